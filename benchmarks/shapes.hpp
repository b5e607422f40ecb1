// benchmarks/shapes.hpp — the attention shapes both benchmark programs measure.
#pragma once

#include <array>
#include <cstdint>

namespace bench {

struct AttentionShape {
  std::int64_t batch, seq, embed, heads;
};

// (batch, seq, embed, heads); tools/bench_torch.py lists the same four.
constexpr std::array<AttentionShape, 4> kShapes{{{1, 16, 32, 2}, {8, 64, 64, 4}, {8, 128, 256, 8}, {4, 512, 512, 8}}};

// GEMM FLOPs of one MultiheadAttention forward (self-attention, need_weights): the input
// projection 2 N L E 3E, q k^T and P v 2 * 2 N L L E, the output projection 2 N L E E.
// Backward costs twice the forward's GEMMs.
constexpr double mha_forward_flops(const AttentionShape& s) {
  const double n = s.batch, l = s.seq, e = s.embed;
  return 2 * n * l * e * 3 * e + 4 * n * l * l * e + 2 * n * l * e * e;
}

// SDPA alone: q k^T and P v over the heads.
constexpr double sdpa_forward_flops(const AttentionShape& s) {
  const double n = s.batch, l = s.seq, e = s.embed;
  return 4 * n * l * l * e;
}

}  // namespace bench
