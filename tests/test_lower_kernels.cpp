// The C99 fixed-point runtime kernels (src/lower/runtime/mt_kernels.c): each kernel against
// an exact integer reference (the requantization of mt_kernels.h computed in 128-bit
// arithmetic) or against double precision, with the worst error in LSB of the output asserted,
// saturation on overflowing inputs, zero points, every type combination, streaming vs
// two-pass attention, and (through tools/mcu/run_kernels_qemu.sh) bit-exactness between the
// host and an emulated Cortex-M.
//
// Measured worst errors (LSB of the output) for the fixed seeds below; each test asserts a
// bound a little above them. MICROTORCH_KERNEL_REPORT=1 prints them.
//   mt_rq, linear, matmul, add, mul, requant, sum, lut: exact (the exact integer result
//   requantized once); strided copy and embedding copy bits
//   div_rows: within 0.5 LSB plus the reciprocal's and the multiplier's relative error
//   mt_recip_u32: y - 2^e/d in [0, 6] units of 2^-30;  mt_rsqrt_u64: [0, 3] units of 2^-30
//   mt_exp2neg_q16: 0.51 LSB of Q16 (every z in [0, 18))
//   tanh / sigmoid / gelu (int16 inputs, every input, real scales): see the report
//   softmax: 1.10 LSB of Q0.15, 0.5 of 8-bit outputs;  layernorm: 0.56 (s16), 0.55 (s8)
//   attention: streaming 1.30 LSB (s16), 0.50 (s8); two-pass 4.13 / 0.51
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

#include "../src/lower/runtime/mt_kernels.h"
#include "microtorch/lower/quantize.hpp"

#ifndef MICROTORCH_SOURCE_DIR
#define MICROTORCH_SOURCE_DIR "."
#endif

namespace {

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

void report(const char* what, const MaxErr& e) {
  if (std::getenv("MICROTORCH_KERNEL_REPORT")) std::printf("  %-48s max error %.3f LSB\n", what, e.value);
}

#define CHECK_ERR(err, bound)      \
  do {                             \
    INFO((err).where);             \
    CHECK((err).value <= (bound)); \
  } while (0)

using i128 = __int128;

// round(v / 2^s), ties away from zero, exact (s may be negative: a left shift)
i128 round_shift(i128 v, int s) {
  if (s <= 0) return s < -60 ? (v == 0 ? 0 : (v > 0 ? i128(1) << 100 : -(i128(1) << 100))) : v * (i128(1) << -s);
  if (s >= 126) return 0;
  const i128 m = v < 0 ? -v : v;
  const i128 r = (m + (i128(1) << (s - 1))) >> s;
  return v < 0 ? -r : r;
}

std::int64_t clamp128(i128 v, std::int64_t lo, std::int64_t hi) {
  return v < lo ? lo : v > hi ? hi : static_cast<std::int64_t>(v);
}

// the requantization of mt_kernels.h: round(x m 2^-(31 + s)) (m = 0: round(x 2^-s)), int32
std::int64_t ref_rq(std::int64_t x, std::int32_t m, int s) {
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
std::int32_t random_m(std::mt19937& g, bool may_be_negative = false) {
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
std::pair<std::int32_t, int> mult(double r) {
  const auto m = microtorch::lower::multiplier(r);
  return {m.m, m.s};
}

double phi(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }

}  // namespace

// ------------------------------------------------------------------------------------
// Rounding and requantization
// ------------------------------------------------------------------------------------

TEST_CASE("lower kernels: the rounding shift rounds half away from zero and saturates") {
  CHECK(mt_rshift_s32(5, 1) == 3);
  CHECK(mt_rshift_s32(-5, 1) == -3);
  CHECK(mt_rshift_s32(6, 2) == 2);   // 1.5 -> 2
  CHECK(mt_rshift_s32(-6, 2) == -2);
  CHECK(mt_rshift_s32(7, 2) == 2);   // 1.75 -> 2
  CHECK(mt_rshift_s32(5, 2) == 1);   // 1.25 -> 1
  CHECK(mt_rshift_s32(INT32_MIN, 1) == -(1 << 30));
  CHECK(mt_rshift_s32(INT32_MIN, 31) == -1);
  CHECK(mt_rshift_s32(INT32_MIN, 32) == -1);  // -0.5 -> -1
  CHECK(mt_rshift_s32(INT32_MAX, 32) == 0);
  CHECK(mt_rshift_s32(INT32_MIN, 40) == 0);
  CHECK(mt_rshift_s32(3, -30) == INT32_MAX);  // saturating left shift
  CHECK(mt_rshift_s32(-3, -30) == INT32_MIN);
  CHECK(mt_rshift_s64(INT64_MIN, 63) == -1);
  CHECK(mt_rshift_s64(INT64_MIN, 1) == INT32_MIN);
  CHECK(mt_rshift_s64(INT64_MAX, 64) == 0);
  CHECK(mt_out_s8(1 << 30, -128) == 127);
  CHECK(mt_out_s8(-5, -128) == -128);
  CHECK(mt_out_s8(200, -128) == 72);
  CHECK(mt_out_s16(INT32_MIN, 0) == -32768);
  std::mt19937 g(1);
  std::uniform_int_distribution<std::int64_t> d64(INT64_MIN, INT64_MAX);
  std::uniform_int_distribution<int> ds(-40, 70);
  for (int i = 0; i < 200000; ++i) {
    const std::int64_t x = d64(g) >> (i % 64);
    const int s = ds(g);
    REQUIRE(mt_rshift_s64(x, s) == ref_rq(x, 0, s));
    const auto x32 = static_cast<std::int32_t>(x);
    REQUIRE(mt_rshift_s32(x32, s) == ref_rq(x32, 0, s));
  }
  // mt_rshift_within (the adds' and LayerNorm's fast path): the same integers for
  // |x| < 2^bits, bits - 30 <= shift <= bits, ties of both signs and the range ends included
  for (const int bits : {48, 56, 61}) {
    CAPTURE(bits);
    const std::int64_t top = (std::int64_t{1} << bits) - 1;
    for (int s = bits - 30; s <= bits; ++s) {
      CAPTURE(s);
      const std::int64_t half = std::int64_t{1} << (s - 1);
      for (const std::int64_t x : {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}, half, -half, half - 1,
                                   1 - half, 3 * half, -3 * half, top, -top, top - half, half - top}) {
        if (x > top || x < -top) continue;  // 3 half at the largest shifts
        CAPTURE(x);
        REQUIRE(mt_rshift_within(x, s, bits) == mt_rshift_s64(x, s));
      }
    }
    std::uniform_int_distribution<std::int64_t> dx(-top, top);
    std::uniform_int_distribution<int> dsh(bits - 30, bits);
    for (int i = 0; i < 100000; ++i) {
      const std::int64_t x = dx(g) >> (i % 40);
      const int s = dsh(g);
      REQUIRE(mt_rshift_within(x, s, bits) == ref_rq(x, 0, s));
    }
  }
}

TEST_CASE("lower kernels: requantization by multiplier and shift is the exact product rounded once") {
  // ties: 3 * 2^30 * 2^-31 = 1.5 -> 2; -1.5 -> -2; m < 0 negates
  CHECK(mt_rq32(3, 1 << 30, 0) == 2);
  CHECK(mt_rq32(-3, 1 << 30, 0) == -2);
  CHECK(mt_rq32(3, -(1 << 30), 0) == -2);
  CHECK(mt_rq(3, 1 << 30, 0) == 2);
  CHECK(mt_rq32(0, 1 << 30, -40) == 0);
  CHECK(mt_rq32(1, 1 << 30, -40) == INT32_MAX);  // saturates
  CHECK(mt_rq(INT64_MIN, INT32_MIN, -31) == INT32_MAX);
  CHECK(mt_rq(INT64_MAX, 1 << 30, 80) == 0);
  std::mt19937 g(2);
  std::uniform_int_distribution<std::int64_t> d64(INT64_MIN, INT64_MAX);
  std::uniform_int_distribution<int> ds(-40, 100);
  for (int i = 0; i < 300000; ++i) {
    const std::int64_t x = d64(g) >> (i % 64);
    const std::int32_t m = random_m(g, true);
    const int s = ds(g) % (m == 0 ? 70 : 100);
    INFO("x=" << x << " m=" << m << " s=" << s);
    REQUIRE(mt_rq(x, m, s) == ref_rq(x, m, s));
    const auto x32 = static_cast<std::int32_t>(x);
    REQUIRE(mt_rq32(x32, m, s) == ref_rq(x32, m, s));
  }
  // the lowering's multipliers represent their ratios to 2^-31 relatively, powers of two exactly
  for (const double r : {1.0, 0.5, 0.75, 3.0, 1e-7, 12345.678, -0.3, 2.0 / 3.0}) {
    const auto m = microtorch::lower::multiplier(r);
    CHECK(std::abs(m.value() / r - 1) <= std::ldexp(1.0, -30));
    if (r == 1.0 || r == 0.5) CHECK(m.m == 0);  // a plain shift
    if (m.m != 0) CHECK(std::abs(static_cast<std::int64_t>(m.m)) >= (std::int64_t{1} << 30));
  }
}

TEST_CASE("lower kernels: reciprocal, inverse square root and 2^-z without division") {
  double lo = 1e9, hi = -1e9;
  for (std::uint64_t d = 1; d < (1ull << 32); d += d < 100000 ? 1 : d / 20000 + 7) {
    int e = 0;
    const std::uint32_t y = mt_recip_u32(static_cast<std::uint32_t>(d), &e);
    const double err = static_cast<double>(y - std::ldexp(1.0L / d, e));
    lo = std::min(lo, err), hi = std::max(hi, err);
    REQUIRE(y > (1u << 30));
    REQUIRE(y <= (1u << 31));
  }
  CHECK(lo >= 0.0);  // never below 1/d: quotients round ties correctly
  CHECK(hi <= 6.0);
  int e = 0;
  CHECK(mt_recip_u32(64, &e) == 0x80000000u);
  CHECK(e == 37);
  CHECK(mt_recip_u32(0x80000001u, &e) == 0x80000000u);  // 1/mu just below 2: clamped to 2^31
  CHECK(e == 62);
  const std::uint32_t third = mt_recip_u32(3, &e);  // 1/3 = 0x55555555.55 * 2^-32
  CHECK(e == 32);
  CHECK(third >= 0x55555556u);
  CHECK(third <= 0x5555555Bu);
  CHECK(mt_recip_u32(0, &e) == 0xFFFFFFFFu);

  lo = 1e9, hi = -1e9;
  for (std::uint64_t v = 1; v < (1ull << 62); v += v < 100000 ? 1 : v / 20000 + 3) {
    const std::uint32_t y = mt_rsqrt_u64(v, &e);
    REQUIRE(y > (1u << 30));
    REQUIRE(y <= (1u << 31));
    const double err = static_cast<double>(y - std::ldexp(1.0L / std::sqrt(static_cast<long double>(v)), e));
    lo = std::min(lo, err), hi = std::max(hi, err);
  }
  CHECK(lo >= -0.5);
  CHECK(hi <= 3.5);

  MaxErr ex;
  for (std::uint32_t z = 0; z < 18u * 65536u; ++z)
    ex.add(mt_exp2neg_q16(z), 65536.0 * std::exp2(-static_cast<double>(z) / 65536.0), "z=" + std::to_string(z));
  report("exp2neg_q16 (Q16)", ex);
  CHECK_ERR(ex, 1.2);
  CHECK(mt_exp2neg_q16(0) == 65536u);
  CHECK(mt_exp2neg_q16(65536) == 32768u);
  CHECK(mt_exp2neg_q16(0xFFFFFFFFu) == 0u);
}

// ------------------------------------------------------------------------------------
// Linear, matmul, elementwise: exact integer results, requantized once
// ------------------------------------------------------------------------------------

namespace {

template <class TX, class TW, class TB, class TY>
using LinearFn = void (*)(const TX*, const TW*, const TB*, TY*, int, int, int, int, const std::int32_t*, int,
                          std::int32_t, std::int32_t);

template <class TX, class TW, class TB, class TY>
void check_linear(LinearFn<TX, TW, TB, TY> fn, int rows, int in, int out, bool bias, bool per_channel,
                  std::int32_t y_zero, bool relu, std::uint32_t seed, int x_stride = 0) {
  std::mt19937 g(seed);
  const int xs = x_stride > 0 ? x_stride : in;  // rows of x at a stride: the padding must be ignored
  const auto x = random_ints<TX>(g, static_cast<std::size_t>(rows * xs));
  const auto w = random_ints<TW>(g, static_cast<std::size_t>(out * in));
  auto stored = w;  // as the lowering stores W: in pair order when x and W differ in width
  if (sizeof(TX) != sizeof(TW)) microtorch::lower::pair_order(stored, in);
  const auto b = random_ints<TB>(g, static_cast<std::size_t>(out), -(std::int64_t{1} << 30), std::int64_t{1} << 30);
  // multipliers that keep the outputs in range for typical sums, some saturating
  std::vector<std::int32_t> rq;
  std::uniform_int_distribution<int> ds(sizeof(TX) + sizeof(TW) == 2 ? -8 : 0, sizeof(TX) + sizeof(TW) == 2 ? 8 : 24);
  for (int c = 0; c < (per_channel ? out : 1); ++c) rq.push_back(random_m(g)), rq.push_back(ds(g));
  std::vector<TY> y(static_cast<std::size_t>(rows * out));
  const std::int32_t y_min = relu ? y_zero : static_cast<std::int32_t>(lo_of<TY>());
  fn(x.data(), stored.data(), bias ? b.data() : nullptr, y.data(), rows, in, out, x_stride, rq.data(),
     per_channel ? 1 : 0, y_zero, y_min);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      std::int64_t acc = bias ? b[o] : 0;
      for (int i = 0; i < in; ++i) acc += static_cast<std::int64_t>(x[r * xs + i]) * w[o * in + i];
      const int c = per_channel ? 2 * o : 0;
      const std::int64_t want = std::max<std::int64_t>(y_min, out_of<TY>(ref_rq(acc, rq[c], rq[c + 1]), y_zero));
      REQUIRE(y[r * out + o] == want);
    }
}

}  // namespace

