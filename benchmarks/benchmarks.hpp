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

/// "8x64x64x4": batch x seq x embed x heads.
inline std::string shape_tag(const AttentionShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.seq) + "x" + std::to_string(s.embed) + "x" +
         std::to_string(s.heads);
}

void register_attention_benchmarks(int threads);
void register_kernel_benchmarks(int threads);
void register_training_benchmarks(int threads);
std::int64_t mha_peak_memory(const AttentionShape& s);

}  // namespace bench
