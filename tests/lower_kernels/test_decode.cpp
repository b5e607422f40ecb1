// The kernels of a decoder's step (src/lower/runtime/mt_decode.c and mt_rmsnorm_s16 of
// mt_norm.c): RMS norm against double, RoPE against its exact integer formula, the cache
// append and the position counter at their limits, and attention over the cache against
// double and against mt_attention_stream_s16 head by head.
#include <cmath>
#include <random>
#include <tuple>

#include "kernel_reference.hpp"

using namespace kernel_ref;

TEST_CASE("lower kernels: mt_rmsnorm_s16 against double, with per-channel gains") {
  std::mt19937 g(90);
  MaxErr e;
  for (int trial = 0; trial < 150; ++trial) {
    const int n = 1 + trial % 97;
    const double sx = trial % 2 ? 2.7e-4 : std::ldexp(1.0, -12), sy = trial % 3 ? 1.3e-4 : 3.1e-5;
    const double eps = trial % 5 ? 1e-5 : 1e-2;
    std::normal_distribution<double> d(0.0, 0.02 + 0.5 * (trial % 4));
    std::uniform_real_distribution<double> ug(-1.5, 1.5);
    std::vector<std::int16_t> x(n), y(n);
    std::vector<double> gm(n);
    std::vector<std::int32_t> rq;
    for (int j = 0; j < n; ++j) {
      x[j] = quant<std::int16_t>(d(g), sx);
      gm[j] = ug(g);
      const auto [m, s] = mult(16.0 * std::sqrt(n) * gm[j] / sy);
      rq.push_back(m), rq.push_back(s);
    }
    double epsn = std::ldexp(n * eps / (sx * sx), 8);
    int shift = 0;
    while (epsn >= 4294967295.0) epsn /= 2, ++shift;
    mt_rmsnorm_s16(x.data(), y.data(), 1, n, static_cast<std::uint32_t>(std::llround(epsn)), shift, rq.data());
    double ms = 0;
    for (int j = 0; j < n; ++j) ms += std::pow(sx * x[j], 2);
    ms /= n;
    for (int j = 0; j < n; ++j) {
      const double want = std::clamp(sx * x[j] / std::sqrt(ms + eps) * gm[j] / sy, -32768.0, 32767.0);
      e.add(y[j], want, "n=" + std::to_string(n));
    }
  }
  report("rmsnorm s16", e);
  CHECK_ERR(e, 0.75);
  // an all-zero row gives zeros (eps keeps the square root away from 0)
  std::vector<std::int16_t> z(8, 0), y(8, 5);
  const std::vector<std::int32_t> rq(16, 1 << 30);
  mt_rmsnorm_s16(z.data(), y.data(), 1, 8, 100, 0, rq.data());
  CHECK(y == z);
}

TEST_CASE("lower kernels: mt_rope_s16 is the exact rotation of its Q14 tables, both layouts") {
  std::mt19937 g(91);
  const int heads = 3, dim = 8, half = dim / 2, capacity = 5;
  std::vector<std::int16_t> c(capacity * half), s(capacity * half);
  for (int p = 0; p < capacity; ++p) {
    for (int i = 0; i < half; ++i) {
      const double a = p * std::pow(10000.0, -2.0 * i / dim);
      c[p * half + i] = static_cast<std::int16_t>(std::lround(std::ldexp(std::cos(a), 14)));
      s[p * half + i] = static_cast<std::int16_t>(std::lround(std::ldexp(std::sin(a), 14)));
    }
  }
  for (const int interleaved : {0, 1}) {
    for (const std::int32_t pos : {0, 3, 4, 9}) {  // 9: beyond the tables, their last row
      const auto x = random_ints<std::int16_t>(g, heads * dim);
      auto y = x;
      mt_rope_s16(y.data(), heads, dim, c.data(), s.data(), &pos, capacity, interleaved);
      const int row = std::min(pos, capacity - 1);
      for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < half; ++i) {
          const int ia = h * dim + (interleaved ? 2 * i : i), ib = h * dim + (interleaved ? 2 * i + 1 : i + half);
          const std::int64_t ci = c[row * half + i], si = s[row * half + i];
          const auto want_a = clamp128(round_shift(i128{x[ia]} * ci - i128{x[ib]} * si, 14), -32768, 32767);
          const auto want_b = clamp128(round_shift(i128{x[ib]} * ci + i128{x[ia]} * si, 14), -32768, 32767);
          CHECK(y[ia] == want_a);
          CHECK(y[ib] == want_b);
        }
      }
    }
  }
}