TEST_CASE("lower kernels: linear equals the exact x W^T + b requantized per channel, for every type combination") {
  // int32 accumulation for int8 x int8, int32 chunks of 511 terms for int16 x int8 (and the
  // int64 path beyond), int64 for int16 x int16: full-range random operands hit every bound
  check_linear(mt_linear_s8_s8_s8, 4, 33, 6, true, true, -7, false, 16);
  check_linear(mt_linear_s8_s8_s8, 2, 2000, 3, false, false, 0, false, 17);
  check_linear(mt_linear_s8_s8_s8, 4, 16, 3, true, true, -128, true, 20, 17);  // rows in place, fused relu
  check_linear(mt_linear_s8_s8_s16, 3, 40, 5, true, true, 0, false, 21);
  check_linear(mt_linear_s8_s16_s8, 3, 40, 5, true, true, 5, false, 22);
  check_linear(mt_linear_s8_s16_s16, 2, 700, 4, true, false, 0, true, 23);
  check_linear(mt_linear_s16_s8_s8, 3, 37, 5, true, true, 3, false, 24);
  check_linear(mt_linear_s16_s8_s16, 2, 511, 4, false, true, 0, false, 25);
  check_linear(mt_linear_s16_s8_s16, 2, 1500, 3, true, true, 0, false, 26);
  check_linear(mt_linear_s16_s8_s16, 5, 16, 4, true, true, 0, false, 27, 48);
  check_linear(mt_linear_s16_s16_s8, 3, 64, 7, true, false, -100, false, 28);
  check_linear(mt_linear_s16_s16_s16, 3, 64, 7, true, true, 0, false, 29);
  check_linear(mt_linear_s16_s16_s16, 2, 700, 3, false, true, 0, true, 30, 0);
  check_linear(mt_linear_s16_s8_s16, 4, 515, 5, true, true, 0, false, 31);  // 508-term chunks, 3 in order
  check_linear(mt_linear_s8_s16_s8, 3, 6, 3, true, true, 0, false, 32);

  // pair order: the middle two of every four weights of a row swapped, the last in % 4 kept
  std::vector<int> order{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  microtorch::lower::pair_order(order, 7);
  CHECK(order == std::vector<int>{0, 2, 1, 3, 4, 5, 6, 7, 9, 8, 10, 11, 12, 13});
  microtorch::lower::pair_order(order, 7);
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});

  // all-extreme inputs: the int32 fast path at its bound, no overflow
  std::vector<std::int16_t> x(511, -32768);
  std::vector<std::int8_t> w(511, -128);
  std::int16_t y = 0;
  const std::int32_t saturate[2] = {0, 0}, down[2] = {0, 22};
  mt_linear_s16_s8_s16(x.data(), w.data(), nullptr, &y, 1, 511, 1, 0, saturate, 0, 0, -32768);
  CHECK(y == 32767);
  mt_linear_s16_s8_s16(x.data(), w.data(), nullptr, &y, 1, 511, 1, 0, down, 0, 0, -32768);
  CHECK(y == 511);
}

