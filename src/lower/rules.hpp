// The op table of the lowering: every op that lowers is declared once, as an OpRule — its
// name, the inputs and attributes it takes, how it is evaluated in floating point (the
// reference that calibration and the accuracy checks measure against) and how it lowers to
// integer kernel calls. Graph validation, evaluate(), quantize() and the list of lowerable
// ops in error messages all read this one table (rules.cpp); the rules live with their
// op family in rules/<family>.cpp, named as the family's host ops (src/ops/<family>.cpp) and
// runtime kernels (runtime/mt_<family>.c). docs/adding-an-op.md is the recipe for a new op.
//
// The passes that look at more than one node (affine chains folded into a layer, a relu
// fused into it, the residual stream kept wide, per-feature formats) never test op names:
// they ask the rules' capabilities below.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "microtorch/error.hpp"
#include "microtorch/lower/graph.hpp"

namespace microtorch::lower {

class Lowering;

/// An attribute an op reads, with the type it must have.
struct AttrSpec {
  enum class Type { Int, Float, Bool, String, Shape };
  const char* name;
  Type type;
};
std::string_view attr_type_name(AttrSpec::Type t);

struct OpRule {
  std::string op;                 ///< the autograd record's op name ("linear")
  std::string summary;            ///< for the list of lowerable ops: "linear (constant weight)"
  int min_inputs = 1, max_inputs = 1;
  std::vector<AttrSpec> attrs;    ///< required attributes
  /// Zero points (affine int8 tensors): can its kernels read them on its activation inputs,
  /// and write one on its output? A view op (reshape, slice, ...) passes its input's format
  /// through: its input may carry one when its output may.
  bool zero_point_in = true, zero_point_out = true, passes_view = false;
  bool reads_parts = false;  ///< reads activations with a format per part (View::segments)

  // ---- capabilities: what the passes over several nodes may do with the op ----

  /// The input that holds the op's weights (-1: none). The capabilities marked "weighted"
  /// apply to a node only when that input is a constant.
  int weight_input = -1;
  /// weighted, y = x W^T + b over x's (input 0's) last dim: a chain of elementwise affine ops
  /// with constant operands in front of x folds into W and b (affine_input.hpp).
  bool folds_affine_input = false;
  /// weighted: calibration gathers x^T x of input 0's rows, with which the weights are
  /// rounded with error feedback (Lowering::weight_rows).
  bool rounds_with_gram = false;
  /// weighted layers whose weight rows read patches of input 0 (convolutions): adds one
  /// calibration sample's p p^T per group, for input `x` and weight `w`, into `gram`
  /// (Calibration::patch_gram, sized here), with which the weights are rounded with error
  /// feedback.
  std::function<void(const Node& n, const Tensor& x, const Tensor& w, std::vector<double>& gram)> patch_gram;
  /// weighted: input 0 may carry a format per feature of its last dim, which the layer folds
  /// into its weight columns (Lowering::channel_formats).
  bool reads_feature_formats = false;
  /// weighted: input 0 may carry a format per channel (index of dim 1, View::segment_dim 1)
  /// with one zero point, which the layer folds into its weights (a convolution: W[o, c, ...]
  /// times the scale of input channel c) (Lowering::dim1_formats).
  bool reads_channel_formats = false;
  /// weighted: an activation with `fuses_into_layer` that alone reads the output is applied
  /// by the op's requantization (Lowering::fused_relu).
  bool fuses_activation = false;
  /// An activation that a layer's requantization applies: a clamp at the zero point (relu).
  bool fuses_into_layer = false;
  /// weighted: a node with `folds_into_weights` (a batch_norm in eval) that alone reads the
  /// output folds into the layer's weights and bias (Lowering::folded_norm) when the output
  /// has this rank, at which its dim 1 is the layer's output channels (0: none folds).
  int folds_norm_rank = 0;
  /// A per-channel affine map over dim 1 that folds into the layer before it (batch_norm).
  bool folds_into_weights = false;
  /// The residual stream runs through it (add, sub): it joins two streams when both operands
  /// are activations, and carries one on when the other is a constant (a position embedding)
  /// (Lowering::residual_stream: such values stay at sensitive_bits in int8 models).
  bool residual = false;
  /// Its output stays at sensitive_bits in int8 models (the attention's output).
  bool sensitive_output = false;
  /// Into how many parts, each with a scale of its own, it reads its input `value`
  /// (View::segments; 0: one scale). A producer that can give them (a linear layer's output
  /// channels, in equal groups) asks every reader. Empty: one scale.
  std::function<std::int64_t(const Node& n, std::int64_t value)> input_parts;
  /// A link of an affine chain (affine_input.hpp): `next = s prev + o` for its constant
  /// operand v (`constant_first`: v is the first operand); false when it is not affine that
  /// way (v / x, or x / 0). Empty for ops that are never a link.
  std::function<bool(double v, bool constant_first, double& s, double& o)> affine_link;

  /// The float reference: the library's op applied to the input values and the attributes.
  std::function<Tensor(const Node&, const std::vector<Tensor>&)> evaluate;
  /// The integer rule: reads the inputs' views from the Lowering, adds kernel calls and
  /// buffers, publishes the output's view. Empty for ops that only evaluate (calibration
  /// runs them; quantize() names them as not lowerable).
  std::function<void(Lowering&, const Node&)> lower;
  /// The float32 rule (TrainOptions::numeric Float32): the same in float kernels; in a
  /// training step's forward (Lowering::training) it also keeps what backward_f32 reads
  /// (Lowering::save). Empty: the op has no float32 lowering.
  std::function<void(Lowering&, const Node&)> lower_f32;
  /// The float32 backward: from the output's gradient (Lowering::grad), the gradients of the
  /// inputs that need one (Lowering::grad_out), as kernel calls that store or add into them.
  /// Empty: gradients do not flow through the op (a training step fails naming it).
  std::function<void(Lowering&, const Node&)> backward_f32;

  /// Is this weighted capability usable on `n`: is its weight input a constant?
  bool weighted(const Node& n, const std::vector<bool>& constant) const {
    return weight_input >= 0 && static_cast<std::size_t>(weight_input) < n.inputs.size() && n.inputs[0] >= 0 &&
           n.inputs[static_cast<std::size_t>(weight_input)] >= 0 &&
           constant[static_cast<std::size_t>(n.inputs[static_cast<std::size_t>(weight_input)])];
  }
};

/// Every op that lowers, in the order of the list printed in errors.
const std::vector<OpRule>& op_rules();
/// The rule of `op`, or nullptr.
const OpRule* find_rule(std::string_view op);
/// The ops that lower: "linear (constant weight and bias), matmul ..." for error messages.
std::string lowerable_ops();

/// An attribute of a node (the node was validated against its rule: present, right type).
template <class T>
const T& node_attr(const Node& n, const char* key) {
  for (const auto& [k, v] : n.attrs) {
    if (k == key) {
      if (const T* p = std::get_if<T>(&v)) return *p;
    }
  }
  throw ValueError(std::string("node ") + n.op + " has no attribute " + key + " of the expected type");
}

}  // namespace microtorch::lower
