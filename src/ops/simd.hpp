// Internal: vectors for the float kernels (GCC vector extensions).
//
// Vec is 16 floats: one AVX-512 register in the avx512f clone of a MICROTORCH_CLONES
// function, split into narrower registers by the compiler in the others (softmax_rows.cpp).
// Every helper is always_inline, so it is compiled into each clone.
//
// Kernels that keep a tile of accumulators in registers (gemm_tiles.hpp) need the vector
// width and register count of the ISA they run on instead: the Isa structs below name each
// one's vectors and tile, MICROTORCH_TARGET_* compiles a function for it, and
// MICROTORCH_ISAS_* say which ones the build compiles (parallel.cpp's cpu_isa() picks one).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

// Clones are chosen by an ifunc resolver, which the dynamic loader runs while it relocates the
// library; under ThreadSanitizer that is before the TSan runtime is set up, and the resolver
// of a file-local clone (instrumented) crashes there: TSan builds compile the default only.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
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

// ---- instruction sets for register-tiled kernels ------------------------------------

// A tile of C is kRows rows x kVectors vectors in registers, plus kVectors vectors of B and
// one broadcast of A: 6 x 4 + 5 = 29 of AVX-512's 32 registers, 6 x 2 + 3 = 15 of AVX2's
// and SSE2's 16.
struct Avx512 {
  typedef float F __attribute__((vector_size(64)));
  typedef double D __attribute__((vector_size(64)));
  typedef std::int32_t I __attribute__((vector_size(64)));
  static constexpr int kRows = 6, kVectors = 4;
};
struct Avx2 {
  typedef float F __attribute__((vector_size(32)));
  typedef double D __attribute__((vector_size(32)));
  typedef std::int32_t I __attribute__((vector_size(32)));
  static constexpr int kRows = 6, kVectors = 2;
};
struct Baseline {  // SSE2 on x86-64, NEON on AArch64: 16-byte vectors everywhere
  typedef float F __attribute__((vector_size(16)));
  typedef double D __attribute__((vector_size(16)));
  typedef std::int32_t I __attribute__((vector_size(16)));
  static constexpr int kRows = 6, kVectors = 2;
};

template <class Isa, class T>
using VecOf = std::conditional_t<std::is_same_v<T, float>, typename Isa::F, typename Isa::D>;
template <class Isa, class T>
constexpr int kLanesOf = static_cast<int>(sizeof(VecOf<Isa, T>) / sizeof(T));

template <class V, class T>
[[gnu::always_inline]] inline V load_vec(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class T>
[[gnu::always_inline]] inline void store_vec(T* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// The build compiles every ISA and picks one at load time, unless its flags fix one: a
// build with -march=native (or -march=skylake-avx512, ...) defines __AVX512F__ and
// compiles the AVX-512 kernels only, one with -march=haswell (__AVX2__, __FMA__) the AVX2
// ones only (CMSIS-NN's way: the variant follows the feature macros).
#if defined(__x86_64__) && defined(__GNUC__)
#define MICROTORCH_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define MICROTORCH_TARGET_AVX2 __attribute__((target("avx2,fma")))
#if defined(__AVX512F__)
#define MICROTORCH_ISAS_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__)
#define MICROTORCH_ISAS_AVX2 1
#else
#define MICROTORCH_ISAS_AVX512 1
#define MICROTORCH_ISAS_AVX2 1
#define MICROTORCH_ISAS_BASELINE 1
#endif
#else
#define MICROTORCH_ISAS_BASELINE 1
#endif

// 2^t for t <= 0 (a softmax's exponent, in base 2, after the row max is subtracted):
// n = round(t), f = t - n in [-1/2, 1/2], 2^f = 1 + f P(f) (Cephes' exp2f polynomial,
// relative error below 2e-7), 2^n put into the exponent bits. Below -126 (2^t under
// FLT_MIN, and -inf from masks) the result is exactly 0; NaN stays NaN.
template <class V, class I>
[[gnu::always_inline]] inline V exp2_nonpositive(V t) {
  const V low = V{} - 126.0f;
  const V tc = t < low ? low : t;  // a NaN passes through
  const V n = (tc + 12582912.0f) - 12582912.0f;  // + 1.5 * 2^23 rounds to an integer
  const V f = tc - n;
  V p = f * 1.535336188319500e-4f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.0f;
  const I bits = (__builtin_convertvector(n, I) + 127) << 23;  // n + 127 in [1, 127]
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return t < low ? V{} : p * scale;
}

}  // namespace microtorch::detail::simd
