// Internal: the row kernels of softmax / log_softmax, shared with attention.
//
// Rows are walked with raw pointers over the (outer, n, inner) layout; contiguous rows
// (inner = 1, the usual last-dim softmax and every attention row) take the SIMD kernels
// softmax_row / softmax_grad_row. A row that is entirely -inf (every position masked) has
// no distribution: softmax defines it as all zeros with zero gradient instead of 0/0 = NaN.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "common.hpp"

namespace microtorch::detail {

// y = exp(x - m) / sum(exp(x - m)), m = max(x), over one contiguous row of n (y may be x).
template <class T>
void softmax_row(const T* x, T* y, std::int64_t n) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = B::size;
  const std::int64_t nv = n - n % W;
  T m = -std::numeric_limits<T>::infinity();
  if (nv > 0) {
    B bm = B::load_unaligned(x);
    for (std::int64_t j = W; j < nv; j += W) bm = xsimd::max(bm, B::load_unaligned(x + j));
    alignas(64) T lanes[W];
    bm.store_aligned(lanes);
    for (T v : lanes) m = std::max(m, v);
  }
  for (std::int64_t j = nv; j < n; ++j) m = std::max(m, x[j]);
  if (m == -std::numeric_limits<T>::infinity()) {  // fully masked (or empty) row
    std::fill(y, y + n, T(0));
    return;
  }
  const B bm(m);
  B bsum(T(0));
  for (std::int64_t j = 0; j < nv; j += W) {
    const B e = xsimd::exp(B::load_unaligned(x + j) - bm);
    e.store_unaligned(y + j);
    bsum += e;
  }
  T total = xsimd::hadd(bsum);
  for (std::int64_t j = nv; j < n; ++j) total += (y[j] = std::exp(x[j] - m));
  const T inv = T(1) / total;
  const B binv(inv);
  for (std::int64_t j = 0; j < nv; j += W) (B::load_unaligned(y + j) * binv).store_unaligned(y + j);
  for (std::int64_t j = nv; j < n; ++j) y[j] *= inv;
}

// dx = y * (g - sum(g * y)) * scale over one contiguous row of n (dx may be g).
template <class T>
void softmax_grad_row(const T* y, const T* g, T* dx, std::int64_t n, T scale = T(1)) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = B::size;
  const std::int64_t nv = n - n % W;
  B bacc(T(0));
  for (std::int64_t j = 0; j < nv; j += W) bacc += B::load_unaligned(g + j) * B::load_unaligned(y + j);
  T acc = xsimd::hadd(bacc);
  for (std::int64_t j = nv; j < n; ++j) acc += g[j] * y[j];
  const B bacc_all(acc), bscale(scale);
  for (std::int64_t j = 0; j < nv; j += W) {
    const B yj = B::load_unaligned(y + j);
    (yj * (B::load_unaligned(g + j) - bacc_all) * bscale).store_unaligned(dx + j);
  }
  for (std::int64_t j = nv; j < n; ++j) dx[j] = y[j] * (g[j] - acc) * scale;
}

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