TEST_CASE("lower kernels: batched matmul equals the exact integer product requantized, both layouts of b") {
  std::mt19937 g(20);
  const int B = 2, M = 5, K = 19, N = 7;
  const auto a16 = random_ints<std::int16_t>(g, B * M * K), b16 = random_ints<std::int16_t>(g, B * K * N);
  const auto a8 = random_ints<std::int8_t>(g, B * M * K), b8 = random_ints<std::int8_t>(g, B * K * N);
  std::vector<std::int16_t> y16(B * M * N);
  std::vector<std::int8_t> y8(B * M * N);
  for (int bt : {0, 1}) {
    CAPTURE(bt);
    const std::int32_t m16 = random_m(g), m8 = random_m(g);
    mt_matmul_s16(a16.data(), b16.data(), y16.data(), B, M, K, N, bt, m16, 20);
    mt_matmul_s8(a8.data(), b8.data(), y8.data(), B, M, K, N, bt, m8, 9);
    for (int t = 0; t < B; ++t)
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          std::int64_t s16 = 0, s8 = 0;
          for (int k = 0; k < K; ++k) {
            const int bi = bt ? t * K * N + n * K + k : t * K * N + k * N + n;
            s16 += static_cast<std::int64_t>(a16[t * M * K + m * K + k]) * b16[bi];
            s8 += static_cast<std::int64_t>(a8[t * M * K + m * K + k]) * b8[bi];
          }
          REQUIRE(y16[t * M * N + m * N + n] == out_of<std::int16_t>(ref_rq(s16, m16, 20), 0));
          REQUIRE(y8[t * M * N + m * N + n] == out_of<std::int8_t>(ref_rq(s8, m8, 9), 0));
        }
  }
}

namespace {

template <class TA, class TB, class TY>
using AddFn = void (*)(const TA*, const TB*, int, TY*, int, std::int32_t, std::int32_t, std::int32_t, int, std::int32_t);

template <class TA, class TB, class TY>
void check_add(AddFn<TA, TB, TY> fn, std::uint32_t seed) {
  std::mt19937 g(seed);
  const int n = 1200;
  const auto a = random_ints<TA>(g, n);
  const auto b = random_ints<TB>(g, n);
  std::vector<TY> y(n);
  const bool narrow = sizeof(TA) == 1 && sizeof(TB) == 1;  // int32 arithmetic: |ma|, |mb| < 2^21
  const std::int64_t bound = narrow ? (1 << 21) - 1 : (std::int64_t{1} << 30) - 1;
  for (int nb : {1, 3, 40, n}) {
    for (int trial = 0; trial < 12; ++trial) {
      const auto ma = static_cast<std::int32_t>(std::uniform_int_distribution<std::int64_t>(-bound, bound)(g));
      const auto mb = static_cast<std::int32_t>(std::uniform_int_distribution<std::int64_t>(-bound, bound)(g));
      const auto c = static_cast<std::int32_t>(std::uniform_int_distribution<std::int64_t>(-(1 << 28), 1 << 28)(g));
      const int shift = std::uniform_int_distribution<int>(narrow ? 10 : 12, narrow ? 24 : 52)(g);  // int64: both sides of [18, 48]
      const auto zy = static_cast<std::int32_t>(sizeof(TY) == 1 ? std::uniform_int_distribution<int>(-128, 127)(g) : 0);
      INFO("nb=" << nb << " ma=" << ma << " mb=" << mb << " c=" << c << " shift=" << shift);
      fn(a.data(), b.data(), nb, y.data(), n, ma, mb, c, shift, zy);
      for (int i = 0; i < n; ++i) {
        const std::int64_t acc = std::int64_t{a[i]} * ma + std::int64_t{b[i % nb]} * mb + c;
        REQUIRE(y[i] == out_of<TY>(ref_rq(acc, 0, shift), zy));
      }
    }
  }
}

}  // namespace

TEST_CASE("lower kernels: add of two scaled tensors (zero points folded, broadcast) is exact, every type combination") {
  check_add(mt_add_s8_s8_s8, 31);
  check_add(mt_add_s8_s8_s16, 32);
  check_add(mt_add_s8_s16_s8, 33);
  check_add(mt_add_s8_s16_s16, 34);
  check_add(mt_add_s16_s8_s8, 35);
  check_add(mt_add_s16_s8_s16, 36);
  check_add(mt_add_s16_s16_s8, 37);
  check_add(mt_add_s16_s16_s16, 38);
  // the power-of-two scheme: power-of-two multipliers align the operands exactly, one rounding:
  // a Q12 + b Q10 -> Q11 is (a 2^0 + b 2^2) 2^-1
  const std::int16_t a[] = {5, -5, 32767}, b[] = {1, 1, 32767};
  std::int16_t y[3];
  mt_add_s16_s16_s16(a, b, 3, y, 3, 1, 4, 0, 1, 0);
  CHECK(y[0] == 5);   // 9 / 2 = 4.5 -> 5
  CHECK(y[1] == -1);  // -1 / 2 = -0.5 -> -1
  CHECK(y[2] == 32767);
  // in place (y = a), bias of a [4, 3] tensor broadcast along rows
  std::int16_t m[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::int16_t bias[] = {100, 200, 300};
  mt_add_s16_s16_s16(m, bias, 3, m, 12, 1, 1, 0, 0, 0);
  for (int i = 0; i < 12; ++i) CHECK(m[i] == i + 1 + 100 * (i % 3 + 1));
  // nb <= 0: nothing written
  std::int16_t untouched[2] = {7, 7};
  mt_add_s16_s16_s16(a, b, 0, untouched, 2, 1, 1, 0, 0, 0);
  CHECK(untouched[0] == 7);
}

TEST_CASE("lower kernels: multiply and requantize with zero points; relu and type changes") {
  std::mt19937 g(40);
  const int n = 2400;
  const auto a = random_ints<std::int16_t>(g, n), b = random_ints<std::int16_t>(g, n);
  const auto a8 = random_ints<std::int8_t>(g, n), b8 = random_ints<std::int8_t>(g, n);
  std::vector<std::int16_t> y(n);
  std::vector<std::int8_t> y8(n);
  for (int nb : {1, 3, 240, n}) {
    for (int shift : {-3, 0, 7, 15, 20, 31}) {
      const std::int32_t m = random_m(g, true), za = static_cast<std::int32_t>(g() % 256) - 128,
                         zb = static_cast<std::int32_t>(g() % 256) - 128, zy = static_cast<std::int32_t>(g() % 256) - 128;
      INFO("nb=" << nb << " shift=" << shift << " m=" << m);
      mt_mul_s16(a.data(), b.data(), nb, y.data(), n, 0, 0, m, shift, 0);
      mt_mul_s8(a8.data(), b8.data(), nb, y8.data(), n, za, zb, m, shift - 8, zy);
      for (int i = 0; i < n; ++i) {
        const int j = i % nb;
        REQUIRE(y[i] == out_of<std::int16_t>(ref_rq(std::int64_t{a[i]} * b[j], m, shift), 0));
        REQUIRE(y8[i] == out_of<std::int8_t>(ref_rq((std::int64_t{a8[i]} - za) * (b8[j] - zb), m, shift - 8), zy));
      }
    }
  }
  // requant: every combination of types, zero points and the relu clamp
  for (int relu : {0, 1}) {
    for (int trial = 0; trial < 8; ++trial) {
      const std::int32_t m = random_m(g, true), zx = static_cast<std::int32_t>(g() % 256) - 128,
                         zy = static_cast<std::int32_t>(g() % 256) - 128;
      const int s = static_cast<int>(g() % 24) - 8;
      std::vector<std::int16_t> y16(n);
      std::vector<std::int8_t> y88(n);
      mt_requant_s8_s8(a8.data(), y88.data(), n, zx, m, s, zy, relu);
      for (int i = 0; i < n; ++i) {
        const std::int64_t v = relu ? std::max<std::int64_t>(0, a8[i] - zx) : a8[i] - zx;
        REQUIRE(y88[i] == out_of<std::int8_t>(ref_rq(v, m, s), zy));
      }
      mt_requant_s8_s16(a8.data(), y16.data(), n, zx, m, s - 8, 0, relu);
      for (int i = 0; i < n; ++i) {
        const std::int64_t v = relu ? std::max<std::int64_t>(0, a8[i] - zx) : a8[i] - zx;
        REQUIRE(y16[i] == out_of<std::int16_t>(ref_rq(v, m, s - 8), 0));
      }
      mt_requant_s16_s8(a.data(), y88.data(), n, 0, m, s + 8, zy, relu);
      mt_requant_s16_s16(a.data(), y16.data(), n, 0, m, s, 0, relu);
      for (int i = 0; i < n; ++i) {
        const std::int64_t v = relu ? std::max<std::int64_t>(0, a[i]) : a[i];
        REQUIRE(y88[i] == out_of<std::int8_t>(ref_rq(v, m, s + 8), zy));
        REQUIRE(y16[i] == out_of<std::int16_t>(ref_rq(v, m, s), 0));
      }
    }
  }
  // a table lookup per int8 input
  std::vector<std::int8_t> t8(256);
  std::vector<std::int16_t> t16(256);
  for (int i = 0; i < 256; ++i) t8[i] = static_cast<std::int8_t>(127 - i), t16[i] = static_cast<std::int16_t>(i * 100);
  mt_lut_s8_s8(a8.data(), y8.data(), n, t8.data());
  mt_lut_s8_s16(a8.data(), y.data(), n, t16.data());
  for (int i = 0; i < n; ++i) {
    REQUIRE(y8[i] == 127 - (a8[i] + 128));
    REQUIRE(y[i] == (a8[i] + 128) * 100);
  }
}

// ------------------------------------------------------------------------------------
// Activations of int16 inputs: every input against double, at real-valued scales
// ------------------------------------------------------------------------------------

namespace {

using TableFn16 = void (*)(const std::int16_t*, std::int16_t*, int, std::int32_t, int, std::int32_t, int, std::int32_t);
using TableFn8 = void (*)(const std::int16_t*, std::int8_t*, int, std::int32_t, int, std::int32_t, int, std::int32_t);

}  // namespace

TEST_CASE("lower kernels: tanh, sigmoid and gelu of int16 inputs, every input, against double") {
  std::vector<std::int16_t> x(65536), y(65536);
  std::vector<std::int8_t> y8(65536);
  for (int i = 0; i < 65536; ++i) x[i] = static_cast<std::int16_t>(i - 32768);
  struct Case {
    const char* name;
    TableFn16 f16;
    TableFn8 f8;
    double (*ref)(double);
    double out_unit_log2;  // the kernel's result unit: 2^-20 (tanh), 2^-21 (sigmoid), x 2^-16 (gelu)
    bool times_x;
    double bound16, bound8;
  };
  const Case cases[] = {
      {"tanh", mt_tanh_s16_s16, mt_tanh_s16_s8, [](double v) { return std::tanh(v); }, -20, false, 0.9, 0.51},
      {"sigmoid", mt_sigmoid_s16_s16, mt_sigmoid_s16_s8, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, -21, false, 0.75, 0.51},
      {"gelu", mt_gelu_s16_s16, mt_gelu_s16_s8, [](double v) { return v * phi(v); }, -16, true, 1.05, 0.51},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    // scales: Q3.12, a wide range, |x| < 1, and two real-valued ones
    for (const double sx : {std::ldexp(1.0, -12), std::ldexp(1.0, -8), std::ldexp(1.0, -15), 1.7e-4, 6.1e-4}) {
      double ymax = 0;
      for (int i = 0; i < 65536; i += 7) ymax = std::max(ymax, std::abs(c.ref(sx * x[i])));
      const double sy = ymax / 32767.0, sy8 = ymax / 127.0;
      const auto in = mult(std::ldexp(sx, 20));
      const double unit = c.times_x ? sx * std::exp2(c.out_unit_log2) : std::exp2(c.out_unit_log2);
      const auto out = mult(unit / sy), out8 = mult(unit / sy8);
      c.f16(x.data(), y.data(), 65536, in.first, in.second, out.first, out.second, 0);
      c.f8(x.data(), y8.data(), 65536, in.first, in.second, out8.first, out8.second, 0);
      MaxErr e, e8;
      for (int i = 0; i < 65536; ++i) {
        const double v = c.ref(sx * x[i]);
        e.add(y[i], std::min(32767.0, std::max(-32768.0, v / sy)), "x=" + std::to_string(x[i]));
        e8.add(y8[i], std::min(127.0, std::max(-128.0, v / sy8)), "x=" + std::to_string(x[i]));
      }
      report((std::string(c.name) + " s16 -> s16, scale_x " + std::to_string(sx)).c_str(), e);
      report((std::string(c.name) + " s16 -> s8").c_str(), e8);
      CHECK_ERR(e, c.bound16);
      CHECK_ERR(e8, c.bound8);
    }
  }
}

// ------------------------------------------------------------------------------------
// Softmax, layer norm, sums, argmax
// ------------------------------------------------------------------------------------

namespace {

template <class TX, class TY>
using SoftmaxFn = void (*)(const TX*, TY*, int, int, std::int32_t, int, int, std::int32_t);

template <class TX, class TY>
double softmax_error(SoftmaxFn<TX, TY> fn, double sx, int out_bits, std::int32_t zy, std::uint32_t seed) {
  std::mt19937 g(seed);
  MaxErr e;
  const auto in = mult(std::ldexp(sx / std::log(2.0), 16));
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + trial % 97;
    std::normal_distribution<double> d(0.0, 0.25 * (1 + trial % 13));
    std::vector<TX> x(n);
    std::vector<TY> y(n);
    for (auto& v : x) v = quant<TX>(d(g), sx);
    fn(x.data(), y.data(), 1, n, in.first, in.second, out_bits, zy);
    double mx = -1e300, s = 0;
    for (int j = 0; j < n; ++j) mx = std::max(mx, sx * x[j]);
    for (int j = 0; j < n; ++j) s += std::exp(sx * x[j] - mx);
    for (int j = 0; j < n; ++j) {
      const double want = std::ldexp(std::exp(sx * x[j] - mx) / s, out_bits) + zy;
      e.add(y[j], std::min<double>(hi_of<TY>(), want), "n=" + std::to_string(n));
    }
  }
  return e.value;
}

}  // namespace

