// The reduce family of the runtime (src/lower/runtime/mt_reduce.c): the sum over the middle dim
// equals the exact integer sum requantized once; argmax takes the first max.
#include "kernel_reference.hpp"

using namespace kernel_ref;

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
