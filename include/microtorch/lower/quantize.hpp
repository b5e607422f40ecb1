/// \file
/// Steps 2 and 3 of the lowering pipeline: calibrate a traced graph on representative
/// inputs, choose a number format per tensor, lower every node to integer kernel calls (a
/// Program) and plan one static arena for it.
///
/// \code
///   lower::Graph g = lower::trace(model, {1, 4});
///   lower::Calibration cal = lower::calibrate(g, train_x);     // [N, 4]: runs g on each row
///   lower::Program p = lower::quantize(g, cal, {.activation_bits = 8});
///   fmt::print("{}\n{}", p.format_table(), p.memory_plan());
/// \endcode
///
/// Number formats (QuantOptions::scheme). A tensor of int8 or int16 integers q stands for
/// `scale * (q - zero_point)`.
///   - Affine (the default): real-valued scales; int8 activations with a zero point, so
///     that a lopsided range (after a relu, a GELU, a softmax, the model's input) gets all
///     256 levels; tensors that feed kernels without zero points (attention, matmul of
///     activations, row division) and int16 tensors are symmetric. Weights symmetric with one
///     scale per output channel (per_channel), rounded with error feedback (rounding); biases
///     int32 (int8 inputs) or int64 (int16 inputs) in the accumulator's scale. A relu that
///     alone reads a linear layer is fused into it: one requantization, to the relu's range,
///     clamped at its zero point.
///   - Symmetric: as Affine without zero points.
///   - PowerOfTwo: every scale a power of two (a Q format), per-tensor weights: requantization
///     is a rounding shift, no multiply (cheaper on cores without a fast multiplier).
///
/// Requantization (an accumulator x in scale s_x to an output in scale s_y) multiplies by the
/// real ratio r = s_x / s_y written as an int32 multiplier and a shift,
/// r = m * 2^-(31 + s) with |m| in [2^30, 2^31) (gemmlowp's quantized multiplier and shift, as
/// in TFLite and CMSIS-NN; see Multiplier): y = round(x * m * 2^-(31 + s)). The product is
/// exact in 64 bits and rounded once; gemmlowp rounds twice
/// (SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT) and can differ by one unit
/// near ties (mt_kernels.h).
///
/// The scale of an activation covers its calibrated range (range: the min/max seen, or a
/// percentile, or the clipping that minimises the quantization error), widened by `margin`;
/// values beyond it saturate (the simulator counts them). int8 functions of one tensor (tanh,
/// sigmoid, GELU) are 256-entry tables computed at lowering time. Rounding everywhere: to
/// nearest, ties away from zero, then saturation (mt_kernels.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/program.hpp"

