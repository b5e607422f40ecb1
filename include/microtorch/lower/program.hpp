/// \file
/// The lowered model: a straight list of calls to the C99 integer kernels
/// (src/lower/runtime/mt_kernels.h) over typed buffers.
///
/// quantize() (quantize.hpp) turns a traced Graph into a Program; the Simulator
/// (simulate.hpp) executes it on the host by calling the kernels, and emit_c() (emit.hpp)
/// prints the very same calls as C. Because both read one Program and the kernels are one C
/// file, the firmware computes what the simulator computes, bit for bit.
///
/// Buffers hold integers. A fixed-point buffer stores the real values
/// `scale * (q - zero_point)` (a power-of-two scale 2^-frac is a Q format). Integer tables
/// (shapes, strides, token ids, attention keep-bits and parameters, requantization
/// multipliers, argmax results) have no scale.
///
/// \code
///   lower::Program p = lower::quantize(graph, calibration, {.activation_bits = 8});
///   fmt::print("{}{}{}", p.to_string(), p.format_table(), p.memory_plan());
///   const lower::Buffer& out = p.buffer(p.output);   // its type, scale, zero point, size
///   fmt::print("{} MACs, {} weight bytes, arena {} bytes\n", p.total_macs(), p.weight_bytes(), p.arena_bytes);
/// \endcode
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "microtorch/shape.hpp"

namespace microtorch::lower {

/// Element type of a buffer (its C type).
enum class Elem {
  S8,   ///< int8_t: int8 activations and weights
  S16,  ///< int16_t: int16 activations and weights
  S32,  ///< int32_t: biases of int8 layers, requantization multipliers, parameter tables, token ids, argmax results
  S64,  ///< int64_t: biases of int16 layers, wide accumulators (attention scratch)
  U8,   ///< uint8_t: bit masks (attention keep-bits)
  F32   ///< float: float32 programs (train.hpp); Buffer::data holds each value's IEEE-754 bits
};
/// Bytes of one element: 1, 2, 4 or 8.
int elem_bytes(Elem e);
std::string_view elem_ctype(Elem e);  ///< The C type's name: "int16_t", ...
/// The smallest value of the C type (INT8_MIN, ..., 0 for U8; for F32 0: its values are bits).
std::int64_t elem_min(Elem e);
/// The largest value of the C type (INT8_MAX, ..., UINT8_MAX for U8; for F32 UINT32_MAX: bits).
std::int64_t elem_max(Elem e);

/// What a buffer is for, which decides where the firmware keeps it.
enum class BufferKind {
  Input,       ///< the caller's input array (`in`)
  Output,      ///< the caller's output array (`out`)
  Activation,  ///< an intermediate tensor, placed in the arena
  Scratch,     ///< kernel working memory (attention accumulators), placed in the arena
  Weight,      ///< constant data: `static const` arrays (flash)
  Target,      ///< the training step's target array (`target`): one sample's class indices or values
  Parameter,   ///< a trained parameter: an array in RAM that starts with its values (training)
  State,       ///< a trained parameter's gradient or momentum, the loss: zeroed arrays in RAM (training)
};
/// The kind's name as listings print it: "input", "output", "activation", "scratch", "weight".
std::string_view buffer_kind_name(BufferKind k);

/// What an integer table (a Weight buffer that is not fixed point) holds, for the report.
enum class TableRole {
  Bias,            ///< a layer's biases in its accumulators' scale, input zero points folded in
  Requantization,  ///< per output channel (or one) multiplier and shift pairs of a layer
  Norm,            ///< a layer norm's gains and biases in fixed point
  Lookup,          ///< an activation's table for every int8 input (256 entries)
  Parameters,      ///< an attention call's parameter block (sizes, strides, scales)
  Mask,            ///< an attention mask's keep bits
  Layout,          ///< the shape and strides of a strided copy
};
/// The role's name as the report prints it: "biases", "requantization", ...
std::string_view table_role_name(TableRole r);

/// One array of the program: its C type and size, its number format (fixed-point buffers) or
/// its values (weights and tables), and, once plan_memory() has run, its place in the arena.
struct Buffer {
  std::int64_t id = -1;       ///< index in Program::buffers (Program::add_buffer sets it)
  BufferKind kind = BufferKind::Activation;  ///< where it lives
  Elem elem = Elem::S16;      ///< its C element type
  std::int64_t size = 0;      ///< elements
  std::string name;           ///< C identifier part: "fc1_weight", "t8"
  std::string origin;         ///< what it holds: "fc1.weight", "%8 = linear", "attention scratch"
  bool fixed_point = true;    ///< false for integer tables (no scale)
  TableRole role = TableRole::Bias;  ///< integer tables: what they hold
  double scale = 1.0;         ///< real value = scale * (q - zero_point)
  std::int32_t zero_point = 0;  ///< the integer that stands for 0.0 (non-zero only in affine int8 tensors)
  /// Weights quantized per output channel: the scale of each row (`scale` is the largest).
  /// The Input buffer with a format per channel (QuantOptions::input_channel_formats): the
  /// scale of each index of dim 1 of the input, with zero point channel_zero_points[c] (then
  /// `scale` and `zero_point` describe no element: the largest scale, zero point 0).
  std::vector<double> channel_scales;
  std::vector<std::int32_t> channel_zero_points;  ///< the Input's zero point per channel (see channel_scales)
  ///@{
  /// The calibrated range [lo, hi] the scale covers (activations; 0 for weights and tables).
  double lo = 0, hi = 0;
  ///@}
  std::vector<std::int64_t> data;  ///< Weight: the values, in the order the kernel reads them
  /// Weight: the rows in pair order (a linear layer whose input and weights differ in width:
  /// lower::pair_order, mt_kernels.h), not in plain row-major order.
  bool rows_in_pair_order = false;
  /// Parameter tables: the runtime's name of each entry (MT_ATTN_L, ...), emitted as
  /// designated initializers.
  std::vector<std::string> fields;
  std::int64_t graph_value = -1;   ///< the graph value it holds, if any
  // Set by plan_memory():
  std::int64_t offset = -1;          ///< Activation/Scratch: byte offset in the arena
  ///@{
  /// Activation/Scratch: the index of the first step that writes it and of the last step
  /// that reads it (its lifetime in the arena).
  std::int64_t first_step = -1, last_step = -1;
  ///@}

