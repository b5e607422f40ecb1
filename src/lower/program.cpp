// The Program IR: element types, buffer bookkeeping and the printed listings.
#include "microtorch/lower/program.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "microtorch/error.hpp"

namespace microtorch::lower {

int elem_bytes(Elem e) {
  switch (e) {
    case Elem::S8:
    case Elem::U8: return 1;
    case Elem::F32: return 4;
    case Elem::S16: return 2;
    case Elem::S32: return 4;
    case Elem::S64: return 8;
  }
  return 0;
}

std::string_view elem_ctype(Elem e) {
  switch (e) {
    case Elem::S8: return "int8_t";
    case Elem::U8: return "uint8_t";
    case Elem::F32: return "float";
    case Elem::S16: return "int16_t";
    case Elem::S32: return "int32_t";
    case Elem::S64: return "int64_t";
  }
  return "?";
}

std::int64_t elem_min(Elem e) {
  switch (e) {
    case Elem::S8: return INT8_MIN;
    case Elem::U8: return 0;
    case Elem::F32: return 0;
    case Elem::S16: return INT16_MIN;
    case Elem::S32: return INT32_MIN;
    case Elem::S64: return INT64_MIN;
  }
  return 0;
}

std::int64_t elem_max(Elem e) {
  switch (e) {
    case Elem::S8: return INT8_MAX;
    case Elem::U8: return UINT8_MAX;
    case Elem::F32: return UINT32_MAX;
    case Elem::S16: return INT16_MAX;
    case Elem::S32: return INT32_MAX;
    case Elem::S64: return INT64_MAX;
  }
  return 0;
}

std::string_view buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::Input: return "input";
    case BufferKind::Output: return "output";
    case BufferKind::Activation: return "activation";
    case BufferKind::Scratch: return "scratch";
    case BufferKind::Weight: return "weight";
    case BufferKind::Target: return "target";
    case BufferKind::Parameter: return "parameter";
    case BufferKind::State: return "state";
  }
  return "?";
}

std::string_view table_role_name(TableRole r) {
  switch (r) {
    case TableRole::Bias: return "biases";
    case TableRole::Requantization: return "requantization";
    case TableRole::Norm: return "layer norm";
    case TableRole::Lookup: return "lookup";
    case TableRole::Parameters: return "attention parameters";
    case TableRole::Mask: return "mask bits";
    case TableRole::Layout: return "copy shapes and strides";
  }
  return "?";
}

std::optional<int> pow2_frac(double scale) {
  int e = 0;
  if (!(scale > 0) || std::frexp(scale, &e) != 0.5) return std::nullopt;
  return 1 - e;  // scale = 0.5 * 2^e = 2^-(1 - e)
}

std::string format_name(Elem elem, double scale, std::int32_t zero_point) {
  if (const auto f = pow2_frac(scale); f && zero_point == 0) return fmt::format("Q{}.{}", elem_bytes(elem) * 8 - 1 - *f, *f);
  return zero_point == 0 ? fmt::format("s={:.4g}", scale) : fmt::format("s={:.4g}, z={}", scale, zero_point);
}

const Buffer& Program::buffer(std::int64_t id) const {
  if (id < 0 || id >= static_cast<std::int64_t>(buffers.size())) {
    throw IndexError(fmt::format("Program::buffer: no buffer {} (the program has {})", id, buffers.size()));
  }
  return buffers[static_cast<std::size_t>(id)];
}

Buffer& Program::buffer(std::int64_t id) { return const_cast<Buffer&>(std::as_const(*this).buffer(id)); }

std::int64_t Program::add_buffer(Buffer b) {
  b.id = static_cast<std::int64_t>(buffers.size());
  buffers.push_back(std::move(b));
  return buffers.back().id;
}

bool Program::float32() const {
  return std::any_of(buffers.begin(), buffers.end(), [](const Buffer& b) { return b.elem == Elem::F32; });
}

std::int64_t Program::weight_bytes() const {
  std::int64_t n = 0;
  for (const Buffer& b : buffers) {
    if (b.kind == BufferKind::Weight) n += b.bytes();
  }
  return n;
}

std::int64_t Program::total_macs() const {
  std::int64_t n = 0;
  for (const Step& s : steps) n += s.macs;
  return n;
}

std::pair<std::int64_t, std::int64_t> Program::input_channels() const {
  const Buffer& in = buffer(input);
  const auto C = static_cast<std::int64_t>(in.channel_scales.size());
  if (C == 0) return {0, 1};
  if (in.channel_zero_points.size() != in.channel_scales.size() || input_shape.size() < 2 || input_shape[1] != C ||
      std::any_of(in.channel_scales.begin(), in.channel_scales.end(), [](double s) { return !(s > 0); })) {
    throw ValueError(fmt::format("program {}: {} input scales and {} zero points per channel for an input {}; they "
                                 "must be one positive scale and one zero point per index of dim 1",
                                 name, C, in.channel_zero_points.size(), shape_str(input_shape)));
  }
  return {C, in.size / (input_shape[0] * C)};
}

