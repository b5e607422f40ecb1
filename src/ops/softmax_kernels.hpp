// Internal: the row kernels of softmax / log_softmax.
//
// Rows are walked with raw pointers over the (outer, n, inner) layout; contiguous rows
// (inner = 1: the usual last-dim softmax) take the SIMD kernels
// softmax_row / softmax_grad_row of softmax_rows.cpp. A row that is entirely -inf (every
// position masked) has no distribution: softmax defines it as all zeros with zero
// gradient instead of 0/0 = NaN.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "common.hpp"

namespace microtorch::detail {

/// y = exp(x - m) / sum(exp(x - m)), m = max(x), over one contiguous row of n (y may be x);
/// a row of only -inf gives zeros. In softmax_rows.cpp (SIMD for float).
void softmax_row(const float* x, float* y, std::int64_t n);
void softmax_row(const double* x, double* y, std::int64_t n);
/// dx = y * (g - sum(g * y)) * scale over one contiguous row of n (dx may be g).
void softmax_grad_row(const float* y, const float* g, float* dx, std::int64_t n, float scale = 1.0f);
void softmax_grad_row(const double* y, const double* g, double* dx, std::int64_t n, double scale = 1.0);

template <class T>
T row_max(const T* row, std::int64_t n, std::int64_t stride) {
  T m = -std::numeric_limits<T>::infinity();
  for (std::int64_t k = 0; k < n; ++k) m = std::max(m, row[k * stride]);
  return m;
}

// y = exp(x - m) / sum(exp(x - m)), m = max(x)     (or y = x - m - log sum exp(x - m))
template <class T>
void softmax_rows(const T* x, T* y, const detail::DimSplit& s, bool log) {
  if (s.inner == 1 && !log) {
    for (std::int64_t o = 0; o < s.outer; ++o) softmax_row(x + o * s.n, y + o * s.n, s.n);
    return;
  }
  for (std::int64_t o = 0; o < s.outer; ++o) {
    for (std::int64_t i = 0; i < s.inner; ++i) {
      const T* xr = x + o * s.n * s.inner + i;
      T* yr = y + o * s.n * s.inner + i;
      const T m = row_max(xr, s.n, s.inner);
      if (m == -std::numeric_limits<T>::infinity()) {  // fully masked (or empty) row
        for (std::int64_t k = 0; k < s.n; ++k) yr[k * s.inner] = log ? m : T(0);
        continue;
      }
      T total = 0;
      for (std::int64_t k = 0; k < s.n; ++k) total += std::exp(xr[k * s.inner] - m);
      if (log) {
        const T shift = m + std::log(total);
        for (std::int64_t k = 0; k < s.n; ++k) yr[k * s.inner] = xr[k * s.inner] - shift;
      } else {
        const T inv = T(1) / total;
        for (std::int64_t k = 0; k < s.n; ++k) yr[k * s.inner] = std::exp(xr[k * s.inner] - m) * inv;
      }
    }
  }
}

// softmax:      dx = y * (dy - sum(dy * y))
// log_softmax:  dx = dy - exp(y) * sum(dy)      (a fully masked row, y = -inf, gets 0)
template <class T>
void softmax_backward_rows(const T* y, const T* g, T* dx, const detail::DimSplit& s, bool log) {
  if (s.inner == 1 && !log) {
    for (std::int64_t o = 0; o < s.outer; ++o) softmax_grad_row(y + o * s.n, g + o * s.n, dx + o * s.n, s.n);
    return;
  }
  for (std::int64_t o = 0; o < s.outer; ++o) {
    for (std::int64_t i = 0; i < s.inner; ++i) {
      const std::int64_t base = o * s.n * s.inner + i;
      T acc = 0;
      for (std::int64_t k = 0; k < s.n; ++k) {
        const std::int64_t j = base + k * s.inner;
        acc += log ? g[j] : g[j] * y[j];
      }
      for (std::int64_t k = 0; k < s.n; ++k) {
        const std::int64_t j = base + k * s.inner;
        if (log) {
          dx[j] = y[j] == -std::numeric_limits<T>::infinity() ? T(0) : g[j] - std::exp(y[j]) * acc;
        } else {
          dx[j] = y[j] * (g[j] - acc);
        }
      }
    }
  }
}

}  // namespace microtorch::detail
