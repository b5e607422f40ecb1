// benchmarks/paired_api.cpp — libmicrotorch-bench-steps: the steps of steps.hpp and the
// reference sgemm behind a C interface, so that tools/bench_paired.py can time microtorch
// and PyTorch in one process, one run of each after the other (both load the same
// OpenBLAS). Machine speed drifts by tens of percent within seconds on a shared host;
// samples taken back to back see the same machine, so their ratios are stable when
// medians of separate runs are not.
#include <cblas.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <microtorch/parallel.hpp>

#include "steps.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

extern "C" {

/// microtorch's thread count, as set_num_threads (which also keeps OpenBLAS at one thread a call).
void mtb_set_threads(int n) { microtorch::set_num_threads(n); }

/// OpenBLAS's own thread count alone, for the PyTorch side and the reference sgemm:
/// torch.set_num_threads sets its OpenMP threads but leaves the OpenBLAS that both libraries
/// load as it is.
void mtb_set_blas_threads(int n) { openblas_set_num_threads(n); }

/// The OpenBLAS kernel set in use.
const char* mtb_blas_core() { return openblas_get_corename(); }

/// The step of steps.hpp called `name`; null for an unknown name.
void* mtb_step_new(const char* name) {
  try {
    return bench::make_step(name).release();
  } catch (const std::invalid_argument&) {
    return nullptr;
  }
}

void mtb_step_free(void* step) { delete static_cast<bench::Step*>(step); }

/// Every step name, one per line, in table order.
const char* mtb_step_names() {
  static const std::string names = [] {
    std::string all;
    for (const std::string& n : bench::step_names()) all += (all.empty() ? "" : "\n") + n;
    return all;
  }();
  return names.c_str();
}

/// GEMM FLOPs of one run of the step (0 when it is not GEMM-bound).
double mtb_step_flops(const char* name) { return bench::step_flops(name); }

/// Wall-clock seconds of `runs` runs of the step.
double mtb_step_seconds(void* step, int runs) {
  auto* s = static_cast<bench::Step*>(step);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) s->run();
  return seconds_since(t0);
}

/// Wall-clock seconds of `runs` cblas_sgemm calls on n x n matrices (the reference rate,
/// 2 n^3 FLOPs per call; the same call as microtorch-bench's sgemm/1024).
double mtb_sgemm_seconds(int n, int runs) {
  static std::vector<float> a, b, c;
  const auto size = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  if (a.size() != size) a.assign(size, 0.5f), b.assign(size, 0.5f), c.assign(size, 0.0f);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
                n);
  }
  return seconds_since(t0);
}

}  // extern "C"
