// benchmarks/bench_attention.cpp — MultiheadAttention and scaled_dot_product_attention
// (mha_fwd, mha_fwd_bwd, mha_infer, sdpa_fwd_bwd of steps.hpp) at every shape of kShapes.
#include "benchmarks.hpp"
#include "steps.hpp"

namespace bench {

namespace {

void attention_step(benchmark::State& state, std::string kind, AttentionShape s, int threads) {
  ThreadScope scope(threads);
  const auto step = make_step(kind, s);
  for (auto _ : state) step->run();
  state.counters["flop"] = step_flops(kind, s);
}

}  // namespace

void register_attention_benchmarks(int t) {
  for (const auto& s : kShapes) {
    for (const char* kind : {"mha_fwd", "mha_fwd_bwd", "mha_infer", "sdpa_fwd_bwd"}) {
      const std::string name = std::string(kind) + "/" + shape_tag(s) + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), attention_step, kind, s, t)
          ->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
  }
}

/// Peak memory of MultiheadAttention forward+backward at shape s, for peak_memory_bytes:
/// after a warm-up run (first-use costs such as BLAS buffers are not the op's) the blocks it
/// left in microtorch's cache are returned, then three runs are measured together, so that
/// the peak includes what the cache holds between runs of a training loop.
std::int64_t mha_peak_memory(const AttentionShape& s) {
  const auto step = make_step("mha_fwd_bwd", s);
  step->run();
  microtorch::memory::empty_cache();
  return peak_memory_bytes([&] {
    for (int i = 0; i < 3; ++i) step->run();
  });
}

}  // namespace bench
