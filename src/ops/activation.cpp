// Activations: tanh, sigmoid, relu, gelu, silu (and silu_and_mul, SwiGLU's gate), clamp (and
// clamp_min, clamp_max), the host ops of the activation family (lowered by
// src/lower/rules/activation.cpp onto src/lower/runtime/mt_activation.c). The formulas are
// evaluated by map_elements.hpp, each backward reading the input x or the output y, never
// both; silu runs its own pass over raw memory in the vectors of simd.hpp.
#include <cmath>
#include <limits>

#include "map_elements.hpp"
#include "simd.hpp"

namespace microtorch {

using namespace detail::elementwise_map;

// y = tanh x ;  dx = dy * (1 - y^2)
Tensor tanh(const Tensor& x) {
  return unary_op("tanh", x, Saved::Output, [](auto X) { return fn::tanh(X); },
                  [](auto G, auto Y) { return G * (element_t<decltype(Y)>(1) - Y * Y); });
}

// y = 1 / (1 + e^-x) ;  dx = dy * y (1 - y)
Tensor sigmoid(const Tensor& x) {
  return unary_op("sigmoid", x, Saved::Output,
                  [](auto X) {
                    using T = element_t<decltype(X)>;
                    return T(1) / (T(1) + fn::exp(-X));
                  },
                  [](auto G, auto Y) { return G * Y * (element_t<decltype(Y)>(1) - Y); });
}

// y = max(x, 0) ;  dx = dy * [y > 0]
Tensor relu(const Tensor& x) {
  const auto max0 = [](auto X) {
    const decltype(X) zero(element_t<decltype(X)>(0));
    return fn::select(X > zero, X, zero);
  };
  if (x.dtype() == Dtype::Int64) return map_tensor<std::int64_t>(x, max0);
  return unary_op("relu", x, Saved::Output, max0, [](auto G, auto Y) {
    const decltype(Y) zero(element_t<decltype(Y)>(0));
    return fn::select(Y > zero, G, zero);
  });
}

// exact:  y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2 ;  dx = dy (Phi(x) + x phi(x)),
//         phi(x) = e^(-x^2/2) / sqrt(2 pi)
// tanh:   y = x (1 + tanh u) / 2, u = sqrt(2/pi) (x + 0.044715 x^3) ;
//         dx = dy ((1 + tanh u) / 2 + x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2) / 2)
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
constexpr double kCubic = 0.044715;
}  // namespace

Tensor gelu(const Tensor& x, std::string_view approximate) {
  if (approximate == "tanh") {
    return unary_op(
        "gelu", x, Saved::Input,
        [](auto X) {
          using T = element_t<decltype(X)>;
          return T(0.5) * X * (T(1) + fn::tanh(T(kSqrt2OverPi) * (X + T(kCubic) * X * X * X)));
        },
        [](auto G, auto X) {
          using T = element_t<decltype(X)>;
          const auto t = fn::tanh(T(kSqrt2OverPi) * (X + T(kCubic) * X * X * X));
          return G * (T(0.5) * (T(1) + t) +
                      T(0.5) * X * (T(1) - t * t) * T(kSqrt2OverPi) * (T(1) + T(3 * kCubic) * X * X));
        },
        {{"approximate", std::string("tanh")}});
  }
  if (approximate != "none") {
    throw ValueError(fmt::format("gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate));
  }
  return unary_op(
      "gelu", x, Saved::Input,
      [](auto X) {
        using T = element_t<decltype(X)>;
        return T(0.5) * X * (T(1) + fn::erf(X * T(kInvSqrt2)));
      },
      [](auto G, auto X) {
        using T = element_t<decltype(X)>;
        return G * (T(0.5) * (T(1) + fn::erf(X * T(kInvSqrt2))) + X * T(kInvSqrt2Pi) * fn::exp(T(-0.5) * X * X));
      },
      {{"approximate", std::string("none")}});
}

// ---- silu: one pass over raw memory, float32 in the vectors of simd.hpp ------------------

namespace {

using detail::simd::exp_nonpositive;
using detail::simd::kLanes;

// sigmoid(x) = 1 / (1 + e^-x) from e = e^-|x|, which never overflows: 1 / (1 + e) for x >= 0,
// e / (1 + e) below.
template <class V, class I>
[[gnu::always_inline]] inline V sigmoid_of(V x) {
  const V e = exp_nonpositive<V, I>(x < 0 ? x : -x);
  const V r = 1.0f / (1.0f + e);
  return x >= 0 ? r : e * r;
}

// y = x s ;  with g: dx = g s (1 + x (1 - s))
MICROTORCH_CLONES void silu_rows(const float* x, const float* g, float* out, std::int64_t n) {
  using detail::simd::load;
  using detail::simd::store;
  using detail::simd::IVec;
  using detail::simd::Vec;
  const std::int64_t nv = n - n % kLanes;
  for (std::int64_t j = 0; j < nv; j += kLanes) {
    const Vec v = load(x + j), sv = sigmoid_of<Vec, IVec>(v);
    store(out + j, g ? load(g + j) * sv * (1.0f + v * (1.0f - sv)) : v * sv);
  }
  for (std::int64_t j = nv; j < n; ++j) {
    const float sv = sigmoid_of<float, std::int32_t>(x[j]);
    out[j] = g ? g[j] * sv * (1.0f + x[j] * (1.0f - sv)) : x[j] * sv;
  }
}

void silu_rows(const double* x, const double* g, double* out, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) {
    const double sv = 1.0 / (1.0 + std::exp(-x[j]));
    out[j] = g ? g[j] * sv * (1.0 + x[j] * (1.0 - sv)) : x[j] * sv;
  }
}

// y = a s b, s = sigmoid(a) ;  with g: da = g b s (1 + a (1 - s)) into out, db = g a s into out_b
MICROTORCH_CLONES void silu_and_mul_rows(const float* a, const float* b, const float* g, float* out, float* out_b,
                                         std::int64_t n) {
  using detail::simd::load;
  using detail::simd::store;
  using detail::simd::IVec;
  using detail::simd::Vec;
  const std::int64_t nv = n - n % kLanes;
  for (std::int64_t j = 0; j < nv; j += kLanes) {
    const Vec va = load(a + j), vb = load(b + j), sv = sigmoid_of<Vec, IVec>(va);
    if (!g) {
      store(out + j, va * sv * vb);
      continue;
    }
    const Vec vg = load(g + j);
    store(out + j, vg * vb * sv * (1.0f + va * (1.0f - sv)));
    store(out_b + j, vg * va * sv);
  }
  for (std::int64_t j = nv; j < n; ++j) {
    const float sv = sigmoid_of<float, std::int32_t>(a[j]);
    if (!g) {
      out[j] = a[j] * sv * b[j];
      continue;
    }
    out[j] = g[j] * b[j] * sv * (1.0f + a[j] * (1.0f - sv));
    out_b[j] = g[j] * a[j] * sv;
  }
}

void silu_and_mul_rows(const double* a, const double* b, const double* g, double* out, double* out_b, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) {
    const double sv = 1.0 / (1.0 + std::exp(-a[j]));
    if (!g) {
      out[j] = a[j] * sv * b[j];
      continue;
    }
    out[j] = g[j] * b[j] * sv * (1.0 + a[j] * (1.0 - sv));
    out_b[j] = g[j] * a[j] * sv;
  }
}

}  // namespace

