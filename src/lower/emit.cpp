// emit_c — a Program printed as a C99 firmware folder; report(); firmware_size().
#include "microtorch/lower/emit.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "microtorch/io.hpp"
#include "microtorch/lower/decoder.hpp"
#include "microtorch/lower/quantize.hpp"
#include "runtime/mt_kernels.h"
#include "shell.hpp"

namespace microtorch::lower {

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// An integer literal of a C type that never needs a conversion (INT_MIN has no literal).
std::string c_int(std::int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  if (v == INT32_MIN) return "(-2147483647 - 1)";
  if (v > INT32_MAX || v < INT32_MIN) return fmt::format("{}LL", v);
  return fmt::format("{}", v);
}

std::string q_name(const Buffer& b) {
  if (!b.fixed_point) return "integers";
  if (!b.channel_scales.empty()) return fmt::format("{} scales, the largest {:.4g}", b.channel_scales.size(), b.scale);
  return format_name(b.elem, b.scale, b.zero_point);
}

// A float's exact C literal: the shortest decimal that reads back as the same float ("0.1f").
std::string c_float(double v) {
  const auto f = static_cast<float>(v);
  if (std::isnan(f)) return "(0.0f / 0.0f)";
  if (std::isinf(f)) return f > 0 ? "(1.0f / 0.0f)" : "(-1.0f / 0.0f)";
  for (int digits = 6; digits <= 9; ++digits) {
    const std::string s = fmt::format("{:.{}g}", f, digits);
    if (std::strtof(s.c_str(), nullptr) == f) return s + (s.find_first_of(".e") == std::string::npos ? ".0f" : "f");
  }
  return fmt::format("{:.9g}f", f);
}

// A float buffer element from its IEEE bits (Buffer::data of an Elem::F32 buffer).
std::string c_float_bits(std::int64_t bits) {
  const auto u = static_cast<std::uint32_t>(bits);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return c_float(f);
}

// The C expression for a buffer argument.
std::string c_pointer(const Program& p, const Arg& a) {
  if (a.buffer < 0) return "0";
  const Buffer& b = p.buffer(a.buffer);
  const std::string off = a.offset ? fmt::format(" + {}", a.offset) : "";
  switch (b.kind) {
    case BufferKind::Input: return "in" + off;
    case BufferKind::Output: return "out" + off;
    case BufferKind::Target: return "target" + off;
    case BufferKind::Weight:
    case BufferKind::Parameter:
    case BufferKind::State: return b.name + off;
    default:
      return fmt::format("({} *)(void *)(arena.bytes + {})", elem_ctype(b.elem), b.offset + a.offset * elem_bytes(b.elem));
  }
}

// A call's arguments as C.
std::string c_args(const Program& p, const Step& s) {
  std::string args;
  for (const Arg& a : s.args) {
    if (!args.empty()) args += ", ";
    args += a.kind == Arg::Kind::Buffer ? c_pointer(p, a)
            : a.kind == Arg::Kind::Real ? c_float(a.real_value)
                                        : c_int(a.value);
  }
  return args;
}

std::string c_array(const Buffer& b) {
  if (b.kind == BufferKind::State) {  // zeroed RAM
    return fmt::format("static {} {}[{}] MT_WORD_ALIGNED;\n", elem_ctype(b.elem), b.name, std::max<std::int64_t>(b.size, 1));
  }
  const bool f32 = b.elem == Elem::F32;
  std::string s = fmt::format("static {}{} {}[{}] MT_WORD_ALIGNED = {{", b.kind == BufferKind::Parameter ? "" : "const ",
                              elem_ctype(b.elem), b.name, std::max<std::int64_t>(b.size, 1));
  if (!b.fields.empty() && b.fields.size() == b.data.size()) {  // a parameter table: designated initializers
    for (std::size_t i = 0; i < b.data.size(); ++i) {
      s += fmt::format("\n  [{}] = {}{}", b.fields[i], c_int(b.data[i]), i + 1 < b.data.size() ? "," : "");
    }
    return s + "\n};\n";
  }
  for (std::size_t i = 0; i < b.data.size(); ++i) {
    s += (i % (f32 ? 8 : 12) == 0 ? "\n  " : " ") + (f32 ? c_float_bits(b.data[i]) : c_int(b.data[i])) +
         (i + 1 < b.data.size() ? "," : "");
  }
  if (b.data.empty()) s += "0";
  return s + "\n};\n";
}

std::string input_type(const Program& p) { return std::string(elem_ctype(p.buffer(p.input).elem)); }
std::string output_type(const Program& p) { return std::string(elem_ctype(p.buffer(p.output).elem)); }

// What the training step returns: the mean loss as a float (float32), or in Q16 as an int32
// (integer: loss * 65536, no float arithmetic on the core).
bool integer_training(const Program& p) { return p.training && p.training->numeric == "integer"; }
std::string loss_type(const Program& p) { return integer_training(p) ? "int32_t" : "float"; }
// The buffer a parameter's blob bytes come from: its int32 master (integer) or its values.
std::int64_t blob_buffer(const TrainedParameter& tp) { return tp.master >= 0 ? tp.master : tp.buffer; }

// The training step's macros and declarations (Program::training).
std::string training_macros(const Program& p) {
  const std::string N = upper(p.name);
  const Training& t = *p.training;
  std::int64_t blob = 0;
  for (const TrainedParameter& tp : t.parameters) blob += p.buffer(blob_buffer(tp)).bytes();
  return fmt::format("#define {0}_BATCH {1}\n#define {0}_TARGET_SIZE {2}\n#define {0}_PARAMS_BYTES {3}\n", N, t.batch,
                     p.buffer(t.target).size, blob);
}

std::string training_declarations(const Program& p) {
  const Training& t = *p.training;
  std::string names;
  for (const TrainedParameter& tp : t.parameters) names += (names.empty() ? "" : ", ") + tp.name;
  return fmt::format(
      "\n/* One training step ({1}, {2} loss): {10}_BATCH samples (in: {10}_BATCH inputs one after the\n"
      " * other; target: {10}_BATCH times {10}_TARGET_SIZE {3}), SGD with lr {4}, momentum {5}, weight\n"
      " * decay {6} on: {7}. Returns the step's mean loss{11}. */\n"
      "{12} {0}_train_step(const {8} *in, const {9} *target);\n"
      "/* The trained parameters as one blob of {10}_PARAMS_BYTES bytes, in the order above{13}: copied out\n"
      " * (get) or in (set); each returns the bytes copied, or -1 when `bytes` is too small. */\n"
      "int {0}_get_params(void *blob, int bytes);\nint {0}_set_params(const void *blob, int bytes);\n",
      p.name, t.numeric, t.loss == "mse" ? "MSE" : "cross entropy",
      t.loss == "mse" ? "float target values" : "int32 class indices", c_float(t.lr), c_float(t.momentum),
      c_float(t.weight_decay), names, input_type(p), elem_ctype(p.buffer(t.target).elem), upper(p.name),
      integer_training(p) ? " in Q16 (loss * 65536)" : "", loss_type(p),
      integer_training(p) ? " (their int32 masters; set re-derives the weights the forward reads)" : "");
}

// A decoder's step program (Program::decoding): reset, step, the greedy choice and sampling.
std::string decoding_declarations(const Program& p) {
  return fmt::format(
      "\n/* A decoder's step: {0}_run reads one token id and writes its {1}_VOCAB logits; the keys and\n"
      " * values of the {1}_CONTEXT positions so far stay in RAM ({1}_STATE_BYTES bytes beside the arena)\n"
      " * from one call to the next. */\n"
      "/* Forgets every position (the position to 0, as at start-up; the cache rows past it are never read). */\n"
      "void {0}_reset(void);\n"
      "/* The logits of `token` at the next position; returns 0, or 1 when the token id is out of range\n"
      " * or the {1}_CONTEXT positions are used up (then the logits are not meaningful). */\n"
      "int {0}_step(int32_t token, int16_t *logits);\n"
      "/* Greedy decoding: the first index of the largest of the {1}_VOCAB logits. */\n"
      "int32_t {0}_greedy(const int16_t *logits);\n"
      "/* Seeded sampling among the top_k (1..64) largest logits at temperature T, given as\n"
      " * inv_temperature_q16 = round(65536 / T): integers only (mt_sample_s16 in mt_kernels.h); *seed\n"
      " * advances one xorshift32 step per call. top_k = 1 is greedy. */\n"
      "int32_t {0}_sample(const int16_t *logits, int top_k, int32_t inv_temperature_q16, uint32_t *seed);\n",
      p.name, upper(p.name));
}

// Reset sets the position to 0 and nothing else: a step writes its cache row before any step
// reads it, and attention reads the rows below the position only.
std::string decoding_source(const Program& p) {
  return fmt::format(
      "\nvoid {0}_reset(void) {{ {2}[0] = 0; }}\n"
      "\nint {0}_step(int32_t token, int16_t *logits) {{ return {0}_run(&token, logits); }}\n"
      "\nint32_t {0}_greedy(const int16_t *logits) {{\n  int32_t i, best = 0;\n"
      "  for (i = 1; i < {1}_VOCAB; ++i) {{\n    if (logits[i] > logits[best]) best = i;\n  }}\n  return best;\n}}\n"
      "\nint32_t {0}_sample(const int16_t *logits, int top_k, int32_t inv_temperature_q16, uint32_t *seed) {{\n"
      "  return mt_sample_s16(logits, {1}_VOCAB, top_k, {1}_LOGIT_LOG2E_Q24, inv_temperature_q16, seed);\n}}\n",
      p.name, upper(p.name), p.buffer(p.decoding->position).name);
}

std::string header_text(const Program& p) {
  const std::string N = upper(p.name);
  const Buffer &in = p.buffer(p.input), &out = p.buffer(p.output);
  if (in.elem == Elem::F32) {
    std::string h = fmt::format(
        "/* {0}.h - generated by microtorch's lowering pass. Do not edit.\n"
        " *\n"
        " * float32 activations and weights (for cores with a single-precision FPU); {1} MACs per\n"
        " * inference; {2} bytes of weights and tables (flash), {3} bytes of arena (RAM); no malloc, no stdio.\n"
        " *\n"
        " *   input  float {4}\n"
        " *   output {5} {6}\n"
        " *\n"
        " * {0}_run returns 0, or 1 when the input held an out-of-range token id.\n"
        " * Not reentrant: the arena is one static buffer.\n"
        " */\n"
        "#ifndef {7}_H\n#define {7}_H\n\n#include <stdint.h>\n\n",
        p.name, p.total_macs(), p.weight_bytes(), p.arena_bytes, shape_str(p.input_shape), elem_ctype(out.elem),
        shape_str(p.output_shape), N);
    h += fmt::format("#define {0}_INPUT_SIZE {1}\n#define {0}_OUTPUT_SIZE {2}\n#define {0}_ARENA_BYTES {3}\n", N, in.size,
                     out.size, p.arena_bytes);
    if (p.training) h += training_macros(p);
    h += "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
    h += fmt::format("int {}_run(const float *in, {} *out);\n", p.name, output_type(p));
    if (p.training) h += training_declarations(p);
    h += "\n#ifdef __cplusplus\n}\n#endif\n\n";
    return h + fmt::format("#endif /* {}_H */\n", N);
  }
  const std::int64_t in_channels = p.input_channels().first;  // 0: one format for the whole input
  std::string h = fmt::format(
      "/* {0}.h - generated by microtorch's lowering pass. Do not edit.\n"
      " *\n"
      " * int{1} activations, int{2} weights ({13}); {3} MACs per inference; {4} bytes of weights\n"
      " * and tables (flash),"
      " {5} bytes of arena (RAM); no malloc, no float{15}, no stdio.\n"
      " *\n"
      " *   input  {6} {7}: {8}\n"
      " *   output {9} {10}: {11}\n"
      " *\n"
      " * A real value v is the integer round(v / SCALE) + ZERO_POINT (ties away from zero, saturated):\n"
      " * v = SCALE * (q - ZERO_POINT); a power-of-two SCALE is 2^-FRAC.{14}\n"
      " * {0}_run returns 0, or 1 when the input held an out-of-range token id.\n"
      " * Not reentrant: the arena is one static buffer.\n"
      " */\n"
      "#ifndef {12}_H\n#define {12}_H\n\n#include <stdint.h>\n\n",
      p.name, p.activation_bits, p.weight_bits, p.total_macs(), p.weight_bytes(), p.arena_bytes, elem_ctype(in.elem),
      shape_str(p.input_shape), in.fixed_point ? q_name(in) : "token ids", elem_ctype(out.elem), shape_str(p.output_shape),
      out.fixed_point ? q_name(out) : "indices (argmax)", N, p.scheme,
      in_channels == 0
          ? ""
          : fmt::format("\n * The input has a format per channel (dim 1): element i is in channel\n"
                        " * c = (i / {0}_INPUT_CHANNEL_STRIDE) % {0}_INPUT_CHANNELS, and its integer is\n"
                        " * round(v / {1}_input_scales[c]) + {1}_input_zero_points[c] (there is no single\n"
                        " * {0}_INPUT_SCALE; {1}_run_float quantises so).",
                        N, p.name),
      in_channels == 0 ? "" : " arithmetic");
  auto format_macros = [&](const char* what, const Buffer& b) {
    std::string m = fmt::format("#define {}_{}_SIZE {}\n", N, what, b.size);
    if (!b.fixed_point) return m;
    if (!b.channel_scales.empty()) {  // the input's formats per channel: arrays, no single scale
      const auto [C, stride] = p.input_channels();
      return m + fmt::format("#define {0}_{1}_CHANNELS {2}\n#define {0}_{1}_CHANNEL_STRIDE {3}\n", N, what, C, stride);
    }
    m += fmt::format("#define {}_{}_SCALE {:.9g}f\n#define {}_{}_ZERO_POINT {}\n", N, what, b.scale, N, what, b.zero_point);
    if (const auto f = pow2_frac(b.scale)) m += fmt::format("#define {}_{}_FRAC {}\n", N, what, *f);
    return m;
  };
  h += format_macros("INPUT", in) + format_macros("OUTPUT", out);
  h += fmt::format("#define {}_ARENA_BYTES {}\n", N, p.arena_bytes);
  if (p.training) h += training_macros(p);
  if (p.decoding) {
    h += fmt::format("#define {0}_CONTEXT {1}\n#define {0}_VOCAB {2}\n#define {0}_STATE_BYTES {3}\n"
                     "#define {0}_LOGIT_LOG2E_Q24 {4} /* OUTPUT_SCALE log2(e) 2^24, for {5}_sample */\n",
                     N, p.decoding->capacity, p.decoding->vocab, p.decoding->state_bytes, logit_log2e_q24(p), p.name);
  }
  h += "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h += fmt::format("int {}_run(const {} *in, {} *out);\n", p.name, input_type(p), output_type(p));
  if (in_channels > 0) {
    h += fmt::format(
        "/* The input's format per channel c: v = {0}_input_scales[c] * (q - {0}_input_zero_points[c]). */\n"
        "extern const float {0}_input_scales[{1}_INPUT_CHANNELS];\n"
        "extern const int32_t {0}_input_zero_points[{1}_INPUT_CHANNELS];\n",
        p.name, N);
  }
  if (p.training) h += training_declarations(p);
  if (p.decoding) h += decoding_declarations(p);
  if (in.fixed_point && out.fixed_point) {
    h += fmt::format(
        "\n#ifdef {0}_FLOAT_API\n/* Convenience for hosts with an FPU: quantises in, runs, dequantises out. */\n"
        "int {1}_run_float(const float *in, float *out);\n#endif\n",
        N, p.name);
  }
  h += "\n#ifdef __cplusplus\n}\n#endif\n\n";
  h += fmt::format("#endif /* {}_H */\n", N);
  return h;
}

// The calls of a list of steps, each after a comment with its label (`status` set to 1 when
// a kernel that returns a status reports bad data).
std::string c_steps(const Program& p, const std::vector<Step>& steps, const std::string& indent) {
  std::string c;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    const std::string args = c_args(p, s);
    c += fmt::format("{}/* {}: {} */\n", indent, i, s.label);
    c += s.returns_status ? fmt::format("{}if ({}({}) != 0) status = 1;\n", indent, s.kernel, args)
                          : fmt::format("{}{}({});\n", indent, s.kernel, args);
  }
  return c;
}

