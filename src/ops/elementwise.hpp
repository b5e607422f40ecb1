// Internal: the broadcasting kernel behind every binary elementwise op.
#pragma once

#include "common.hpp"
#include "microtorch/xtensor.hpp"

namespace microtorch::detail {

/// The dtype of an arithmetic op on a and b: promote_types, but bool with bool is refused.
Dtype arithmetic_dtype(const Tensor& a, const Tensor& b, const char* op);

/// Evaluates f(A, B) over xtensor views of a and b converted to `compute` (NumPy
/// broadcasting); the result takes the expression's value type. `compute` must not be
/// bool (bool has no arithmetic; comparisons compare bools as int64). Records nothing.
template <class F>
Tensor binary_map(const Tensor& a, const Tensor& b, Dtype compute, const char* op, F&& f) {
  broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor ca = a.dtype() == compute ? a : a.detach().to(compute);
  const Tensor cb = b.dtype() == compute ? b : b.detach().to(compute);
  return visit_numeric(compute, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Tensor::from_array(f(ca.template array<T>(), cb.template array<T>()));
  });
}

}  // namespace microtorch::detail