// y = x sigmoid(x) ;  dx = dy (s + x s (1 - s)),  s = sigmoid(x) (recomputed from x)
Tensor silu(const Tensor& x_in) {
  const Tensor x = x_in.is_floating_point() ? x_in : x_in.detach().to(Dtype::Float32);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  detail::visit_floating(x.dtype(), "silu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    silu_rows(x.data<T>(), static_cast<const T*>(nullptr), y.data<T>(), x.numel());
    return 0;
  });
  return autograd::record(y, "silu", {x}, autograd::Saved{x},
                          [](const Tensor& g, const autograd::NeedsGrad&, const TensorList& s) {
                            Tensor dx = Tensor::empty(g.shape(), g.dtype());
                            detail::visit_floating(g.dtype(), "silu", [&](auto tag) {
                              using T = typename decltype(tag)::type;
                              silu_rows(s[0].data<T>(), g.data<T>(), dx.data<T>(), g.numel());
                              return 0;
                            });
                            return TensorList{dx};
                          });
}

// y = silu(a) b ;  da = dy b s (1 + a (1 - s)),  db = dy silu(a),  s = sigmoid(a): one pass each way
Tensor silu_and_mul(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) {
    throw ShapeError(fmt::format("silu_and_mul: gate {} and up {} must have one shape (no broadcasting)",
                                 shape_str(a.shape()), shape_str(b.shape())));
  }
  if (!a.is_floating_point() || b.dtype() != a.dtype()) {
    throw DtypeError(fmt::format("silu_and_mul: gate and up must share one floating dtype, got {} and {}",
                                 dtype_name(a.dtype()), dtype_name(b.dtype())));
  }
  Tensor y = Tensor::empty(a.shape(), a.dtype());
  detail::visit_floating(a.dtype(), "silu_and_mul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    silu_and_mul_rows(a.data<T>(), b.data<T>(), static_cast<const T*>(nullptr), y.data<T>(), static_cast<T*>(nullptr),
                      a.numel());
    return 0;
  });
  return autograd::record(y, "silu_and_mul", {a, b}, autograd::Saved{a, b},
                          [](const Tensor& g, const autograd::NeedsGrad&, const TensorList& s) {
                            Tensor da = Tensor::empty(g.shape(), g.dtype()), db = Tensor::empty(g.shape(), g.dtype());
                            detail::visit_floating(g.dtype(), "silu_and_mul", [&](auto tag) {
                              using T = typename decltype(tag)::type;
                              silu_and_mul_rows(s[0].data<T>(), s[1].data<T>(), g.data<T>(), da.data<T>(),
                                                db.data<T>(), g.numel());
                              return 0;
                            });
                            return TensorList{da, db};
                          });
}

// y = min(max(x, lo), hi) ;  dx = dy * [lo <= x <= hi]
Tensor clamp(const Tensor& x, double lo, double hi) {
  if (std::isnan(lo) || std::isnan(hi) || lo > hi) {
    throw ValueError(fmt::format("clamp: min {} must not exceed max {} (and neither may be NaN)", lo, hi));
  }
  return unary_op(
      "clamp", x, Saved::Input,
      [lo, hi](auto X) {
        using T = element_t<decltype(X)>;
        using V = decltype(X);
        const V low(static_cast<T>(std::max(lo, static_cast<double>(std::numeric_limits<T>::lowest()))));
        const V high(static_cast<T>(std::min(hi, static_cast<double>(std::numeric_limits<T>::max()))));
        return fn::select(X < low, low, fn::select(high < X, high, X));
      },
      [lo, hi](auto G, auto X) {
        using T = element_t<decltype(X)>;
        using V = decltype(X);
        return fn::select(X >= V(static_cast<T>(lo)) && X <= V(static_cast<T>(hi)), G, V(T(0)));
      },
      {{"min", lo}, {"max", hi}});
}

Tensor clamp_min(const Tensor& x, double lo) { return clamp(x, lo, std::numeric_limits<double>::infinity()); }
Tensor clamp_max(const Tensor& x, double hi) { return clamp(x, -std::numeric_limits<double>::infinity(), hi); }

}  // namespace microtorch