TEST_CASE("lower kernels: integer softmax within 1.25 LSB of Q0.15 and 0.6 LSB of 8-bit outputs, every type") {
  const double e16 = softmax_error(mt_softmax_s16_s16, std::ldexp(1.0, -10), 15, 0, 40);
  const double e16r = softmax_error(mt_softmax_s16_s16, 3.3e-4, 15, 0, 41);
  const double e8 = softmax_error(mt_softmax_s8_s8, 1.0 / 16, 7, 0, 42);
  const double e8a = softmax_error(mt_softmax_s8_s8, 0.047, 8, -128, 43);  // affine: scale 1/256, zero -128
  const double e816 = softmax_error(mt_softmax_s8_s16, 0.05, 15, 0, 44);
  const double e168 = softmax_error(mt_softmax_s16_s8, 2.1e-3, 8, -128, 45);
  if (std::getenv("MICROTORCH_KERNEL_REPORT")) {
    std::printf("  softmax s16 -> Q0.15 %.3f (real scale %.3f), s8 -> Q0.7 %.3f, s8 -> affine %.3f, s8 -> Q0.15 %.3f, "
                "s16 -> affine s8 %.3f LSB\n",
                e16, e16r, e8, e8a, e816, e168);
  }
  CHECK(e16 <= 1.25);
  CHECK(e16r <= 1.25);
  CHECK(e816 <= 1.25);
  CHECK(e8 <= 0.6);
  CHECK(e8a <= 0.6);
  CHECK(e168 <= 0.6);

  // extremes: the whole int16 range in one row, a constant row, a single element, in place
  std::vector<std::int16_t> x = {-32768, 32767, 0, 32767}, y(4);
  const auto unit = mult(std::ldexp(1.0 / std::log(2.0), 16));  // scale 1
  mt_softmax_s16_s16(x.data(), y.data(), 1, 4, unit.first, unit.second, 15, 0);
  CHECK(y[0] == 0);
  CHECK(y[1] == 16384);
  CHECK(y[2] == 0);
  CHECK(y[3] == 16384);
  std::vector<std::int16_t> c(10, -5), yc(10);
  mt_softmax_s16_s16(c.data(), yc.data(), 1, 10, unit.first, unit.second, 15, 0);
  for (auto v : yc) CHECK(v == 3277);  // 32768 / 10 = 3276.8
  mt_softmax_s16_s16(c.data(), yc.data(), 1, 1, unit.first, unit.second, 15, 0);
  CHECK(yc[0] == 32767);
  std::vector<std::int8_t> one(1, 3), p8(1);
  mt_softmax_s8_s8(one.data(), p8.data(), 1, 1, unit.first, unit.second, 8, -128);  // 1.0 -> 128 - 128 saturates to 127
  CHECK(p8[0] == 127);
}

