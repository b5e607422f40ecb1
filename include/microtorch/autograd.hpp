/// \file
/// The reverse-mode tape: nodes, the engine, grad mode, anomaly mode, gradcheck.
///
/// Every differentiable op computes its result, then calls autograd::record(): the output
/// gets a Node holding the op's name, attributes, its input edges and the backward closure
/// that belongs to the op. Tensor::backward() walks those nodes in reverse topological order
/// (iteratively, so a 10,000-op chain is fine), sums the gradient flowing into each
/// input, and un-broadcasts it to the input's shape with sum_to(). The same records are
/// what a tracing pass reads: the graph is the IR.
///
/// A custom op is written the same way as the built-in ones (here with xtensor's
/// expressions: microtorch/xtensor.hpp):
///
/// \code
///   // y = e^x ;  dL/dx = dL/dy * e^x  (reuse y)
///   Tensor my_exp(const Tensor& x) {
///     Tensor y = Tensor::from_array(xt::exp(x.array<float>()));
///     return autograd::record(y, "my_exp", {x}, autograd::Saved{y},
///                             [](const Tensor& gy, const autograd::NeedsGrad&, const TensorList& saved) {
///                               return TensorList{gy * saved[0]};
///                             });
///   }
/// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "microtorch/tensor.hpp"

namespace microtorch {

/// Is the tape recording on this thread? On by default; off inside a NoGradGuard.
bool is_grad_enabled();
/// Switches recording on or off for this thread (torch.set_grad_enabled); prefer NoGradGuard,
/// which restores the previous mode.
void set_grad_enabled(bool enabled);

/// RAII: no graph is recorded on this thread while it lives (inference, optimizer updates),
/// as torch::NoGradGuard.
class NoGradGuard {
 public:
  /// Turns recording off, remembering the previous mode.
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  /// Restores the mode the guard found.
  ~NoGradGuard() { set_grad_enabled(previous_); }
  ///@{
  /// Not copyable: exactly one guard restores the previous mode.
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
  ///@}

 private:
  bool previous_;
};

/// Anomaly mode (PyTorch's torch.autograd.set_detect_anomaly), per thread, off by default.
/// While on, every op checks its floating output and every backward step checks the
/// gradients it produced; the first NaN or Inf that an op *creates* (its inputs were
/// finite) throws AnomalyError naming the op, its input and output shapes, the element,
/// and the chain of recorded ops that made its inputs, for example
///
///     anomaly: LogBackward (op #3 of the forward) produced NaN in the gradient of input 0 ...
///
/// Infinities are not anomalies in ops told to write them (masked_fill(x, m, -inf)) or
/// when an input already holds one (scores + an additive -inf mask). Costs one check of a
/// thread-local flag per op when off; a pass over each output and gradient when on.
/// is_anomaly_enabled() tells whether it is on for this thread.
bool is_anomaly_enabled();
/// Switches anomaly mode on or off for this thread (see is_anomaly_enabled).
void set_detect_anomaly(bool enabled);

/// RAII: anomaly mode on (or off) on this thread while it lives (torch.autograd.detect_anomaly).
class DetectAnomalyGuard {
 public:
  /// Sets anomaly mode to `enabled`, remembering the previous mode.
  explicit DetectAnomalyGuard(bool enabled = true) : previous_(is_anomaly_enabled()) { set_detect_anomaly(enabled); }
  /// Restores the mode the guard found.
  ~DetectAnomalyGuard() { set_detect_anomaly(previous_); }
  ///@{
  /// Not copyable: exactly one guard restores the previous mode.
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;
  ///@}

 private:
  bool previous_;
};

/// The tape's records and the tools to write a differentiable op of your own: record(),
/// Saved, Node, sum_to(), and the tracing that the lowering pass uses.
namespace autograd {

/// An attribute of a recorded op (a dim, a scale, a shape, ...).
using Attr = std::variant<std::int64_t, double, bool, std::string, Shape>;
/// The named attributes of a recorded op, in order: `{{"dim", -1}, {"keepdim", true}}`.
using Attrs = std::vector<std::pair<std::string, Attr>>;
/// needs[i] is true when input i wants a gradient; backward may skip the others.
using NeedsGrad = std::vector<bool>;
/// Maps the gradient of the output to one gradient per input (undefined = none), given the
/// tensors the op saved (see Saved). A returned gradient may have the broadcast shape: the
/// engine reduces it with sum_to().
using BackwardFn =
    std::function<TensorList(const Tensor& grad_output, const NeedsGrad& needs, const TensorList& saved)>;

/// The tensors an op's backward reads (PyTorch's ctx.save_for_backward): inputs, the
/// output, or anything else the op made, such as the indices max(x, dim) returns or the
/// attention weights. The node keeps them (detached) with the version their memory had when
/// the op ran, and backward refuses to run if one was written in place since (the user
/// edited returned indices, an optimizer stepped a weight). Backward closures read tensor
/// values only through this list, so no saved value escapes the check.
struct Saved {
  TensorList tensors;  ///< in the order backward receives them
  /// Nothing saved: the backward reads no tensor values.
  Saved() = default;
  /// `Saved{x, y}`: the listed tensors.
  Saved(std::initializer_list<Tensor> t) : tensors(t) {}
  /// A list built at run time.
  explicit Saved(TensorList t) : tensors(std::move(t)) {}
};

/// One saved tensor on a node: the tensor (detached), its memory's version when saved, and
/// what it was to the op (for error messages).
struct SavedTensor {
  static constexpr int kOutput = -1;  ///< role of the op's output
  static constexpr int kOther = -2;   ///< role of a tensor made by the op (indices, weights, statistics)
  Tensor tensor;                      ///< the saved value, detached
  std::uint64_t version = 0;          ///< its memory's Tensor::version() when saved
  int role = kOther;                  ///< kOutput, kOther, or the index of the input it is
};

/// Where the gradient of one input goes: the node that produced it, or the leaf itself.
struct Edge {
  std::shared_ptr<Node> node;        ///< the producing op's node; null for a leaf or a constant
  std::shared_ptr<TensorImpl> leaf;  ///< the leaf that requires grad; null otherwise
  Shape shape;                       ///< the input's shape (gradients are summed back to it)
  Dtype dtype = Dtype::Float32;      ///< the input's dtype (gradients are converted to it)
  bool requires_grad = false;        ///< whether the input wanted a gradient
  /// Only while a trace is active (see TraceGuard): the input tensor itself, so the tracer
  /// can read constants (a scalar in `x * 0.5`, an attention mask) and fold subgraphs that
  /// do not depend on the traced input. Empty in normal autograd.
  std::shared_ptr<TensorImpl> value;
};

/// One recorded op: what Tensor::grad_fn() returns and what the lowering pass reads.
class Node {
 public:
  std::string op;                    ///< the op's name: "matmul", "softmax", ...
  Attrs attrs;                       ///< its attributes: {"dim", -1}, ...
  std::vector<Edge> inputs;          ///< one edge per input, in order
  BackwardFn backward;               ///< empty once the graph has been freed
  std::vector<SavedTensor> saved;    ///< what backward reads; freed with it
  Shape shape;                       ///< the output's shape
  Dtype dtype = Dtype::Float32;      ///< the output's dtype
  std::weak_ptr<TensorImpl> output;  ///< the output, for retain_grad(); weak, so no cycle
  std::int64_t anomaly_seq = 0;      ///< 1, 2, ... for ops recorded in anomaly mode, else 0

