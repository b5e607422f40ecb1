// The fixed-point primitives of the runtime (src/lower/runtime/mt_primitives.c and the inlines
// of mt_kernels.h): the rounding shift, the requantization against its exact integer value, the
// reciprocal, the inverse square root and 2^-z without division.
//   mt_rq: exact (the exact integer result requantized once)
//   mt_recip_u32: y - 2^e/d in [0, 6] units of 2^-30;  mt_rsqrt_u64: [0, 3] units of 2^-30
//   mt_exp2neg_q16: 0.51 LSB of Q16 (every z in [0, 18))
#include "kernel_reference.hpp"

using namespace kernel_ref;

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