// <name>_train_step, <name>_get_params, <name>_set_params.
std::string training_source(const Program& p) {
  const std::string N = upper(p.name);
  const Training& t = *p.training;
  const std::string target_t(elem_ctype(p.buffer(t.target).elem));
  std::string c = fmt::format(
      "\n{3} {0}_train_step(const {1} *batch_in, const {2} *batch_target) {{\n  int s, status = 0;\n", p.name,
      input_type(p), target_t, loss_type(p));
  c += c_steps(p, t.zero, "  ");
  c += fmt::format("  for (s = 0; s < {0}_BATCH; ++s) {{\n    const {1} *in = batch_in + s * {0}_INPUT_SIZE;\n"
                   "    const {2} *target = batch_target + s * {0}_TARGET_SIZE;\n",
                   N, input_type(p), target_t);
  c += c_steps(p, t.sample, "    ");
  c += "  }\n";
  c += c_steps(p, t.update, "  ");
  c += fmt::format("  (void)status;\n  return {}[0];\n}}\n", p.buffer(t.loss_value).name);
  // the blob: each trained parameter's bytes in turn
  auto copy = [&](bool out) {
    std::string body;
    for (const TrainedParameter& tp : t.parameters) {
      const Buffer& b = p.buffer(blob_buffer(tp));
      body += fmt::format("  for (i = 0; i < {}; ++i) {};\n", b.bytes(),
                          out ? fmt::format("*dst++ = ((const uint8_t *){})[i]", b.name)
                              : fmt::format("((uint8_t *){})[i] = *src++", b.name));
    }
    return body;
  };
  c += fmt::format("\nint {0}_get_params(void *blob, int bytes) {{\n  uint8_t *dst = (uint8_t *)blob;\n  int i;\n"
                   "  if (bytes < {1}_PARAMS_BYTES) return -1;\n{2}  return {1}_PARAMS_BYTES;\n}}\n",
                   p.name, N, copy(true));
  c += fmt::format("\nint {0}_set_params(const void *blob, int bytes) {{\n  const uint8_t *src = (const uint8_t *)blob;\n"
                   "  int i;\n  if (bytes < {1}_PARAMS_BYTES) return -1;\n{2}{3}  return {1}_PARAMS_BYTES;\n}}\n",
                   p.name, N, copy(false), c_steps(p, t.derive, "  "));
  return c;
}

