// benchmarks/fma_peak.cpp — the roofline: one core's float FMA rate on the vectors of the
// instruction set microtorch's attention kernels run (get_cpu_capability()). Twelve
// independent accumulator chains, each step a fused multiply-add per chain (2 FLOPs per
// lane): more chains than FMA latency x FMA ports on current x86 cores (4 x 2), so the
// loop is bound by FMA throughput alone, as a GEMM micro-kernel at its best is.
#include "benchmarks.hpp"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <string>

namespace bench {

namespace {

constexpr int kChains = 12;

// GFLOP/s of one timed run: `steps` x kChains FMAs on vectors of `lanes` floats in `seconds`.
double rate(int lanes, long steps, double seconds) {
  return 2.0 * lanes * kChains * static_cast<double>(steps) / seconds / 1e9;
}

// The best of five runs, for vectors V of LANES floats by FMA and SET1 (one function per
// instruction set, each compiled for it by its target attribute, which a lambda or a
// template argument would not inherit).
#define MT_FMA_PEAK(NAME, TARGET, V, LANES, FMA, SET1)                                             \
  __attribute__((target(TARGET))) double NAME(long steps) {                                        \
    double best = 0;                                                                              \
    for (int run = 0; run < 5; ++run) {                                                           \
      V c[kChains];                                                                               \
      for (int j = 0; j < kChains; ++j) c[j] = SET1(static_cast<float>(j)); /* no two chains merge */ \
      V a = SET1(1e-7f);                                                                          \
      const V b = SET1(1.0f);                                                                     \
      const auto t0 = std::chrono::steady_clock::now();                                           \
      for (long i = 0; i < steps; ++i) {                                                          \
        asm volatile("" : "+x"(a)); /* unknown to the compiler each step: nothing is hoisted */   \
        for (int j = 0; j < kChains; ++j) c[j] = FMA(a, b, c[j]);                                 \
      }                                                                                           \
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); \
      for (const V& v : c) benchmark::DoNotOptimize(v);                                           \
      best = std::max(best, rate(LANES, steps, s));                                               \
    }                                                                                             \
    return best;                                                                                  \
  }

MT_FMA_PEAK(avx512_rate, "avx512f", __m512, 16, _mm512_fmadd_ps, _mm512_set1_ps)
MT_FMA_PEAK(avx2_rate, "avx2,fma", __m256, 8, _mm256_fmadd_ps, _mm256_set1_ps)
#undef MT_FMA_PEAK

}  // namespace

double fma_peak_gflops() {
  const std::string isa = microtorch::get_cpu_capability();
  if (isa == "avx512") return avx512_rate(50'000'000);
  if (isa == "avx2") return avx2_rate(100'000'000);
  return 0;  // the baseline kernels have no FMA to measure
}

}  // namespace bench