TEST_CASE("lower kernels: the cache append and the position counter at the cache's capacity") {
  std::vector<std::int16_t> cache(3 * 4, 0);
  const std::vector<std::int16_t> row{1, -2, 3, -4};
  std::int32_t pos = 0;
  for (int k = 0; k < 3; ++k) {
    CHECK(mt_cache_append_s16(row.data(), cache.data(), 4, &pos, 3) == 0);
    CHECK(cache[k * 4 + 3] == -4);
    mt_position_next(&pos, 3);
  }
  CHECK(pos == 3);
  CHECK(mt_cache_append_s16(row.data(), cache.data(), 4, &pos, 3) == 1);  // full: nothing written
  mt_position_next(&pos, 3);
  CHECK(pos == 3);
}

TEST_CASE("lower kernels: mt_attention_cached_s16 is each head's streaming attention over the cache (GQA)") {
  std::mt19937 g(92);
  const int kv = 2, group = 3, H = kv * group, D = 8, capacity = 20;
  const double sq = 1.0 / 4096, sk = 1.0 / 4096, sv = 1.0 / 2048, so = 1.0 / 4096;
  std::vector<std::int32_t> p(MT_ATTN_PARAMS, 0);
  p[MT_ATTN_L] = 1, p[MT_ATTN_S] = capacity, p[MT_ATTN_D] = D, p[MT_ATTN_DV] = D;
  p[MT_ATTN_K_STRIDE] = kv * D, p[MT_ATTN_V_STRIDE] = kv * D;
  std::tie(p[MT_ATTN_LOGIT_M], p[MT_ATTN_LOGIT_S]) = mult(std::ldexp(sq * sk / std::sqrt(D) / std::log(2.0), 16));
  std::tie(p[MT_ATTN_OUT_M], p[MT_ATTN_OUT_S]) = mult(sv / so);
  const auto k = random_ints<std::int16_t>(g, capacity * kv * D, -8000, 8000);
  const auto v = random_ints<std::int16_t>(g, capacity * kv * D, -8000, 8000);
  MaxErr e;
  for (const std::int32_t pos : {0, 1, 7, 19}) {
    const auto q = random_ints<std::int16_t>(g, H * D, -8000, 8000);
    std::vector<std::int16_t> out(H * D), head(D);
    std::vector<std::int64_t> acc(D);
    mt_attention_cached_s16(p.data(), &pos, kv, group, q.data(), k.data(), v.data(), out.data(), acc.data());
    for (int h = 0; h < H; ++h) {
      const int kh = h / group;
      std::vector<std::int32_t> ph = p;
      ph[MT_ATTN_S] = pos + 1;
      mt_attention_stream_s16(ph.data(), nullptr, q.data() + h * D, k.data() + kh * D, v.data() + kh * D, head.data(),
                              acc.data());
      CHECK(std::equal(head.begin(), head.end(), out.begin() + h * D));
      // against double: softmax(q.k / sqrt(D)) v
      std::vector<double> w(pos + 1);
      double top = -1e300, sum = 0;
      for (int j = 0; j <= pos; ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += sq * q[h * D + d] * sk * k[j * kv * D + kh * D + d];
        w[j] = dot / std::sqrt(D), top = std::max(top, w[j]);
      }
      for (auto& x : w) x = std::exp(x - top), sum += x;
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (int j = 0; j <= pos; ++j) o += w[j] / sum * sv * v[j * kv * D + kh * D + d];
        e.add(out[h * D + d], o / so, "pos=" + std::to_string(pos));
      }
    }
  }
  report("attention over a cache s16", e);
  CHECK_ERR(e, 1.6);
}

