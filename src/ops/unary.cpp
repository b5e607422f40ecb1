// Unary elementwise math: neg, exp, log, sqrt, rsqrt, pow(x, p), abs, tanh, sigmoid,
// relu, gelu, silu, clamp. Each backward needs either the input x or the output y, never both;
// unary_op saves only that one.
#include <cmath>

#include <xtensor/xmath.hpp>

#include "common.hpp"

namespace microtorch {

namespace {

enum class Saved { Input, Output };

/// y = fwd(X) elementwise over a floating x; dx = bwd(G, S) where S is the saved input or
/// output. Integer and bool inputs are converted to float32 first (as torch.exp does).
template <class Fwd, class Bwd>
Tensor unary_op(const char* op, const Tensor& x_in, Saved saved, Fwd fwd, Bwd bwd, autograd::Attrs attrs = {}) {
  const Tensor x = x_in.is_floating_point() ? x_in : x_in.detach().to(Dtype::Float32);
  Tensor y = detail::visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Tensor::from_array(fwd(x.template array<T>()));
  });
  return autograd::record(
      y, op, {x}, autograd::Saved{saved == Saved::Input ? x : y},
      [bwd](const Tensor& g, const autograd::NeedsGrad&, const TensorList& s) {
        return TensorList{detail::visit_floating(g.dtype(), "backward", [&](auto tag) {
          using T = typename decltype(tag)::type;
          return Tensor::from_array(bwd(g.template array<T>(), s[0].template array<T>()));
        })};
      },
      std::move(attrs));
}

template <class E>
using value_t = typename std::decay_t<E>::value_type;

}  // namespace

// y = -x ;  dx = -dy
Tensor neg(const Tensor& x) {
  if (!x.is_floating_point()) {
    if (x.dtype() == Dtype::Bool) throw DtypeError("neg: bool tensors have no negation; use logical_not");
    return Tensor::from_array(-x.array<std::int64_t>());
  }
  return unary_op("neg", x, Saved::Output, [](auto&& X) { return -X; }, [](auto&& G, auto&&) { return -G; });
}

// y = e^x ;  dx = dy * y
Tensor exp(const Tensor& x) {
  return unary_op("exp", x, Saved::Output, [](auto&& X) { return xt::exp(X); },
                  [](auto&& G, auto&& Y) { return G * Y; });
}

// y = ln x ;  dx = dy / x
Tensor log(const Tensor& x) {
  return unary_op("log", x, Saved::Input, [](auto&& X) { return xt::log(X); },
                  [](auto&& G, auto&& X) { return G / X; });
}

// y = sqrt x ;  dx = dy / (2 y)
Tensor sqrt(const Tensor& x) {
  return unary_op("sqrt", x, Saved::Output, [](auto&& X) { return xt::sqrt(X); },
                  [](auto&& G, auto&& Y) { return G / (value_t<decltype(Y)>(2) * Y); });
}

// y = 1 / sqrt x ;  dx = -dy * y^3 / 2
Tensor rsqrt(const Tensor& x) {
  return unary_op("rsqrt", x, Saved::Output, [](auto&& X) { return value_t<decltype(X)>(1) / xt::sqrt(X); },
                  [](auto&& G, auto&& Y) { return value_t<decltype(Y)>(-0.5) * G * Y * Y * Y; });
}

// y = x^p ;  dx = dy * p * x^(p-1)
Tensor pow(const Tensor& x, double p) {
  return unary_op(
      "pow_scalar", x, Saved::Input, [p](auto&& X) { return xt::pow(X, value_t<decltype(X)>(p)); },
      [p](auto&& G, auto&& X) {
        using T = value_t<decltype(X)>;
        return G * T(p) * xt::pow(X, T(p - 1));
      },
      {{"exponent", p}});
}

// y = |x| ;  dx = dy * sign(x)
Tensor abs(const Tensor& x) {
  if (x.dtype() == Dtype::Int64) return Tensor::from_array(xt::abs(x.array<std::int64_t>()));
  return unary_op("abs", x, Saved::Input, [](auto&& X) { return xt::abs(X); },
                  [](auto&& G, auto&& X) { return G * xt::sign(X); });
}

// y = tanh x ;  dx = dy * (1 - y^2)
Tensor tanh(const Tensor& x) {
  return unary_op("tanh", x, Saved::Output, [](auto&& X) { return xt::tanh(X); },
                  [](auto&& G, auto&& Y) { return G * (value_t<decltype(Y)>(1) - Y * Y); });
}

