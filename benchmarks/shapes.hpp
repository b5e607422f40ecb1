// benchmarks/shapes.hpp — the attention shapes both benchmark programs measure.
#pragma once

#include <array>
#include <cstdint>

namespace bench {

/// Self-attention on x [batch, seq, embed] with `heads` heads; need_weights as
/// MultiheadAttention's option (the weights averaged over the heads, its default).
struct AttentionShape {
  std::int64_t batch, seq, embed, heads;
  bool need_weights;
};

// The four shapes with weights, then long sequences without (no L x S buffer to return);
// tools/bench_torch.py and tools/bench_table.py list the same seven.
constexpr std::array<AttentionShape, 7> kShapes{{{1, 16, 32, 2, true},
                                                 {8, 64, 64, 4, true},
                                                 {8, 128, 256, 8, true},
                                                 {4, 512, 512, 8, true},
                                                 {1, 1024, 512, 8, false},
                                                 {1, 2048, 512, 8, false},
                                                 {1, 4096, 512, 8, false}}};

// GEMM FLOPs of one MultiheadAttention forward (self-attention): the input projection
// 2 N L E 3E, q k^T and P v 2 * 2 N L L E, the output projection 2 N L E E. Backward costs
// twice the forward's GEMMs.
constexpr double mha_forward_flops(const AttentionShape& s) {
  const double n = s.batch, l = s.seq, e = s.embed;
  return 2 * n * l * e * 3 * e + 4 * n * l * l * e + 2 * n * l * e * e;
}

// The attention core alone: q k^T and P v over the heads.
constexpr double attention_forward_flops(const AttentionShape& s) {
  const double n = s.batch, l = s.seq, e = s.embed;
  return 4 * n * l * l * e;
}

}  // namespace bench
