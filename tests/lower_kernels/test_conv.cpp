// The conv family of the runtime (src/lower/runtime/mt_conv.c): every type combination of the
// convolution equals the exact integer cross-correlation requantized once, at the edges of
// padding, stride, dilation and groups; the poolings equal their exact maximum and rounded mean.
#include "kernel_reference.hpp"

using namespace kernel_ref;

namespace {

template <class TX, class TW, class TB, class TY>
using ConvFn = void (*)(const TX*, const TW*, const TB*, TY*, const std::int32_t*, const std::int32_t*, int,
                        std::int32_t, std::int32_t, std::int16_t*);

struct Geom {
  int n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  int ph_end = -1, pw_end = -1;  // -1: as ph, pw
  int oh() const { return (h + ph + (ph_end < 0 ? ph : ph_end) - dh * (kh - 1) - 1) / sh + 1; }
  int ow() const { return (w + pw + (pw_end < 0 ? pw : pw_end) - dw * (kw - 1) - 1) / sw + 1; }
};

template <class TX, class TW, class TB, class TY>
void check_conv(ConvFn<TX, TW, TB, TY> fn, const Geom& G, bool bias, bool per_channel, std::int32_t y_zero, bool relu,
                std::uint32_t seed) {
  std::mt19937 gen(seed);
  const int cg = G.c / G.groups, og = G.o / G.groups, OH = G.oh(), OW = G.ow();
  const auto x = random_ints<TX>(gen, static_cast<std::size_t>(G.n * G.c * G.h * G.w));
  const auto w = random_ints<TW>(gen, static_cast<std::size_t>(G.o * cg * G.kh * G.kw));
  const std::int64_t b_max = std::int64_t{1} << (8 * (sizeof(TX) + sizeof(TW)) - 4);  // a few products' worth
  const auto b = random_ints<TB>(gen, static_cast<std::size_t>(G.o), -b_max, b_max);
  std::vector<std::int32_t> rq;
  // shifts around the sums' magnitude over the output's: most outputs in range, some saturating
  const int base = static_cast<int>(8 * (sizeof(TX) + sizeof(TW)) - 8 * sizeof(TY)) + 1;
  std::uniform_int_distribution<int> ds(std::max(0, base - 2), base + 3);
  for (int c = 0; c < (per_channel ? G.o : 1); ++c) rq.push_back(random_m(gen)), rq.push_back(ds(gen));
  const std::int32_t g[MT_CONV_FIELDS] = {G.n, cg, G.h, G.w, og, G.kh, G.kw, OH, OW, G.sh, G.sw, G.ph, G.pw, G.dh, G.dw,
                                          G.groups};
  std::vector<TY> y(static_cast<std::size_t>(G.n * G.o * OH * OW));
  const std::int32_t y_min = relu ? y_zero : static_cast<std::int32_t>(lo_of<TY>());
  std::vector<std::int16_t> col(static_cast<std::size_t>(8 * ((cg * G.kh * G.kw + 3) / 4 * 4)));
  fn(x.data(), w.data(), bias ? b.data() : nullptr, y.data(), g, rq.data(), per_channel ? 1 : 0, y_zero, y_min,
     seed % 2 ? col.data() : nullptr);
  std::int64_t saturated = 0;
  for (int n = 0; n < G.n; ++n)
    for (int o = 0; o < G.o; ++o)
      for (int p = 0; p < OH; ++p)
        for (int q = 0; q < OW; ++q) {
          std::int64_t acc = bias ? b[o] : 0;
          for (int c = 0; c < cg; ++c)
            for (int i = 0; i < G.kh; ++i)
              for (int j = 0; j < G.kw; ++j) {
                const int hi = p * G.sh - G.ph + i * G.dh, wi = q * G.sw - G.pw + j * G.dw;
                if (hi < 0 || hi >= G.h || wi < 0 || wi >= G.w) continue;  // zero padding
                const int ci = (o / og) * cg + c;
                acc += static_cast<std::int64_t>(x[((n * G.c + ci) * G.h + hi) * G.w + wi]) *
                       w[((o * cg + c) * G.kh + i) * G.kw + j];
              }
          const int k = per_channel ? 2 * o : 0;
          const std::int64_t want = std::max<std::int64_t>(y_min, out_of<TY>(ref_rq(acc, rq[k], rq[k + 1]), y_zero));
          saturated += want == lo_of<TY>() || want == hi_of<TY>();
          REQUIRE(y[((n * G.o + o) * OH + p) * OW + q] == want);
        }
  CHECK(saturated < static_cast<std::int64_t>(y.size()));  // the multipliers leave most outputs in range
}

}  // namespace

