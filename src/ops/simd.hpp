// Internal: one-register vectors for the float kernels compiled per ISA (softmax_rows.cpp,
// attention_rows.cpp). Vec is 16 floats (GCC vector extensions): one AVX-512 register in
// the avx512f clone of a MICROTORCH_CLONES function, split into narrower registers by the
// compiler in the others. Every helper is always_inline, so it is compiled into each clone.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

// Vec values never cross a call boundary (every helper is always_inline), so GCC's note that
// passing them would differ between the clones' ABIs does not apply.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define MICROTORCH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MICROTORCH_CLONES
#endif

namespace microtorch::detail::simd {

constexpr int kLanes = 16;
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
typedef std::int32_t IVec __attribute__((vector_size(kLanes * sizeof(float))));
typedef double VecD __attribute__((vector_size(kLanes * sizeof(float))));  // 8 doubles

[[gnu::always_inline]] inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline VecD load(const double* p) {
  VecD v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
[[gnu::always_inline]] inline void store(double* p, VecD v) { std::memcpy(p, &v, sizeof v); }

// e^x for x <= 0 (softmax exponentiates x - max): e^x = 2^n e^r with n = round(x log2 e)
// and r = x - n ln 2 in [-ln2/2, ln2/2] (Cody-Waite: ln 2 in two parts), e^r by Cephes'
// expf polynomial (relative error ~1e-7), 2^n put into the exponent bits. Below
// -87.3 (e^x < 2^-126, and -inf from masks) the result is exactly 0; NaN stays NaN.
template <class V, class I>
[[gnu::always_inline]] inline V exp_nonpositive(V x) {
  const V low = V{} - 87.3f;
  const V xc = x < low ? low : x;  // a NaN passes through
  const V n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // + 1.5 * 2^23 rounds
  const V r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  V p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  I bits;
  if constexpr (std::is_same_v<V, float>) {
    if (n != n) return x;  // NaN: converting it to an integer would be undefined
    bits = static_cast<I>(static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23);  // n + 127 in [1, 127]
  } else {
    bits = (__builtin_convertvector(n, I) + 127) << 23;
  }
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const V one = V{} + 1.0f, zero = V{};
  return p * scale * (x < low ? zero : one);
}

// Transpose of W vectors of W lanes in registers (W = 16 floats or 8 doubles): x[i][l]
// becomes x[l][i]. Recursive block swap: the step for s exchanges, in each pair of rows
// (i, i + s) with i & s = 0, the lanes l & s != 0 of row i with the lanes l & s = 0 of row
// i + s; the steps s = W / 2, ..., 2, 1 transpose the whole. One two-source shuffle per
// row per step: W log2 W shuffles.
template <int s, class V, int... l>
[[gnu::always_inline]] inline V swap_low(V a, V b, std::integer_sequence<int, l...>) {
  return __builtin_shufflevector(a, b, ((l & s) ? int(sizeof...(l)) + l - s : l)...);
}
template <int s, class V, int... l>
[[gnu::always_inline]] inline V swap_high(V a, V b, std::integer_sequence<int, l...>) {
  return __builtin_shufflevector(a, b, ((l & s) ? int(sizeof...(l)) + l : l + s)...);
}
template <int s, class V, int W>
[[gnu::always_inline]] inline void transpose_step(V (&x)[W]) {
  constexpr auto lanes = std::make_integer_sequence<int, W>{};
  _Pragma("GCC unroll 16") for (int i = 0; i < W; ++i) {
    if (i & s) continue;
    const V low = swap_low<s>(x[i], x[i + s], lanes), high = swap_high<s>(x[i], x[i + s], lanes);
    x[i] = low;
    x[i + s] = high;
  }
  if constexpr (s > 1) transpose_step<s / 2>(x);
}
template <class V, int W>
[[gnu::always_inline]] inline void transpose(V (&x)[W]) {
  static_assert(sizeof(V) / sizeof(x[0][0]) == W, "transpose: W vectors of W lanes");
  transpose_step<W / 2>(x);
}

}  // namespace microtorch::detail::simd
