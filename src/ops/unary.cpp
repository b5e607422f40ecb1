// Unary elementwise math: neg, exp, log, sqrt, rsqrt, pow(x, p), abs, tanh, sigmoid,
// relu, gelu, clamp. Each backward needs either the input x or the output y, never both;
// unary_op saves only that one.
//
// Every formula is one generic lambda, evaluated over the buffers by map_elements: on
// xsimd batches for the whole batches, one element at a time for the last n % W elements.
// That is how xtensor's expressions evaluated them, with the same functions (xsimd's exp,
// log, tanh, erf and pow on a batch, std::'s on one element), so the results keep their
// bits; and it compiles in a fraction of the time.
#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "common.hpp"

namespace microtorch {

namespace {

// The math the formulas call: std:: on one element, xsimd:: on a batch.
namespace fn {
using std::erf;
using std::exp;
using std::log;
using std::pow;
using std::sqrt;
using std::tanh;
using xsimd::erf;
using xsimd::exp;
using xsimd::log;
using xsimd::pow;
using xsimd::sqrt;
using xsimd::tanh;

// cond ? a : b, elementwise on a batch.
template <class T>
T select(bool cond, T a, T b) {
  return cond ? a : b;
}
using xsimd::select;

// sign(x): 1 or -1 with x's sign, +-0 for +-0, NaN for NaN (xtensor's xt::sign).
template <class T>
T sign(T x) {
  return std::isnan(x) ? std::numeric_limits<T>::quiet_NaN() : x == 0 ? std::copysign(T(0), x) : std::copysign(T(1), x);
}
template <class T, class A>
xsimd::batch<T, A> sign(const xsimd::batch<T, A>& x) {
  using B = xsimd::batch<T, A>;
  return xsimd::select(xsimd::isnan(x), B(std::numeric_limits<T>::quiet_NaN()),
                       xsimd::select(x == B(T(0)), xsimd::copysign(B(T(0)), x), xsimd::copysign(B(T(1)), x)));
}
}  // namespace fn

// The element type of a value or a batch: what T(0.5) in a formula converts to.
template <class V>
struct element {
  using type = V;
};
template <class T, class A>
struct element<xsimd::batch<T, A>> {
  using type = T;
};
template <class V>
using element_t = typename element<std::decay_t<V>>::type;

/// out[i] = f(in[i]...) for i in [0, n): on xsimd batches of W elements while whole batches
/// remain, then one element at a time.
template <class T, class F, class... In>
void map_elements(T* out, std::int64_t n, F f, const In*... in) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t kW = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  for (; i + kW <= n; i += kW) f(B::load_unaligned(in + i)...).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = f(in[i]...);
}

/// y = fwd(x) for a tensor of T (float, double or int64), computed by map_elements.
template <class T, class F>
Tensor map_tensor(const Tensor& x, F f) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  map_elements(y.template data<T>(), x.numel(), f, x.template data<T>());
  return y;
}

enum class Saved { Input, Output };

/// y = fwd(x) elementwise over a floating x; dx = bwd(g, s) where s is the saved input or
/// output. Integer and bool inputs are converted to float32 first (as torch.exp does).
template <class Fwd, class Bwd>
Tensor unary_op(const char* op, const Tensor& x_in, Saved saved, Fwd fwd, Bwd bwd, autograd::Attrs attrs = {}) {
  const Tensor x = x_in.is_floating_point() ? x_in : x_in.detach().to(Dtype::Float32);
  Tensor y = detail::visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return map_tensor<T>(x, fwd);
  });
  return autograd::record(
      y, op, {x}, autograd::Saved{saved == Saved::Input ? x : y},
      [bwd](const Tensor& g, const autograd::NeedsGrad&, const TensorList& s) {
        return TensorList{detail::visit_floating(g.dtype(), "backward", [&](auto tag) {
          using T = typename decltype(tag)::type;
          Tensor dx = Tensor::empty(g.shape(), g.dtype());
          map_elements(dx.template data<T>(), g.numel(), bwd, g.template data<T>(), s[0].template data<T>());
          return dx;
        })};
      },
      std::move(attrs));
}

}  // namespace

// y = -x ;  dx = -dy
Tensor neg(const Tensor& x) {
  if (!x.is_floating_point()) {
    if (x.dtype() == Dtype::Bool) throw DtypeError("neg: bool tensors have no negation; use logical_not");
    return map_tensor<std::int64_t>(x, [](auto X) { return -X; });
  }
  return unary_op("neg", x, Saved::Output, [](auto X) { return -X; }, [](auto G, auto) { return -G; });
}

// y = e^x ;  dx = dy * y
Tensor exp(const Tensor& x) {
  return unary_op("exp", x, Saved::Output, [](auto X) { return fn::exp(X); }, [](auto G, auto Y) { return G * Y; });
}

// y = ln x ;  dx = dy / x
Tensor log(const Tensor& x) {
  return unary_op("log", x, Saved::Input, [](auto X) { return fn::log(X); }, [](auto G, auto X) { return G / X; });
}

// y = sqrt x ;  dx = dy / (2 y)
Tensor sqrt(const Tensor& x) {
  return unary_op("sqrt", x, Saved::Output, [](auto X) { return fn::sqrt(X); },
                  [](auto G, auto Y) { return G / (element_t<decltype(Y)>(2) * Y); });
}

// y = 1 / sqrt x ;  dx = -dy * y^3 / 2
Tensor rsqrt(const Tensor& x) {
  return unary_op("rsqrt", x, Saved::Output, [](auto X) { return element_t<decltype(X)>(1) / fn::sqrt(X); },
                  [](auto G, auto Y) { return element_t<decltype(Y)>(-0.5) * G * Y * Y * Y; });
}

// y = x^p ;  dx = dy * p * x^(p-1)
Tensor pow(const Tensor& x, double p) {
  return unary_op(
      "pow_scalar", x, Saved::Input,
      [p](auto X) { return fn::pow(X, decltype(X)(element_t<decltype(X)>(p))); },
      [p](auto G, auto X) {
        using T = element_t<decltype(X)>;
        return G * T(p) * fn::pow(X, decltype(X)(T(p - 1)));
      },
      {{"exponent", p}});
}

// y = |x| ;  dx = dy * sign(x)
Tensor abs(const Tensor& x) {
  if (x.dtype() == Dtype::Int64) return map_tensor<std::int64_t>(x, [](auto X) { return xsimd::abs(X); });
  return unary_op("abs", x, Saved::Input, [](auto X) { return xsimd::abs(X); },
                  [](auto G, auto X) { return G * fn::sign(X); });
}

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