std::string source_text(const Program& p) {
  const std::string N = upper(p.name);
  std::string c = fmt::format("/* {}.c - generated by microtorch's lowering pass. Do not edit. See {}.h. */\n", p.name,
                              p.name);
  c += fmt::format("#include \"{}.h\"\n#include \"mt_kernels.h\"\n\n", p.name);
  c += "/* ---- weights and tables (flash) ---- */\n\n";
  for (const Buffer& b : p.buffers) {
    if (b.kind != BufferKind::Weight) continue;
    c += fmt::format("/* {}: {} {}{} */\n", b.origin, b.size, b.elem == Elem::F32 ? "floats" : q_name(b),
                     b.rows_in_pair_order ? ", rows in pair order (mt_kernels.h)" : "") +
         c_array(b);
  }
  if (p.training) {
    c += fmt::format("\n/* ---- the trained parameters, their gradients and momentum (RAM), {} bytes ---- */\n\n",
                     p.training->state_bytes);
    for (const Buffer& b : p.buffers) {
      if (b.kind == BufferKind::Parameter || b.kind == BufferKind::State) {
        c += fmt::format("/* {}: {} values */\n", b.origin, b.size) + c_array(b);
      }
    }
  }
  if (p.decoding) {
    c += fmt::format("\n/* ---- the key/value caches and the position (RAM), {} bytes, kept between steps ---- */\n\n",
                     p.decoding->state_bytes);
    for (const Buffer& b : p.buffers) {
      if (b.kind == BufferKind::State) c += fmt::format("/* {}: {} values */\n", b.origin, b.size) + c_array(b);
    }
  }
  if (p.arena_bytes > 0) {
    c += fmt::format("\n/* ---- the arena (RAM), {} bytes; plan in {}_report.txt ---- */\n\n", p.arena_bytes, p.name);
    c += fmt::format("static union {{\n  int64_t align;\n  uint8_t bytes[{}];\n}} arena;\n", p.arena_bytes);
  }
  c += fmt::format("\nint {}_run(const {} *in, {} *out) {{\n  int status = 0;\n", p.name, input_type(p), output_type(p));
  c += c_steps(p, p.steps, "  ");
  c += "  return status;\n}\n";
  if (p.training) c += training_source(p);
  if (p.decoding) c += decoding_source(p);
  const Buffer &in = p.buffer(p.input), &out = p.buffer(p.output);
  const bool by_channel = p.input_channels().first > 0;
  if (by_channel) {  // the input's formats per channel, declared in the header
    std::string scales, zeros;
    for (std::size_t k = 0; k < in.channel_scales.size(); ++k) {
      scales += (k ? ", " : "") + c_float(in.channel_scales[k]);
      zeros += (k ? ", " : "") + c_int(in.channel_zero_points[k]);
    }
    c += fmt::format("\nconst float {0}_input_scales[{1}_INPUT_CHANNELS] = {{{2}}};\n"
                     "const int32_t {0}_input_zero_points[{1}_INPUT_CHANNELS] = {{{3}}};\n",
                     p.name, N, scales, zeros);
  }
  if (in.fixed_point && out.fixed_point) {
    const double lo_in = static_cast<double>(elem_min(in.elem)), hi_in = static_cast<double>(elem_max(in.elem));
    // element i's scale and zero point: the input's, or its channel's
    const std::string channel = fmt::format("(i / {0}_INPUT_CHANNEL_STRIDE) % {0}_INPUT_CHANNELS", N);
    const std::string scale = by_channel ? fmt::format("{}_input_scales[{}]", p.name, channel) : N + "_INPUT_SCALE";
    const std::string zero = by_channel ? fmt::format("{}_input_zero_points[{}]", p.name, channel) : N + "_INPUT_ZERO_POINT";
    c += fmt::format(
        "\n#ifdef {0}_FLOAT_API\nint {1}_run_float(const float *in, float *out) {{\n"
        "  {2} qin[{0}_INPUT_SIZE];\n  {3} qout[{0}_OUTPUT_SIZE];\n  int i, status;\n"
        "  for (i = 0; i < {0}_INPUT_SIZE; ++i) {{\n"
        "    float v = in[i] / {6};\n    long q;\n"
        "    v = v < 0 ? v - 0.5f : v + 0.5f; /* round half away from zero: truncated below */\n"
        "    v = v <= -65536.0f ? -65536.0f : v >= 65536.0f ? 65536.0f : v; /* beyond every int16, within long */\n"
        "    q = (long)v + {7};\n"
        "    qin[i] = ({2})(q <= {4:.0f} ? {4:.0f} : q >= {5:.0f} ? {5:.0f} : q); /* saturate */\n  }}\n"
        "  status = {1}_run(qin, qout);\n"
        "  for (i = 0; i < {0}_OUTPUT_SIZE; ++i) out[i] = (float)(qout[i] - {0}_OUTPUT_ZERO_POINT) * {0}_OUTPUT_SCALE;\n"
        "  return status;\n}}\n#endif\n",
        N, p.name, elem_ctype(in.elem), elem_ctype(out.elem), lo_in, hi_in, scale, zero);
  }
  return c;
}

