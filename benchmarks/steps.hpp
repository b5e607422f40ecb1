// benchmarks/steps.hpp — the timed units of work, shared by microtorch-bench (Google
// Benchmark, bench_attention.cpp / bench_training.cpp) and the paired harness
// (paired_api.cpp, driven by tools/bench_paired.py), so both time exactly the same code.
//
//   mha_fwd          MultiheadAttention(E, H, batch_first) forward on x [N, L, E], graph recorded
//   mha_fwd_bwd      zero_grad, forward, loss = output.sum(), backward
//   mha_infer        forward under NoGradGuard
//   sdpa_fwd_bwd     scaled_dot_product_attention on q, k, v [N, H, L, E / H] that require grad
//   iris_train_step  one Adam step of the Iris transformer (iris_model.hpp) on 16 flowers
//
// A step builds its module and inputs once (seeded with 0); run() does one unit and keeps
// nothing of it (every tensor it makes is freed before run() returns).
#pragma once

#include <memory>
#include <string>

#include "shapes.hpp"

namespace bench {

class Step {
 public:
  virtual ~Step() = default;
  virtual void run() = 0;
};

/// The step called `kind` (the list above) at shape s (iris_train_step ignores s); null
/// for an unknown kind.
std::unique_ptr<Step> make_step(const std::string& kind, const AttentionShape& s);

/// GEMM FLOPs of one run of `kind` at s (0 when the step is not GEMM-bound).
double step_flops(const std::string& kind, const AttentionShape& s);

}  // namespace bench