std::string Program::to_string() const {
  std::string out = fmt::format("program {} (int{} activations, int{} weights, {}): {} steps, {} MACs\n", name,
                                activation_bits, weight_bits, scheme, steps.size(), total_macs());
  auto list = [this, &out](const std::vector<Step>& steps) {
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      std::string args;
      for (const Arg& a : s.args) {
        if (!args.empty()) args += ", ";
        if (a.kind == Arg::Kind::Int) {
          args += fmt::format("{}", a.value);
        } else if (a.kind == Arg::Kind::Real) {
          args += fmt::format("{}f", static_cast<float>(a.real_value));
        } else {
          args += a.buffer < 0 ? "NULL" : buffer(a.buffer).name + (a.offset ? fmt::format("+{}", a.offset) : "");
        }
      }
      out += fmt::format("{:3}  {}({})  ; {}\n", i, s.kernel, args, s.label);
    }
  };
  list(steps);
  if (training) {
    out += fmt::format("training step ({}, {} loss, batch {}): once\n", training->numeric, training->loss, training->batch);
    list(training->zero);
    out += "per sample\n";
    list(training->sample);
    out += "then\n";
    list(training->update);
  }
  return out;
}

std::string Program::memory_plan() const {
  std::vector<const Buffer*> placed;
  std::int64_t unshared = 0;
  for (const Buffer& b : buffers) {
    if (b.in_arena()) {
      placed.push_back(&b);
      unshared += (b.bytes() + 7) / 8 * 8;
    }
  }
  std::sort(placed.begin(), placed.end(), [](const Buffer* a, const Buffer* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->id < b->id;
  });
  std::string out = fmt::format("arena of {}: {} bytes ({} buffers; {} bytes if none shared)\n", name, arena_bytes,
                                placed.size(), unshared);
  out += fmt::format("  {:>7} {:>7}  {:>9}  {:<8} {}\n", "offset", "bytes", "steps", "buffer", "holds");
  for (const Buffer* b : placed) {
    out += fmt::format("  {:>7} {:>7}  {:>4}-{:<4}  {:<8} {}\n", b->offset, b->bytes(), b->first_step, b->last_step,
                       b->name, b->origin);
  }
  return out;
}

std::string Program::format_table() const {
  // a float32 program (train_program) has no fixed-point formats: its buffers hold IEEE floats
  if (float32()) {
    return fmt::format("formats of {}: none (float32: every value an IEEE-754 float)\n", name);
  }
  std::string out = fmt::format("formats of {} (value = scale * (q - zero point); Qm.f: scale 2^-f; range = the "
                                "values representable)\n",
                                name);
  out += fmt::format("  {:<12} {:<10} {:>7} {:>18} {:>25} {:>25}  {}\n", "buffer", "kind", "type", "format", "range",
                     "calibrated", "holds");
  for (const Buffer& b : buffers) {
    if (!b.fixed_point || b.elem == Elem::F32) continue;
    double lo = b.scale * static_cast<double>(elem_min(b.elem) - b.zero_point);
    double hi = b.scale * static_cast<double>(elem_max(b.elem) - b.zero_point);
    for (std::size_t c = 0; c < b.channel_zero_points.size(); ++c) {  // a format per channel: what any channel holds
      const double s = b.channel_scales[c];
      lo = std::min(c ? lo : 0.0, s * static_cast<double>(elem_min(b.elem) - b.channel_zero_points[c]));
      hi = std::max(c ? hi : 0.0, s * static_cast<double>(elem_max(b.elem) - b.channel_zero_points[c]));
    }
    std::string format = format_name(b.elem, b.scale, b.zero_point);
    if (!b.channel_scales.empty()) format = fmt::format("{} ch, s<={:.3g}", b.channel_scales.size(), b.scale);
    const std::string calibrated = b.kind == BufferKind::Weight ? "-" : fmt::format("[{:.4g}, {:.4g}]", b.lo, b.hi);
    out += fmt::format("  {:<12} {:<10} {:>7} {:>18} {:>25} {:>25}  {}\n", b.name, buffer_kind_name(b.kind),
                       elem_ctype(b.elem), format, fmt::format("[{:.4g}, {:.4g}]", lo, hi), calibrated, b.origin);
  }
  return out;
}

}  // namespace microtorch::lower