// y = 1 / (1 + e^-x) ;  dx = dy * y (1 - y)
Tensor sigmoid(const Tensor& x) {
  return unary_op("sigmoid", x, Saved::Output,
                  [](auto&& X) {
                    using T = value_t<decltype(X)>;
                    return T(1) / (T(1) + xt::exp(-X));
                  },
                  [](auto&& G, auto&& Y) { return G * Y * (value_t<decltype(Y)>(1) - Y); });
}

// y = max(x, 0) ;  dx = dy * [y > 0]
Tensor relu(const Tensor& x) {
  if (x.dtype() == Dtype::Int64) {
    return Tensor::from_array(xt::maximum(x.array<std::int64_t>(), std::int64_t(0)));
  }
  return unary_op("relu", x, Saved::Output, [](auto&& X) { return xt::maximum(X, value_t<decltype(X)>(0)); },
                  [](auto&& G, auto&& Y) {
                    using T = value_t<decltype(Y)>;
                    return xt::where(Y > T(0), G, T(0));
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
        [](auto&& X) {
          using T = value_t<decltype(X)>;
          return T(0.5) * X * (T(1) + xt::tanh(T(kSqrt2OverPi) * (X + T(kCubic) * X * X * X)));
        },
        [](auto&& G, auto&& X) {
          using T = value_t<decltype(X)>;
          xt::xarray<T> t = xt::tanh(T(kSqrt2OverPi) * (X + T(kCubic) * X * X * X));
          return xt::xarray<T>(G * (T(0.5) * (T(1) + t) +
                                    T(0.5) * X * (T(1) - t * t) * T(kSqrt2OverPi) * (T(1) + T(3 * kCubic) * X * X)));
        },
        {{"approximate", std::string("tanh")}});
  }
  if (approximate != "none") {
    throw ValueError(fmt::format("gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate));
  }
  return unary_op(
      "gelu", x, Saved::Input,
      [](auto&& X) {
        using T = value_t<decltype(X)>;
        return T(0.5) * X * (T(1) + xt::erf(X * T(kInvSqrt2)));
      },
      [](auto&& G, auto&& X) {
        using T = value_t<decltype(X)>;
        return G * (T(0.5) * (T(1) + xt::erf(X * T(kInvSqrt2))) + X * T(kInvSqrt2Pi) * xt::exp(T(-0.5) * X * X));
      },
      {{"approximate", std::string("none")}});
}

// y = x sigmoid(x) ;  dx = dy (s + x s (1 - s)),  s = sigmoid(x)
Tensor silu(const Tensor& x) {
  return unary_op(
      "silu", x, Saved::Input,
      [](auto&& X) {
        using T = value_t<decltype(X)>;
        return X / (T(1) + xt::exp(-X));
      },
      [](auto&& G, auto&& X) {
        using T = value_t<decltype(X)>;
        xt::xarray<T> s = T(1) / (T(1) + xt::exp(-X));
        return xt::xarray<T>(G * s * (T(1) + X * (T(1) - s)));
      });
}

// y = min(max(x, lo), hi) ;  dx = dy * [lo <= x <= hi]
Tensor clamp(const Tensor& x, double lo, double hi) {
  if (std::isnan(lo) || std::isnan(hi) || lo > hi) {
    throw ValueError(fmt::format("clamp: min {} must not exceed max {} (and neither may be NaN)", lo, hi));
  }
  return unary_op(
      "clamp", x, Saved::Input,
      [lo, hi](auto&& X) {
        using T = value_t<decltype(X)>;
        return xt::clip(X, static_cast<T>(std::max(lo, static_cast<double>(std::numeric_limits<T>::lowest()))),
                        static_cast<T>(std::min(hi, static_cast<double>(std::numeric_limits<T>::max()))));
      },
      [lo, hi](auto&& G, auto&& X) {
        using T = value_t<decltype(X)>;
        return xt::where(X >= static_cast<T>(lo) && X <= static_cast<T>(hi), G, T(0));
      },
      {{"min", lo}, {"max", hi}});
}

Tensor clamp_min(const Tensor& x, double lo) { return clamp(x, lo, std::numeric_limits<double>::infinity()); }
Tensor clamp_max(const Tensor& x, double hi) { return clamp(x, -std::numeric_limits<double>::infinity(), hi); }

}  // namespace microtorch