TEST_CASE("lower kernels: int16 softmax: a row alone gives what it gives among many rows, both exponent paths agree") {
  // int16 inputs take 2^-z(d) from two tables of 256 factors: filled up to the rows' ranges
  // when enough rows are left to pay for them, else each short row writes just its own
  // elements' entries. Both must give the same integers, whatever the row's neighbours.
  std::mt19937 g(46);
  for (int trial = 0; trial < 24; ++trial) {
    const int n = 1 + trial * 7 % 61, rows = 40;
    const int spread = 16 << (trial % 12);  // ranges from 32 (one table) to the whole int16 range
    const auto in = mult(std::ldexp((trial % 3 == 0 ? 2.0 : 0.01) / std::log(2.0), 16));
    std::uniform_int_distribution<int> u(-spread, spread - 1);
    std::vector<std::int16_t> x(rows * n);
    for (auto& v : x) v = static_cast<std::int16_t>(std::clamp(u(g), -32768, 32767));
    std::vector<std::int16_t> all(rows * n), one(n);
    mt_softmax_s16_s16(x.data(), all.data(), rows, n, in.first, in.second, 15, 0);
    for (int r = 0; r < rows; r += 7) {
      mt_softmax_s16_s16(x.data() + r * n, one.data(), 1, n, in.first, in.second, 15, 0);
      for (int j = 0; j < n; ++j)
        CHECK_MESSAGE(one[j] == all[r * n + j], "trial " << trial << " row " << r << " j " << j);
    }
  }
  // The factors' exponents z(v) = rq(v, m, s): the same reals as (m, 0) and (2 m, 1) round to
  // the same integers, one through the kernel's own path for s in [-30, 0], one through mt_rq32
  std::vector<std::int16_t> x(64 * 50), a(x.size()), b(x.size());
  std::uniform_int_distribution<int> u(-32768, 32767);
  for (auto& v : x) v = static_cast<std::int16_t>(u(g));
  for (const std::int32_t m : {1, 977, 123456789, (1 << 30) - 1}) {
    mt_softmax_s16_s16(x.data(), a.data(), 64, 50, m, 0, 15, 0);
    mt_softmax_s16_s16(x.data(), b.data(), 64, 50, 2 * m, 1, 15, 0);
    CHECK(a == b);
  }
}

namespace {

template <class TX, class TY>
using LayerNormFn = void (*)(const TX*, TY*, int, int, std::uint32_t, int, const std::int32_t*, int,
                             const std::int32_t*, int, std::int32_t);

// The lowering's folding: g = gamma / scale_y in Q(g_shift - 20), b = beta / scale_y in
// Q(b_shift), each below 2^30; eps / scale_x^2 with 24 significant bits.
template <class TX, class TY>
double layernorm_error(LayerNormFn<TX, TY> fn, double sx, double sy, std::int32_t zy, std::uint32_t seed) {
  std::mt19937 g(seed);
  MaxErr e;
  for (int trial = 0; trial < 120; ++trial) {
    const int n = 2 + trial % 70;
    std::normal_distribution<double> d((trial % 7 - 3) * 0.4, 0.05 + 0.3 * (trial % 5));
    std::uniform_real_distribution<double> ug(0.5, 1.5), ub(-0.5, 0.5);
    std::vector<TX> x(n);
    std::vector<TY> y(n);
    std::vector<double> gm(n, 1.0), bt(n, 0.0);
    const bool affine = trial % 3 != 0;
    for (int j = 0; j < n; ++j) {
      x[j] = quant<TX>(d(g), sx);
      if (affine) gm[j] = ug(g), bt[j] = ub(g);
    }
    double gmax = 0, bmax = 0;
    for (int j = 0; j < n; ++j) gmax = std::max(gmax, std::abs(gm[j]) / sy), bmax = std::max(bmax, std::abs(bt[j]) / sy);
    auto room = [](double m) { return m > 0 ? static_cast<int>(std::floor(std::log2(std::ldexp(1.0, 30) / m))) : 62; };
    const int g_shift = std::clamp(std::min(20 + room(gmax), room(bmax) + 32), 0, 62);
    const int b_shift = std::clamp(std::min(room(bmax), g_shift), g_shift - 32, g_shift);
    std::vector<std::int32_t> gq(n), bq(n);
    for (int j = 0; j < n; ++j) {
      gq[j] = static_cast<std::int32_t>(std::llround(std::ldexp(gm[j] / sy, g_shift - 20)));
      bq[j] = static_cast<std::int32_t>(std::llround(std::ldexp(bt[j] / sy, b_shift)));
    }
    const double eps = 1e-5, eps_x = eps / (sx * sx);
    const int eps_frac = std::clamp(24 - static_cast<int>(std::ceil(std::log2(eps_x))), -30, 62);
    const auto eps_q = static_cast<std::uint32_t>(std::llround(std::ldexp(eps_x, eps_frac)));
    fn(x.data(), y.data(), 1, n, eps_q, eps_frac, gq.data(), g_shift, bq.data(), b_shift, zy);
    double m = 0, v = 0;
    for (int j = 0; j < n; ++j) m += sx * x[j];
    m /= n;
    for (int j = 0; j < n; ++j) v += std::pow(sx * x[j] - m, 2);
    v /= n;
    for (int j = 0; j < n; ++j) {
      const double want = ((sx * x[j] - m) / std::sqrt(v + eps) * gm[j] + bt[j]) / sy + zy;
      e.add(y[j], std::min<double>(hi_of<TY>(), std::max<double>(lo_of<TY>(), want)), "n=" + std::to_string(n));
    }
  }
  return e.value;
}

}  // namespace

TEST_CASE("lower kernels: integer layer norm against double, with folded gamma and beta, every type") {
  const double e16 = layernorm_error(mt_layernorm_s16_s16, std::ldexp(1.0, -12), std::ldexp(1.0, -12), 0, 50);
  const double e16r = layernorm_error(mt_layernorm_s16_s16, 2.7e-4, 1.3e-4, 0, 51);
  const double e8 = layernorm_error(mt_layernorm_s8_s8, 1.0 / 16, 1.0 / 32, 0, 52);
  const double e8a = layernorm_error(mt_layernorm_s8_s8, 0.03, 0.031, 9, 53);
  const double e168 = layernorm_error(mt_layernorm_s16_s8, 2.7e-4, 0.03, -3, 54);
  const double e816 = layernorm_error(mt_layernorm_s8_s16, 0.03, 1.3e-4, 0, 55);
  if (std::getenv("MICROTORCH_KERNEL_REPORT")) {
    std::printf("  layernorm s16 %.3f (real scales %.3f), s8 %.3f (zero point %.3f), s16 -> s8 %.3f, s8 -> s16 %.3f LSB\n",
                e16, e16r, e8, e8a, e168, e816);
  }
  CHECK(e16 <= 0.75);
  CHECK(e16r <= 0.75);
  CHECK(e816 <= 0.75);
  CHECK(e8 <= 0.6);
  CHECK(e8a <= 0.6);
  CHECK(e168 <= 0.6);
  // a constant row with eps = 0 gives b (no division by zero)
  std::vector<std::int16_t> c(8, 1234), y(8);
  const std::vector<std::int32_t> gq(8, 1 << 20), bq(8, -77 * 1024);
  mt_layernorm_s16_s16(c.data(), y.data(), 1, 8, 0, 0, gq.data(), 10, bq.data(), 10, 0);
  for (auto v : y) CHECK(v == -77);
}

TEST_CASE("lower kernels: sum over the middle dim (and mean through its multiplier) is exact; argmax takes the first max") {
  std::mt19937 g(92);
  for (int n : {1, 2, 5, 64, 333, 70000}) {  // 70000 > 65536: int32 chunks into int64
    const int outer = n > 1000 ? 1 : 3, inner = n > 1000 ? 2 : 4;
    const auto x = random_ints<std::int16_t>(g, static_cast<std::size_t>(outer * n * inner));
    const auto x8 = random_ints<std::int8_t>(g, static_cast<std::size_t>(outer * n * inner));
    std::vector<std::int16_t> y(outer * inner);
    std::vector<std::int8_t> y8(outer * inner);
    for (int shift : {-4, 0, 1, 3, 9, 17, 40}) {
      const std::int32_t m = random_m(g), zx = static_cast<std::int32_t>(g() % 256) - 128,
                         zy = static_cast<std::int32_t>(g() % 256) - 128;
      CAPTURE(n);
      CAPTURE(shift);
      mt_sum_s16_s16(x.data(), y.data(), outer, n, inner, 0, m, shift, 0);
      mt_sum_s8_s8(x8.data(), y8.data(), outer, n, inner, zx, m, shift, zy);
      std::vector<std::int16_t> y816(outer * inner);
      std::vector<std::int8_t> y168(outer * inner);
      mt_sum_s8_s16(x8.data(), y816.data(), outer, n, inner, zx, m, shift, 0);
      mt_sum_s16_s8(x.data(), y168.data(), outer, n, inner, 0, m, shift, zy);
      for (int o = 0; o < outer; ++o)
        for (int c = 0; c < inner; ++c) {
          std::int64_t s = 0, s8 = 0;
          for (int j = 0; j < n; ++j) s += x[(o * n + j) * inner + c], s8 += x8[(o * n + j) * inner + c];
          s8 -= std::int64_t{n} * zx;
          REQUIRE(y[o * inner + c] == out_of<std::int16_t>(ref_rq(s, m, shift), 0));
          REQUIRE(y8[o * inner + c] == out_of<std::int8_t>(ref_rq(s8, m, shift), zy));
          REQUIRE(y816[o * inner + c] == out_of<std::int16_t>(ref_rq(s8, m, shift), 0));
          REQUIRE(y168[o * inner + c] == out_of<std::int8_t>(ref_rq(s, m, shift), zy));
        }
    }
  }
  // a mean: 1/3 as a multiplier, ties away from zero
  const std::int8_t t[] = {1, 2, 3, -1, -2, -3};
  std::int8_t mean[2];
  const auto third = mult(1.0 / 3.0);
  mt_sum_s8_s8(t, mean, 2, 3, 1, 0, third.first, third.second, 0);
  CHECK(mean[0] == 2);
  CHECK(mean[1] == -2);
  // n = 0: the empty sum, y_zero
  std::int16_t z[3] = {5, 5, 5};
  mt_sum_s16_s16(nullptr, z, 1, 0, 3, 0, 0, 0, 0);
  for (auto v : z) CHECK(v == 0);

  std::int16_t a[] = {3, 9, 9, -1, -5, -5, -5, -9};
  std::int8_t a8[] = {-128, -128, 127, 127};
  std::int32_t idx[2];
  mt_argmax_s16(a, idx, 2, 4);
  CHECK(idx[0] == 1);
  CHECK(idx[1] == 0);
  mt_argmax_s8(a8, idx, 2, 2);
  CHECK(idx[0] == 0);
  CHECK(idx[1] == 0);
}

