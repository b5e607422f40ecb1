// Simulator — executes a Program's steps by calling the runtime's C kernels through the
// kernel table (kernels.hpp), which binds each kernel by its declaration in mt_kernels.h;
// emit.cpp prints the same steps as C source, so the two cannot drift apart without a
// compile error or a bit-exactness failure in the firmware test.
#include "microtorch/lower/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels.hpp"
#include "microtorch/error.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/ops.hpp"
#include "runtime/mt_kernels.h"

namespace microtorch::lower {

namespace {

// The integers of an element type; a float's are its IEEE-754 bits (the convention of
// Buffer::data and of the Simulator's integer vectors for Elem::F32).
template <class F>
auto visit_elem(Elem e, F&& f) {
  switch (e) {
    case Elem::F32: return f(std::uint32_t{});
    case Elem::S8: return f(std::int8_t{});
    case Elem::U8: return f(std::uint8_t{});
    case Elem::S16: return f(std::int16_t{});
    case Elem::S32: return f(std::int32_t{});
    case Elem::S64: return f(std::int64_t{});
  }
  return f(std::int64_t{});
}

float float_of_bits(std::int64_t bits) {
  const auto u = static_cast<std::uint32_t>(bits);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::int64_t bits_of_float(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace

Simulator::Simulator(Program program) : program_(std::move(program)) {
  for (const Step& s : program_.steps) check_call(program_, s);
  if (program_.training) {
    for (const auto* list : {&program_.training->zero, &program_.training->sample, &program_.training->update,
                             &program_.training->derive}) {
      for (const Step& s : *list) check_call(program_, s);
    }
  }
  storage_.resize(program_.buffers.size());
  limit_counts_.assign(program_.buffers.size(), 0);
  for (const Buffer& b : program_.buffers) {
    auto& st = storage_[static_cast<std::size_t>(b.id)];
    st.assign(static_cast<std::size_t>((b.bytes() + 7) / 8), 0);
    if (b.kind == BufferKind::Weight || b.kind == BufferKind::Parameter) {
      visit_elem(b.elem, [&](auto tag) {
        using T = decltype(tag);
        T* p = reinterpret_cast<T*>(st.data());
        for (std::size_t i = 0; i < b.data.size(); ++i) p[i] = static_cast<T>(b.data[i]);
        return 0;
      });
    }
  }
}

void* Simulator::ptr(std::int64_t buffer, std::int64_t offset) {
  if (buffer < 0) return nullptr;
  const Buffer& b = program_.buffer(buffer);
  auto* base = reinterpret_cast<char*>(storage_[static_cast<std::size_t>(buffer)].data());
  return base + offset * elem_bytes(b.elem);
}

std::vector<std::int64_t> Simulator::run(const std::vector<std::int64_t>& input) {
  const Buffer& in = program_.buffer(program_.input);
  if (static_cast<std::int64_t>(input.size()) != in.size) {
    throw ShapeError(fmt::format("Simulator::run: the input buffer holds {} values, got {}", in.size, input.size()));
  }
  visit_elem(in.elem, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(ptr(in.id));
    for (std::size_t i = 0; i < input.size(); ++i) {
      if (input[i] < elem_min(in.elem) || input[i] > elem_max(in.elem)) {
        throw ValueError(fmt::format("Simulator::run: input value {} at {} does not fit {}", input[i], i,
                                     elem_ctype(in.elem)));
      }
      p[i] = static_cast<T>(input[i]);
    }
    return 0;
  });
  status_ = 0;
  if (record_) recorded_.assign(program_.probes.size(), {});
  record_probes(-1);
  execute(program_.steps, true);
  ++runs_;
  for (const Buffer& b : program_.buffers) {
    if (b.kind == BufferKind::Activation || b.kind == BufferKind::Output) limit_counts_[static_cast<std::size_t>(b.id)] += at_limit(b.id);
  }
  return values(program_.output);
}

namespace {
void require_decoding(const Program& p, const char* what) {
  if (!p.decoding) {
    throw ValueError(fmt::format("Simulator::{}: the program {} is not a decoder's step (lower::lower_decoder makes "
                                 "one)",
                                 what, p.name));
  }
}
}  // namespace

void Simulator::reset() {
  require_decoding(program_, "reset");
  // as the firmware's: the position to 0 (cache rows past the position are never read)
  auto& pos = storage_[static_cast<std::size_t>(program_.decoding->position)];
  std::fill(pos.begin(), pos.end(), 0);
}

std::vector<std::int64_t> Simulator::step(std::int64_t token) {
  require_decoding(program_, "step");
  return run({token});
}

std::int64_t Simulator::position() const {
  require_decoding(program_, "position");
  return values(program_.decoding->position)[0];
}

void Simulator::execute(const std::vector<Step>& steps, bool probes) {
  std::vector<KernelArg> args;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const Step& s = steps[k];
    args.assign(s.args.size(), KernelArg{});
    for (std::size_t i = 0; i < s.args.size(); ++i) {
      const Arg& a = s.args[i];
      if (a.kind == Arg::Kind::Buffer) {
        args[i].ptr = ptr(a.buffer, a.offset);
      } else if (a.kind == Arg::Kind::Real) {
        args[i].real = a.real_value;
      } else {
        args[i].value = a.value;
      }
    }
    if (find_kernel(s.kernel)->call(args.data()) != 0) status_ = 1;
    if (probes) record_probes(static_cast<std::int64_t>(k));
  }
}

// Writes `values` (a buffer's integers, or a float buffer's floats' bits) into a buffer.
void Simulator::fill(std::int64_t buffer, const std::vector<std::int64_t>& values, const char* what) {
  const Buffer& b = program_.buffer(buffer);
  if (static_cast<std::int64_t>(values.size()) != b.size) {
    throw ShapeError(fmt::format("{}: the {} buffer holds {} values, got {}", what, b.name, b.size, values.size()));
  }
  visit_elem(b.elem, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(ptr(buffer));
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
    return 0;
  });
}

double Simulator::train_step(const Tensor& x, const Tensor& target) {
  if (!program_.training) {
    throw ValueError(fmt::format("Simulator::train_step: the program {} has no training step (lower::train_program "
                                 "makes one)",
                                 program_.name));
  }
  const Training& t = program_.training.value();
  const std::vector<Tensor> xs = split_stacked(program_.input_shape, x, "Simulator::train_step");
  if (static_cast<std::int64_t>(xs.size()) != t.batch) {
    throw ShapeError(fmt::format("Simulator::train_step: the step takes a batch of {} inputs {} stacked along dim 0, "
                                 "got {}",
                                 t.batch, shape_str(program_.input_shape), shape_str(x.shape())));
  }
  const Buffer& tb = program_.buffer(t.target);
  if (target.numel() != t.batch * tb.size) {
    throw ShapeError(fmt::format("Simulator::train_step: {} targets for a batch of {} ({} per sample: {}), got {} {}",
                                 t.batch * tb.size, t.batch, tb.size, tb.origin, shape_str(target.shape()),
                                 dtype_name(target.dtype())));
  }
  const bool classes = tb.elem == Elem::S32;
  if (classes == target.is_floating_point()) {
    throw DtypeError(fmt::format("Simulator::train_step: the {} loss takes {} targets, got {}", t.loss,
                                 classes ? "int64 class index" : "float", dtype_name(target.dtype())));
  }
  std::vector<std::int64_t> in, tv;
  for (const Tensor& xi : xs) {
    const auto q = quantize_input(program_, xi);
    in.insert(in.end(), q.begin(), q.end());
  }
  const Tensor flat = classes ? target.to(Dtype::Int64).contiguous() : target.to(Dtype::Float32).contiguous();
  for (std::int64_t i = 0; i < flat.numel(); ++i) {
    if (classes) {
      const std::int64_t c = flat.data<std::int64_t>()[i];
      if (c < INT32_MIN || c > INT32_MAX) throw ValueError(fmt::format("Simulator::train_step: class {} does not fit int32", c));
      tv.push_back(c);
    } else {
      tv.push_back(bits_of_float(flat.data<float>()[i]));
    }
  }
  return train_step_integers(in, tv);
}

double Simulator::train_step_integers(const std::vector<std::int64_t>& inputs, const std::vector<std::int64_t>& targets) {
  if (!program_.training) throw ValueError(fmt::format("Simulator::train_step: the program {} has no training step", program_.name));
  const Training& t = program_.training.value();
  const std::int64_t in_size = program_.buffer(program_.input).size, t_size = program_.buffer(t.target).size;
  if (static_cast<std::int64_t>(inputs.size()) != t.batch * in_size ||
      static_cast<std::int64_t>(targets.size()) != t.batch * t_size) {
    throw ShapeError(fmt::format("Simulator::train_step: a step takes {} input values and {} targets, got {} and {}",
                                 t.batch * in_size, t.batch * t_size, inputs.size(), targets.size()));
  }
  execute(t.zero, false);
  for (std::int64_t s = 0; s < t.batch; ++s) {
    fill(program_.input, {inputs.begin() + s * in_size, inputs.begin() + (s + 1) * in_size}, "Simulator::train_step");
    fill(t.target, {targets.begin() + s * t_size, targets.begin() + (s + 1) * t_size}, "Simulator::train_step");
    execute(t.sample, false);
  }
  execute(t.update, false);
  ++steps_;
  if (t.numeric == "integer") return static_cast<double>(values(t.loss_value)[0]) / 65536.0;  // Q16
  return static_cast<double>(float_of_bits(values(t.loss_value)[0]));
}

std::vector<std::uint8_t> Simulator::parameter_blob() const {
  std::vector<std::uint8_t> blob;
  if (!program_.training) return blob;
  for (const TrainedParameter& tp : program_.training->parameters) {
    const std::int64_t b = tp.master >= 0 ? tp.master : tp.buffer;  // integer: the int32 masters
    const auto* p = reinterpret_cast<const std::uint8_t*>(storage_[static_cast<std::size_t>(b)].data());
    blob.insert(blob.end(), p, p + program_.buffer(b).bytes());
  }
  return blob;
}

Tensor Simulator::parameter(const std::string& name) const {
  if (program_.training) {
    for (const TrainedParameter& tp : program_.training->parameters) {
      if (tp.name != name) continue;
      if (tp.master >= 0) {  // integer: master times its row's scale
        const std::vector<std::int64_t> q = values(tp.master);
        Tensor t = Tensor::empty(tp.shape, Dtype::Float32);
        const std::size_t per = q.size() / tp.scales.size();
        for (std::size_t i = 0; i < q.size(); ++i) {
          t.data<float>()[i] = static_cast<float>(static_cast<double>(q[i]) * tp.scales[i / per]);
        }
        return t;
      }
      const std::vector<std::int64_t> bits = values(tp.buffer);
      Tensor t = Tensor::empty(tp.shape, Dtype::Float32);
      for (std::size_t i = 0; i < bits.size(); ++i) t.data<float>()[i] = float_of_bits(bits[i]);
      return t;
    }
  }
  std::vector<std::string> names;
  if (program_.training) {
    for (const TrainedParameter& tp : program_.training->parameters) names.push_back(tp.name);
  }
  throw ValueError(fmt::format("Simulator::parameter: {} is not a trained parameter of {} (trained: {})", name,
                               program_.name, names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
}

void Simulator::record_probes(std::int64_t step) {
  if (!record_) return;
  for (std::size_t i = 0; i < program_.probes.size(); ++i) {
    const Probe& pr = program_.probes[i];
    if (pr.step != step) continue;
    const Buffer& b = program_.buffer(pr.buffer);
    std::vector<std::int64_t>& out = recorded_[i];
    out.resize(static_cast<std::size_t>(numel_of(pr.shape)));
    visit_elem(b.elem, [&](auto tag) {
      using T = decltype(tag);
      const T* p = reinterpret_cast<const T*>(storage_[static_cast<std::size_t>(pr.buffer)].data());
      Shape idx(pr.shape.size(), 0);
      for (std::size_t k = 0; k < out.size(); ++k) {
        std::int64_t at = pr.offset;
        for (std::size_t d = 0; d < idx.size(); ++d) at += idx[d] * pr.strides[d];
        out[k] = p[at];
        for (std::size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < pr.shape[d]) break;
          idx[d] = 0;
        }
      }
      return 0;
    });
  }
}

Tensor Simulator::value(std::int64_t graph_value) const {
  for (std::size_t i = 0; i < program_.probes.size() && i < recorded_.size(); ++i) {
    const Probe& pr = program_.probes[i];
    if (pr.value != graph_value || recorded_[i].empty()) continue;
    const Buffer& b = program_.buffer(pr.buffer);
    if (b.elem == Elem::F32) {
      Tensor t = Tensor::empty(pr.shape, Dtype::Float32);
      for (std::size_t k = 0; k < recorded_[i].size(); ++k) t.data<float>()[k] = float_of_bits(recorded_[i][k]);
      return t;
    }
    Tensor t = Tensor::empty(pr.shape, b.fixed_point ? Dtype::Float32 : Dtype::Int64);
    // element k's index along the parts' dim is k / inner % width
    const auto rank = static_cast<std::int64_t>(pr.shape.size());
    const std::int64_t dim = pr.segment_dim < 0 ? rank - 1 : pr.segment_dim;
    const std::int64_t width = pr.shape.empty() ? 1 : pr.shape[static_cast<std::size_t>(dim)];
    std::int64_t inner = 1;
    for (std::int64_t d = dim + 1; d < rank; ++d) inner *= pr.shape[static_cast<std::size_t>(d)];
    const std::int64_t group = pr.segments.empty() ? width : width / static_cast<std::int64_t>(pr.segments.size());
    for (std::size_t k = 0; k < recorded_[i].size(); ++k) {
      const auto q = recorded_[i][k];
      if (b.fixed_point) {
        const auto g = static_cast<std::size_t>(static_cast<std::int64_t>(k) / inner % width / group);
        const double scale = pr.segments.empty() ? pr.scale : pr.segments[g];
        const std::int64_t zero = pr.segment_zeros.empty() ? pr.zero_point : pr.segment_zeros[g];
        t.data<float>()[k] = static_cast<float>(scale * static_cast<double>(q - zero));
      } else {
        t.data<std::int64_t>()[k] = q;
      }
    }
    return t;
  }
  return Tensor();
}

Tensor Simulator::forward(const Tensor& x) {
  if (x.shape() == program_.input_shape) return dequantize_output(program_, run(quantize_input(program_, x)));
  // A stack of inputs: one run each, the outputs joined along dim 0 when it is the batch
  // dim of the output too, else stacked along a new dim 0.
  std::vector<Tensor> ys;
  for (const Tensor& xi : split_stacked(program_.input_shape, x, "Simulator::forward")) {
    ys.push_back(dequantize_output(program_, run(quantize_input(program_, xi))));
  }
  const Shape& in = program_.input_shape;
  const Shape& out = program_.output_shape;
  return !out.empty() && !in.empty() && out[0] == in[0] ? cat(ys, 0) : stack(ys, 0);
}

std::vector<std::int64_t> Simulator::values(std::int64_t buffer) const {
  const Buffer& b = program_.buffer(buffer);
  std::vector<std::int64_t> out(static_cast<std::size_t>(b.size));
  visit_elem(b.elem, [&](auto tag) {
    using T = decltype(tag);
    const T* p = reinterpret_cast<const T*>(storage_[static_cast<std::size_t>(buffer)].data());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = p[i];
    return 0;
  });
  return out;
}

std::int64_t Simulator::at_limit(std::int64_t buffer) const {
  const Buffer& b = program_.buffer(buffer);
  if (!b.fixed_point) return 0;
  std::int64_t n = 0;
  for (const auto v : values(buffer)) n += v == elem_min(b.elem) || v == elem_max(b.elem);
  return n;
}

std::string Simulator::saturation_report() const {
  std::string out = fmt::format("values at the limits of their format over {} runs (saturated or exactly at the limit)\n",
                                runs_);
  for (const Buffer& b : program_.buffers) {
    if (!b.fixed_point || !(b.kind == BufferKind::Activation || b.kind == BufferKind::Output)) continue;
    const std::int64_t n = limit_counts_[static_cast<std::size_t>(b.id)], seen = b.size * runs_;
    out += fmt::format("  {:<12} {:<18} {:>8} of {:>9} ({:.3f}%)  {}\n", b.name,
                       format_name(b.elem, b.scale, b.zero_point), n, seen,
                       seen ? 100.0 * static_cast<double>(n) / static_cast<double>(seen) : 0.0, b.origin);
  }
  return out;
}

std::vector<std::int64_t> quantize_input(const Program& program, const Tensor& x) {
  const Buffer& in = program.buffer(program.input);
  if (x.shape() != program.input_shape) {
    throw ShapeError(fmt::format("quantize_input: the program {} takes {}, got {}", program.name,
                                 shape_str(program.input_shape), shape_str(x.shape())));
  }
  std::vector<std::int64_t> q(static_cast<std::size_t>(x.numel()));
  if (in.elem == Elem::F32) {  // a float32 program: the floats' bits
    const Tensor f = x.to(Dtype::Float32).contiguous();
    for (std::size_t i = 0; i < q.size(); ++i) {
      if (!std::isfinite(f.data<float>()[i])) {
        throw ValueError(fmt::format("quantize_input: element {} is {}; the model takes finite inputs", i, f.data<float>()[i]));
      }
      q[i] = bits_of_float(f.data<float>()[i]);
    }
    return q;
  }
  if (!in.fixed_point) {
    const Tensor ids = x.to(Dtype::Int64);
    const std::int64_t* p = ids.data<std::int64_t>();
    for (std::size_t i = 0; i < q.size(); ++i) {
      if (p[i] < INT32_MIN || p[i] > INT32_MAX) {
        throw ValueError(fmt::format("quantize_input: id {} at {} does not fit int32", p[i], i));
      }
      q[i] = p[i];
    }
    return q;
  }
  const Tensor d = x.to(Dtype::Float64).contiguous();
  const double* p = d.data<double>();
  // a format per channel (Buffer::channel_scales): element i is in channel i / inner % C of [N, C, ...]
  const auto [C, inner] = program.input_channels();
  for (std::size_t i = 0; i < q.size(); ++i) {
    if (!std::isfinite(p[i])) {
      throw ValueError(fmt::format("quantize_input: element {} is {}; the fixed-point model takes finite inputs", i, p[i]));
    }
    const auto c = C == 0 ? std::size_t{0} : static_cast<std::size_t>(static_cast<std::int64_t>(i) / inner % C);
    const double scale = C == 0 ? in.scale : in.channel_scales[c];
    const std::int32_t zero = C == 0 ? in.zero_point : in.channel_zero_points[c];
    const double v = std::round(p[i] / scale) + zero;  // ties away from zero, then saturate
    q[i] = static_cast<std::int64_t>(std::clamp<double>(v, static_cast<double>(elem_min(in.elem)),
                                                         static_cast<double>(elem_max(in.elem))));
  }
  return q;
}

Tensor dequantize_output(const Program& program, const std::vector<std::int64_t>& q) {
  const Buffer& out = program.buffer(program.output);
  if (static_cast<std::int64_t>(q.size()) != out.size) {
    throw ShapeError(fmt::format("dequantize_output: {} values for an output of {}", q.size(), out.size));
  }
  Tensor t = Tensor::empty(program.output_shape, out.fixed_point || out.elem == Elem::F32 ? Dtype::Float32 : Dtype::Int64);
  for (std::size_t i = 0; i < q.size(); ++i) {
    if (out.elem == Elem::F32) {
      t.data<float>()[i] = float_of_bits(q[i]);
    } else if (out.fixed_point) {
      t.data<float>()[i] = static_cast<float>(out.scale * static_cast<double>(q[i] - out.zero_point));
    } else {
      t.data<std::int64_t>()[i] = q[i];
    }
  }
  return t;
}

}  // namespace microtorch::lower