// The firmware folder's Makefile (src/lower/firmware/Makefile.in): the one build recipe for
// Cortex-M and the host, used by firmware_size(), run_firmware_qemu.sh and benchmarks/mcu, and
// by anyone who wants to reproduce what they verified or run their own main on QEMU.
std::string makefile_text(const Program& p) {
  std::string t = firmware_makefile_template();
  auto substitute = [&t](const std::string& key, const std::string& value) {
    for (std::size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + value.size())) {
      t.replace(at, key.size(), value);
    }
  };
  substitute("@NAME@", p.name);
  substitute("@FLOAT_ABI@", p.float32() ? "hard" : "soft");
  return t;
}

}  // namespace

// The training step: what it trains, its kernel calls, its RAM (the arena alone and with the
// inference's, the parameters' copies, gradients and momentum).
std::string training_report(const Program& p) {
  const Training& t = *p.training;
  Program alone = p;  // the arena the inference alone would need
  alone.training.reset();
  plan_memory(alone);
  std::int64_t param = 0, grad = 0, mom = 0, sample_macs = 0;
  std::string names;
  for (const TrainedParameter& tp : t.parameters) {
    param += p.buffer(tp.buffer).bytes() + (tp.master >= 0 ? p.buffer(tp.master).bytes() : 0);
    grad += p.buffer(tp.grad).bytes();
    if (tp.momentum >= 0) mom += p.buffer(tp.momentum).bytes();
    names += (names.empty() ? "" : ", ") + tp.name;
  }
  for (const Step& st : t.sample) sample_macs += st.macs;
  std::string r = fmt::format(
      "\ntraining step: {} {} loss, batch {}, SGD lr {} momentum {} weight decay {}\n"
      "  trains {}\n"
      "  {} kernel calls per sample ({} MACs; the inference {}), {} once per step\n"
      "  RAM: arena {} bytes (the inference alone: {}), trained parameters {} bytes, their gradients {}, momentum {}\n",
      t.numeric, t.loss == "mse" ? "MSE" : "cross entropy", t.batch, t.lr, t.momentum, t.weight_decay, names,
      t.sample.size(), sample_macs, p.total_macs(), t.zero.size() + t.update.size(), p.arena_bytes, alone.arena_bytes,
      param, grad, mom);
  return r;
}