TEST_CASE("lower kernels: row division by one reciprocal per row, requantized; a zero divisor saturates") {
  std::mt19937 g(93);
  MaxErr e16, e8;
  // real ratios scale_x / (scale_d scale_y), including powers of two
  for (const double ratio : {1.0, std::ldexp(1.0, -6), 1.7e-3, 0.37, 5.5, std::ldexp(1.0, 12)}) {
    const auto m = mult(ratio);
    const int rows = 200, n = 30;
    auto x = random_ints<std::int16_t>(g, rows * n);
    auto d = random_ints<std::int16_t>(g, rows);
    auto x8 = random_ints<std::int8_t>(g, rows * n);
    auto d8 = random_ints<std::int8_t>(g, rows);
    for (int r = 3; r < rows; r += 11) d[r] = static_cast<std::int16_t>(d[r] % 64), d8[r] = static_cast<std::int8_t>(d8[r] % 8);
    std::vector<std::int16_t> y(rows * n);
    std::vector<std::int8_t> y8(rows * n);
    mt_div_rows_s16(x.data(), d.data(), y.data(), rows, n, m.first, m.second);
    mt_div_rows_s8(x8.data(), d8.data(), y8.data(), rows, n, m.first, m.second);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < n; ++j) {
        const int i = r * n + j;
        if (d[r] == 0) {
          REQUIRE(y[i] == (x[i] > 0 ? 32767 : (x[i] < 0 ? -32768 : 0)));
        } else {
          e16.add(y[i], std::min(32767.0, std::max(-32768.0, static_cast<double>(x[i]) / d[r] * ratio)),
                  "x=" + std::to_string(x[i]) + " d=" + std::to_string(d[r]));
        }
        if (d8[r] == 0) {
          REQUIRE(y8[i] == (x8[i] > 0 ? 127 : (x8[i] < 0 ? -128 : 0)));
        } else {
          e8.add(y8[i], std::min(127.0, std::max(-128.0, static_cast<double>(x8[i]) / d8[r] * ratio)));
        }
      }
  }
  report("div_rows s16", e16);
  report("div_rows s8", e8);
  // the reciprocal over-estimates 1/|d| by < 6 * 2^-30 and the multiplier is rounded to 2^-31:
  // beyond the rounding's 0.5, at most |q| * 4e-9 (<= 1.3e-4 LSB)
  CHECK_ERR(e16, 0.5002);
  CHECK_ERR(e8, 0.5001);
  // exact cases, signs, saturation, zero divisor, in place (y = x)
  std::int16_t x[] = {6, -6, 7, 0, 32767, -32768, 100, -100, 0, 5};
  const std::int16_t d[] = {4, -4, 0, 0, 1};
  mt_div_rows_s16(x, d, x, 5, 2, 0, 0);
  // 1.5 -> 2, -1.5 -> -2, 7 / -4 = -1.75 -> -2, 0 / -4 = 0, x / 0 = +-max, 0 / 0 = 0
  const std::int16_t want[] = {2, -2, -2, 0, 32767, -32768, 32767, -32768, 0, 5};
  for (int i = 0; i < 10; ++i) CHECK(x[i] == want[i]);
}

// ------------------------------------------------------------------------------------
// Data movement (strided copy, embedding), sums, broadcast add / mul, row division
// ------------------------------------------------------------------------------------

namespace {

// Runs the strided copy of each element type on one layout and compares every element of
// dst with a naive computation of the source and destination offsets from the index.
// dst starts filled with a sentinel: elements outside the copied index set must keep it.
struct StridedCase {
  std::vector<std::int32_t> shape, src_strides, dst_strides;
  std::int32_t src_base = 0, dst_base = 0;  // offset of element (0, .., 0)
  std::size_t src_size = 0, dst_size = 0;
};

template <class T>
void check_strided(const StridedCase& c, void (*fn)(const T*, T*, int, const std::int32_t*, const std::int32_t*,
                                                    const std::int32_t*),
                   std::mt19937& g) {
  const int nd = static_cast<int>(c.shape.size());
  const auto src = random_ints<T>(g, c.src_size, std::numeric_limits<T>::min() + 1, std::numeric_limits<T>::max());
  const T sentinel = std::numeric_limits<T>::min();
  std::vector<T> dst(c.dst_size, sentinel), want(c.dst_size, sentinel);
  fn(src.data() + c.src_base, dst.data() + c.dst_base, nd, c.shape.data(), c.src_strides.data(),
     c.dst_strides.data());
  std::vector<std::int32_t> idx(nd, 0);
  for (bool more = true; more;) {
    std::int64_t so = c.src_base, dof = c.dst_base;
    for (int k = 0; k < nd; ++k) so += static_cast<std::int64_t>(idx[k]) * c.src_strides[k], dof += static_cast<std::int64_t>(idx[k]) * c.dst_strides[k];
    want[dof] = src[so];
    more = false;
    for (int k = nd - 1; k >= 0; --k) {
      if (++idx[k] < c.shape[k]) {
        more = true;
        break;
      }
      idx[k] = 0;
    }
  }
  REQUIRE(dst == want);
}

void check_strided_all(const StridedCase& c, std::mt19937& g) {
  check_strided<std::int16_t>(c, mt_copy_strided_s16, g);
  check_strided<std::int8_t>(c, mt_copy_strided_s8, g);
  check_strided<std::int32_t>(c, mt_copy_strided_s32, g);
}

std::vector<std::int32_t> packed_strides(const std::vector<std::int32_t>& shape) {
  std::vector<std::int32_t> st(shape.size());
  std::int32_t s = 1;
  for (std::size_t k = shape.size(); k-- > 0;) st[k] = s, s *= shape[k];
  return st;
}

std::int32_t numel(const std::vector<std::int32_t>& shape) {
  std::int32_t n = 1;
  for (auto v : shape) n *= v;
  return n;
}

}  // namespace

