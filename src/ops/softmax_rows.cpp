// The contiguous softmax row kernels (declared in softmax_kernels.hpp).
//
// float rows are the hot path of softmax: the kernels below work on 16 floats at a time
// (simd.hpp) and are compiled for AVX-512, AVX2 and the baseline ISA, picked at load time
// by CPU features (target_clones). double rows use std::exp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "simd.hpp"
#include "softmax_kernels.hpp"

namespace microtorch::detail {

namespace {

using simd::exp_nonpositive;
using simd::IVec;
using simd::kLanes;
using simd::load;
using simd::store;
using simd::Vec;

typedef float Vec8 __attribute__((vector_size(8 * sizeof(float))));
typedef float Vec4 __attribute__((vector_size(4 * sizeof(float))));
typedef float Vec2 __attribute__((vector_size(2 * sizeof(float))));

// The lanes folded in halves inside registers, 16 -> 8 -> 4 -> 2 -> 1.
template <class Op>
[[gnu::always_inline]] inline float fold(Vec v, Op op) {
  const Vec8 a = op(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
                    __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
  const Vec4 b = op(__builtin_shufflevector(a, a, 0, 1, 2, 3), __builtin_shufflevector(a, a, 4, 5, 6, 7));
  const Vec2 c = op(__builtin_shufflevector(b, b, 0, 1), __builtin_shufflevector(b, b, 2, 3));
  return op(c[0], c[1]);
}

// NaN-ignoring max and plain sum, for floats and for vectors of floats.
struct MaxOf {
  template <class V>
  V operator()(V a, V b) const { return a > b ? a : b; }
};
struct SumOf {
  template <class V>
  V operator()(V a, V b) const { return a + b; }
};
constexpr MaxOf max_of;
constexpr SumOf sum_of;

}  // namespace

// y = exp(x - m) / sum(exp(x - m)), m = max(x)
MICROTORCH_CLONES void softmax_row(const float* x, float* y, std::int64_t n) {
  const std::int64_t nv = n - n % kLanes;
  float m = -std::numeric_limits<float>::infinity();
  if (nv > 0) {
    Vec vm = load(x);
    for (std::int64_t j = kLanes; j < nv; j += kLanes) {
      const Vec v = load(x + j);
      vm = v > vm ? v : vm;
    }
    m = fold(vm, max_of);
  }
  for (std::int64_t j = nv; j < n; ++j) m = max_of(x[j], m);
  if (m == -std::numeric_limits<float>::infinity()) {  // fully masked (or empty) row
    std::fill(y, y + n, 0.0f);
    return;
  }
  Vec vsum{};
  for (std::int64_t j = 0; j < nv; j += kLanes) {
    const Vec e = exp_nonpositive<Vec, IVec>(load(x + j) - m);
    store(y + j, e);
    vsum += e;
  }
  float total = fold(vsum, sum_of);
  for (std::int64_t j = nv; j < n; ++j) total += (y[j] = exp_nonpositive<float, std::int32_t>(x[j] - m));
  const float inv = 1.0f / total;
  for (std::int64_t j = 0; j < nv; j += kLanes) store(y + j, load(y + j) * inv);
  for (std::int64_t j = nv; j < n; ++j) y[j] *= inv;
}

// dx = y * (g - sum(g * y)) * scale
MICROTORCH_CLONES void softmax_grad_row(const float* y, const float* g, float* dx, std::int64_t n, float scale) {
  const std::int64_t nv = n - n % kLanes;
  Vec vdot{};
  for (std::int64_t j = 0; j < nv; j += kLanes) vdot += load(g + j) * load(y + j);
  float dot = fold(vdot, sum_of);
  for (std::int64_t j = nv; j < n; ++j) dot += g[j] * y[j];
  for (std::int64_t j = 0; j < nv; j += kLanes) store(dx + j, load(y + j) * (load(g + j) - dot) * scale);
  for (std::int64_t j = nv; j < n; ++j) dx[j] = y[j] * (g[j] - dot) * scale;
}

void softmax_row(const double* x, double* y, std::int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  if (m == -std::numeric_limits<double>::infinity()) {
    std::fill(y, y + n, 0.0);
    return;
  }
  double total = 0;
  for (std::int64_t j = 0; j < n; ++j) total += (y[j] = std::exp(x[j] - m));
  for (std::int64_t j = 0; j < n; ++j) y[j] /= total;
}

void softmax_grad_row(const double* y, const double* g, double* dx, std::int64_t n, double scale) {
  double dot = 0;
  for (std::int64_t j = 0; j < n; ++j) dot += g[j] * y[j];
  for (std::int64_t j = 0; j < n; ++j) dx[j] = y[j] * (g[j] - dot) * scale;
}

}  // namespace microtorch::detail