std::string report(const Program& p) {
  const bool f32 = p.buffer(p.input).elem == Elem::F32;
  std::string r = f32 ? fmt::format("lowering report for {}: float32\n\n", p.name)
                      : fmt::format("lowering report for {}: int{} activations, int{} weights, {}\n\n", p.name,
                                    p.activation_bits, p.weight_bits, p.scheme);
  for (const std::string& w : p.warnings) r += "warning: " + w + "\n";
  if (!p.warnings.empty()) r += "\n";
  r += fmt::format("{:>4}  {:<28} {:>24} {:>9} {:>8}  {}\n", "step", "kernel", "out", "MACs", "weights", "computes");
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    std::int64_t wbytes = 0;
    std::string out_fmt = "-";
    for (const Arg& a : s.args) {
      if (a.kind != Arg::Kind::Buffer || a.buffer < 0) continue;
      const Buffer& b = p.buffer(a.buffer);
      if (b.kind == BufferKind::Weight) wbytes += b.bytes();
    }
    if (!s.out_format.empty()) out_fmt = s.out_format;
    r += fmt::format("{:>4}  {:<28} {:>24} {:>9} {:>8}  {}\n", i, s.kernel, out_fmt, s.macs, wbytes, s.label);
  }
  // The integer tables by what they hold: the bytes beside the weights that a layer's
  // integer arithmetic needs (docs/lowering.md, "Reading the report").
  std::int64_t tables = 0;
  std::vector<std::int64_t> by_role(static_cast<std::size_t>(TableRole::Layout) + 1, 0);
  for (const Buffer& b : p.buffers) {
    if (b.kind == BufferKind::Weight && !b.fixed_point) {
      tables += b.bytes();
      by_role[static_cast<std::size_t>(b.role)] += b.bytes();
    }
  }
  r += fmt::format("\ntotal: {} steps, {} MACs, {} bytes of weights and tables ({} of them integer tables), arena {} "
                   "bytes\n",
                   p.steps.size(), p.total_macs(), p.weight_bytes(), tables, p.arena_bytes);
  if (tables > 0) {
    std::string parts;
    for (std::size_t k = 0; k < by_role.size(); ++k) {
      if (by_role[k] == 0) continue;
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", table_role_name(static_cast<TableRole>(k)), by_role[k]);
    }
    r += "integer tables, bytes: " + parts + "\n";
  }
  // the precision actually used: values and weight bytes by type
  std::int64_t v8 = 0, v16 = 0, w8 = 0, w16 = 0;
  for (const Probe& pr : p.probes) {
    const Buffer& b = p.buffer(pr.buffer);
    if (b.fixed_point) (b.elem == Elem::S8 ? v8 : v16) += 1;
  }
  for (const Buffer& b : p.buffers) {
    if (b.kind == BufferKind::Weight && b.fixed_point) (b.elem == Elem::S8 ? w8 : w16) += b.bytes();
  }
  if (!f32) {
    r += fmt::format("precision: {} values int8, {} int16; weight arrays {} bytes int8, {} bytes int16\n", v8, v16, w8,
                     w16);
  }
  if (p.training) r += training_report(p);
  if (p.decoding) {
    r += fmt::format("\ndecoding: one token per step, {} positions; RAM: arena {} bytes + caches and position {} bytes "
                     "= {} bytes\n",
                     p.decoding->capacity, p.arena_bytes, p.decoding->state_bytes, p.arena_bytes + p.decoding->state_bytes);
  }
  if (!p.evaluation.empty()) r += "\n" + p.evaluation;
  return r;
}