TEST_CASE("lower kernels: strided copy does permute, slice, concat and expand like the naive index walk") {
  std::mt19937 g(90);
  std::uniform_int_distribution<int> dn(1, MT_MAX_DIMS), dlen(1, 5);
  for (int trial = 0; trial < 400; ++trial) {
    CAPTURE(trial);
    const int nd = dn(g);
    std::vector<std::int32_t> in_shape(nd);
    for (auto& v : in_shape) v = dlen(g);
    const auto in_st = packed_strides(in_shape);
    StridedCase c;
    switch (trial % 4) {
      case 0: {  // permute (transpose when nd == 2): read through permuted strides, dst packed
        std::vector<int> perm(nd);
        for (int k = 0; k < nd; ++k) perm[k] = k;
        std::shuffle(perm.begin(), perm.end(), g);
        for (int k = 0; k < nd; ++k) c.shape.push_back(in_shape[perm[k]]), c.src_strides.push_back(in_st[perm[k]]);
        c.dst_strides = packed_strides(c.shape);
        c.src_size = c.dst_size = static_cast<std::size_t>(numel(in_shape));
        break;
      }
      case 1: {  // slice [start, start + len) with a step on every dim
        c.src_size = static_cast<std::size_t>(numel(in_shape));
        for (int k = 0; k < nd; ++k) {
          const int start = std::uniform_int_distribution<int>(0, in_shape[k] - 1)(g);
          const int step = std::uniform_int_distribution<int>(1, 2)(g);
          const int len = (in_shape[k] - start + step - 1) / step;
          c.src_base += start * in_st[k];
          c.shape.push_back(len), c.src_strides.push_back(step * in_st[k]);
        }
        c.dst_strides = packed_strides(c.shape);
        c.dst_size = static_cast<std::size_t>(numel(c.shape));
        break;
      }
      case 2: {  // concat: this input is the middle part of the output along dim `ax`
        const int ax = std::uniform_int_distribution<int>(0, nd - 1)(g);
        auto out_shape = in_shape;
        const int before = dlen(g) - 1, after = dlen(g) - 1;
        out_shape[ax] += before + after;
        const auto out_st = packed_strides(out_shape);
        c.shape = in_shape, c.src_strides = in_st, c.dst_strides = out_st;
        c.dst_base = before * out_st[ax];
        c.src_size = static_cast<std::size_t>(numel(in_shape));
        c.dst_size = static_cast<std::size_t>(numel(out_shape));
        break;
      }
      default: {  // expand: size-1 dims of the input broadcast with stride 0
        std::vector<std::int32_t> small = in_shape;
        for (int k = 0; k < nd; ++k)
          if (g() % 2) small[k] = 1;
        const auto small_st = packed_strides(small);
        c.shape = in_shape;
        for (int k = 0; k < nd; ++k) c.src_strides.push_back(small[k] == 1 ? 0 : small_st[k]);
        c.dst_strides = packed_strides(in_shape);
        c.src_size = static_cast<std::size_t>(numel(small));
        c.dst_size = static_cast<std::size_t>(numel(in_shape));
        break;
      }
    }
    check_strided_all(c, g);
  }
  // a transpose whose rows are long (the innermost run), a fully contiguous copy (all dims
  // merge into one run), a negative stride (flip) and a single element
  check_strided_all({{3, 1000}, {1, 3}, {1000, 1}, 0, 0, 3000, 3000}, g);
  check_strided_all({{2, 3, 4, 5, 6, 7}, packed_strides({2, 3, 4, 5, 6, 7}), packed_strides({2, 3, 4, 5, 6, 7}), 0, 0, 5040, 5040}, g);
  check_strided_all({{4, 6}, {6, -1}, {6, 1}, 5, 0, 24, 24}, g);
  check_strided_all({{1, 1, 1}, {7, 7, 7}, {0, 0, 0}, 0, 0, 1, 1}, g);

  // ndim outside [1, MT_MAX_DIMS] or an empty dim: nothing is written
  const std::int32_t shape[MT_MAX_DIMS + 1] = {2, 2, 2, 2, 2, 2, 2}, st[MT_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1};
  std::int16_t src[16] = {1, 2, 3}, dst[16] = {};
  mt_copy_strided_s16(src, dst, 0, shape, st, st);
  mt_copy_strided_s16(src, dst, MT_MAX_DIMS + 1, shape, st, st);
  const std::int32_t empty[2] = {3, 0}, neg[2] = {-1, 3};
  mt_copy_strided_s16(src, dst, 2, empty, st, st);
  mt_copy_strided_s16(src, dst, 2, neg, st, st);
  for (auto v : dst) CHECK(v == 0);
}

TEST_CASE("lower kernels: embedding copies table rows; out-of-range ids give zero rows and are counted") {
  std::mt19937 g(91);
  const int num = 50, dim = 7;
  const auto t16 = random_ints<std::int16_t>(g, num * dim);
  const auto t8 = random_ints<std::int8_t>(g, num * dim);
  const std::vector<std::int32_t> ids = {0, 49, 3, -1, 50, 17, INT32_MIN, INT32_MAX, 3, 25};
  const int n = static_cast<int>(ids.size());
  std::vector<std::int16_t> o16(n * dim, 99);
  std::vector<std::int8_t> o8(n * dim, 99);
  CHECK(mt_embedding_s16(ids.data(), n, t16.data(), num, dim, o16.data()) == 4);
  CHECK(mt_embedding_s8(ids.data(), n, t8.data(), num, dim, o8.data()) == 4);
  for (int i = 0; i < n; ++i) {
    const bool ok = ids[i] >= 0 && ids[i] < num;
    for (int j = 0; j < dim; ++j) {
      REQUIRE(o16[i * dim + j] == (ok ? t16[ids[i] * dim + j] : 0));
      REQUIRE(o8[i * dim + j] == (ok ? t8[ids[i] * dim + j] : 0));
    }
  }
  const std::vector<std::int32_t> good = {1, 2, 48};
  CHECK(mt_embedding_s16(good.data(), 3, t16.data(), num, dim, o16.data()) == 0);  // 0 = success
  CHECK(std::equal(o16.begin(), o16.begin() + dim, t16.begin() + dim));
  CHECK(mt_embedding_s16(ids.data(), 0, t16.data(), num, dim, o16.data()) == 0);
  CHECK(mt_embedding_s16(ids.data(), n, t16.data(), num, 0, o16.data()) == 4);  // dim 0: counts only
  CHECK(mt_embedding_s8(ids.data(), n, t8.data(), 0, dim, o8.data()) == n);      // empty table
  for (auto v : o8) CHECK(v == 0);
}

// ------------------------------------------------------------------------------------
// Attention: streaming (online softmax) vs two-pass vs double
// ------------------------------------------------------------------------------------

namespace {

enum class MaskKind { none, causal, bits, causal_bits };

struct AttnResult {
  MaxErr stream, twopass, between;
  double out_range = 0;  // max |reference output| in LSB
};

bool bit_of(const std::vector<std::uint8_t>& keep, int idx) { return (keep[idx >> 3] >> (idx & 7)) & 1; }

// The parameter array of mt_kernels.h for real scales.
std::vector<std::int32_t> attn_params(int L, int S, int D, int Dv, int qs, int ks, int vs, int os, double sq, double sk,
                                      double sv, double so, double scale, bool causal) {
  std::vector<std::int32_t> p(MT_ATTN_PARAMS, 0);
  p[MT_ATTN_L] = L, p[MT_ATTN_S] = S, p[MT_ATTN_D] = D, p[MT_ATTN_DV] = Dv;
  p[MT_ATTN_Q_STRIDE] = qs, p[MT_ATTN_K_STRIDE] = ks, p[MT_ATTN_V_STRIDE] = vs, p[MT_ATTN_OUT_STRIDE] = os;
  const auto logit = mult(std::ldexp(sq * sk * scale / std::log(2.0), 16)), out = mult(sv / so);
  p[MT_ATTN_LOGIT_M] = logit.first, p[MT_ATTN_LOGIT_S] = logit.second;
  p[MT_ATTN_OUT_M] = out.first, p[MT_ATTN_OUT_S] = out.second;
  p[MT_ATTN_FLAGS] = causal ? MT_ATTN_CAUSAL : 0;
  return p;
}

template <class T>
void run_attention(int L, int S, int D, int Dv, int H, MaskKind mk, double sq, double sk, double sv, double so,
                   double qk_sd, std::uint32_t seed, AttnResult& res) {
  std::mt19937 g(seed);
  std::normal_distribution<double> dq(0.0, qk_sd);
  std::uniform_real_distribution<double> dv(-0.95, 0.95);
  // heads packed as [L, H*D] like an in-projection output: read in place through strides
  std::vector<T> q(L * H * D), k(S * H * D), v(S * H * Dv), o(L * H * Dv), o2(L * H * Dv);
  for (auto& x : q) x = quant<T>(dq(g), sq);
  for (auto& x : k) x = quant<T>(dq(g), sk);
  for (auto& x : v) x = quant<T>(dv(g) * static_cast<double>(hi_of<T>()) * sv, sv);
  std::vector<std::uint8_t> keep((L * S + 7) / 8, 0);
  std::bernoulli_distribution coin(0.7);
  for (int i = 0; i < L; ++i)
    for (int j = 0; j < S; ++j)
      if (coin(g) && i != 3) keep[(i * S + j) >> 3] |= static_cast<std::uint8_t>(1u << ((i * S + j) & 7));
  const bool use_bits = mk == MaskKind::bits || mk == MaskKind::causal_bits;
  const bool causal = mk == MaskKind::causal || mk == MaskKind::causal_bits;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const auto p = attn_params(L, S, D, Dv, H * D, H * D, H * Dv, H * Dv, sq, sk, sv, so, scale, causal);
  const std::uint8_t* kp = use_bits ? keep.data() : nullptr;
  std::vector<std::int32_t> scores(L * S);
  for (int h = 0; h < H; ++h) {
    if constexpr (sizeof(T) == 2) {
      std::vector<std::int64_t> acc(Dv);
      mt_attention_stream_s16(p.data(), kp, q.data() + h * D, k.data() + h * D, v.data() + h * Dv, o.data() + h * Dv,
                              acc.data());
      mt_attention_twopass_s16(p.data(), kp, q.data() + h * D, k.data() + h * D, v.data() + h * Dv, o2.data() + h * Dv,
                               scores.data());
    } else {
      std::vector<std::int32_t> acc(Dv);
      mt_attention_stream_s8(p.data(), kp, q.data() + h * D, k.data() + h * D, v.data() + h * Dv, o.data() + h * Dv,
                             acc.data());
      mt_attention_twopass_s8(p.data(), kp, q.data() + h * D, k.data() + h * D, v.data() + h * Dv, o2.data() + h * Dv,
                              scores.data());
    }
  }
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < L; ++i) {
      std::vector<double> w(S, 0.0);
      double mx = -1e300, sum = 0;
      bool any = false;
      for (int j = 0; j < S; ++j) {
        const bool vis = (!causal || j <= i) && (!use_bits || bit_of(keep, i * S + j));
        if (!vis) continue;
        double s = 0;
        for (int d = 0; d < D; ++d) s += sq * q[i * H * D + h * D + d] * sk * k[j * H * D + h * D + d];
        w[j] = s * scale;
        mx = any ? std::max(mx, w[j]) : w[j];
        any = true;
      }
      for (int j = 0; j < S; ++j) {
        const bool vis = (!causal || j <= i) && (!use_bits || bit_of(keep, i * S + j));
        w[j] = vis ? std::exp(w[j] - mx) : 0.0;
        sum += w[j];
      }
      for (int d = 0; d < Dv; ++d) {
        double want = 0;
        if (any)
          for (int j = 0; j < S; ++j) want += w[j] / sum * sv * v[j * H * Dv + h * Dv + d];
        want /= so;
        const int idx = i * H * Dv + h * Dv + d;
        const std::string at = "h=" + std::to_string(h) + " i=" + std::to_string(i) + " d=" + std::to_string(d);
        res.stream.add(o[idx], want, at);
        res.twopass.add(o2[idx], want, at);
        res.between.add(o[idx], o2[idx], at);
        res.out_range = std::max(res.out_range, std::fabs(want));
        if (!any) REQUIRE(o[idx] == 0);  // fully masked row: zeros
        if (!any) REQUIRE(o2[idx] == 0);
      }
    }
}

}  // namespace

