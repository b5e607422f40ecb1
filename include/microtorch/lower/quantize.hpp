// microtorch/lower/quantize.hpp — steps 2 and 3 of the lowering pipeline: calibrate a traced
// graph on representative inputs, choose a number format per tensor, lower every node to
// integer kernel calls (a Program) and plan one static arena for it.
//
// \code
//   lower::Graph g = lower::trace(model, {1, 4});
//   lower::Calibration cal = lower::calibrate(g, train_x);     // [N, 4]: runs g on each row
//   lower::Program p = lower::quantize(g, cal, {.activation_bits = 8});
//   fmt::print("{}\n{}", p.format_table(), p.memory_plan());
// \endcode
//
// Number formats (QuantOptions::scheme). A tensor of int8 or int16 integers q stands for
// scale * (q - zero_point).
//   - Symmetric (the default): real-valued scales, zero point 0; weights with one scale
//     per output channel (per_channel), biases int32 (int8 inputs) or int64 in the
//     accumulator's scale. Requantization by an int32 multiplier and a shift (mt_kernels.h).
//   - Affine: as Symmetric, but int8 activations whose range is lopsided (after a relu, a
//     GELU, a softmax) get a zero point and so all 256 levels; tensors that feed kernels
//     without zero points (attention, matmul of activations, row division) stay symmetric.
//   - PowerOfTwo: every scale a power of two (a Q format), per-tensor weights: requantization
//     is a rounding shift, no multiply (cheaper on cores without a fast multiplier).
// The scale of an activation covers its calibrated range (range: the min/max seen, or a
// percentile, or the clipping that minimises the quantization error); values beyond it
// saturate (the simulator counts them). int8 functions of one tensor (tanh, sigmoid, GELU)
// are 256-entry tables computed at lowering time. Rounding everywhere: to nearest, ties away
// from zero, then saturation (mt_kernels.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/program.hpp"

namespace microtorch::lower {

/// Per graph value (index = value id): the range seen over the calibration samples.
struct Calibration {
  std::vector<double> absmax;    ///< largest |value| (finite values)
  std::vector<double> min, max;  ///< smallest and largest value
  std::int64_t samples = 0;
};

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
enum class Scheme { Symmetric, Affine, PowerOfTwo };
std::string_view scheme_name(Scheme s);

struct QuantOptions {
  int activation_bits = 16;  ///< 16 or 8: the default precision of every layer's output
  int weight_bits = 0;       ///< 16 or 8; 0 = same as activation_bits (int16 x int8 is "16x8")
  Scheme scheme = Scheme::Symmetric;
  bool per_channel = true;   ///< one weight scale per output channel (not in PowerOfTwo)
  /// int8 models keep the outputs of adds of two activations (the residual stream) at int16.
  bool wide_residuals = true;
  /// Activation scales cover the calibrated range widened by this fraction, so that inputs a
  /// little beyond the calibration data do not saturate (real-valued scales; power-of-two
  /// scales round up to the next power of two anyway).
  double margin = 0.25;
  AttentionKernel attention = AttentionKernel::Streaming;
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
  std::int32_t m = 0;
  int s = 0;
  double value() const;  ///< the ratio it represents
};
Multiplier multiplier(double r);

/// Throws ValueError unless `name` can name a firmware: a C identifier (letters, digits and
/// '_', not starting with a digit or '_'), at most 40 characters, and not in the runtime's
/// own namespace (`mt`, `mt_...`, in any case: the runtime's files, symbols and macros).
void check_firmware_name(const std::string& name);

}  // namespace microtorch::lower
