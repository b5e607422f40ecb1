// Comparisons and logic (results are bool, never differentiable), where and masked_fill.
#include <cmath>

#include <xtensor/xmath.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xvectorize.hpp>

#include "elementwise.hpp"

namespace microtorch {

using detail::binary_map;

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

/// pred(x, y) elementwise in the promoted dtype, giving bool. Everything that reads or
/// writes bool goes through xt::vectorize: xtensor's SIMD path mixes up bool lanes.
template <class Pred>
Tensor compare_map(const Tensor& a, const Tensor& b, const char* op, Pred pred) {
  return binary_map(a, b, compare_dtype(a, b), op,
                    [pred](auto&& A, auto&& B) {
                      using T = typename std::decay_t<decltype(A)>::value_type;
                      return xt::vectorize([pred](T x, T y) -> bool { return pred(x, y); })(A, B);
                    });
}

/// f over the two operands as bool arrays (broadcasting), any dtype read as "non-zero".
template <class F>
Tensor logical_map(const Tensor& a, const Tensor& b, const char* op, F f) {
  broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor ca = a.dtype() == Dtype::Bool ? a : a.detach().to(Dtype::Bool);
  const Tensor cb = b.dtype() == Dtype::Bool ? b : b.detach().to(Dtype::Bool);
  return Tensor::from_array(xt::vectorize([f](bool x, bool y) -> bool { return f(x, y); })(ca.array<bool>(), cb.array<bool>()));
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
  return Tensor::from_array(xt::vectorize([](bool x) -> bool { return !x; })(b.array<bool>()));
}
// The operators are bitwise in PyTorch; on bool tensors that is logic, which is all they accept here.
Tensor operator&(const Tensor& a, const Tensor& b) { return logical_and(require_bool(a, "&"), require_bool(b, "&")); }
Tensor operator|(const Tensor& a, const Tensor& b) { return logical_or(require_bool(a, "|"), require_bool(b, "|")); }
Tensor operator^(const Tensor& a, const Tensor& b) { return logical_xor(require_bool(a, "^"), require_bool(b, "^")); }
Tensor operator~(const Tensor& a) { return logical_not(require_bool(a, "~")); }

// y = cond ? a : b ;  da = cond ? dy : 0, db = cond ? 0 : dy
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  require_bool(cond, "where");
  broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  const Dtype d = promote_types(a.dtype(), b.dtype());
  if (d == Dtype::Bool) return (cond & a) | (~cond & b);
  const Tensor ca = a.dtype() == d ? a : a.detach().to(d);
  const Tensor cb = b.dtype() == d ? b : b.detach().to(d);
  Tensor y = detail::visit_numeric(d, "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Tensor::from_array(xt::vectorize([](bool c, T x, T y) { return c ? x : y; })(cond.array<bool>(), ca.array<T>(), cb.array<T>()));
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
    return Tensor::from_array(xt::vectorize([v](bool m, T e) { return m ? v : e; })(mask.array<bool>(), x.array<T>()));
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
  broadcast_shapes(a.shape(), b.shape(), "allclose");
  return xt::all(xt::abs(ad.array<double>() - bd.array<double>()) <= atol + rtol * xt::abs(bd.array<double>()));
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
