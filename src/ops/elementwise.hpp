// Internal: the broadcasting kernel behind the binary elementwise ops.
#pragma once

#include <array>

#include "broadcast.hpp"
#include "common.hpp"

namespace microtorch::detail {

/// The dtype of an arithmetic op on a and b: promote_types, but bool with bool is refused.
Dtype arithmetic_dtype(const Tensor& a, const Tensor& b, const char* op);

/// a and b converted to `compute`, and the shape they broadcast to (ShapeError naming `op`).
struct BinaryOperands {
  Tensor a, b;
  Shape out;
};
inline BinaryOperands binary_operands(const Tensor& a, const Tensor& b, Dtype compute, const char* op) {
  Shape out = broadcast_shapes(a.shape(), b.shape(), op);
  return {a.dtype() == compute ? a : a.detach().to(compute), b.dtype() == compute ? b : b.detach().to(compute),
          std::move(out)};
}

/// f(x, y) elementwise over a and b converted to `compute` (NumPy broadcasting), giving a
/// tensor of `compute`. `compute` must not be bool (bool has no arithmetic). Records nothing.
template <class F>
Tensor binary_map(const Tensor& a, const Tensor& b, Dtype compute, const char* op, F&& f) {
  const BinaryOperands in = binary_operands(a, b, compute, op);
  return visit_numeric(compute, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor y = Tensor::empty(in.out, compute);
    const T* pa = in.a.template data<T>();
    const T* pb = in.b.template data<T>();
    T* py = y.template data<T>();
    const std::array<Shape, 2> strides{broadcast_strides(in.a.shape(), in.out), broadcast_strides(in.b.shape(), in.out)};
    for_each_broadcast(in.out, strides, [&](std::int64_t i, const auto& at) { py[i] = f(pa[at[0]], pb[at[1]]); });
    return y;
  });
}

}  // namespace microtorch::detail