namespace {

// The runtime's variants that no step of p can take, turned off at the top of its
// mt_kernels.c (mt_internal.h: the results are the same, their code is left out of the flash).
// One switch per variant: its macro, what it computes, and whether a step may take it, judged
// from the step's kernel, its integer arguments and its constant arrays (an array the firmware
// changes, a trained parameter, may hold anything: the variant stays).
struct StepView {
  const Program& p;
  const Step& s;
  bool kernel_in(std::initializer_list<const char*> prefixes) const {
    return std::any_of(prefixes.begin(), prefixes.end(), [&](const char* k) { return s.kernel.rfind(k, 0) == 0; });
  }
  std::int64_t num(std::size_t i) const { return s.args.at(i).value; }
  // The n values of a constant array argument from its offset; nullptr when it is not constant.
  const std::int64_t* constant(std::size_t i, std::int64_t n) const {
    const Arg& a = s.args.at(i);
    if (a.kind != Arg::Kind::Buffer || a.buffer < 0) return nullptr;
    const Buffer& b = p.buffer(a.buffer);
    if (b.kind != BufferKind::Weight || a.offset + n > static_cast<std::int64_t>(b.data.size())) return nullptr;
    return b.data.data() + a.offset;
  }
};

// mt_linear_<x>_s8_<y> (x, w, b, y, rows, in, out, xs, rq, rq_per_channel, y_zero, y_min): the
// Armv7E-M linear layers with int8 weights; their conditions are mt_kernels.h's (MT_RQ_CHAN_FAST,
// MT_LINEAR_BIAS_FITS, MT_LINEAR_MAX_IN_*), the runtime's own.
bool int8_weight_linear(const StepView& v) {
  return v.kernel_in({"mt_linear_s8_s8_", "mt_linear_s16_s8_"});
}
std::int64_t linear_max_in(const StepView& v) {
  return v.kernel_in({"mt_linear_s8_"}) ? MT_LINEAR_MAX_IN_S8 : MT_LINEAR_MAX_IN_S16;
}
// Every channel fast and every bias within 2^30 (false when rq or b is not constant).
bool linear_fast(const StepView& v, bool want_fast) {
  const std::int64_t out = v.num(6), n_rq = v.num(9) ? out : 1, y_zero = v.num(10);
  const std::int64_t* rq = v.constant(8, 2 * n_rq);
  if (!rq) return !want_fast;
  bool all = true, any_slow = false;
  for (std::int64_t o = 0; o < n_rq; ++o) {
    const std::int64_t m = rq[2 * o], sh = rq[2 * o + 1];
    const bool fast = MT_RQ_CHAN_FAST(m, sh, y_zero);
    all = all && fast, any_slow = any_slow || !fast;
  }
  return want_fast ? all : any_slow;
}
bool linear_bias_small(const StepView& v) {
  if (v.s.args.at(2).buffer < 0) return true;
  const std::int64_t* b = v.constant(2, v.num(6));
  if (!b) return false;
  return std::all_of(b, b + v.num(6), [](std::int64_t x) { return MT_LINEAR_BIAS_FITS(x); });
}
// mt_conv_s8_s8_<y> (x, w, b, y, g, rq, rq_per_channel, y_zero, y_min, col): which Armv7E-M
// variant of mt_conv_arm.c the call may take, by mt_kernels.h's conditions (MT_CONV_DW3_FITS ..
// MT_CONV_COLS8_LAST1, the runtime's own); a condition on rq, b or w that are not constant: may.
struct ConvCall {
  const std::vector<std::int64_t>& g;
  std::int64_t taps, out, n_rq, y_zero;
  const std::int64_t* rq;  // nullptr when not constant
  const std::int64_t* b;   // nullptr when not constant or none
  bool has_b;
  // Whether every channel's sums up to amax(o) are free of rounding ties (MT_RQ_CHAN_H_OK):
  // empty when rq or what amax reads is not constant.
  template <class F>
  std::optional<bool> h_ok(std::int64_t n, F amax) const {
    if (!rq) return std::nullopt;
    for (std::int64_t o = 0; o < n; ++o) {
      const std::optional<std::int64_t> a = amax(o);
      if (!a) return std::nullopt;
      const std::int64_t* r = rq + (n_rq > 1 ? 2 * o : 0);
      if (!MT_RQ_CHAN_H_OK(r[0], r[1], *a)) return false;
    }
    return true;
  }
};
// The call of an int8 x int8 convolution that may take a variant; empty when it is none, or its
// channels or biases send it to the reference (not MT_RQ_CHAN_FAST, beyond MT_LINEAR_BIAS_FITS,
// more than MT_LINEAR_MAX_IN_S8 taps).
std::optional<ConvCall> conv_call(const StepView& v) {
  if (!v.kernel_in({"mt_conv_s8_s8_"})) return std::nullopt;
  const std::vector<std::int64_t>& g = v.p.buffer(v.s.args.at(4).buffer).data;
  const std::int64_t out = g.at(MT_CONV_OG) * g.at(MT_CONV_GROUPS);
  const bool has_b = v.s.args.at(2).buffer >= 0;
  ConvCall c{g, g.at(MT_CONV_CG) * g.at(MT_CONV_KH) * g.at(MT_CONV_KW), out, v.num(6) ? out : 1, v.num(7),
             nullptr, has_b ? v.constant(2, out) : nullptr, has_b};
  c.rq = v.constant(5, 2 * c.n_rq);
  if (c.taps > MT_LINEAR_MAX_IN_S8) return std::nullopt;
  for (std::int64_t o = 0; c.rq && o < c.n_rq; ++o)
    if (!MT_RQ_CHAN_FAST(c.rq[2 * o], c.rq[2 * o + 1], c.y_zero)) return std::nullopt;
  for (std::int64_t o = 0; c.b && o < out; ++o)
    if (!MT_LINEAR_BIAS_FITS(c.b[o])) return std::nullopt;
  return c;
}
std::int64_t magnitude(std::int64_t x) { return x < 0 ? -x : x; }
// A depthwise layer of kernel width 3 that the 'same' kh x 3 variant takes
bool conv_dw3_same(const StepView& v, std::int64_t kh) {
  const std::optional<ConvCall> c = conv_call(v);
  return c && c->g.at(MT_CONV_OG) == 1 && c->g.at(MT_CONV_CG) == 1 && MT_CONV_DW3_FITS(c->g) &&
         (kh == 3 ? MT_CONV_SAME3X3_FITS(c->g) : MT_CONV_SAME1X3_FITS(c->g));
}
// The generic rows of a depthwise layer of kernel width 3: not a 'same' 3 x 3 one, not a 'same'
// 1-D one whose channels all stay free of ties at |b| + 2^7 sum |w| (mt_bound_s8)
bool conv_dw3_rows(const StepView& v) {
  const std::optional<ConvCall> c = conv_call(v);
  if (!c || c->g.at(MT_CONV_OG) != 1 || c->g.at(MT_CONV_CG) != 1 || !MT_CONV_DW3_FITS(c->g)) return false;
  if (MT_CONV_SAME3X3_FITS(c->g)) return false;
  if (!MT_CONV_SAME1X3_FITS(c->g)) return true;
  const std::int64_t* w = v.constant(1, 3 * c->out);
  const std::optional<bool> all = c->h_ok(c->out, [&](std::int64_t o) -> std::optional<std::int64_t> {
    if (!w || (c->has_b && !c->b)) return std::nullopt;
    return 128 * (magnitude(w[3 * o]) + magnitude(w[3 * o + 1]) + magnitude(w[3 * o + 2])) +
           (c->b ? magnitude(c->b[o]) : 0);
  });
  return all != true;
}
// The eight-column path (two or more output channels per group) and which of its channel
// functions the call may take: 0 the eight outputs at a time without the y_min clamp, 1 with
// it, 2 one channel at a time, -1 any
bool conv_cols8(const StepView& v, int chans) {
  const std::optional<ConvCall> c = conv_call(v);
  if (!c || c->g.at(MT_CONV_OG) == 1) return false;
  if (chans < 0) return true;
  const std::int64_t positions = c->g.at(MT_CONV_OH) * c->g.at(MT_CONV_OW);
  std::optional<std::int64_t> amax;  // |sum| <= taps 2^14 + max |b| (|x w| <= 2^14)
  if (c->b || !c->has_b) {
    std::int64_t bmax = 0;
    for (std::int64_t o = 0; c->b && o < c->out; ++o) bmax = std::max(bmax, magnitude(c->b[o]));
    amax = (c->taps << 14) + bmax;
  }
  const std::optional<bool> hq = c->h_ok(c->n_rq, [&](std::int64_t) { return amax; });
  const bool bits8 = v.kernel_in({"mt_conv_s8_s8_s8"});
  const bool clamp = v.num(8) > -(std::int64_t{1} << (bits8 ? 7 : 15));
  if (chans == 2) return !MT_CONV_COLS8_CHANS(positions, hq == true, c->has_b) || MT_CONV_COLS8_LAST1(c->taps);
  return MT_CONV_COLS8_CHANS(positions, hq != false, c->has_b) && clamp == (chans == 1);
}

// mt_attention_<kind>_<t> (params, ...): an integer attention whose head or value dimension is
// d (its parameter table not constant: any)
bool attention_dim(const StepView& v, std::int64_t d) {
  if (!v.kernel_in({"mt_attention_"}) || v.s.kernel.find("_f32") != std::string::npos) return false;
  const std::int64_t* prm = v.constant(0, MT_ATTN_DV + 1);
  return !prm || prm[MT_ATTN_D] == d || prm[MT_ATTN_DV] == d;
}

struct RuntimeSwitch {
  const char* macro;
  const char* variant;  // "no <variant>" in the folder's mt_kernels.c
  bool (*taken)(const StepView&);
};
const RuntimeSwitch kRuntimeSwitches[] = {
    {"MT_CONV_SAME3X3", "'same' 3 x 3 depthwise convolution", [](const StepView& v) { return conv_dw3_same(v, 3); }},
    {"MT_CONV_SAME1X3", "1-D depthwise convolution of kernel 3", [](const StepView& v) { return conv_dw3_same(v, 1); }},
    {"MT_CONV_DW3", "depthwise convolution of kernel width 3 for the generic rows", conv_dw3_rows},
    {"MT_CONV_COLS8", "convolution of two or more output channels per group", [](const StepView& v) { return conv_cols8(v, -1); }},
    {"MT_CONV_CHANS8", "convolution of eight outputs per channel at a time without a relu bound",
     [](const StepView& v) { return conv_cols8(v, 0); }},
    {"MT_CONV_CHANS8_CLAMP", "convolution of eight outputs per channel at a time with a relu bound",
     [](const StepView& v) { return conv_cols8(v, 1); }},
    {"MT_CONV_ONE_CHAN", "convolution of one channel at a time against the eight columns",
     [](const StepView& v) { return conv_cols8(v, 2); }},
    {"MT_LINEAR_ROWS", "linear layer with int8 weights and two rows or more",
     [](const StepView& v) { return int8_weight_linear(v) && v.num(4) >= 2 && v.num(5) <= linear_max_in(v); }},
    {"MT_LINEAR_UP", "int8 x int8 linear layer with int16 outputs and a channel at a shift of 0 or less",
     [](const StepView& v) {
       return v.kernel_in({"mt_linear_s8_s8_s16"}) && v.num(4) >= 2 && linear_fast(v, false);
     }},
    {"MT_LINEAR_ONE_ROW", "linear layer with int8 weights that the two-row variant cannot take",
     [](const StepView& v) {
       return int8_weight_linear(v) &&
              (v.num(4) < 2 || v.num(5) > linear_max_in(v) || !linear_fast(v, true) || !linear_bias_small(v));
     }},
    {"MT_ATTN_DIM4", "attention of head or value dimension 4", [](const StepView& v) { return attention_dim(v, 4); }},
    {"MT_ATTN_DIM8", "attention of head or value dimension 8", [](const StepView& v) { return attention_dim(v, 8); }},
    {"MT_ATTN_DIM16", "attention of head or value dimension 16", [](const StepView& v) { return attention_dim(v, 16); }},
};

std::string runtime_config(const Program& p) {
  std::vector<const Step*> steps;
  for (const Step& s : p.steps) steps.push_back(&s);
  if (p.training) {
    for (const auto* list : {&p.training->zero, &p.training->sample, &p.training->update, &p.training->derive})
      for (const Step& s : *list) steps.push_back(&s);
  }
  std::string off;
  for (const RuntimeSwitch& sw : kRuntimeSwitches) {
    const bool taken = std::any_of(steps.begin(), steps.end(), [&](const Step* s) { return sw.taken(StepView{p, *s}); });
    if (!taken) off += fmt::format("#define {} 0 /* no {} */\n", sw.macro, sw.variant);
  }
  if (off.empty()) return "";
  return fmt::format("/* {}: the runtime's variants that no step of the model takes (mt_internal.h) */\n{}\n", p.name,
                     off);
}

}  // namespace

