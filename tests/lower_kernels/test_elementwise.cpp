// The elementwise family of the runtime (src/lower/runtime/mt_elementwise.c): add, multiply and
// requantize equal the exact integer result requantized once (every type combination, zero
// points, broadcast, in place; the int8 table lookup mt_lut_* of mt_activation.c on the same
// inputs), and the row division within 0.5 LSB plus the reciprocal's and the multiplier's
// relative error.
#include "kernel_reference.hpp"

using namespace kernel_ref;

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
