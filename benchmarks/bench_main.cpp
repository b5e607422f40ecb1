// benchmarks/bench_main.cpp — microtorch-bench: Google Benchmark's runner plus one extra mode.
//
//   microtorch-bench [--threads=1,2] [Google Benchmark flags]   time everything
//   microtorch-bench --peak-memory=I                            peak bytes of one MHA
//                                                               forward+backward at kShapes[I]
//   microtorch-bench --blas-core                                the kernel set OpenBLAS chose
//   microtorch-bench --cpu-capability                           the ISA microtorch's attention runs
//   microtorch-bench --fma-peak                                 one core's FMA GFLOP/s on its vectors
//
// tools/bench_table.py runs both (each peak in a fresh process) and prints the table.
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>

#include <cblas.h>

#include "benchmarks.hpp"

int main(int argc, char** argv) {
  std::vector<int> threads{1, 2};
  std::vector<char*> args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--peak-memory=", 0) == 0) {
      const auto& s = bench::kShapes.at(std::stoul(a.substr(14)));
      std::printf("%lld\n", static_cast<long long>(bench::mha_peak_memory(s)));
      return 0;
    }
    if (a == "--blas-core") {
      std::printf("%s\n", openblas_get_corename());
      return 0;
    }
    if (a == "--cpu-capability") {
      std::printf("%s\n", microtorch::get_cpu_capability());
      return 0;
    }
    if (a == "--fma-peak") {
      std::printf("%.1f\n", bench::fma_peak_gflops());
      return 0;
    }
    if (a.rfind("--threads=", 0) == 0) {
      threads.clear();
      std::stringstream list(a.substr(10));
      for (std::string t; std::getline(list, t, ',');) threads.push_back(std::stoi(t));
      continue;
    }
    args.push_back(argv[i]);
  }
  // All single-thread runs first, and each multi-thread sgemm after its steps: OpenBLAS's
  // workers spin for ~0.1 s after a multi-threaded call, taking a core from what follows.
  for (int t : threads) {
    bench::register_step_benchmarks(t);
    bench::register_sgemm_benchmark(t);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
