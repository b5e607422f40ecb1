// microtorch/lower/program.hpp — the lowered model: a straight list of calls to the C99
// integer kernels (src/lower/runtime/mt_kernels.h) over typed buffers.
//
// quantize() (quantize.hpp) turns a traced Graph into a Program; simulate() (simulate.hpp)
// executes it on the host by calling the kernels, and emit_c() (emit.hpp) prints the very
// same calls as C. Because both read one Program and the kernels are one C file, the
// firmware computes what the simulator computes, bit for bit.
//
// Buffers hold integers. A fixed-point buffer stores the real values scale * (q - zero_point)
// (a power-of-two scale 2^-frac is a Q format). Integer tables (shapes, strides, token ids,
// attention keep-bits and parameters, requantization multipliers, argmax results) have no
// scale.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "microtorch/shape.hpp"

namespace microtorch::lower {

/// Element type of a buffer (its C type).
enum class Elem { S8, S16, S32, S64, U8 };
int elem_bytes(Elem e);
std::string_view elem_ctype(Elem e);  ///< "int16_t", ...
std::int64_t elem_min(Elem e);
std::int64_t elem_max(Elem e);

enum class BufferKind {
  Input,       ///< the caller's input array (`in`)
  Output,      ///< the caller's output array (`out`)
  Activation,  ///< an intermediate tensor, placed in the arena
  Scratch,     ///< kernel working memory (attention accumulators), placed in the arena
  Weight,      ///< constant data: `static const` arrays (flash)
};
std::string_view buffer_kind_name(BufferKind k);

struct Buffer {
  std::int64_t id = -1;
  BufferKind kind = BufferKind::Activation;
  Elem elem = Elem::S16;
  std::int64_t size = 0;      ///< elements
  std::string name;           ///< C identifier part: "fc1_weight", "t8"
  std::string origin;         ///< what it holds: "fc1.weight", "%8 = linear", "attention scratch"
  bool fixed_point = true;    ///< false for integer tables (no scale)
  double scale = 1.0;         ///< real value = scale * (q - zero_point)
  std::int32_t zero_point = 0;
  /// Weights quantized per output channel: the scale of each row (`scale` is the largest).
  std::vector<double> channel_scales;
  double lo = 0, hi = 0;      ///< the calibrated range the scale covers (activations)
  std::vector<std::int64_t> data;  ///< Weight: the values
  /// Parameter tables: the runtime's name of each entry (MT_ATTN_L, ...), emitted as
  /// designated initializers.
  std::vector<std::string> fields;
  std::int64_t graph_value = -1;   ///< the graph value it holds, if any
  // Set by plan_memory():
  std::int64_t offset = -1;          ///< Activation/Scratch: byte offset in the arena
  std::int64_t first_step = -1, last_step = -1;  ///< steps that write / read it

  std::int64_t bytes() const { return size * elem_bytes(elem); }
  bool in_arena() const { return kind == BufferKind::Activation || kind == BufferKind::Scratch; }
};

/// The power-of-two exponent of a scale that is one (2^-frac), if it is.
std::optional<int> pow2_frac(double scale);
/// "Q3.12" for a power-of-two scale without zero point, else "s=0.0123" (", z=-7").
std::string format_name(Elem elem, double scale, std::int32_t zero_point);

/// One argument of a kernel call, in the C signature's order.
struct Arg {
  enum class Kind { Buffer, Int };
  Kind kind = Kind::Int;
  std::int64_t buffer = -1;  ///< Buffer: buffer id (-1: a NULL pointer)
  std::int64_t offset = 0;   ///< Buffer: element offset into it
  std::int64_t value = 0;    ///< Int: the value
  static Arg buf(std::int64_t id, std::int64_t offset = 0) { return {Kind::Buffer, id, offset, 0}; }
  static Arg num(std::int64_t v) { return {Kind::Int, -1, 0, v}; }
};

/// One kernel call: `kernel(args...)`. Kernels that return a status (embedding lookups)
/// make the firmware's run function return non-zero.
struct Step {
  std::string kernel;
  std::vector<Arg> args;
  bool returns_status = false;
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
  std::int64_t buffer = -1, offset = 0;
  Shape shape;
  std::vector<std::int64_t> strides;
  double scale = 1.0;
  std::int32_t zero_point = 0;
  std::vector<double> segments;  ///< per equal group of the last dim, when the parts differ
  std::vector<std::int32_t> segment_zeros;  ///< their zero points (empty: 0)
};

struct Program {
  std::string name = "model";
  int activation_bits = 16;  ///< the default precision (layers may differ: QuantOptions::precision)
  int weight_bits = 16;
  std::string scheme;        ///< "power-of-two", "symmetric per-channel", "affine per-channel"
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::int64_t input = -1, output = -1;  ///< buffer ids
  Shape input_shape, output_shape;
  std::int64_t arena_bytes = 0;  ///< set by plan_memory()
  std::vector<Probe> probes;     ///< one per graph value the program computes
  /// What the lowering had to approximate beyond rounding, one line each, naming the tensor
  /// (a calibrated range outside the formats the kernels support: clamped, so its values
  /// round to 0 or saturate). report() lists them first; microtorch-lower prints them.
  std::vector<std::string> warnings;
  /// Text appended to report() (and so to the firmware's <name>_report.txt): the accuracy on
  /// evaluation data and the per-layer table (layer_report), the precision search's choices.
  std::string evaluation;

  const Buffer& buffer(std::int64_t id) const;
  Buffer& buffer(std::int64_t id);
  std::int64_t add_buffer(Buffer b);  ///< assigns the id; returns it

  std::int64_t weight_bytes() const;
  std::int64_t total_macs() const;

  /// One line per step: `mt_linear_s16_w16(t3, fc1_weight, fc1_bias, ...)  ; %3 = linear ...`.
  std::string to_string() const;
  /// The arena: one line per placed buffer (offset, bytes, live steps), then the total and
  /// the bytes an unshared layout would need.
  std::string memory_plan() const;
  /// Per-tensor formats: buffer, type, scale (Q format) and zero point, representable and
  /// calibrated range, what it holds.
  std::string format_table() const;
};

}  // namespace microtorch::lower
