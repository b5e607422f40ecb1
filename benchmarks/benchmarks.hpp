// benchmarks/benchmarks.hpp — what the benchmark files share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <microtorch/microtorch.hpp>

#include "peak_memory.hpp"
#include "shapes.hpp"

namespace bench {

/// microtorch::set_num_threads(n) for one benchmark, back to 1 afterwards.
struct ThreadScope {
  explicit ThreadScope(int n) { microtorch::set_num_threads(n); }
  ~ThreadScope() { microtorch::set_num_threads(1); }
};

void register_sgemm_benchmark(int threads);
void register_step_benchmarks(int threads);
std::int64_t mha_peak_memory(const AttentionShape& s);
/// One core's float FMA rate in GFLOP/s on the attention kernels' vectors (0 for the baseline).
double fma_peak_gflops();

}  // namespace bench
