// The norm family of the runtime (src/lower/runtime/mt_norm.c): layer norm against double,
// every type combination: 0.56 LSB (s16), 0.55 (s8).
#include "kernel_reference.hpp"

using namespace kernel_ref;

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