TEST_CASE("lower kernels: mt_attention_cached_s8 is each head's int8 streaming attention over the cache") {
  std::mt19937 g(93);
  const int kv = 2, group = 2, H = kv * group, D = 8, capacity = 300;  // S > 256: the int8 kernel's narrower weights
  std::vector<std::int32_t> p(MT_ATTN_PARAMS, 0);
  p[MT_ATTN_L] = 1, p[MT_ATTN_S] = capacity, p[MT_ATTN_D] = D, p[MT_ATTN_DV] = D;
  p[MT_ATTN_K_STRIDE] = kv * D, p[MT_ATTN_V_STRIDE] = kv * D;
  std::tie(p[MT_ATTN_LOGIT_M], p[MT_ATTN_LOGIT_S]) = mult(std::ldexp(1.0 / 64 / 64 / std::sqrt(D) / std::log(2.0), 16));
  std::tie(p[MT_ATTN_OUT_M], p[MT_ATTN_OUT_S]) = mult(1.0);
  const auto k = random_ints<std::int8_t>(g, capacity * kv * D);
  const auto v = random_ints<std::int8_t>(g, capacity * kv * D);
  for (const std::int32_t pos : {0, 5, 299, 400}) {  // 400: beyond the capacity, every row
    const auto q = random_ints<std::int8_t>(g, H * D);
    std::vector<std::int8_t> out(H * D), head(D);
    std::vector<std::int32_t> acc(D);
    mt_attention_cached_s8(p.data(), &pos, kv, group, q.data(), k.data(), v.data(), out.data(), acc.data());
    for (int h = 0; h < H; ++h) {
      std::vector<std::int32_t> ph = p;
      ph[MT_ATTN_S] = std::min(pos + 1, capacity);
      mt_attention_stream_s8(ph.data(), nullptr, q.data() + h * D, k.data() + h / group * D, v.data() + h / group * D,
                             head.data(), acc.data());
      CHECK(std::equal(head.begin(), head.end(), out.begin() + h * D));
    }
  }
}

TEST_CASE("lower kernels: mt_swiglu_s16 is the chain sigmoid, product, product, integer for integer") {
  // every int16 gate against pseudo-random up values, at several scales of gate, act and y
  std::mt19937 g(93);
  std::uniform_int_distribution<int> du(-32768, 32767);
  const int n = 65536;
  std::vector<std::int16_t> gate(n), up(n), sig(n), act(n), want(n), got(n);
  for (int i = 0; i < n; ++i) gate[i] = static_cast<std::int16_t>(i - 32768), up[i] = static_cast<std::int16_t>(du(g));
  for (const auto& [sg, sa, sy] : {std::tuple{2.4e-4, 1.9e-4, 3.0e-5}, std::tuple{std::ldexp(1.0, -12), 5e-5, 2e-3},
                                   std::tuple{1e-3, 1e-2, 1e-6}, std::tuple{3e-6, 1e-6, 1e-8}}) {
    const auto [in_m, in_s] = mult(std::ldexp(sg, 20));
    const auto [sig_m, sig_s] = mult(std::ldexp(1.0, -6));
    const auto [act_m, act_s] = mult(sg * std::ldexp(1.0, -15) / sa);
    const auto [m, s] = mult(sa * 1.7e-4 / sy);
    mt_sigmoid_s16_s16(gate.data(), sig.data(), n, in_m, in_s, sig_m, sig_s, 0);
    mt_mul_s16(gate.data(), sig.data(), n, act.data(), n, 0, 0, act_m, act_s, 0);
    mt_mul_s16(act.data(), up.data(), n, want.data(), n, 0, 0, m, s, 0);
    mt_swiglu_s16(gate.data(), up.data(), got.data(), n, in_m, in_s, sig_m, sig_s, act_m, act_s, m, s);
    CHECK(got == want);
  }
}
