// The integer training kernels of the runtime (src/lower/runtime/mt_loss.c, mt_optim.c): the
// cross entropy's loss and gradient against the real softmax within their fixed-point
// rounding; the linear layer's gradients, the SGD step, the masters' rounding exact.
#include <cmath>

#include "kernel_reference.hpp"

using namespace kernel_ref;

TEST_CASE("lower kernels: integer cross entropy is the real softmax's loss and gradient within the Q formats") {
  std::mt19937 g(46);
  for (const double sy : {0.02, 0.1, 1.0 / 4096}) {
    for (const int gb : {8, 12, 15}) {
      const int rows = 3, n = 10;
      const auto y16 = random_ints<std::int16_t>(g, rows * n, sy < 0.01 ? -20000 : -200, sy < 0.01 ? 20000 : 200);
      std::vector<std::int8_t> y8(y16.begin(), y16.end());
      for (auto& v : y8) v = static_cast<std::int8_t>(std::clamp<int>(v, -128, 127));
      const std::int32_t target[rows] = {2, 9, -1};  // the third row is not counted
      const auto [m, s] = mult(sy * 1.4426950408889634 * 65536.0);
      const auto [ml, sl] = mult(sy * 65536.0);
      for (const bool wide : {false, true}) {
        std::int32_t loss = 7;  // the kernel adds to it
        std::vector<std::int32_t> grad(rows * n, 99);
        if (wide) mt_cross_entropy_s16(y16.data(), target, &loss, grad.data(), rows, n, m, s, ml, sl, gb);
        else mt_cross_entropy_s8(y8.data(), target, &loss, grad.data(), rows, n, m, s, ml, sl, gb);
        double total = 0;
        for (int r = 0; r < 2; ++r) {
          double mx = -1e300, sum = 0;
          for (int j = 0; j < n; ++j) mx = std::max(mx, sy * (wide ? y16[r * n + j] : y8[r * n + j]));
          for (int j = 0; j < n; ++j) sum += std::exp(sy * (wide ? y16[r * n + j] : y8[r * n + j]) - mx);
          const double yt = sy * (wide ? y16[r * n + target[r]] : y8[r * n + target[r]]);
          total += mx - yt + std::log(sum);
          for (int j = 0; j < n; ++j) {
            const double p = std::exp(sy * (wide ? y16[r * n + j] : y8[r * n + j]) - mx) / sum;
            const double want = (p - (j == target[r] ? 1.0 : 0.0)) / 2 * std::ldexp(1.0, gb);
            CAPTURE(sy);
            CAPTURE(gb);
            REQUIRE(std::abs(grad[r * n + j] - want) <= 1.0 + 1e-4 * std::ldexp(1.0, gb));
          }
        }
        for (int j = 0; j < n; ++j) CHECK(grad[2 * n + j] == 0);
        CHECK(std::abs((loss - 7) / 65536.0 - total / 2) <= 3e-4);
      }
    }
  }
}