namespace microtorch::lower {

/// Per graph value (index = value id): the range seen over the calibration samples, and for
/// activations the histogram of their values.
struct Calibration {
  static constexpr std::int64_t kBins = 2048;  ///< Bins of each histogram.
  std::vector<double> absmax;    ///< largest |value| (finite values)
  ///@{
  /// Smallest and largest value (finite values; the range always holds 0).
  std::vector<double> min, max;
  ///@}
  /// largest |value| per index of the last dim (activations): the ranges of the parts of a
  /// packed tensor (q | k | v of an attention projection, head by head)
  std::vector<std::vector<double>> channel_absmax;
  ///@{
  /// Smallest and largest value per index of the last dim (activations), like channel_absmax.
  std::vector<std::vector<double>> channel_min, channel_max;
  ///@}
  ///@{
  /// Smallest and largest value per index of dim 1 (activations of rank >= 3: the channels of
  /// a convolution's [N, C, ...]), for formats per channel (Lowering::channel_formats).
  std::vector<std::vector<double>> dim1_min, dim1_max;
  ///@}
  /// kBins counts over [min, max] for the input and op outputs (empty for constants, or
  /// when min == max).
  std::vector<std::vector<double>> histogram;
  /// For the inputs of linear layers: sum over calibration rows of x x^T ([in, in], row
  /// major; empty for other values), which weight rounding uses to place rounding errors
  /// where the inputs do not see them.
  std::vector<std::vector<double>> gram;
  /// For the outputs of convolutions: per group, the sum over calibration samples and output
  /// positions of p p^T for the patch p of the input that the group's weight rows read
  /// ([groups, taps, taps], taps = in_channels / groups x kernel size, in the weights' order;
  /// empty for other values), for the same rounding.
  std::vector<std::vector<double>> patch_gram;
  std::int64_t samples = 0;  ///< how many inputs the graph ran on
};

/// How an activation's range is chosen from its calibration (QuantOptions::range).
enum class RangeMethod {
  MinMax,      ///< everything seen
  Percentile,  ///< the central QuantOptions::percentile % of the values (the tails saturate)
  Mse,         ///< the clipping that minimises the expected squared error: rounding noise
               ///< of the step it implies plus the clipping of what lies beyond
};
/// The method's name as reports print it: "min/max", "percentile", "MSE".
std::string_view range_method_name(RangeMethod m);

/// The range [lo, hi] graph value `value` gets from its calibration with `method` at `bits`
/// (symmetric: lo = -hi unless `affine`). `percentile` (in %, clamped to [0, 100]) is
/// Percentile's share of values kept. MinMax for values without a histogram.
std::pair<double, double> choose_range(const Calibration& cal, std::int64_t value, RangeMethod method, int bits,
                                       bool affine, double percentile = 99.99);

/// Runs the graph in float on every sample of `data` and records each value's range.
/// `data` is a stack of inputs: its shape is [N * B, rest...] for a graph input [B, rest...]
/// (so [150, 4] calibrates a [1, 4] graph with 150 samples). A single input of exactly the
/// graph's input shape also works. ShapeError otherwise; ValueError for NaN or Inf values.
Calibration calibrate(const Graph& graph, const Tensor& data);

/// How attention is lowered.
enum class AttentionKernel {
  Streaming,  ///< online softmax, O(Dv) working memory per query (mt_attention_stream_*)
  TwoPass,    ///< the L x S score buffer reference (mt_attention_twopass_*)
};

/// How scales are chosen (see the top of this header).
enum class Scheme {
  Affine,      ///< real-valued scales, zero points for int8 activations that allow them
  Symmetric,   ///< real-valued scales, no zero points
  PowerOfTwo   ///< scales 2^-frac (Q formats), per-tensor weights: requantization is a shift
};
/// The scheme's name as reports print it: "affine", "symmetric", "power-of-two".
std::string_view scheme_name(Scheme s);

/// The precision of one layer (or node), overriding QuantOptions' defaults: `match` is a
/// module path ("encoder.layers.0" matches that module and everything in it, "head" the
/// module head) or a node ("%12", the node computing value %12). The last entry that matches
/// a node wins. A node belongs to the module whose parameters it uses, else to the module of
/// the nearest node before it that uses some (a GELU after encoder.layers.0.linear1, the
/// attention after its in_proj). An int8 layer's sensitive values still get sensitive_bits.
/// A match that names no node is an error (ValueError listing the modules).
struct LayerPrecision {
  std::string match;        ///< a module path ("encoder.layers.0") or a node ("%12")
  int activation_bits = 8;  ///< 8 or 16: the node's output
  int weight_bits = 0;      ///< 8 or 16; 0 = as activation_bits ("16x8": 16, 8)
};

/// How weights are rounded to their integers.
enum class WeightRounding {
  Nearest,        ///< each weight to the nearest step
  ErrorFeedback,  ///< GPTQ: column by column, each rounding error compensated in the columns
                  ///< not yet rounded using the calibration inputs' correlations (linear
                  ///< layers; convolutions on their patches' covariance, with the error left
                  ///< in the patches' mean taken back by the bias: bias correction)
};

/// Options of quantize(): precision, number formats, ranges, the attention kernel and the
/// firmware's name. Invalid bit widths, an invalid name (check_firmware_name) and a
/// `precision` or `ranges` entry that names no node throw ValueError from quantize().
struct QuantOptions {
  int activation_bits = 16;  ///< 16 or 8: the default precision of every layer's output
  int weight_bits = 0;       ///< 16 or 8; 0 = same as activation_bits (int16 x int8 is "16x8")
  std::vector<LayerPrecision> precision = {};  ///< per-layer exceptions to the two above
  /// The graph input's precision when it holds real numbers (the firmware's `in` type, which
  /// the first layers read): 8 or 16; 0 = as activation_bits. Raw sensor windows (offsets,
  /// bumps and channels of unequal range in one int8 scale) lose more at an int8 input than
  /// any layer does; 16 costs 2 bytes per input value of RAM and no weight bytes.
  int input_bits = 0;
  /// An int8 graph input of rank >= 3 ([N, C, ...]) that only convolutions read, as their
  /// input 0 (a conv stem reading raw sensor windows), gets a scale and a zero point per
  /// channel (index of dim 1) from its calibrated range, which the convolutions fold into
  /// their weights and biases (Buffer::channel_scales, channel_zero_points of the Input
  /// buffer; the firmware exports them as `<name>_input_scales[]` and `_input_zero_points[]`). A padded
  /// reader pads each channel with its own zero point. false: one format for the whole input.
  bool input_channel_formats = true;
  Scheme scheme = Scheme::Affine;  ///< how scales are chosen (see the top of this header)
  bool per_channel = true;   ///< one weight scale per output channel (not in PowerOfTwo)
  WeightRounding rounding = WeightRounding::ErrorFeedback;  ///< how weights are rounded to integers
  /// Where int8 activations cost the most accuracy, int8 layers keep `sensitive_bits` (16;
  /// 8 = everything int8) for: the residual stream (adds of two activations, the values they
  /// add and where those come from through view ops and adds of constants, such as a token
  /// embedding plus a position embedding), attention (its projections' outputs and its own)
  /// and the graph output. Their weights keep their bits. LayerNorm statistics, softmax sums
  /// and attention scores are wider inside the kernels regardless.
  int sensitive_bits = 16;
  /// How activation ranges are chosen from the calibration (the graph output's is always
  /// MinMax: clipping logits costs more than it saves). `ranges` overrides it per value
  /// ("%12") or module path.
  RangeMethod range = RangeMethod::MinMax;
  double percentile = 99.99;  ///< Percentile: the share of values kept, in % (the tails saturate)
  /// Per-value exceptions to `range`: (`"%12"` or a module path, method); the last entry that
  /// matches a value wins.
  std::vector<std::pair<std::string, RangeMethod>> ranges = {};
  /// Activation scales cover the chosen range [lo, hi] widened at each end by margin *
  /// (hi - lo) / 2 (margin * hi for a symmetric range), so that inputs a little beyond the
  /// calibration data do not saturate (real-valued scales; power-of-two scales round up to
  /// the next power of two anyway). An end at 0 is not widened: values never seen below 0
  /// (a relu's, a softmax's, raw sensor readings) spend no levels on negatives.
  double margin = 0.25;
  AttentionKernel attention = AttentionKernel::Streaming;  ///< how attention is lowered
  std::string name = "model";  ///< C identifier prefix of the emitted firmware
};

/// Lowers a traced graph to integer kernel calls with formats from `calibration`, then plans
/// the arena (plan_memory). An op, attribute or layout the kernels cannot express throws
/// ValueError naming the node (`%8 = softmax` ...), its shapes and what would lower instead.
Program quantize(const Graph& graph, const Calibration& calibration, const QuantOptions& options = {});

/// Places every Activation and Scratch buffer in one arena: a buffer lives from the step that
/// first writes it to the step that last reads it, and buffers whose lifetimes do not overlap
/// share bytes (greedy by size, first fit, 8-byte aligned). Sets offsets and arena_bytes.
void plan_memory(Program& program);

/// Puts the rows of `w` ([rows, in], row-major) in pair order, the weight order of a linear
/// layer whose input and weights differ in width (mt_kernels.h, mt_linear_*): in every four
/// consecutive weights of a row the middle two swap places (w0, w2, w1, w3, w4, w6, w5, w7,
/// ..), the last in % 4 keep theirs. Its own inverse.
template <class T>
void pair_order(std::vector<T>& w, std::int64_t in) {
  const auto n = static_cast<std::size_t>(in);
  for (std::size_t r = 0; n > 0 && r + n <= w.size(); r += n) {
    for (std::size_t j = 0; j + 4 <= n; j += 4) std::swap(w[r + j + 1], w[r + j + 2]);
  }
}

/// Round to nearest, ties away from zero, then saturate to `bits` (the runtime's rounding).
std::int64_t quantize_value(double x, int frac, int bits);
/// The largest frac with round(absmax * 2^frac) <= 2^(bits-1) - 1, clamped to [-16, 31],
/// the formats the kernels' shifts support; *clamped tells whether it was (the lowering then
/// warns, naming the tensor: its values round to 0 or saturate).
int choose_frac(double absmax, int bits, bool* clamped = nullptr);

/// A real multiplier r as the kernels take it: r = m * 2^-(31 + s) with |m| in [2^30, 2^31)
/// (m rounded to nearest), or m = 0 and r = 2^-s exactly (a power of two: a shift, no
/// multiply).
struct Multiplier {
  std::int32_t m = 0;    ///< the multiplier, |m| in [2^30, 2^31) with the sign of r; 0: a plain shift
  int s = 0;             ///< the shift: r = m * 2^-(31 + s), or 2^-s when m = 0
  double value() const;  ///< The ratio it represents.
};
/// The Multiplier of r: |r| = mant * 2^e with mant in [0.5, 1) gives m = round(mant * 2^31)
/// (with r's sign) and s = -e; a positive power of two gives m = 0 and s exactly. r = 0 or
/// not finite gives m = 0, s = 127: a shift that rounds every value to 0.
Multiplier multiplier(double r);

/// Throws ValueError unless `name` can name a firmware: a C identifier (letters, digits and
/// '_', not starting with a digit or '_'), at most 40 characters, and not in the runtime's
/// own namespace (`mt`, `mt_...`, in any case: the runtime's files, symbols and macros).
void check_firmware_name(const std::string& name);

}  // namespace microtorch::lower
