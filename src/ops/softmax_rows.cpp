// The contiguous softmax row kernels (declared in softmax_kernels.hpp).
//
// float rows are the hot path of softmax and of every attention row: the loops below are
// written so that GCC vectorises them (no calls, selects instead of branches, reductions
// kept in explicit lanes) and are compiled for AVX-512, AVX2 and the baseline ISA, picked
// at load time by CPU features (target_clones). double rows use std::exp.
//
// Without -fno-trapping-math GCC refuses to turn the selects into blends (a compare might
// raise a floating-point exception); microtorch never reads those flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "softmax_kernels.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define MICROTORCH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MICROTORCH_CLONES
#endif

namespace microtorch::detail {

namespace {

constexpr int kLanes = 16;  // independent partial sums: one AVX-512 register of floats

// e^x for x <= 0 (softmax exponentiates x - max): e^x = 2^n e^r with n = round(x log2 e)
// and r = x - n ln 2 in [-ln2/2, ln2/2] (Cody-Waite: ln 2 in two parts), e^r by Cephes'
// expf polynomial (relative error ~1e-7), 2^n put into the exponent bits. Below
// -87.3 (e^x < 2^-126, and -inf from masks) the result is exactly 0.
inline float exp_nonpositive(float x) {
  const float xc = x > -87.3f ? x : -87.3f;
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (xc * 1.44269504088896341f + shifter) - shifter;
  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;  // 2^n
  const float keep = x >= -87.3f ? 1.0f : 0.0f;                           // NaN stays NaN
  return p * __builtin_bit_cast(float, bits) * keep;
}

template <class T>
T lane_sum(const T (&acc)[kLanes]) {
  T s = 0;
  for (T v : acc) s += v;
  return s;
}

}  // namespace

// y = exp(x - m) / sum(exp(x - m)), m = max(x)
MICROTORCH_CLONES void softmax_row(const float* x, float* y, std::int64_t n) {
  const std::int64_t nv = n - n % kLanes;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  for (std::int64_t j = 0; j < nv; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = x[j + l] > lanes[l] ? x[j + l] : lanes[l];
  }
  float m = -std::numeric_limits<float>::infinity();
  for (float v : lanes) m = std::max(m, v);
  for (std::int64_t j = nv; j < n; ++j) m = std::max(m, x[j]);
  if (m == -std::numeric_limits<float>::infinity()) {  // fully masked (or empty) row
    std::fill(y, y + n, 0.0f);
    return;
  }
  for (std::int64_t j = 0; j < n; ++j) y[j] = exp_nonpositive(x[j] - m);
  float acc[kLanes] = {};
  for (std::int64_t j = 0; j < nv; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += y[j + l];
  }
  float total = lane_sum(acc);
  for (std::int64_t j = nv; j < n; ++j) total += y[j];
  const float inv = 1.0f / total;
  for (std::int64_t j = 0; j < n; ++j) y[j] *= inv;
}

// dx = y * (g - sum(g * y)) * scale
MICROTORCH_CLONES void softmax_grad_row(const float* y, const float* g, float* dx, std::int64_t n, float scale) {
  const std::int64_t nv = n - n % kLanes;
  float acc[kLanes] = {};
  for (std::int64_t j = 0; j < nv; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += g[j + l] * y[j + l];
  }
  float dot = lane_sum(acc);
  for (std::int64_t j = nv; j < n; ++j) dot += g[j] * y[j];
  for (std::int64_t j = 0; j < n; ++j) dx[j] = y[j] * (g[j] - dot) * scale;
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
