// Internal: elementwise loops over operands that broadcast (NumPy's rule, shape.hpp), with
// raw pointers: each operand's element offset at every index of the result.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "microtorch/shape.hpp"

namespace microtorch::detail {

/// Element strides that read a contiguous tensor of shape `in` at the indices of `out`, a
/// shape `in` broadcasts to: 0 along the dims where `in` has size 1 or no dim at all.
inline Shape broadcast_strides(const Shape& in, const Shape& out) {
  Shape strides(out.size(), 0);
  const std::size_t lead = out.size() - in.size();
  std::int64_t step = 1;
  for (std::size_t k = in.size(); k-- > 0;) {
    if (in[k] != 1) strides[lead + k] = step;
    step *= in[k];
  }
  return strides;
}

/// f(i, offsets) for every index i of `out`, in row-major order; offsets[k] is operand k's
/// element there (strides[k] from broadcast_strides).
template <std::size_t N, class F>
void for_each_broadcast(const Shape& out, const std::array<Shape, N>& strides, F&& f) {
  std::int64_t n = 1;
  for (const auto s : out) n *= s;
  if (n == 0) return;
  const std::size_t nd = out.size();
  std::array<std::int64_t, N> row{}, step{};
  // No operand broadcasts (the common case): every offset is i, in one loop the compiler
  // can vectorize.
  bool flat = true;
  std::int64_t contiguous = 1;
  for (std::size_t d = nd; d-- > 0;) {
    for (std::size_t k = 0; k < N; ++k) flat = flat && (out[d] == 1 || strides[k][d] == contiguous);
    contiguous *= out[d];
  }
  if (flat) {
    for (std::int64_t i = 0; i < n; ++i) {
      row.fill(i);
      f(i, static_cast<const std::array<std::int64_t, N>&>(row));
    }
    return;
  }
  for (std::size_t k = 0; k < N; ++k) step[k] = strides[k][nd - 1];
  const std::int64_t inner = out[nd - 1];
  std::vector<std::int64_t> index(nd, 0);  // of the outer dims; the last one is the inner loop
  for (std::int64_t i = 0; i < n; i += inner) {
    std::array<std::int64_t, N> at = row;
    for (std::int64_t j = 0; j < inner; ++j) {
      f(i + j, static_cast<const std::array<std::int64_t, N>&>(at));
      for (std::size_t k = 0; k < N; ++k) at[k] += step[k];
    }
    for (std::size_t d = nd - 1; d-- > 0;) {  // the next row: an odometer over the outer dims
      for (std::size_t k = 0; k < N; ++k) row[k] += strides[k][d];
      if (++index[d] < out[d]) break;
      for (std::size_t k = 0; k < N; ++k) row[k] -= strides[k][d] * out[d];
      index[d] = 0;
    }
  }
}

}  // namespace microtorch::detail
