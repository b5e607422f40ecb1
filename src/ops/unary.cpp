// Unary elementwise math: neg, exp, log, sqrt, rsqrt, pow(x, p), abs. The formulas are
// evaluated by map_elements.hpp; each backward needs either the input x or the output y,
// never both, and unary_op saves only that one.
#include <cmath>
#include <limits>

#include "map_elements.hpp"

namespace microtorch {

using namespace detail::elementwise_map;

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

}  // namespace microtorch