  /// Its size in bytes: size * elem_bytes(elem).
  std::int64_t bytes() const { return size * elem_bytes(elem); }
  /// True for Activation and Scratch buffers, the ones plan_memory() places in the arena.
  bool in_arena() const { return kind == BufferKind::Activation || kind == BufferKind::Scratch; }
};

/// The exponent frac of a scale that is a power of two (scale = 2^-frac), or nullopt when
/// the scale is not a power of two or not positive.
std::optional<int> pow2_frac(double scale);
/// "Q3.12" for a power-of-two scale without zero point, else "s=0.0123" (", z=-7").
std::string format_name(Elem elem, double scale, std::int32_t zero_point);

/// One argument of a kernel call, in the C signature's order.
struct Arg {
  /// What the argument passes.
  enum class Kind {
    Buffer,  ///< a pointer: `buffer` + `offset` elements
    Int,     ///< an integer: `value`
    Real     ///< a float: `real_value` (a float32 program's scalars: scales, learning rates)
  };
  Kind kind = Kind::Int;     ///< which of the fields below it uses
  std::int64_t buffer = -1;  ///< Buffer: buffer id (-1: a NULL pointer)
  std::int64_t offset = 0;   ///< Buffer: element offset into it
  std::int64_t value = 0;    ///< Int: the value
  double real_value = 0;     ///< Real: the value (a float's, exactly)
  /// A pointer to element `offset` of buffer `id` (-1: NULL).
  static Arg buf(std::int64_t id, std::int64_t offset = 0) { return {Kind::Buffer, id, offset, 0, 0}; }
  /// An integer argument.
  static Arg num(std::int64_t v) { return {Kind::Int, -1, 0, v, 0}; }
  /// A float argument (the float nearest `v`).
  static Arg real(double v) { return {Kind::Real, -1, 0, 0, static_cast<double>(static_cast<float>(v))}; }
};

/// One kernel call: `kernel(args...)`. Kernels that return a status (embedding lookups)
/// make the firmware's run function return non-zero.
struct Step {
  std::string kernel;        ///< the runtime function called: "mt_linear_s8_s8_s8", ...
  std::vector<Arg> args;     ///< its arguments in the C signature's order
  bool returns_status = false;  ///< the kernel returns a status (non-zero: bad data, such as an out-of-range token id)
  std::int64_t node = -1;   ///< index of the graph node it implements (-1: layout copy of the input)
  std::string label;        ///< "%8 = linear(attn.in_proj_weight)" — for listings and C comments
  std::int64_t macs = 0;    ///< multiply-accumulates
  std::string out_format;   ///< the format of what it computes ("Q3.12", "s=0.0123, z=-7", "int8 s=...")
};

/// Where a graph value can be read in the program: the elements of a strided view of a
/// buffer, valid right after step `step` (later steps may reuse the bytes). The per-layer
/// error report compares them with the float model.
struct Probe {
  std::int64_t value = -1;  ///< graph value id
  std::int64_t step = -1;   ///< -1: before the first step (the input)
  ///@{
  /// The buffer that holds it, and the element offset of its first element there.
  std::int64_t buffer = -1, offset = 0;
  ///@}
  Shape shape;               ///< the graph value's shape
  std::vector<std::int64_t> strides;  ///< element strides of the view, one per dim of `shape`
  double scale = 1.0;        ///< real value = scale * (q - zero_point) (the largest scale when `segments` is set)
  std::int32_t zero_point = 0;  ///< see `scale`
  std::vector<double> segments;  ///< per equal group of dim `segment_dim`, when the parts differ
  std::vector<std::int32_t> segment_zeros;  ///< their zero points (empty: 0)
  std::int64_t segment_dim = -1;  ///< the dim the parts divide (-1: the last)
};

/// A parameter that a training step updates.
struct TrainedParameter {
  std::string name;           ///< its named_parameters() name ("head.weight")
  std::int64_t buffer = -1;   ///< the Parameter buffer the forward reads (and, in float32, the update writes)
  std::int64_t grad = -1;     ///< the State buffer of its gradient, summed over a step's samples
  std::int64_t momentum = -1;  ///< the State buffer of its momentum (-1: no momentum)
  std::int64_t master = -1;   ///< integer mode: the wider Parameter buffer the update writes (-1 in float32)
  /// Integer mode: the real value of each master element is master * scales[r], r its row (of
  /// size numel / scales.size()); empty in float32.
  std::vector<double> scales;
  Shape shape;                ///< its shape
};

/// The training step of a Program (train.hpp): what `<name>_train_step(in, target)` runs.
/// For a batch of samples it runs `zero` once, `sample` once per sample (its Input buffer
/// pointing at that sample, its Target buffer at the sample's target), then `update`.
struct Training {
  std::string numeric;      ///< "float32" or "integer"
  std::string loss;         ///< "cross_entropy" or "mse"
  double lr = 0;             ///< the SGD step's learning rate (TrainOptions::lr)
  double momentum = 0;       ///< its momentum (TrainOptions::momentum; 0: none)
  double weight_decay = 0;   ///< its L2 weight decay (TrainOptions::weight_decay)
  std::int64_t batch = 1;   ///< samples per step
  std::vector<Step> zero;   ///< once per step, first: the gradients and the loss to 0
  std::vector<Step> sample;  ///< per sample: forward, loss and its gradient, backward
  std::vector<Step> update;  ///< once per step, last: the averaged gradients, the SGD step
  /// Integer mode: the forward's integer weights and bias tables re-derived from the masters;
  /// the end of `update`, and what `<name>_set_params` runs after copying the blob in.
  std::vector<Step> derive;
  std::int64_t target = -1;  ///< the Target buffer: one sample's class indices (int32) or float targets
  std::int64_t loss_value = -1;  ///< a State buffer holding the step's mean loss
  std::vector<TrainedParameter> parameters;  ///< what the step updates, in blob order
  /// Bytes of the parameters' RAM copies, gradients and momentum (outside the arena).
  std::int64_t state_bytes = 0;
};

/// A decoder's step program (lower_decoder, decoder.hpp): the input is one token id, the
/// output its logits, and the key/value caches and the position counter are State buffers
/// that keep their values from one call to the next (zeroed by the firmware's `<name>_reset`).
struct Decoding {
  std::int64_t capacity = 0;    ///< positions the caches hold (the longest sequence)
  std::int64_t vocab = 0;       ///< logits per step
  std::int64_t position = -1;   ///< the State buffer of the position counter (int32 [1])
  std::int64_t state_bytes = 0;  ///< the caches and the counter, in RAM beside the arena
};

/// The lowered model: buffers and the kernel calls over them, in execution order, plus what
/// the listings and the per-layer error report need (labels, probes, warnings). quantize()
/// builds it; the Simulator runs it and emit_c() writes it as C.
struct Program {
  std::string name = "model";  ///< C identifier prefix of the firmware (`<name>.h`, `<name>_run`)
  int activation_bits = 16;  ///< the default precision (layers may differ: QuantOptions::precision)
  int weight_bits = 16;      ///< the default weight precision (QuantOptions::weight_bits, 0 resolved)
  std::string scheme;        ///< the number formats, e.g. "affine, per-channel weights" (scheme_name + weights)
  std::vector<Buffer> buffers;  ///< every array, indexed by Buffer::id
  std::vector<Step> steps;      ///< the kernel calls, in execution order
  ///@{
  /// The ids of the Input and the Output buffer.
  std::int64_t input = -1, output = -1;
  ///@}
  ///@{
  /// The graph input's and output's shapes (what quantize_input() takes and
  /// dequantize_output() returns).
  Shape input_shape, output_shape;
  ///@}
  std::int64_t arena_bytes = 0;  ///< set by plan_memory(): for the inference and, if any, the training step
  /// The training step, when the program has one (train_program); empty for quantize()'s.
  std::optional<Training> training;
  /// The decoder's step, when the program is one (lower_decoder); empty otherwise.
  std::optional<Decoding> decoding;
  std::vector<Probe> probes;     ///< one per graph value the program computes
  /// What the lowering had to approximate beyond rounding, one line each, naming the tensor
  /// (a calibrated range outside the formats the kernels support: clamped, so its values
  /// round to 0 or saturate). report() lists them first; microtorch-lower prints them.
  std::vector<std::string> warnings;
  /// Text appended to report() (and so to the firmware's `<name>_report.txt`): the accuracy on
  /// evaluation data and the per-layer table (layer_report), the precision search's choices.
  std::string evaluation;

