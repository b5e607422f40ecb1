// benchmarks/bench_kernels.cpp — the reference sgemm rate, matmul and softmax.
//
//   sgemm         cblas_sgemm on 1024 x 1024 x 1024, no microtorch in between: the FLOP
//                 rate every "% of sgemm" in the table is relative to
//   matmul        microtorch::matmul of two n x n float32 matrices (no graph)
//   softmax       microtorch::softmax over the last dim of [rows, n] (no graph)
#include "benchmarks.hpp"

#include <cblas.h>

#include <vector>

namespace mt = microtorch;

namespace bench {

namespace {

void sgemm(benchmark::State& state, int n, int threads) {
  ThreadScope scope(threads);
  std::vector<float> a(static_cast<std::size_t>(n) * n, 0.5f), b(a), c(a);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["flop"] = 2.0 * n * n * n;
}

void matmul(benchmark::State& state, int n, int threads) {
  ThreadScope scope(threads);
  mt::manual_seed(0);
  const mt::Tensor a = mt::randn({n, n}), b = mt::randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(mt::matmul(a, b).data<float>());
  state.counters["flop"] = 2.0 * n * n * n;
}

void softmax(benchmark::State& state, int rows, int n, int threads) {
  ThreadScope scope(threads);
  mt::manual_seed(0);
  const mt::Tensor x = mt::randn({rows, n});
  for (auto _ : state) benchmark::DoNotOptimize(mt::softmax(x, -1).data<float>());
}

}  // namespace

void register_kernel_benchmarks(int t) {
  const std::string threads = "/threads:" + std::to_string(t);
  benchmark::RegisterBenchmark(("sgemm/1024" + threads).c_str(), sgemm, 1024, t)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  for (int n : {64, 256}) {
    benchmark::RegisterBenchmark(("matmul/" + std::to_string(n) + threads).c_str(), matmul, n, t)
        ->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
  for (auto [rows, n] : {std::pair{256, 16}, std::pair{16384, 512}}) {
    benchmark::RegisterBenchmark(("softmax/" + std::to_string(rows) + "x" + std::to_string(n) + threads).c_str(),
                                 softmax, rows, n, t)
        ->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace bench
