// benchmarks/bench_sgemm.cpp — the reference: cblas_sgemm on 1024 x 1024 x 1024 with no
// microtorch in between, on OpenBLAS's own threads (microtorch keeps OpenBLAS at one thread
// and splits products itself), the FLOP rate every "% sgemm" is relative to.
#include "benchmarks.hpp"

#include <cblas.h>

#include <vector>

namespace bench {

namespace {

void sgemm(benchmark::State& state, int n, int threads) {
  ThreadScope scope(threads);  // its end sets OpenBLAS back to one thread
  openblas_set_num_threads(threads);
  std::vector<float> a(static_cast<std::size_t>(n) * n, 0.5f), b(a), c(a);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["flop"] = 2.0 * n * n * n;
}

}  // namespace

void register_sgemm_benchmark(int t) {
  benchmark::RegisterBenchmark(("sgemm/1024/threads:" + std::to_string(t)).c_str(), sgemm, 1024, t)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace bench
