// Comparisons and logic (results are bool, never differentiable), where and masked_fill:
// selections and comparisons, element by element over the broadcast operands.
#include <array>
#include <cmath>

#include "broadcast.hpp"
#include "common.hpp"

namespace microtorch {

using detail::broadcast_strides;
using detail::for_each_broadcast;

namespace {

Tensor require_bool(const Tensor& t, const char* op) {
  if (t.dtype() != Dtype::Bool) {
    throw DtypeError(fmt::format("{}: expects a bool tensor, got {} of shape {}; build masks with comparisons "
                                 "(x > 0) or convert with .to(kBool)",
                                 op, dtype_name(t.dtype()), shape_str(t.shape())));
  }
  return t;
}

// Comparisons run in the promoted dtype; bools compare as int64 (false < true).
Dtype compare_dtype(const Tensor& a, const Tensor& b) {
  const Dtype d = promote_types(a.dtype(), b.dtype());
  return d == Dtype::Bool ? Dtype::Int64 : d;
}

/// The bool tensor f(a, b), elementwise over the broadcast shape `out`, for a and b of type T.
template <class T, class F>
Tensor bool_map(const Tensor& a, const Tensor& b, const Shape& out, F f) {
  Tensor y = Tensor::empty(out, Dtype::Bool);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  bool* py = y.data<bool>();
  const std::array<Shape, 2> strides{broadcast_strides(a.shape(), out), broadcast_strides(b.shape(), out)};
  for_each_broadcast(out, strides, [&](std::int64_t i, const auto& at) { py[i] = f(pa[at[0]], pb[at[1]]); });
  return y;
}

/// pred(x, y) elementwise in the promoted dtype (broadcasting), giving bool.
template <class Pred>
Tensor compare_map(const Tensor& a, const Tensor& b, const char* op, Pred pred) {
  const Shape out = broadcast_shapes(a.shape(), b.shape(), op);
  const Dtype d = compare_dtype(a, b);
  const Tensor ca = a.dtype() == d ? a : a.detach().to(d);
  const Tensor cb = b.dtype() == d ? b : b.detach().to(d);
  return detail::visit_numeric(d, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return bool_map<T>(ca, cb, out, [pred](T x, T y) -> bool { return pred(x, y); });
  });
}

/// f over the two operands as bools (broadcasting), any dtype read as "non-zero".
template <class F>
Tensor logical_map(const Tensor& a, const Tensor& b, const char* op, F f) {
  const Shape out = broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor ca = a.dtype() == Dtype::Bool ? a : a.detach().to(Dtype::Bool);
  const Tensor cb = b.dtype() == Dtype::Bool ? b : b.detach().to(Dtype::Bool);
  return bool_map<bool>(ca, cb, out, [f](bool x, bool y) -> bool { return f(x, y); });
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare_map(a, b, "eq", [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare_map(a, b, "ne", [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare_map(a, b, "lt", [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare_map(a, b, "le", [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare_map(a, b, "gt", [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare_map(a, b, "ge", [](auto x, auto y) { return x >= y; });
}

Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, double b) { return eq(a, detail::scalar_like(a, b)); }
Tensor operator!=(const Tensor& a, double b) { return ne(a, detail::scalar_like(a, b)); }
Tensor operator<(const Tensor& a, double b) { return lt(a, detail::scalar_like(a, b)); }
Tensor operator<=(const Tensor& a, double b) { return le(a, detail::scalar_like(a, b)); }
Tensor operator>(const Tensor& a, double b) { return gt(a, detail::scalar_like(a, b)); }
Tensor operator>=(const Tensor& a, double b) { return ge(a, detail::scalar_like(a, b)); }

// Logical ops treat any non-zero value as true, as torch.logical_* do.
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return logical_map(a, b, "logical_and", [](bool x, bool y) { return x && y; });
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return logical_map(a, b, "logical_or", [](bool x, bool y) { return x || y; });
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return logical_map(a, b, "logical_xor", [](bool x, bool y) { return x != y; });
}
Tensor logical_not(const Tensor& a) {
  const Tensor b = a.dtype() == Dtype::Bool ? a : a.detach().to(Dtype::Bool);
  Tensor y = Tensor::empty(b.shape(), Dtype::Bool);
  const bool* p = b.data<bool>();
  bool* q = y.data<bool>();
  for (std::int64_t i = 0, n = b.numel(); i < n; ++i) q[i] = !p[i];
  return y;
}
// The operators are bitwise in PyTorch; on bool tensors that is logic, which is all they accept here.
Tensor operator&(const Tensor& a, const Tensor& b) { return logical_and(require_bool(a, "&"), require_bool(b, "&")); }
Tensor operator|(const Tensor& a, const Tensor& b) { return logical_or(require_bool(a, "|"), require_bool(b, "|")); }
Tensor operator^(const Tensor& a, const Tensor& b) { return logical_xor(require_bool(a, "^"), require_bool(b, "^")); }
Tensor operator~(const Tensor& a) { return logical_not(require_bool(a, "~")); }

// y = cond ? a : b ;  da = cond ? dy : 0, db = cond ? 0 : dy
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  require_bool(cond, "where");
  const Shape out = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  const Dtype d = promote_types(a.dtype(), b.dtype());
  if (d == Dtype::Bool) return (cond & a) | (~cond & b);
  const Tensor ca = a.dtype() == d ? a : a.detach().to(d);
  const Tensor cb = b.dtype() == d ? b : b.detach().to(d);
  Tensor y = detail::visit_numeric(d, "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor r = Tensor::empty(out, d);
    const bool* pc = cond.data<bool>();
    const T* pa = ca.data<T>();
    const T* pb = cb.data<T>();
    T* py = r.data<T>();
    const std::array<Shape, 3> strides{broadcast_strides(cond.shape(), out), broadcast_strides(ca.shape(), out),
                                       broadcast_strides(cb.shape(), out)};
    for_each_broadcast(out, strides, [&](std::int64_t i, const auto& at) { py[i] = pc[at[0]] ? pa[at[1]] : pb[at[2]]; });
    return r;
  });
  return autograd::record(y, "where", {a, b}, autograd::Saved{cond},
                          [](const Tensor& g, const autograd::NeedsGrad& n, const TensorList& s) {
    const Tensor& cond = s[0];
    const Tensor zero = zeros({}, g.dtype());
    return TensorList{n[0] ? where(cond, g, zero) : Tensor(), n[1] ? where(cond, zero, g) : Tensor()};
  });
}

// y = mask ? value : x ;  dx = mask ? 0 : dy
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  require_bool(mask, "masked_fill");
  if (broadcast_shapes(x.shape(), mask.shape(), "masked_fill") != x.shape()) {
    throw ShapeError(fmt::format("masked_fill: mask of shape {} must broadcast to the input's shape {}",
                                 shape_str(mask.shape()), shape_str(x.shape())));
  }
  if (x.dtype() == Dtype::Bool) return value != 0.0 ? (x | mask) : (x & ~mask);
  Tensor y = detail::visit_numeric(x.dtype(), "masked_fill", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = static_cast<T>(value);
    Tensor r = Tensor::empty(x.shape(), x.dtype());
    const bool* pm = mask.data<bool>();
    const T* px = x.data<T>();
    T* py = r.data<T>();
    const std::array<Shape, 1> strides{broadcast_strides(mask.shape(), x.shape())};
    for_each_broadcast(x.shape(), strides, [&](std::int64_t i, const auto& at) { py[i] = pm[at[0]] ? v : px[i]; });
    return r;
  });
  return autograd::record(
      y, "masked_fill", {x}, autograd::Saved{mask},
      [](const Tensor& g, const autograd::NeedsGrad&, const TensorList& s) {
        return TensorList{where(s[0], zeros({}, g.dtype()), g)};
      },
      {{"value", value}});
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return visit_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return std::equal(a.data<T>(), a.data<T>() + a.numel(), b.data<T>());
  });
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  const Tensor ad = a.detach().to(Dtype::Float64);
  const Tensor bd = b.detach().to(Dtype::Float64);
  const Shape out = broadcast_shapes(a.shape(), b.shape(), "allclose");
  const double* pa = ad.data<double>();
  const double* pb = bd.data<double>();
  std::int64_t far = 0;  // a count, not a flag: the loop then vectorizes
  const std::array<Shape, 2> strides{broadcast_strides(a.shape(), out), broadcast_strides(b.shape(), out)};
  for_each_broadcast(out, strides, [&](std::int64_t, const auto& at) {
    const double x = pa[at[0]], y = pb[at[1]];
    far += !(std::abs(x - y) <= atol + rtol * std::abs(y));  // a NaN is far
  });
  return far == 0;
}

bool has_nonfinite(const Tensor& x) {
  if (!x.is_floating_point()) return false;
  return visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const T* p = x.data<T>();
      for (std::int64_t i = 0, n = x.numel(); i < n; ++i) {
        if (!std::isfinite(p[i])) return true;
      }
    }
    return false;
  });
}

}  // namespace microtorch
