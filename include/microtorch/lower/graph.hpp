/// \file
/// Step 1 of the lowering pipeline: trace a model's forward pass for one fixed input shape
/// into a graph IR, print it, save it and load it back.
///
/// The graph is the IR: trace() runs the forward under an autograd::TraceGuard, so every op
/// leaves the same Node record autograd builds for backward (op name, attributes, input
/// edges), and walks those records from the output in topological order. Subgraphs that
/// depend on neither the input nor a parameter (an additive attention mask built from
/// Mask::causal, a scalar in `x * 0.5`) are folded into constants holding their values.
/// Ops are recorded whatever they are; the later lowering passes reject the ones they do
/// not support, naming the op.
///
/// \code
///   auto model = std::make_shared<Mlp>();            // Linear(4, 32) - ReLU - Linear(32, 3)
///   model->eval();
///   lower::Graph g = lower::trace(*model, {2, 4});
///   fmt::print("{}", g.to_string());
///   //   graph(%0: float32[2, 4]) -> %5
///   //   %3 = linear(%0, fc1.weight, fc1.bias)  [2, 4] -> [2, 32]
///   //   %4 = relu(%3)  [2, 32] -> [2, 32]
///   //   %5 = linear(%4, fc2.weight, fc2.bias)  [2, 32] -> [2, 3]
///   lower::save(g, "out/mlp");                      // out/mlp.json + out/mlp.npz
///   lower::Graph same = lower::load("out/mlp");
/// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "microtorch/autograd.hpp"
#include "microtorch/nn/module.hpp"
#include "microtorch/tensor.hpp"

namespace microtorch::lower {

/// Where a value comes from.
enum class ValueKind {
  Input,      ///< the graph input (the example tensor the forward ran on)
  Parameter,  ///< a parameter or buffer of the model, by its dotted state-dict name
  Constant,   ///< a tensor the trace folded (scalar, mask, ...); its data is kept
  OpOutput,   ///< the result of a node
};
/// The kind's name as messages print it: "input", "parameter", "constant", "op".
std::string_view kind_name(ValueKind k);

/// One tensor of the graph. Values are numbered 0.. in the order the graph lists them.
struct Value {
  std::int64_t id = -1;      ///< its index in Graph::values; nodes and listings call it `%id`
  ValueKind kind = ValueKind::OpOutput;  ///< where it comes from
  Shape shape;               ///< its shape (fixed: the graph is traced for one input shape)
  Dtype dtype = Dtype::Float32;  ///< its dtype
  std::string name;  ///< dotted name for parameters ("fc1.weight"), empty otherwise
  Tensor data;       ///< parameters and constants: the value (a copy taken at trace time)
};

/// One op: `output = op(inputs...)` with autograd's attributes.
struct Node {
  std::string op;            ///< the op's name as autograd records it ("linear", "softmax", ...)
  autograd::Attrs attrs;     ///< its attributes (dim, eps, ...) as autograd records them
  std::vector<std::int64_t> inputs;  ///< value ids (-1 for an absent optional input)
  std::int64_t output = -1;  ///< the id of the value it computes
};

/// A traced forward pass for one input shape: values, nodes in topological order (every
/// node's inputs are defined before it), the input and the output.
struct Graph {
  std::vector<Value> values;  ///< every value, indexed by Value::id
  std::vector<Node> nodes;    ///< the ops, in topological order
  std::int64_t input = -1;    ///< the id of the input value
  std::int64_t output = -1;   ///< the id of the output value

  /// The value with id `id`; IndexError when there is none.
  const Value& value(std::int64_t id) const;

  /// One line per node: `%5 = linear(%0, fc1.weight, fc1.bias)  [2, 4] -> [2, 32]`, with
  /// attributes in braces (`{dim=-1}`); constants print as `%7:const` (or their value when
  /// they hold one element, e.g. `0.5`). Equal graphs print equal strings.
  std::string to_string() const;

