// benchmarks/bench_steps.cpp — every step of steps.hpp as a Google Benchmark, and the peak
// memory of MultiheadAttention forward+backward.
#include "benchmarks.hpp"
#include "steps.hpp"

namespace bench {

namespace {

void timed_step(benchmark::State& state, const std::string& name, int threads) {
  ThreadScope scope(threads);
  const auto step = make_step(name);
  for (auto _ : state) step->run();
  if (const double flops = step_flops(name); flops > 0) state.counters["flop"] = flops;
}

}  // namespace

void register_step_benchmarks(int t) {
  for (const std::string& name : step_names()) {
    benchmark::RegisterBenchmark((name + "/threads:" + std::to_string(t)).c_str(), timed_step, name, t)
        ->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
}

/// Peak memory of MultiheadAttention forward+backward at shape s, for peak_memory_bytes:
/// after a warm-up run (first-use costs such as BLAS buffers are not the op's) the blocks it
/// left in microtorch's cache are returned, then three runs are measured together, so that
/// the peak includes what the cache holds between runs of a training loop.
std::int64_t mha_peak_memory(const AttentionShape& s) {
  const auto step = make_step("mha_fwd_bwd/" + shape_tag(s));
  step->run();
  microtorch::memory::empty_cache();
  return peak_memory_bytes([&] {
    for (int i = 0; i < 3; ++i) step->run();
  });
}

}  // namespace bench
