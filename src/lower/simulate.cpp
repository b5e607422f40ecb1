// Simulator — executes a Program's steps by calling the runtime's C kernels. The table below
// is the one place where a kernel name meets its C signature on the host; emit.cpp prints the
// same steps as C source, so the two cannot drift apart without a compile error here or a
// bit-exactness failure in the firmware test.
#include "microtorch/lower/simulate.hpp"

#include <cmath>
#include <cstring>
#include <functional>
#include <unordered_map>

#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/ops.hpp"
#include "runtime/mt_kernels.h"

namespace microtorch::lower {

namespace {

// Arguments of one call, resolved to host pointers and ints.
struct Call {
  const Step& step;
  std::function<void*(const Arg&)> resolve;
  const Program& program;
  template <class T>
  T* p(std::size_t i) const {
    return static_cast<T*>(resolve(step.args.at(i)));
  }
  int i(std::size_t k) const { return static_cast<int>(step.args.at(k).value); }
  std::uint32_t u(std::size_t k) const { return static_cast<std::uint32_t>(step.args.at(k).value); }
  mt_attn_params attn(std::size_t k) const {
    const AttentionParams& a = program.attention.at(static_cast<std::size_t>(step.args.at(k).value));
    mt_attn_params m{};
    m.L = a.L, m.S = a.S, m.D = a.D, m.Dv = a.Dv;
    m.q_stride = a.q_stride, m.k_stride = a.k_stride, m.v_stride = a.v_stride, m.out_stride = a.out_stride;
    m.q_frac = a.q_frac, m.k_frac = a.k_frac, m.v_frac = a.v_frac, m.out_frac = a.out_frac;
    m.scale_q = a.scale_q, m.scale_frac = a.scale_frac, m.flags = a.flags;
    m.keep = a.keep >= 0 ? static_cast<const std::uint8_t*>(resolve(Arg::buf(a.keep))) : nullptr;
    return m;
  }
};

using Kernel = std::function<int(const Call&)>;  // returns the kernel's status (0 = fine)

// The kernels that exist for both activation types, registered once per type.
template <class T>
void add_typed(std::unordered_map<std::string, Kernel>& k, const std::string& s,
               void (*relu)(const T*, T*, int), void (*softmax)(const T*, T*, int, int, int),
               void (*act_tanh)(const T*, T*, int, int, int), void (*act_sigmoid)(const T*, T*, int, int, int),
               void (*act_gelu)(const T*, T*, int, int, int),
               void (*add)(const T*, int, const T*, int, T*, int, int),
               void (*add_bcast)(const T*, int, const T*, int, int, T*, int, int),
               void (*mul)(const T*, const T*, int, T*, int, int), void (*scale)(const T*, T*, int, int16_t, int),
               void (*matmul)(const T*, const T*, T*, int, int, int, int, int, int),
               void (*layernorm)(const T*, T*, int, int, int, const T*, int, const T*, int, uint32_t, int, int),
               void (*meanpool)(const T*, T*, int, int, int, int), void (*sum)(const T*, T*, int, int, int, int),
               void (*argmax)(const T*, int32_t*, int, int), int (*embedding)(const int32_t*, int, const T*, int, int, T*),
               void (*div_rows)(const T*, int, const T*, int, T*, int, int, int),
               void (*copy)(const T*, T*, int, const int32_t*, const int32_t*, const int32_t*)) {
  k["mt_relu_" + s] = [relu](const Call& c) { return relu(c.p<T>(0), c.p<T>(1), c.i(2)), 0; };
  k["mt_softmax_" + s] = [softmax](const Call& c) { return softmax(c.p<T>(0), c.p<T>(1), c.i(2), c.i(3), c.i(4)), 0; };
  for (auto [name, f] : {std::pair{"tanh", act_tanh}, std::pair{"sigmoid", act_sigmoid}, std::pair{"gelu", act_gelu}}) {
    k[fmt::format("mt_{}_{}", name, s)] = [f = f](const Call& c) { return f(c.p<T>(0), c.p<T>(1), c.i(2), c.i(3), c.i(4)), 0; };
  }
  k["mt_add_" + s] = [add](const Call& c) {
    return add(c.p<T>(0), c.i(1), c.p<T>(2), c.i(3), c.p<T>(4), c.i(5), c.i(6)), 0;
  };
  k["mt_add_bcast_" + s] = [add_bcast](const Call& c) {
    return add_bcast(c.p<T>(0), c.i(1), c.p<T>(2), c.i(3), c.i(4), c.p<T>(5), c.i(6), c.i(7)), 0;
  };
  k["mt_mul_" + s] = [mul](const Call& c) { return mul(c.p<T>(0), c.p<T>(1), c.i(2), c.p<T>(3), c.i(4), c.i(5)), 0; };
  k["mt_scale_" + s] = [scale](const Call& c) {
    return scale(c.p<T>(0), c.p<T>(1), c.i(2), static_cast<int16_t>(c.i(3)), c.i(4)), 0;
  };
  k["mt_matmul_" + s] = [matmul](const Call& c) {
    return matmul(c.p<T>(0), c.p<T>(1), c.p<T>(2), c.i(3), c.i(4), c.i(5), c.i(6), c.i(7), c.i(8)), 0;
  };
  k["mt_layernorm_" + s] = [layernorm](const Call& c) {
    return layernorm(c.p<T>(0), c.p<T>(1), c.i(2), c.i(3), c.i(4), c.p<T>(5), c.i(6), c.p<T>(7), c.i(8), c.u(9), c.i(10),
                     c.i(11)),
           0;
  };
  k["mt_meanpool_" + s] = [meanpool](const Call& c) {
    return meanpool(c.p<T>(0), c.p<T>(1), c.i(2), c.i(3), c.i(4), c.i(5)), 0;
  };
  k["mt_sum_" + s] = [sum](const Call& c) { return sum(c.p<T>(0), c.p<T>(1), c.i(2), c.i(3), c.i(4), c.i(5)), 0; };
  k["mt_argmax_" + s] = [argmax](const Call& c) { return argmax(c.p<T>(0), c.p<int32_t>(1), c.i(2), c.i(3)), 0; };
  k["mt_embedding_" + s] = [embedding](const Call& c) {
    return embedding(c.p<int32_t>(0), c.i(1), c.p<T>(2), c.i(3), c.i(4), c.p<T>(5)) != 0 ? 1 : 0;
  };
  k["mt_div_rows_" + s] = [div_rows](const Call& c) {
    return div_rows(c.p<T>(0), c.i(1), c.p<T>(2), c.i(3), c.p<T>(4), c.i(5), c.i(6), c.i(7)), 0;
  };
  k["mt_copy_strided_" + s] = [copy](const Call& c) {
    return copy(c.p<T>(0), c.p<T>(1), c.i(2), c.p<int32_t>(3), c.p<int32_t>(4), c.p<int32_t>(5)), 0;
  };
}

const std::unordered_map<std::string, Kernel>& kernels() {
  static const auto table = [] {
    std::unordered_map<std::string, Kernel> k;
    add_typed<int16_t>(k, "s16", mt_relu_s16, mt_softmax_s16, mt_tanh_s16, mt_sigmoid_s16, mt_gelu_s16, mt_add_s16,
                       mt_add_bcast_s16, mt_mul_s16, mt_scale_s16, mt_matmul_s16, mt_layernorm_s16, mt_meanpool_s16,
                       mt_sum_s16, mt_argmax_s16, mt_embedding_s16, mt_div_rows_s16, mt_copy_strided_s16);
    add_typed<int8_t>(k, "s8", mt_relu_s8, mt_softmax_s8, mt_tanh_s8, mt_sigmoid_s8, mt_gelu_s8, mt_add_s8,
                      mt_add_bcast_s8, mt_mul_s8, mt_scale_s8, mt_matmul_s8, mt_layernorm_s8, mt_meanpool_s8, mt_sum_s8,
                      mt_argmax_s8, mt_embedding_s8, mt_div_rows_s8, mt_copy_strided_s8);
    k["mt_copy_strided_s32"] = [](const Call& c) {
      return mt_copy_strided_s32(c.p<int32_t>(0), c.p<int32_t>(1), c.i(2), c.p<int32_t>(3), c.p<int32_t>(4),
                                 c.p<int32_t>(5)),
             0;
    };
    k["mt_linear_s16_w16"] = [](const Call& c) {
      return mt_linear_s16_w16(c.p<int16_t>(0), c.p<int16_t>(1), c.p<int32_t>(2), c.p<int16_t>(3), c.i(4), c.i(5),
                               c.i(6), c.i(7), c.i(8)),
             0;
    };
    k["mt_linear_s16_w8"] = [](const Call& c) {
      return mt_linear_s16_w8(c.p<int16_t>(0), c.p<int8_t>(1), c.p<int32_t>(2), c.p<int16_t>(3), c.i(4), c.i(5), c.i(6),
                              c.i(7), c.i(8)),
             0;
    };
    k["mt_linear_s8_w8"] = [](const Call& c) {
      return mt_linear_s8_w8(c.p<int8_t>(0), c.p<int8_t>(1), c.p<int32_t>(2), c.p<int8_t>(3), c.i(4), c.i(5), c.i(6),
                             c.i(7), c.i(8)),
             0;
    };
    k["mt_attention_stream_s16"] = [](const Call& c) {
      const mt_attn_params a = c.attn(0);
      return mt_attention_stream_s16(&a, c.p<int16_t>(1), c.p<int16_t>(2), c.p<int16_t>(3), c.p<int16_t>(4),
                                     c.p<int64_t>(5)),
             0;
    };
    k["mt_attention_stream_s8"] = [](const Call& c) {
      const mt_attn_params a = c.attn(0);
      return mt_attention_stream_s8(&a, c.p<int8_t>(1), c.p<int8_t>(2), c.p<int8_t>(3), c.p<int8_t>(4), c.p<int32_t>(5)),
             0;
    };
    k["mt_attention_twopass_s16"] = [](const Call& c) {
      const mt_attn_params a = c.attn(0);
      return mt_attention_twopass_s16(&a, c.p<int16_t>(1), c.p<int16_t>(2), c.p<int16_t>(3), c.p<int16_t>(4),
                                      c.p<int32_t>(5)),
             0;
    };
    k["mt_attention_twopass_s8"] = [](const Call& c) {
      const mt_attn_params a = c.attn(0);
      return mt_attention_twopass_s8(&a, c.p<int8_t>(1), c.p<int8_t>(2), c.p<int8_t>(3), c.p<int8_t>(4),
                                     c.p<int32_t>(5)),
             0;
    };
    return k;
  }();
  return table;
}

template <class F>
auto visit_elem(Elem e, F&& f) {
  switch (e) {
    case Elem::S8: return f(std::int8_t{});
    case Elem::U8: return f(std::uint8_t{});
    case Elem::S16: return f(std::int16_t{});
    case Elem::S32: return f(std::int32_t{});
    case Elem::S64: return f(std::int64_t{});
  }
  return f(std::int64_t{});
}

}  // namespace

Simulator::Simulator(Program program) : program_(std::move(program)) {
  for (const Step& s : program_.steps) {
    if (!kernels().count(s.kernel)) {
      throw ValueError(fmt::format("Simulator: no host binding for kernel {} ({})", s.kernel, s.label));
    }
  }
  storage_.resize(program_.buffers.size());
  limit_counts_.assign(program_.buffers.size(), 0);
  for (const Buffer& b : program_.buffers) {
    auto& st = storage_[static_cast<std::size_t>(b.id)];
    st.assign(static_cast<std::size_t>((b.bytes() + 7) / 8), 0);
    if (b.kind == BufferKind::Weight) {
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
  for (const Step& s : program_.steps) {
    const Call call{s, [this](const Arg& a) { return ptr(a.buffer, a.offset); }, program_};
    if (kernels().at(s.kernel)(call) != 0) status_ = 1;
  }
  ++runs_;
  for (const Buffer& b : program_.buffers) {
    if (b.kind == BufferKind::Activation || b.kind == BufferKind::Output) limit_counts_[static_cast<std::size_t>(b.id)] += at_limit(b.id);
  }
  return values(program_.output);
}

Tensor Simulator::forward(const Tensor& x) { return dequantize_output(program_, run(quantize_input(program_, x))); }

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
    out += fmt::format("  {:<12} Q{}.{:<3} {:>8} of {:>9} ({:.3f}%)  {}\n", b.name, elem_bytes(b.elem) * 8 - 1 - b.frac,
                       b.frac, n, seen, seen ? 100.0 * static_cast<double>(n) / static_cast<double>(seen) : 0.0, b.origin);
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
  const Tensor d = x.to(Dtype::Float64);
  const double* p = d.data<double>();
  for (std::size_t i = 0; i < q.size(); ++i) {
    if (!std::isfinite(p[i])) {
      throw ValueError(fmt::format("quantize_input: element {} is {}; the fixed-point model takes finite inputs", i, p[i]));
    }
    q[i] = quantize_value(p[i], in.frac, elem_bytes(in.elem) * 8);
  }
  return q;
}

Tensor dequantize_output(const Program& program, const std::vector<std::int64_t>& q) {
  const Buffer& out = program.buffer(program.output);
  if (static_cast<std::int64_t>(q.size()) != out.size) {
    throw ShapeError(fmt::format("dequantize_output: {} values for an output of {}", q.size(), out.size));
  }
  Tensor t = Tensor::empty(program.output_shape, out.fixed_point ? Dtype::Float32 : Dtype::Int64);
  for (std::size_t i = 0; i < q.size(); ++i) {
    if (out.fixed_point) {
      t.data<float>()[i] = static_cast<float>(std::ldexp(static_cast<double>(q[i]), -out.frac));
    } else {
      t.data<std::int64_t>()[i] = q[i];
    }
  }
  return t;
}

}  // namespace microtorch::lower
