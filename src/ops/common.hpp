// Internal helpers shared by the op families (not installed).
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::detail {

/// Calls f(TypeTag<T>{}) for float32/float64; throws DtypeError naming `op` otherwise.
template <class F>
decltype(auto) visit_floating(Dtype d, const char* op, F&& f) {
  if (d == Dtype::Float32) return f(TypeTag<float>{});
  if (d == Dtype::Float64) return f(TypeTag<double>{});
  throw DtypeError(fmt::format("{}: expects a floating tensor (float32 or float64), got {}; convert with .to(kFloat32)",
                               op, dtype_name(d)));
}

/// Calls f(TypeTag<T>{}) for float32/float64/int64: the dtypes with arithmetic (xtensor's
/// SIMD kernels have none for bool). Throws DtypeError naming `op` for bool.
template <class F>
decltype(auto) visit_numeric(Dtype d, const char* op, F&& f) {
  if (d == Dtype::Int64) return f(TypeTag<std::int64_t>{});
  if (d == Dtype::Bool) {
    throw DtypeError(fmt::format("{}: bool tensors have no arithmetic; convert with .to(kFloat32) or .to(kInt64)", op));
  }
  return visit_floating(d, op, std::forward<F>(f));
}

/// The dtype a C++ number takes next to tensor `t`: t's own when t is floating (or the
/// number is integral), float32 when a fraction meets an integer or bool tensor.
Dtype scalar_dtype(const Tensor& t, double value);

/// A 0-d tensor holding `value` with scalar_dtype(t, value).
Tensor scalar_like(const Tensor& t, double value);

/// Raw bytes of a tensor's data, for the dtype-agnostic copy kernels.
char* bytes_of(const Tensor& t);

/// Sizes before, at and after `dim`: the (outer, n, inner) decomposition every
/// "along one dim" kernel iterates with raw pointers.
struct DimSplit {
  std::int64_t outer = 1, n = 1, inner = 1;
};
DimSplit split_at(const Shape& shape, std::int64_t dim);

/// The dims of a reduction, wrapped and sorted; empty `dims` means all dims.
std::vector<std::int64_t> reduction_dims(const std::vector<std::int64_t>& dims, std::int64_t ndim, const char* op);

/// The output shape of a reduction over `dims` (kept as 1 when keepdim).
Shape reduced_shape(const Shape& shape, const std::vector<std::int64_t>& dims, bool keepdim);

/// Inverse of a reduction's shape change: the gradient of the reduced result, reshaped
/// with the reduced dims kept as 1 and broadcast back to `shape`.
Tensor expand_reduced(const Tensor& g, const Shape& shape, const std::vector<std::int64_t>& dims, bool keepdim);

}  // namespace microtorch::detail
