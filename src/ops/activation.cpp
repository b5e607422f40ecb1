// Activations: tanh, sigmoid, relu, gelu, clamp (and clamp_min, clamp_max), the host ops
// of the activation family (lowered by src/lower/rules/activation.cpp onto
// src/lower/runtime/mt_activation.c). The formulas are evaluated by map_elements.hpp; each
// backward needs either the input x or the output y, never both.
#include <cmath>
#include <limits>

#include "map_elements.hpp"

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
