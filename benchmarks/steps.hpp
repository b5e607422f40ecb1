// benchmarks/steps.hpp — the timed units of work, by name. microtorch-bench (Google
// Benchmark) registers each as "<name>/threads:<t>"; the paired harness (paired_api.cpp,
// driven by tools/bench_paired.py) runs the same steps next to PyTorch's
// (tools/bench_torch.py defines the PyTorch side under the same names).
//
//   matmul/<n>                    microtorch::matmul of two n x n float32 matrices (no graph)
//   softmax/<rows>x<n>            softmax over the last dim of [rows, n] (no graph)
//   mha_fwd/<shape>               MultiheadAttention(E, H, batch_first) on x [N, L, E], graph recorded
//   mha_fwd_bwd/<shape>           zero_grad, forward, loss = output.sum(), backward
//   mha_infer/<shape>             forward under NoGradGuard
//   attn_fwd_bwd/<shape>          the attention core alone: multi_head_attention on projected
//                                 q, k, v [N, L, E] that require grad (the weights averaged over
//                                 the heads, as MultiheadAttention returns them), loss =
//                                 output.sum(), backward
//   iris_train_step/batch:16      one Adam step of the Iris transformer (iris_model.hpp)
//   sensor_fwd/32x3x128           a sensor front end on x [32, 3, 128]: Conv1d 3 -> 16 (kernel 5,
//                                 stride 2, padding 2), depthwise Conv1d (kernel 3) on 16
//                                 channels, pointwise Conv1d 16 -> 32; graph recorded
//   sensor_fwd_bwd/32x3x128       zero_grad, the same forward, loss = output.sum(), backward
//   dscnn_pair_fwd/32x64x25x5     a DS-CNN layer pair on x [32, 64, 25, 5]: depthwise Conv2d 3x3
//                                 (padding 1) on 64 channels, pointwise Conv2d 64 -> 64
//   dscnn_pair_fwd_bwd/32x64x25x5 zero_grad, forward, loss = output.sum(), backward
//   decoder_train_step/16x128     one AdamW step of a decoder-only language model
//                                 (decoder_model.hpp) on 16 sequences of 128 tokens
//   decoder_decode/1x128          that model decoding 128 tokens one at a time through its KV
//                                 cache, batch 1, from an empty cache
//
// <shape> is NxLxExH (with weights) or NxLxExH-noweights (need_weights = false), one of
// kShapes. A step builds its module and inputs once (seeded with 0); run() does one unit
// and keeps nothing of it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "shapes.hpp"

namespace bench {

class Step {
 public:
  virtual ~Step() = default;
  virtual void run() = 0;
};

/// Every step name, in table order.
std::vector<std::string> step_names();

/// The step called `name`; throws std::invalid_argument for a name step_names() lacks.
std::unique_ptr<Step> make_step(const std::string& name);

/// GEMM FLOPs of one run (0 for steps that are not GEMM-bound).
double step_flops(const std::string& name);

/// "8x64x64x4": batch x seq x embed x heads; "1x4096x512x8-noweights" without weights.
std::string shape_tag(const AttentionShape& s);

}  // namespace bench