  /// An empty record; record_node() fills it.
  Node() = default;
  ///@{
  /// Not copyable: tensors and edges point to a node by identity.
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ///@}
  /// Frees the chain of producers iteratively: dropping a 100,000-op graph cannot
  /// overflow the stack through nested shared_ptr destructors.
  ~Node();

  /// PyTorch-style display name: "matmul" -> "MatmulBackward".
  std::string name() const;
  /// The attribute `key`, or nullptr.
  const Attr* attr(std::string_view key) const;
};

/// Is a trace active on this thread (see TraceGuard)?
bool is_tracing();

/// RAII: while it lives, record_node records every op on this thread (also integer results),
/// even when no input requires grad or grad mode is off, and keeps each input tensor in its Edge
/// (Edge::value). The lowering pass (microtorch/lower/graph.hpp) runs a forward under it
/// and reads the records. Outputs only require grad when they would without the trace, so
/// backward behaves as usual.
class TraceGuard {
 public:
  /// Starts tracing on this thread.
  TraceGuard();
  /// Restores the tracing state the guard found.
  ~TraceGuard();
  ///@{
  /// Not copyable: exactly one guard restores the previous state.
  TraceGuard(const TraceGuard&) = delete;
  TraceGuard& operator=(const TraceGuard&) = delete;
  ///@}

 private:
  bool previous_;
};

/// Records `op` on `out` when grad mode is on and an input requires grad (or a trace is
/// active); returns `out`. `saved` lists every tensor the backward reads (see Saved).
Tensor record_node(Tensor out, std::string_view op, const TensorList& inputs, const Saved& saved, BackwardFn backward,
                   Attrs attrs);

/// record_node with the backward given as any of
///   backward(grad_output)                      reads no saved values (add, reshape, ...)
///   backward(grad_output, needs)
///   backward(grad_output, needs, saved)        saved[i] is the i-th tensor of `saved`
template <class F>
Tensor record(Tensor out, std::string_view op, const TensorList& inputs, const Saved& saved, F&& backward,
              Attrs attrs = {}) {
  if constexpr (std::is_invocable_v<F, const Tensor&, const NeedsGrad&, const TensorList&>) {
    return record_node(std::move(out), op, inputs, saved, BackwardFn(std::forward<F>(backward)), std::move(attrs));
  } else if constexpr (std::is_invocable_v<F, const Tensor&, const NeedsGrad&>) {
    return record_node(std::move(out), op, inputs, saved,
                       BackwardFn([f = std::forward<F>(backward)](const Tensor& g, const NeedsGrad& n,
                                                                  const TensorList&) { return f(g, n); }),
                       std::move(attrs));
  } else {
    return record_node(std::move(out), op, inputs, saved,
                       BackwardFn([f = std::forward<F>(backward)](const Tensor& g, const NeedsGrad&,
                                                                  const TensorList&) { return f(g); }),
                       std::move(attrs));
  }
}

/// record() for ops whose backward reads no tensor values.
template <class F>
Tensor record(Tensor out, std::string_view op, const TensorList& inputs, F&& backward, Attrs attrs = {}) {
  return record(std::move(out), op, inputs, Saved{}, std::forward<F>(backward), std::move(attrs));
}

/// True when an op on these inputs would be recorded.
bool needs_recording(const TensorList& inputs);

/// Sums a broadcast gradient back to `shape` (the one un-broadcasting helper):
/// leading extra dims are summed away, dims that were 1 are summed with keepdim.
Tensor sum_to(const Tensor& grad, const Shape& shape);

/// Runs backward from `root` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace autograd

/// Compares the analytic Jacobian of fn (from backward) with central finite differences,
/// (f(x + eps) - f(x - eps)) / 2 eps, for every input that requires grad. Inputs must be
/// float64. Returns true, or throws AutogradError listing the elements that differ by more
/// than atol + rtol * |numerical|.
bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs, double eps = 1e-6,
               double atol = 1e-5, double rtol = 1e-3);

}  // namespace microtorch