TEST_CASE("lower kernels: conv equals the exact cross-correlation requantized per channel, for every type combination") {
  // n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups
  const Geom conv1d{2, 3, 1, 17, 4, 1, 5, 1, 2, 0, 2, 1, 1, 1};         // stem: kernel 5, stride 2, padding 2
  const Geom depthwise1d{1, 6, 1, 12, 6, 1, 3, 1, 1, 0, 1, 1, 1, 6};    // groups == channels
  const Geom pointwise1d{2, 5, 1, 9, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1};     // kernel 1
  const Geom dilated1d{1, 2, 1, 15, 3, 1, 3, 1, 3, 0, 4, 1, 3, 1};      // dilation 3, padding past a whole tap
  const Geom grouped2d{1, 4, 5, 6, 6, 3, 2, 2, 1, 1, 1, 2, 1, 2};       // groups 2, dilation 2 along H
  const Geom depthwise2d{2, 3, 6, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3};     // channel multiplier 2
  const Geom conv2d{1, 3, 7, 7, 2, 3, 3, 2, 2, 0, 0, 1, 1, 1};          // stride 2, no padding
  Geom same{1, 2, 1, 8, 3, 1, 4, 1, 1, 0, 1, 1, 1, 1};                  // "same" for an even kernel: 1 before, 2 after
  same.pw_end = 2;
  const Geom one_tap{1, 1, 1, 3, 1, 1, 3, 1, 1, 0, 2, 1, 1, 1};          // windows with one tap inside
  const Geom padded_pointwise{2, 4, 2, 5, 3, 1, 1, 1, 2, 1, 1, 1, 1, 1};  // kernel 1 reading the padding
  check_conv(mt_conv_s8_s8_s8, conv1d, true, true, -5, false, 1);
  check_conv(mt_conv_s8_s8_s8, depthwise1d, true, true, 0, true, 2);
  check_conv(mt_conv_s8_s8_s8, pointwise1d, false, false, 3, false, 3);
  check_conv(mt_conv_s8_s8_s8, dilated1d, true, true, 0, false, 4);
  check_conv(mt_conv_s8_s8_s8, grouped2d, true, true, -128, true, 5);
  check_conv(mt_conv_s8_s8_s8, depthwise2d, true, true, 0, false, 6);
  check_conv(mt_conv_s8_s8_s8, conv2d, true, false, 0, false, 7);
  check_conv(mt_conv_s8_s8_s8, same, true, true, 0, false, 8);
  check_conv(mt_conv_s8_s8_s8, one_tap, true, true, 0, false, 9);
  check_conv(mt_conv_s8_s8_s8, padded_pointwise, true, true, 0, false, 18);
  check_conv(mt_conv_s16_s8_s16, padded_pointwise, true, true, 0, false, 19);
  check_conv(mt_conv_s8_s8_s16, conv1d, true, true, 0, true, 10);
  check_conv(mt_conv_s8_s16_s8, depthwise2d, true, true, 0, false, 11);
  check_conv(mt_conv_s8_s16_s16, grouped2d, true, true, 0, false, 12);
  check_conv(mt_conv_s16_s8_s8, conv1d, true, true, 2, false, 13);
  check_conv(mt_conv_s16_s8_s16, dilated1d, false, true, 0, false, 14);
  check_conv(mt_conv_s16_s16_s8, pointwise1d, true, true, 0, true, 15);
  check_conv(mt_conv_s16_s16_s16, conv2d, true, true, 0, false, 16);
  check_conv(mt_conv_s16_s16_s16, depthwise1d, true, false, 0, true, 17);

  // all-extreme int8 inputs at the int32 accumulator's bound: 131071 taps of (-128)(-128)
  const int taps = 131071;
  std::vector<std::int8_t> x(taps, -128), w(taps, -128);
  std::int16_t y = 0;
  const std::int32_t g[MT_CONV_FIELDS] = {1, taps, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1};
  const std::int32_t down[2] = {0, 17};  // 2^-17: (2^31 - 2^14) / 2^17 rounds to 16384
  mt_conv_s8_s8_s16(x.data(), w.data(), nullptr, &y, g, down, 0, 0, -32768, nullptr);
  CHECK(y == 16384);
}