TEST_CASE("lower kernels: streaming attention matches two-pass and double, with masks, strides and real scales") {
  AttnResult r16, r8;
  std::uint32_t seed = 70;
  for (MaskKind mk : {MaskKind::none, MaskKind::causal, MaskKind::bits, MaskKind::causal_bits}) {
    const double q16 = std::ldexp(1.0, -13), v16 = std::ldexp(1.0, -14), q8 = 1.0 / 32, v8 = 1.0 / 64;
    run_attention<std::int16_t>(48, 48, 16, 16, 2, mk, q16, q16, v16, v16, 1.0, seed++, r16);
    run_attention<std::int16_t>(9, 40, 8, 12, 1, mk, std::ldexp(1.0, -12), std::ldexp(1.0, -12), v16, v16, 2.0, seed++,
                                r16);  // L != S, Dv != D
    run_attention<std::int16_t>(20, 20, 16, 16, 1, mk, 1.3e-4, 1.7e-4, 5.1e-5, 6.3e-5, 1.0, seed++, r16);  // real scales
    run_attention<std::int8_t>(48, 48, 16, 16, 2, mk, q8, q8, v8, v8, 1.0, seed++, r8);
    run_attention<std::int8_t>(9, 300, 8, 12, 1, mk, q8, q8, v8, v8, 1.0, seed++, r8);  // S > 256: guard bits
    run_attention<std::int8_t>(20, 20, 16, 16, 1, mk, 0.021, 0.017, 0.0073, 0.0081, 1.0, seed++, r8);
  }
  report("attention s16 streaming vs double", r16.stream);
  report("attention s16 two-pass vs double", r16.twopass);
  report("attention s16 streaming vs two-pass", r16.between);
  report("attention s8 streaming vs double", r8.stream);
  report("attention s8 two-pass vs double", r8.twopass);
  report("attention s8 streaming vs two-pass", r8.between);
  if (std::getenv("MICROTORCH_KERNEL_REPORT"))
    std::printf("  attention s16 relative to the output range: streaming %.2e, two-pass %.2e\n",
                r16.stream.value / r16.out_range, r16.twopass.value / r16.out_range);
  // Streaming keeps unnormalised Q16 weights and divides once per query; each weight's
  // rounding (<= 2^-17 of the row's max weight) moves the output by at most
  // 2^-17 |v_j - out|, so with v spanning the whole int16 range the error is ~1 LSB.
  // Two-pass rounds every probability to Q0.15 first, then sums S of them: its error grows
  // with S (|sum_j dp_j v_j| <= S * 2^-16 * max|v|). They are not bit-identical (different
  // rounding order); what holds is the bound between them below.
  CHECK_ERR(r16.stream, 2.0);
  CHECK_ERR(r16.twopass, 6.0);
  CHECK_ERR(r16.between, 6.0);
  CHECK_ERR(r8.stream, 0.6);
  CHECK_ERR(r8.twopass, 0.6);
  CHECK_ERR(r8.between, 1.0);
  // relative to the output range: streaming within 0.01%, two-pass within 0.1% (int16)
  CHECK(r16.stream.value / r16.out_range < 1e-4);
  CHECK(r16.twopass.value / r16.out_range < 1e-3);
}

TEST_CASE("lower kernels: streaming attention runs in place (out = q) and survives huge scores") {
  std::mt19937 g(80);
  const int L = 12, S = 12, D = 8;
  auto q = random_ints<std::int16_t>(g, L * D);
  const auto k = random_ints<std::int16_t>(g, S * D), v = random_ints<std::int16_t>(g, S * D);
  std::vector<std::int16_t> ref(L * D);
  std::vector<std::int64_t> acc(D);
  // scale 1 for every integer and 256 on the scores: logits up to 8 * 2^38, saturated
  auto p = attn_params(L, S, D, D, 0, 0, 0, 0, 1.0, 1.0, 1.0, 1.0, 256.0, true);
  mt_attention_stream_s16(p.data(), nullptr, q.data(), k.data(), v.data(), ref.data(), acc.data());
  mt_attention_stream_s16(p.data(), nullptr, q.data(), k.data(), v.data(), q.data(), acc.data());
  CHECK(q == ref);
  // the logits saturate (ties between saturated keys average them): the output stays a
  // convex combination of the visible v rows
  for (int i = 0; i < L; ++i)
    for (int d = 0; d < D; ++d) {
      int lo = 32767, hi = -32768;
      for (int j = 0; j <= i; ++j) lo = std::min<int>(lo, v[j * D + d]), hi = std::max<int>(hi, v[j * D + d]);
      CHECK(ref[i * D + d] >= lo);
      CHECK(ref[i * D + d] <= hi);
    }
  CHECK(std::equal(ref.begin(), ref.begin() + D, v.begin()));  // query 0 sees key 0 only
  // int8 extremes: all -128 (largest scores), exact -128 rows out
  std::vector<std::int8_t> q8(L * D, -128), k8(S * D, -128), v8(S * D, -128), o8(L * D);
  std::vector<std::int32_t> acc8(D);
  p[MT_ATTN_FLAGS] = 0;
  mt_attention_stream_s8(p.data(), nullptr, q8.data(), k8.data(), v8.data(), o8.data(), acc8.data());
  for (auto x : o8) CHECK(x == -128);
}

// ------------------------------------------------------------------------------------
// Cortex-M: compile for M0/M4/M7 and compare host and QEMU outputs byte for byte
// ------------------------------------------------------------------------------------

namespace {
bool have_tool(const char* name) {
  return std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0;
}
}  // namespace

TEST_CASE("lower kernels: bit-exact on emulated Cortex-M0, M4, M7, M33 and M55 (QEMU), UBSan-clean on the host") {
  if (!have_tool("arm-none-eabi-gcc") || !have_tool("qemu-system-arm")) {
    MESSAGE("skipped: arm-none-eabi-gcc or qemu-system-arm not installed (tools/install-deps.sh adds them)");
    return;
  }
  // compiles the kernels for cortex-m0/m4/m7/m33/m55 (-Werror, no division or float helpers
  // on M0), runs tools/mcu/kernel_vectors.c on the host, under UBSan+ASan, and under QEMU on
  // mps2-an385 (M0 code: the portable C) and, with the DSP variants, on mps2-an386 (M4),
  // mps2-an500 (M7), mps2-an505 (M33) and mps3-an547 (M55), the M4 build also at -O0 (a
  // frame pointer: the inline assembly's registers), and compares the outputs byte for byte
  const std::string cmd = std::string("bash '") + MICROTORCH_SOURCE_DIR + "/tools/mcu/run_kernels_qemu.sh' 2>&1";
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  const int status = pclose(pipe);
  INFO(cmd << "\n" << out);
  CHECK(status == 0);
  CHECK(out.find("run_kernels_qemu: PASS (host == UBSan/ASan host == cortex-m0 == cortex-m4 (-O2, -O0) == cortex-m7 == "
                 "cortex-m33 == cortex-m55)") != std::string::npos);
}
