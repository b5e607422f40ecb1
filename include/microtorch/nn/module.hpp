/// \file
/// The base of every layer, nn::Module: parameters, buffers, children, train/eval, and
/// state dicts with PyTorch's dotted names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "microtorch/tensor.hpp"

namespace microtorch::nn {

using microtorch::NamedTensors;

/// A layer or a model. Subclasses register their parameters, buffers and child modules in
/// the constructor and implement forward():
///
/// \code
///   struct Mlp : nn::Module {
///     std::shared_ptr<nn::Linear> fc1, fc2;
///     Mlp() : fc1(register_module("fc1", std::make_shared<nn::Linear>(4, 16))),
///             fc2(register_module("fc2", std::make_shared<nn::Linear>(16, 3))) {}
///     Tensor forward(const Tensor& x) override { return fc2->forward(relu(fc1->forward(x))); }
///   };
///   auto model = std::make_shared<Mlp>();
///   model->named_parameters();   // fc1.weight, fc1.bias, fc2.weight, fc2.bias
/// \endcode
class Module {
 public:
  /// An empty module in training mode; subclasses register their state in their constructor.
  Module() = default;
  /// Virtual: modules are held and destroyed through std::shared_ptr<Module>.
  virtual ~Module() = default;
  ///@{
  /// Not copyable: a module's tensors are shared handles, so a copy would alias them (hold
  /// modules by std::shared_ptr; copy weights with state_dict / load_state_dict).
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ///@}

  /// The single-tensor forward (what Sequential calls). Modules with other signatures
  /// (MultiheadAttention) define their own forward and leave this one throwing.
  virtual Tensor forward(const Tensor& input);
  /// forward(input), so a module can be called like a function: `y = (*model)(x)`.
  Tensor operator()(const Tensor& input) { return forward(input); }

  /// "Linear", "MultiheadAttention", ...: by default the class's own name, without
  /// namespaces or template arguments, so a user's module needs no override.
  virtual std::string type_name() const;
  /// The arguments summary() shows after the type name.
  virtual std::string extra_repr() const { return ""; }

  /// The parameters with dotted names ("fc1.weight"): this module's own in registration
  /// order, then each child's (only the own ones when recurse is false). The tensors are
  /// handles to the module's parameters, not copies. A parameter shared by two modules
  /// (weight tying, see replace_parameter) is listed once, under the first name met, as
  /// PyTorch's remove_duplicate does.
  NamedTensors named_parameters(bool recurse = true) const;
  /// The tensors of named_parameters(), e.g. for an optimizer.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// The buffers (registered state that is not trained) with dotted names, like
  /// named_parameters: every buffer, persistent or not (as in PyTorch).
  NamedTensors named_buffers(bool recurse = true) const;
  /// The direct children with their names, in registration order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  /// The direct children, in registration order.
  std::vector<std::shared_ptr<Module>> children() const;
  /// This module ("") and every descendant, depth-first, with dotted names.
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// The parameter or buffer with this dotted name; throws ValueError when absent.
  Tensor get(const std::string& dotted_name) const;

  /// Sets training mode (on) or evaluation mode for this module and every descendant.
  /// Dropout and friends behave differently in training; eval() switches them off.
  void train(bool on = true);
  /// train(false): evaluation mode (dropout off).
  void eval() { train(false); }
  /// True in training mode (the default for a new module).
  bool is_training() const { return training_; }

  /// Forgets every parameter's gradient.
  void zero_grad();
  /// Calls fn on this module and every descendant (e.g. custom initialisation).
  void apply(const std::function<void(Module&)>& fn);
  /// Number of scalar parameters (trainable ones only when trainable_only).
  std::int64_t num_parameters(bool trainable_only = false) const;
  /// A readable tree: one line per module with its arguments and parameter count.
  std::string summary() const;

  /// Parameters and persistent buffers with dotted names; the tensors share memory with the
  /// module. A shared parameter appears under each of its names (the same tensor), as in PyTorch.
  NamedTensors state_dict() const;
  /// Copies the values of `state` into the module's tensors. Every key, shape and dtype is
  /// checked before anything is written (floating values convert to the module's floating
  /// dtype; other dtypes must match); strict mode also refuses missing and unexpected keys.
  /// The error lists all problems at once. All or nothing: when anything fails, an
  /// allocation included, the module is unchanged.
  void load_state_dict(const NamedTensors& state, bool strict = true);

  /// Makes this module's own parameter `name` the tensor `shared`, usually a parameter of
  /// another module (weight tying: an output Linear reading the Embedding's weight, as GPT-2
  /// and PyTorch's `head.weight = emb.weight` do), and returns it. Both modules then hold one
  /// tensor: parameters() lists it once, the state dict under both names, and its gradient
  /// sums both uses. The member that held the old tensor must take the returned one:
  /// `head->weight = head->replace_parameter("weight", emb->weight)`. An unknown name throws
  /// ValueError; a shape or dtype other than the old parameter's, ShapeError or DtypeError.
  Tensor replace_parameter(const std::string& name, const Tensor& shared);

 protected:
  /// Registers a parameter (a leaf requiring grad) and returns the handle to keep. Names
  /// must be non-empty, contain no '.' and be new in this module (ValueError otherwise).
  Tensor register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  /// Registers non-trained state (running stats, masks), with the same rules for names. A
  /// persistent buffer belongs in the state dict; a non-persistent one (PyTorch's
  /// persistent=False: a causal mask, a table computed from the configuration) does not,
  /// and the lowering bakes it in as a constant.
  Tensor register_buffer(const std::string& name, Tensor value, bool persistent = true);
  /// Registers a child under `name` and returns it: its parameter "weight" appears as
  /// "name.weight". A null module or a bad name throws ValueError.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void summary_into(std::string& out, const std::string& name, int depth) const;

  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::string> non_persistent_;  // names of own buffers left out of the state dict
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace microtorch::nn