void emit_c(const Program& p, const std::string& dir) {
  check_firmware_name(p.name);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("emit: cannot create {}: {}", dir, ec.message()));
  const std::filesystem::path d(dir);
  microtorch::write_file((d / (p.name + ".h")).string(), header_text(p), "emit_c");
  microtorch::write_file((d / (p.name + ".c")).string(), source_text(p), "emit_c");
  microtorch::write_file((d / "mt_kernels.h").string(), runtime_header(), "emit_c");
  microtorch::write_file((d / "mt_kernels.c").string(), runtime_config(p) + runtime_source(), "emit_c");
  microtorch::write_file((d / "Makefile").string(), makefile_text(p), "emit_c");
  microtorch::write_file((d / (p.name + "_report.txt")).string(), report(p) + "\n" + p.format_table() + "\n" + p.memory_plan(), "emit_c");
}

namespace {

// One value of the check program's output: an integer, or a float's bits in hex.
std::string check_value(Elem e, std::int64_t v) {
  return e == Elem::F32 ? fmt::format(" {:08x}", static_cast<std::uint32_t>(v)) : fmt::format(" {}", v);
}

// An array initializer of a buffer's values (floats from their bits).
std::string c_values(Elem e, const std::vector<std::int64_t>& v) {
  std::string row;
  for (std::size_t i = 0; i < v.size(); ++i) row += (i ? ", " : "") + (e == Elem::F32 ? c_float_bits(v[i]) : c_int(v[i]));
  return row.empty() ? "0" : row;
}

// FNV-1a over bytes
std::uint32_t fnv1a(const std::vector<std::uint8_t>& bytes) {
  std::uint32_t h = 2166136261u;
  for (const auto b : bytes) h = (h ^ b) * 16777619u;
  return h;
}

}  // namespace

