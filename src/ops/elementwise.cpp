// Binary arithmetic with broadcasting: add, sub, mul, div, pow, maximum, minimum.
// Each backward returns gradients of the broadcast shape; the engine sums them back
// to each input's shape (autograd::sum_to).
#include "elementwise.hpp"

#include <xtensor/xmath.hpp>

#include "microtorch/xtensor.hpp"

namespace microtorch {

using autograd::NeedsGrad;
using autograd::record;
using autograd::Saved;

namespace detail {

Dtype arithmetic_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() == Dtype::Bool && b.dtype() == Dtype::Bool) {
    throw DtypeError(fmt::format("{}: both operands are bool, which has no arithmetic; use logical_and/logical_or, "
                                 "or convert with .to(kFloat32)",
                                 op));
  }
  return promote_types(a.dtype(), b.dtype());
}

}  // namespace detail

using detail::arithmetic_dtype;
using detail::binary_map;

// y = a + b ;  da = dy, db = dy
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = binary_map(a, b, arithmetic_dtype(a, b, "add"), "add", [](auto u, auto v) { return u + v; });
  return record(y, "add", {a, b}, [](const Tensor& g) { return TensorList{g, g}; });
}

// y = a - b ;  da = dy, db = -dy
Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor y = binary_map(a, b, arithmetic_dtype(a, b, "sub"), "sub", [](auto u, auto v) { return u - v; });
  return record(y, "sub", {a, b}, [](const Tensor& g, const NeedsGrad& needs) {
    return TensorList{g, needs[1] ? neg(g) : Tensor()};
  });
}

// y = a * b ;  da = dy * b, db = dy * a
Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = binary_map(a, b, arithmetic_dtype(a, b, "mul"), "mul", [](auto u, auto v) { return u * v; });
  return record(y, "mul", {a, b}, Saved{a, b}, [](const Tensor& g, const NeedsGrad& needs, const TensorList& s) {
    return TensorList{needs[0] ? mul(g, s[1]) : Tensor(), needs[1] ? mul(g, s[0]) : Tensor()};
  });
}

// y = a / b (true division: integers give float32) ;  da = dy / b, db = -dy * y / b
Tensor div(const Tensor& a, const Tensor& b) {
  Dtype d = arithmetic_dtype(a, b, "div");
  if (!is_floating(d)) d = Dtype::Float32;
  Tensor y = binary_map(a, b, d, "div", [](auto u, auto v) { return u / v; });
  return record(y, "div", {a, b}, Saved{b, y}, [](const Tensor& g, const NeedsGrad& needs, const TensorList& s) {
    const Tensor &b = s[0], &y = s[1];
    return TensorList{needs[0] ? div(g, b) : Tensor(), needs[1] ? neg(div(mul(g, y), b)) : Tensor()};
  });
}

// y = a ^ b ;  da = dy * b * a^(b-1), db = dy * y * log(a)
Tensor pow(const Tensor& a, const Tensor& b) {
  Dtype d = arithmetic_dtype(a, b, "pow");
  if (!is_floating(d)) d = Dtype::Float32;
  // xtensor's evaluation takes xsimd's pow or std::pow for an element depending on the
  // operands' layout; it stays, so that the results keep their bits.
  const detail::BinaryOperands in = detail::binary_operands(a, b, d, "pow");
  Tensor y = detail::visit_floating(d, "pow", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Tensor::from_array(xt::pow(in.a.template array<T>(), in.b.template array<T>()));
  });
  return record(y, "pow", {a, b}, Saved{a, b, y}, [](const Tensor& g, const NeedsGrad& needs, const TensorList& s) {
    const Tensor &a = s[0], &b = s[1], &y = s[2];
    return TensorList{needs[0] ? mul(g, mul(b, pow(a, sub(b, detail::scalar_like(b, 1.0))))) : Tensor(),
                      needs[1] ? mul(g, mul(y, log(a))) : Tensor()};
  });
}

namespace {

// Shared by maximum and minimum: the gradient goes to the selected operand and is split
// evenly on ties, as in PyTorch.  da = dy * ([a wins] + [tie] / 2), db = dy * ([b wins] + [tie] / 2)
Tensor extremum(const Tensor& a, const Tensor& b, bool is_max) {
  const char* op = is_max ? "maximum" : "minimum";
  Dtype d = promote_types(a.dtype(), b.dtype());
  if (d == Dtype::Bool) return is_max ? logical_or(a, b) : logical_and(a, b);
  // xt::maximum's select(u > v, u, v), xt::minimum's select(u < v, u, v)
  Tensor y = binary_map(a, b, d, op, [is_max](auto u, auto v) { return (is_max ? u > v : u < v) ? u : v; });
  return record(y, op, {a, b}, Saved{a, b}, [is_max](const Tensor& g, const NeedsGrad&, const TensorList& s) {
    const Tensor &a = s[0], &b = s[1];
    Tensor a_wins = (is_max ? gt(a, b) : lt(a, b)).to(g.dtype());
    Tensor tie = eq(a, b).to(g.dtype());
    Tensor half_tie = mul(tie, detail::scalar_like(g, 0.5));
    Tensor b_wins = sub(sub(ones_like(a_wins), a_wins), tie);
    return TensorList{mul(g, add(a_wins, half_tie)), mul(g, add(b_wins, half_tie))};
  });
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(a, b, false); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, detail::scalar_like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, detail::scalar_like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, detail::scalar_like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, detail::scalar_like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(detail::scalar_like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(detail::scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(detail::scalar_like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(detail::scalar_like(b, a), b); }
Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace microtorch