TEST_CASE("lower kernels: integer linear gradients, SGD on int32 masters, the weights and bias re-derived, exact") {
  std::mt19937 g(47);
  const int rows = 3, in = 7, out = 5;
  const auto x16 = random_ints<std::int16_t>(g, rows * 9);  // a row stride of 9
  const auto x8 = random_ints<std::int8_t>(g, rows * in);
  const auto gr = random_ints<std::int32_t>(g, rows * out, -1024, 1024);
  for (const std::int32_t zx : {0, -17, 100}) {
    std::vector<std::int32_t> dw(out * in, 5), db(out, -3), dw8(out * in, 0);
    mt_linear_grad_s16(x16.data(), gr.data(), dw.data(), db.data(), rows, in, out, 9, zx);
    mt_linear_grad_s8(x8.data(), gr.data(), dw8.data(), nullptr, rows, in, out, 0, zx);
    for (int o = 0; o < out; ++o) {
      std::int64_t sb = -3;
      for (int r = 0; r < rows; ++r) sb += gr[r * out + o];
      CHECK(db[o] == sb);
      for (int i = 0; i < in; ++i) {
        std::int64_t s = 5, s8 = 0;
        for (int r = 0; r < rows; ++r) {
          s += std::int64_t{gr[r * out + o]} * (x16[r * 9 + i] - zx);
          s8 += std::int64_t{gr[r * out + o]} * (x8[r * in + i] - zx);
        }
        CHECK(dw[o * in + i] == s);
        CHECK(dw8[o * in + i] == s8);
      }
    }
  }
  // SGD: two rows of 4, momentum 0.9, clamped to [lo, hi]
  std::vector<std::int32_t> w = {1000, -1000, 1 << 29, -(1 << 29), 0, 5, -5, 123456};
  const std::vector<std::int32_t> grad = {300, -300, -(1 << 30), 1 << 30, 1, -1, 77, -77};
  std::vector<std::int32_t> mom(8, 0);
  const auto r0 = mult(0.37), r1 = mult(3.5), mu = mult(0.9);
  const std::int32_t rq[] = {r0.first, r0.second, r1.first, r1.second};
  const std::int32_t lo = -(1 << 30), hi = 1 << 30;
  std::vector<std::int64_t> ref_w(w.begin(), w.end()), ref_m(8, 0);
  for (int step = 0; step < 3; ++step) {
    mt_sgd_s32(w.data(), grad.data(), mom.data(), 8, 4, rq, mu.first, mu.second, lo, hi);
    for (int i = 0; i < 8; ++i) {
      const auto& r = i < 4 ? r0 : r1;
      const std::int64_t d = ref_rq(ref_m[i], mu.first, mu.second) + ref_rq(grad[i], r.first, r.second);
      ref_m[i] = std::clamp<std::int64_t>(d, INT32_MIN, INT32_MAX);
      ref_w[i] = std::clamp<std::int64_t>(ref_w[i] - d, lo, hi);
      CHECK(mom[i] == ref_m[i]);
      CHECK(w[i] == ref_w[i]);
    }
  }
  // the masters: round(master 2^-shift) saturated; the bias minus zx times the row sums
  const std::int32_t master[] = {(127 << 23) + (1 << 22), -(3 << 23) - (1 << 22), (1 << 22) - 1, -(1 << 30)};
  std::int8_t w8[4];
  mt_master_s8(master, w8, 4, 23);
  CHECK(w8[0] == 127);  // 127.5 rounds to 128, saturated
  CHECK(w8[1] == -4);   // ties away from zero
  CHECK(w8[2] == 0);
  CHECK(w8[3] == -128);
  std::int16_t w16[4];
  mt_master_s16(master, w16, 4, 15);
  CHECK(w16[0] == 127 * 256 + 128);
  CHECK(w16[1] == -(3 << 8) - (1 << 7));
  const std::int32_t bm[] = {1001, -1001};
  const std::int8_t wb8[] = {1, 2, 3, -4, -5, -6};
  std::int32_t b32[2];
  mt_linear_bias_s8(bm, wb8, b32, 3, 2, 1, 10);
  CHECK(b32[0] == 501 - 60);   // round(1001 / 2) = 501 (ties away), zx sum = 10 * 6
  CHECK(b32[1] == -501 + 150);
  mt_linear_bias_s8(nullptr, wb8, b32, 3, 2, 1, 10);
  CHECK(b32[0] == -60);
  const std::int16_t wb16[] = {1, 2, 3, -4, -5, -6};
  std::int64_t b64[2];
  mt_linear_bias_s16(bm, wb16, b64, 3, 2, -20, -1);
  CHECK(b64[0] == (std::int64_t{1001} << 20) + 6);
  CHECK(b64[1] == -(std::int64_t{1001} << 20) - 15);
  std::int32_t f[3] = {1, 2, 3};
  mt_fill_s32(f, 3, -9);
  CHECK((f[0] == -9 && f[2] == -9));
  const auto third = mult(1.0 / 3.0);
  f[0] = 10, f[1] = -11;
  mt_scale_s32(f, 2, third.first, third.second);
  CHECK(f[0] == 3);
  CHECK(f[1] == -4);
}

TEST_CASE("lower kernels: the integer input gradient of a linear layer, through a relu's mask, exact") {
  std::mt19937 g(48);
  const int rows = 2, in = 6, out = 4;
  const auto gr = random_ints<std::int32_t>(g, rows * out, -40000, 40000);
  const auto w16 = random_ints<std::int16_t>(g, out * in);
  const auto w8 = random_ints<std::int8_t>(g, out * in);
  const auto y16 = random_ints<std::int16_t>(g, rows * 8, -3, 3);  // a row stride of 8
  const auto y8 = random_ints<std::int8_t>(g, rows * in, -130 + 3, -128 + 3);
  std::vector<std::int32_t> pre;
  for (const double r : {1.0, 0.75, 0.5, 0.3}) pre.push_back(mult(r).first), pre.push_back(mult(r).second);
  const auto [m, s] = mult(0.0123);
  std::vector<std::int32_t> dx16(rows * in), dx8(rows * in), nomask(rows * in);
  mt_linear_dx_s16(gr.data(), w16.data(), dx16.data(), rows, in, out, pre.data(), m, s, y16.data(), 8, 0);
  mt_linear_dx_s8(gr.data(), w8.data(), dx8.data(), rows, in, out, pre.data(), m, s, y8.data(), 0, -128);
  mt_linear_dx_s16(gr.data(), w16.data(), nomask.data(), rows, in, out, pre.data(), m, s, nullptr, 0, 0);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < in; ++i) {
      std::int64_t a16 = 0, a8 = 0;
      for (int o = 0; o < out; ++o) {
        const std::int64_t go = ref_rq(gr[r * out + o], pre[2 * o], pre[2 * o + 1]);
        a16 += go * w16[o * in + i], a8 += go * w8[o * in + i];
      }
      CHECK(nomask[r * in + i] == ref_rq(a16, m, s));
      CHECK(dx16[r * in + i] == (y16[r * 8 + i] <= 0 ? 0 : ref_rq(a16, m, s)));
      CHECK(dx8[r * in + i] == (y8[r * in + i] <= -128 ? 0 : ref_rq(a8, m, s)));
    }
  }
}