void emit_check(const Program& p, const std::vector<std::vector<std::int64_t>>& inputs, const std::string& dir,
                const std::vector<TrainingBatch>& training) {
  const Buffer &in = p.buffer(p.input), &outb = p.buffer(p.output);
  const std::string N = upper(p.name);
  if (!training.empty() && !p.training) throw ValueError("emit_check: training batches for a program without a training step");
  std::string c = fmt::format(
      "/* {0}_check.c - runs {0}_run on {1} fixed inputs and prints the outputs (generated). */\n"
      "#include <stdio.h>\n\n#include \"{0}.h\"\n\n",
      p.name, inputs.size());
  // Each build defines only what its main() uses (C's -Wunused under -Werror): -DCHECK_RUNS
  // the inputs, -DCHECK_TRAIN_RUNS the training batches, the default build everything.
  const bool trains = !training.empty();
  if (trains) c += "#ifndef CHECK_TRAIN_RUNS\n";
  c += fmt::format("static const {} inputs[{}][{}] = {{\n", elem_ctype(in.elem), std::max<std::size_t>(inputs.size(), 1),
                   in.size);
  for (const auto& x : inputs) {
    if (static_cast<std::int64_t>(x.size()) != in.size) {
      throw ShapeError(fmt::format("emit_check: an input has {} values, the program takes {}", x.size(), in.size));
    }
    c += "  {" + c_values(in.elem, x) + "},\n";
  }
  c += "};\n";
  c += trains ? "#endif\n\n" : "\n";
  const bool f32_out = outb.elem == Elem::F32;
  // a float output's bits (a union: the C99 way to read a float's representation)
  c += f32_out ? "static unsigned long bits(float f) {\n  union {\n    float f;\n    uint32_t u;\n  } c;\n  c.f = f;\n"
                 "  return (unsigned long)c.u;\n}\n\n"
               : "";
  const std::string print_out = f32_out ? "printf(\" %08lx\", bits(out[i]))" : "printf(\" %ld\", (long)out[i])";
  c += trains ? "#if !defined(CHECK_RUNS) && !defined(CHECK_TRAIN_RUNS)\n" : "#ifndef CHECK_RUNS\n";
  c += fmt::format(
      "static void run_inputs(const char *prefix) {{\n  static {1} out[{0}_OUTPUT_SIZE];\n  int s, i;\n"
      "  for (s = 0; s < {2}; ++s) {{\n    int status = {3}_run(inputs[s], out);\n"
      "    printf(\"%s%d %d:\", prefix, s, status);\n"
      "    for (i = 0; i < {0}_OUTPUT_SIZE; ++i) {4};\n"
      "    printf(\"\\n\");\n  }}\n}}\n\n",
      N, output_type(p), inputs.size(), p.name, print_out);
  c += "#endif\n\n";
  if (trains) {
    const Training& t = *p.training;
    c += "#ifndef CHECK_RUNS\n";
    const Buffer& tb = p.buffer(t.target);
    c += fmt::format("static const {} batch_inputs[{}][{}] = {{\n", elem_ctype(in.elem), training.size(), t.batch * in.size);
    for (const TrainingBatch& b : training) {
      if (static_cast<std::int64_t>(b.inputs.size()) != t.batch * in.size ||
          static_cast<std::int64_t>(b.targets.size()) != t.batch * tb.size) {
        throw ShapeError(fmt::format("emit_check: a training batch has {} inputs and {} targets; the step takes {} and {}",
                                     b.inputs.size(), b.targets.size(), t.batch * in.size, t.batch * tb.size));
      }
      c += "  {" + c_values(in.elem, b.inputs) + "},\n";
    }
    c += fmt::format("}};\nstatic const {} batch_targets[{}][{}] = {{\n", elem_ctype(tb.elem), training.size(),
                     t.batch * tb.size);
    for (const TrainingBatch& b : training) c += "  {" + c_values(tb.elem, b.targets) + "},\n";
    c += "};\n\n";
    c += f32_out || integer_training(p) ? "" : "static unsigned long bits(float f) {\n  union {\n    float f;\n    uint32_t u;\n  } c;\n  c.f = f;\n"
                        "  return (unsigned long)c.u;\n}\n\n";
    c += "#endif\n#if !defined(CHECK_RUNS) && !defined(CHECK_TRAIN_RUNS)\n";
    c += fmt::format(
        "static void train_steps(void) {{\n  static uint8_t blob[{0}_PARAMS_BYTES];\n  uint32_t h = 2166136261u;\n"
        "  int k, i;\n  for (k = 0; k < {1}; ++k) printf(\"train %d: %08lx\\n\", k, {3}({2}_train_step(batch_inputs[k], "
        "batch_targets[k])));\n"
        "  run_inputs(\"after \");\n  {2}_get_params(blob, (int)sizeof blob);\n"
        "  for (i = 0; i < {0}_PARAMS_BYTES; ++i) h = (h ^ blob[i]) * 16777619u;\n"
        "  printf(\"params %08lx\\n\", (unsigned long)h);\n}}\n#endif\n\n",
        N, training.size(), p.name, integer_training(p) ? "(unsigned long)(uint32_t)" : "bits");
  }
  // -DCHECK_RUNS=n: the first input n times, its line printed once (instruction counting:
  // n = 2 minus n = 1 is one inference; for a decoder's step, the whole sequence n times from a
  // reset: the difference is the sequence's steps); -DCHECK_TRAIN_RUNS=n: the first batch's
  // step n times.
  c += fmt::format("int main(void) {{\n#if defined(CHECK_RUNS)\n  static {1} out[{0}_OUTPUT_SIZE];\n  int r, i, status = 0;\n"
                   "{4}"
                   "  printf(\"0 %d:\", status);\n  for (i = 0; i < {0}_OUTPUT_SIZE; ++i) {3};\n  printf(\"\\n\");\n",
                   N, output_type(p), p.name, print_out,
                   // a decoder's step: n runs of the whole sequence from a reset (n = 2 minus n = 1 is the
                   // sequence's steps), then the first step's line
                   p.decoding ? fmt::format("  int s;\n  for (r = 0; r < CHECK_RUNS; ++r) {{\n    {0}_reset();\n"
                                            "    for (s = 0; s < {1}; ++s) status |= {0}_run(inputs[s], out);\n  }}\n"
                                            "  {0}_reset();\n  status = {0}_run(inputs[0], out);\n",
                                            p.name, inputs.size())
                              : fmt::format("  for (r = 0; r < CHECK_RUNS; ++r) status |= {}_run(inputs[0], out);\n",
                                            p.name));
  if (!training.empty()) {
    c += fmt::format("#elif defined(CHECK_TRAIN_RUNS)\n  int r;\n  {1} loss = 0;\n"
                     "  for (r = 0; r < CHECK_TRAIN_RUNS; ++r) loss = {0}_train_step(batch_inputs[0], batch_targets[0]);\n"
                     "  printf(\"train: %08lx\\n\", {2}(loss));\n",
                     p.name, loss_type(p), integer_training(p) ? "(unsigned long)(uint32_t)" : "bits");
  }
  c += "#else\n  run_inputs(\"\");\n";
  if (!training.empty()) c += "  train_steps();\n";
  c += "#endif\n  return 0;\n}\n";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  microtorch::write_file((std::filesystem::path(dir) / (p.name + "_check.c")).string(), c, "emit_check");
}

std::string expected_check_output(Simulator& sim, const std::vector<std::vector<std::int64_t>>& inputs,
                                  const std::vector<TrainingBatch>& training) {
  const Program& p = sim.program();
  const Elem out = p.buffer(p.output).elem;
  auto run_inputs = [&](const char* prefix) {
    std::string s;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const auto y = sim.run(inputs[k]);
      s += fmt::format("{}{} {}:", prefix, k, sim.status());
      for (const auto v : y) s += check_value(out, v);
      s += "\n";
    }
    return s;
  };
  std::string s = run_inputs("");
  if (training.empty()) return s;
  for (std::size_t k = 0; k < training.size(); ++k) {
    const double loss = sim.train_step_integers(training[k].inputs, training[k].targets);
    const auto f = static_cast<float>(loss);
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if (integer_training(p)) u = static_cast<std::uint32_t>(static_cast<std::int32_t>(std::llround(loss * 65536.0)));
    s += fmt::format("train {}: {:08x}\n", k, u);
  }
  s += run_inputs("after ");
  return s + fmt::format("params {:08x}\n", fnv1a(sim.parameter_blob()));
}

FirmwareSize firmware_size(const Program& p, const std::string& dir, const std::string& cpu) {
  detail::check_cpu_name(cpu, "firmware_size");
  // The folder's Makefile (emit_c) is the recipe: model + kernels, unused sections removed.
  // The objects go to a temporary folder, so the firmware folder keeps only its sources.
  static std::atomic<unsigned> serial{0};
  const std::filesystem::path build = std::filesystem::temp_directory_path() /
                                      fmt::format("microtorch-size-{}-{}", ::getpid(), serial++);
  const detail::CommandResult r = detail::run_command(
      fmt::format("make --no-print-directory -s -C {} size CPU={} BUILD={}", detail::shell_quote(dir), cpu,
                  detail::shell_quote(build.string())),
      "firmware_size");
  std::error_code ec;
  std::filesystem::remove_all(build, ec);
  if (r.status != 0) {
    throw IoError(fmt::format("firmware_size: linking {} for {} failed (tools/install-deps.sh installs make, {}):\n{}",
                              p.name, cpu, detail::cross_tools(cpu).packages, r.out));
  }
  const std::string& out = r.out;
  // -A: one line per section; text = code + read-only data, data, bss
  FirmwareSize s;
  std::size_t pos = 0;
  while (pos < out.size()) {
    const std::size_t end = out.find('\n', pos);
    const std::string line = out.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? out.size() : end + 1;
    char name[128];
    long long size = 0, addr = 0;
    if (std::sscanf(line.c_str(), "%127s %lld %lld", name, &size, &addr) != 3) continue;
    const std::string n = name;
    if (n == ".text" || n == ".rodata" || n.rfind(".text.", 0) == 0 || n.rfind(".rodata", 0) == 0 || n == ".init" ||
        n == ".fini") {
      s.text += size;
    } else if (n == ".data" || n.rfind(".data.", 0) == 0) {
      s.data += size;
    } else if (n == ".bss" || n.rfind(".bss.", 0) == 0) {
      s.bss += size;
    }
  }
  return s;
}

}  // namespace microtorch::lower