  /// The buffer with id `id`; IndexError when there is none.
  const Buffer& buffer(std::int64_t id) const;
  /// The buffer with id `id`, to modify; IndexError when there is none.
  Buffer& buffer(std::int64_t id);
  std::int64_t add_buffer(Buffer b);  ///< Appends `b`, assigning its id; returns the id.

  /// Bytes of every Weight buffer (quantized parameters, constants and integer tables: flash).
  std::int64_t weight_bytes() const;
  /// A float32 program (train_program, Numeric::Float32): some buffer holds IEEE floats, so
  /// it runs only on cores with a single-precision FPU.
  bool float32() const;
  /// Multiply-accumulates of one inference: the sum of Step::macs.
  std::int64_t total_macs() const;
  /// The input's channels when it has a format per channel (Buffer::channel_scales): their
  /// number C and the elements from one channel to the next, so element i of the input is in
  /// channel i / stride % C; {0, 1} when one format covers the whole input. ValueError when
  /// the formats are not one positive scale and one zero point per index of dim 1 of
  /// input_shape (a program built by hand or edited).
  std::pair<std::int64_t, std::int64_t> input_channels() const;

  /// A header line (name, precision, scheme, steps, MACs), then one line per step:
  /// `mt_linear_s16_w16(t3, fc1_weight, fc1_bias, ...)  ; %3 = linear ...`.
  std::string to_string() const;
  /// The arena: one line per placed buffer (offset, bytes, live steps), then the total and
  /// the bytes an unshared layout would need.
  std::string memory_plan() const;
  /// Per-tensor formats: buffer, type, scale (Q format) and zero point, representable and
  /// calibrated range, what it holds.
  std::string format_table() const;
};

}  // namespace microtorch::lower
