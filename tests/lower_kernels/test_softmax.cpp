// The softmax family of the runtime (src/lower/runtime/mt_softmax.c) against double, every type
// combination: 1.10 LSB of Q0.15, 0.5 of 8-bit outputs.
#include "kernel_reference.hpp"

using namespace kernel_ref;

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
