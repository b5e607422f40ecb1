// microtorch/nn/attention.hpp — ScaledDotProductAttention and MultiheadAttention.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "microtorch/mask.hpp"
#include "microtorch/nn/layers.hpp"

namespace microtorch::nn {

/// The module form of microtorch::scaled_dot_product_attention (see ops.hpp): dropout on
/// the weights in training, an optional fixed scale (0 = 1/sqrt(D)).
class ScaledDotProductAttention : public Module {
 public:
  explicit ScaledDotProductAttention(double dropout = 0.0, double scale = 0.0) : dropout(dropout), scale(scale) {}
  /// (output [N.., L, Dv], weights [N.., L, S]).
  std::tuple<Tensor, Tensor> forward(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask = Mask(),
                                     bool is_causal = false);
  std::string extra_repr() const override;
  double dropout, scale;
};

/// torch.nn.MultiheadAttention's constructor options.
struct MultiheadAttentionOptions {
  bool bias = true;
  double dropout = 0.0;    ///< on the attention weights, in training
  std::int64_t kdim = 0;   ///< key features (0 = embed_dim)
  std::int64_t vdim = 0;   ///< value features (0 = embed_dim)
  bool batch_first = false;
  Dtype dtype = Dtype::Float32;
};

/// torch.nn.MultiheadAttention.forward's keyword arguments, with PyTorch's polarity:
/// a bool key_padding_mask / attn_mask is true where attention is *not* allowed; a float
/// one is added to the scores. `mask` takes a microtorch Mask (true = may attend) that
/// broadcasts against N x H x L x S; all given masks combine.
struct MhaForwardOptions {
  Tensor key_padding_mask{};  ///< [N, S] (or [S] unbatched)
  bool need_weights = true;
  Tensor attn_mask{};         ///< [L, S] or [N * num_heads, L, S]
  bool average_attn_weights = true;
  bool is_causal = false;   ///< add Mask::causal(L, S)
  Mask mask{};
};

/// Multi-head attention with PyTorch's parameter names, so a torch state dict loads
/// unchanged: in_proj_weight [3E, E] and in_proj_bias [3E] (or q_proj_weight [E, E],
/// k_proj_weight [E, kdim], v_proj_weight [E, vdim] when kdim or vdim differ from E),
/// out_proj.weight, out_proj.bias. Heads come from one projection reshaped
/// N x L x E -> N x H x L x D (D = E / H), not from H small layers.
///
/// \code
///   nn::MultiheadAttention mha(8, 2, {.batch_first = true});
///   auto [out, w] = mha.forward(x, x, x, {.key_padding_mask = padded});  // w: [N, L, S]
/// \endcode
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, MultiheadAttentionOptions options = {});
  /// (output, weights): output like query ([N, L, E] batch_first, [L, N, E] otherwise,
  /// [L, E] unbatched); weights [N, L, S] averaged over heads or [N, H, L, S]; weights are
  /// undefined when need_weights is false.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const MhaForwardOptions& options = {});
  /// Self-attention on one input: forward(x, x, x).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();

  std::int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight, in_proj_bias;                  // packed when kdim == vdim == embed_dim
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;   // separate otherwise
  std::shared_ptr<Linear> out_proj;

 private:
  /// The combined mask of the forward options, broadcastable to [N, H, L, S].
  Mask combined_mask(const MhaForwardOptions& o, std::int64_t N, std::int64_t L, std::int64_t S) const;
};

}  // namespace microtorch::nn
