// microtorch/lower/quantize.hpp — steps 2 and 3 of the lowering pipeline: calibrate a traced
// graph on representative inputs, choose a power-of-two format per tensor, lower every node
// to integer kernel calls (a Program) and plan one static arena for it.
//
// \code
//   lower::Graph g = lower::trace(model, {1, 4});
//   lower::Calibration cal = lower::calibrate(g, train_x);     // [N, 4]: runs g on each row
//   lower::Program p = lower::quantize(g, cal, {.activation_bits = 8});
//   fmt::print("{}\n{}", p.format_table(), p.memory_plan());
// \endcode
//
// Formats. A tensor whose calibrated max |value| is m gets the largest `frac` with
// round(m * 2^frac) <= 2^(bits-1) - 1, so calibration data never saturates (values beyond
// the calibrated range saturate; the simulator counts them). Softmax outputs are Q0.15 /
// Q0.7, tanh and sigmoid outputs likewise; relu keeps its input's format. Weights are
// per-tensor with the same rule at `weight_bits`; biases are int32 in the accumulator
// format (frac_x + frac_w). Rounding everywhere: to nearest, ties away from zero, then
// saturation (mt_kernels.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/program.hpp"

namespace microtorch::lower {

/// Per graph value (index = value id): the largest |value| seen, and how many samples ran.
struct Calibration {
  std::vector<double> absmax;
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

struct QuantOptions {
  int activation_bits = 16;  ///< 16 or 8
  int weight_bits = 0;       ///< 16 or 8; 0 = same as activation_bits (8-bit activations need 8)
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

/// Throws ValueError unless `name` can name a firmware: a C identifier (letters, digits and
/// '_', not starting with a digit or '_'), at most 40 characters, and not in the runtime's
/// own namespace (`mt`, `mt_...`, in any case: the runtime's files, symbols and macros).
void check_firmware_name(const std::string& name);

}  // namespace microtorch::lower