  /// Checks that the graph is well formed, and throws ValueError naming the value or node
  /// that is not: value ids 0, 1, 2, ... with non-negative dims and at most 2^31 - 1
  /// elements each, parameters and constants holding data of their declared shape and
  /// dtype, one input, an output that is a value some node computes (or the input), nodes
  /// in topological order (every input defined before the node reads it, so no cycle),
  /// each output computed once, and, for every op the lowering knows, its number of inputs
  /// and its attributes with their types. from_json(), evaluate(), calibrate() and
  /// quantize() call it.
  void validate() const;

  /// Structure and attributes as JSON; parameter and constant data are referenced by
  /// their key (`"data": "fc1.weight"`) in weights() and are not part of the JSON.
  nlohmann::json to_json() const;
  /// The tensors to_json() refers to: parameters by name, constants as "const.<id>".
  std::vector<std::pair<std::string, Tensor>> weights() const;
  /// The inverse of to_json() + weights(), validated (validate()). Malformed JSON structure
  /// (a non-integer id or dim, an unknown dtype or attribute type), a missing weight, a
  /// weight whose shape or dtype differs, or a graph validate() refuses throws IoError
  /// naming `source` and the value, node or key.
  static Graph from_json(const nlohmann::json& j, const std::vector<std::pair<std::string, Tensor>>& weights,
                         const std::string& source = "<json>");
};

/// Runs the graph in floating point with the library's ops and returns every value (index =
/// value id; parameters and constants hold their data). ValueError names a node whose op it
/// cannot run.
std::vector<Tensor> evaluate(const Graph& graph, const Tensor& input);
/// One node of evaluate(): its op applied to its input values.
Tensor evaluate_node(const Node& node, const std::vector<Tensor>& inputs);

/// The samples of stacked data: `data` [N * B, rest...] for an input shape [B, rest...] is N
/// inputs (a single input of exactly that shape is one). ShapeError naming `who` otherwise,
/// saying how many rows are left over when dim 0 is not a multiple of B.
std::vector<Tensor> split_stacked(const Shape& input_shape, const Tensor& data, const char* who);
/// split_stacked() for the graph's input shape.
std::vector<Tensor> split_inputs(const Graph& graph, const Tensor& data, const char* who);

/// Traces `model.forward` on zeros of `input_shape`. Its parameters and persistent buffers
/// (its state dict) are named in the graph; non-persistent buffers become constants. The model and every module in it must be
/// in eval mode (ValueError naming the module otherwise: call model.eval() first), so that
/// training-only behaviour such as dropout is not baked into the graph.
Graph trace(nn::Module& model, const Shape& input_shape, Dtype dtype = Dtype::Float32);
/// Traces `model.forward` on the given example input (its values may matter to
/// data-dependent code, its shape is fixed into the graph).
Graph trace(nn::Module& model, const Tensor& example);
/// Traces any function of one tensor. `names` gives dotted names to tensors the function
/// uses (e.g. a model's named_parameters()); other input-independent tensors become constants.
Graph trace(const std::function<Tensor(const Tensor&)>& fn, const Tensor& example,
            const std::vector<std::pair<std::string, Tensor>>& names = {});

/// Writes `<prefix>.json` (structure) and `<prefix>.npz` (weights), creating the directory.
/// `prefix` is a path without extension ("out/model"); "out/model.json" or "out/model.npz"
/// name the same two files (never out/model.json.json). IoError on failure.
void save(const Graph& graph, const std::string& prefix);
/// Reads what save() wrote (the prefix as in save()). Bad JSON, a missing file, or a missing
/// or mismatched weight throws IoError naming the file and the key.
Graph load(const std::string& prefix);

}  // namespace microtorch::lower

/// \namespace microtorch::lower
/// The lowering of a trained model to static fixed-point C for microcontrollers: trace
/// (graph.hpp), calibrate and quantize (quantize.hpp), the Program (program.hpp), its host
/// Simulator (simulate.hpp), the firmware (emit.hpp), accuracy against the float model
/// (accuracy.hpp) and automatic mixed precision (precision.hpp).
