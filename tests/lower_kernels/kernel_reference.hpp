// The exact references of the runtime kernel tests (tests/lower_kernels/test_*.cpp, one file per
// kernel family of src/lower/runtime): the requantization of mt_kernels.h computed in 128-bit
// arithmetic, the saturation of a result to its type, random operands and multipliers, the
// lowering's multiplier of a real ratio, and the worst error in LSB of a kernel's output
// (MICROTORCH_KERNEL_REPORT=1 prints it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "../../src/lower/runtime/mt_kernels.h"
#include "microtorch/lower/quantize.hpp"

namespace kernel_ref {

// Worst |got - want| in LSB, with the place where it happened (for the failure message).
struct MaxErr {
  double value = 0;
  std::string where;
  void add(double got, double want, const std::string& at = "") {
    const double e = std::fabs(got - want);
    if (e > value) {
      value = e;
      where = at + " got " + std::to_string(got) + " want " + std::to_string(want);
    }
  }
};

inline void report(const char* what, const MaxErr& e) {
  if (std::getenv("MICROTORCH_KERNEL_REPORT")) std::printf("  %-48s max error %.3f LSB\n", what, e.value);
}

#define CHECK_ERR(err, bound)      \
  do {                             \
    INFO((err).where);             \
    CHECK((err).value <= (bound)); \
  } while (0)

using i128 = __int128;

// round(v / 2^s), ties away from zero, exact (s may be negative: a left shift)
inline i128 round_shift(i128 v, int s) {
  if (s <= 0) return s < -60 ? (v == 0 ? 0 : (v > 0 ? i128(1) << 100 : -(i128(1) << 100))) : v * (i128(1) << -s);
  if (s >= 126) return 0;
  const i128 m = v < 0 ? -v : v;
  const i128 r = (m + (i128(1) << (s - 1))) >> s;
  return v < 0 ? -r : r;
}

inline std::int64_t clamp128(i128 v, std::int64_t lo, std::int64_t hi) {
  return v < lo ? lo : v > hi ? hi : static_cast<std::int64_t>(v);
}

// the requantization of mt_kernels.h: round(x m 2^-(31 + s)) (m = 0: round(x 2^-s)), int32
inline std::int64_t ref_rq(std::int64_t x, std::int32_t m, int s) {
  const i128 v = m == 0 ? round_shift(x, s) : round_shift(i128(x) * m, 31 + s);
  return clamp128(v, INT32_MIN, INT32_MAX);
}

template <class T>
std::int64_t lo_of() { return std::numeric_limits<T>::min(); }
template <class T>
std::int64_t hi_of() { return std::numeric_limits<T>::max(); }

// zero + an int32, saturated to T (what mt_out_s8 / mt_out_s16 compute)
template <class T>
std::int64_t out_of(std::int64_t v, std::int64_t zero) {
  return std::min(hi_of<T>(), std::max(lo_of<T>(), v + zero));
}

template <class T>
std::vector<T> random_ints(std::mt19937& g, std::size_t n, std::int64_t lo = std::numeric_limits<T>::min(),
                           std::int64_t hi = std::numeric_limits<T>::max()) {
  std::uniform_int_distribution<std::int64_t> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(g));
  return v;
}

// a random multiplier: |m| in [2^30, 2^31), or 0 (a shift) one time in four
inline std::int32_t random_m(std::mt19937& g, bool may_be_negative = false) {
  if (g() % 4 == 0) return 0;
  const auto m = static_cast<std::int32_t>((1u << 30) + (g() & 0x3FFFFFFFu));
  return may_be_negative && g() % 2 ? -m : m;
}

// quantise a real value: round(x / scale) + zero, saturated to T
template <class T>
T quant(double x, double scale, std::int32_t zero = 0) {
  const double v = std::round(x / scale) + zero;
  return static_cast<T>(std::min<double>(std::max<double>(v, lo_of<T>()), hi_of<T>()));
}

// the (m, s) of a real ratio, as the lowering computes it
inline std::pair<std::int32_t, int> mult(double r) {
  const auto m = microtorch::lower::multiplier(r);
  return {m.m, m.s};
}

}  // namespace kernel_ref
