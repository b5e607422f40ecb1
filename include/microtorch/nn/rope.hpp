/// \file
/// RotaryEmbedding: rotary position embedding (RoPE, Su et al., "RoFormer", 2021) as in Llama,
/// Qwen2 and llama2.c.
///
/// \code
///   nn::RotaryEmbedding rope(/*head_dim=*/32, {.max_seq_len = 256});
///   Tensor q = randn({2, 10, 4, 32});       // [N, L, H, D]
///   Tensor q0 = rope.forward(q);            // positions 0..9
///   Tensor q7 = rope.forward(q, 7);         // positions 7..16 (after 7 cached ones)
/// \endcode
#pragma once

#include <cstdint>
#include <string>

#include "microtorch/nn/module.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::nn {

/// Constructor options of RotaryEmbedding.
struct RotaryEmbeddingOptions {
  double base = 10000.0;           ///< theta_i = base^(-2i / D) (Llama 3 and Qwen2 use larger bases)
  bool interleaved = false;        ///< pairs (2i, 2i + 1) (RoFormer, Meta's Llama, llama2.c); else (i, i + D/2) (Hugging Face)
  std::int64_t max_seq_len = 4096;  ///< positions 0 .. max_seq_len - 1 have a row in the tables
  Dtype dtype = Dtype::Float32;    ///< of the tables
};

/// Turns the head features of queries or keys by their position: the pair i of position p by
/// the angle p theta_i, theta_i = base^(-2i / D), so that q_m . k_n depends on m - n only
/// (see rotary_embedding in ops.hpp for the layouts). The tables cos_cached and sin_cached,
/// [max_seq_len, D/2], are computed once in float64 and stored in the options' dtype; they are
/// non-persistent buffers (as Hugging Face's inv_freq), left out of the state dict.
class RotaryEmbedding : public Module {
 public:
  /// Tables for head_dim features (even and positive; ValueError otherwise) at positions
  /// 0 .. max_seq_len - 1 (positive; a base <= 0 throws ValueError too).
  explicit RotaryEmbedding(std::int64_t head_dim, RotaryEmbeddingOptions options = {});
  /// x [N, L, H, head_dim] (or any [..., L, H, head_dim]) at positions 0 .. L - 1.
  Tensor forward(const Tensor& x) override { return forward(x, std::int64_t{0}); }
  /// x at positions offset .. offset + L - 1: the new positions after `offset` cached ones.
  /// Positions beyond max_seq_len throw ValueError; a last dim other than head_dim, or fewer
  /// than 3 dims, ShapeError.
  Tensor forward(const Tensor& x, std::int64_t offset);
  /// x [N, L, H, head_dim] at the int64 positions [L] (shared by the batch) or [N, L] (one
  /// row per sequence, e.g. left-padded prompts); each in [0, max_seq_len) (ValueError).
  Tensor forward(const Tensor& x, const Tensor& positions);
  std::string extra_repr() const override;

  std::int64_t head_dim;           ///< D, the features of one head
  RotaryEmbeddingOptions options;  ///< as given to the constructor
  Tensor cos_cached;               ///< [max_seq_len, D/2]: cos(p theta_i), a non-persistent buffer
  Tensor sin_cached;               ///< [max_seq_len, D/2]: sin(p theta_i), a non-persistent buffer

 private:
  void check_input(const Tensor& x) const;
};

}  // namespace microtorch::nn
