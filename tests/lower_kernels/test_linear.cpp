// The linear family of the runtime (src/lower/runtime/mt_linear.c): every type combination of
// the linear layer and both matmuls equal the exact integer result requantized once.
#include "kernel_reference.hpp"

using namespace kernel_ref;

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