namespace {

template <class T>
void check_pools(int planes, int h, int w, int kh, int kw, int sh, int sw, int ph, int pw, std::int32_t zero,
                 std::uint32_t seed) {
  std::mt19937 gen(seed);
  const auto x = random_ints<T>(gen, static_cast<std::size_t>(planes * h * w));
  for (int mode = -1; mode < 3; ++mode) {  // -1: max; 0, 1, 2: the means
    const int oh = mode == 2 ? std::max(1, h / 2 + 1) : (h + 2 * ph - kh) / sh + 1;
    const int ow = mode == 2 ? std::max(1, w / 2 + 1) : (w + 2 * pw - kw) / sw + 1;
    const std::int32_t g[MT_POOL_FIELDS] = {planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, mode < 0 ? 0 : mode};
    std::vector<T> y(static_cast<std::size_t>(planes * oh * ow));
    if (mode < 0) {
      if constexpr (sizeof(T) == 1) mt_max_pool_s8(x.data(), y.data(), g);
      else mt_max_pool_s16(x.data(), y.data(), g);
    } else {
      if constexpr (sizeof(T) == 1) mt_avg_pool_s8(x.data(), y.data(), g, zero);
      else mt_avg_pool_s16(x.data(), y.data(), g, zero);
    }
    for (int t = 0; t < planes; ++t)
      for (int p = 0; p < oh; ++p)
        for (int q = 0; q < ow; ++q) {
          int h0, h1, w0, w1;
          if (mode == 2) {
            h0 = p * h / oh, h1 = ((p + 1) * h + oh - 1) / oh, w0 = q * w / ow, w1 = ((q + 1) * w + ow - 1) / ow;
          } else {
            h0 = std::max(0, p * sh - ph), h1 = std::min(h, p * sh - ph + kh);
            w0 = std::max(0, q * sw - pw), w1 = std::min(w, q * sw - pw + kw);
          }
          std::int64_t best = lo_of<T>(), sum = 0;
          for (int i = h0; i < h1; ++i)
            for (int j = w0; j < w1; ++j) {
              const std::int64_t v = x[(t * h + i) * w + j];
              best = std::max(best, v), sum += v - zero;
            }
          const std::int64_t d = mode == 0 ? kh * kw : (h1 - h0) * (w1 - w0);
          // round(sum / d), ties away from zero: exact with twice the values
          const std::int64_t mean = sum >= 0 ? (2 * sum + d) / (2 * d) : -((-2 * sum + d) / (2 * d));
          const std::int64_t want = mode < 0 ? best : out_of<T>(mean, zero);
          REQUIRE(y[(t * oh + p) * ow + q] == want);
        }
  }
}

}  // namespace

TEST_CASE("lower kernels: max and average pooling equal the exact maximum and the mean rounded once") {
  check_pools<std::int8_t>(3, 1, 11, 1, 3, 1, 2, 0, 1, 0, 1);    // 1-D, padding
  check_pools<std::int8_t>(2, 5, 6, 2, 3, 2, 2, 1, 1, -20, 2);   // 2-D, zero point
  check_pools<std::int8_t>(4, 1, 8, 1, 2, 1, 2, 0, 0, 0, 3);     // the stem's max pool
  check_pools<std::int16_t>(2, 4, 7, 3, 3, 1, 2, 1, 1, 0, 4);
  check_pools<std::int16_t>(1, 1, 9, 1, 4, 1, 1, 0, 2, 0, 5);
}
