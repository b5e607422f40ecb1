/// \file
/// ScaledDotProductAttention and MultiheadAttention, with PyTorch's names and mask polarity.
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
  /// Dropout probability on the weights (in training) and a fixed scale (0 = 1/sqrt(D)).
  explicit ScaledDotProductAttention(double dropout = 0.0, double scale = 0.0) : dropout(dropout), scale(scale) {}
  /// scaled_dot_product_attention(q, k, v, mask, dropout in training else 0, is_causal,
  /// scale, enable_gqa): (output [N.., L, Dv], weights [N.., L, S]); enable_gqa lets k and v
  /// have fewer heads (dim -3) than q (grouped-query attention).
  std::tuple<Tensor, Tensor> forward(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask = Mask(),
                                     bool is_causal = false, bool enable_gqa = false);
  std::string extra_repr() const override;
  double dropout;  ///< the dropout probability on the attention weights, in training
  double scale;    ///< the score scale; 0 = 1/sqrt(D)
};

/// The constructor options of torch.nn.MultiheadAttention.
struct MultiheadAttentionOptions {
  bool bias = true;        ///< in_proj_bias and out_proj.bias
  double dropout = 0.0;    ///< on the attention weights, in training
  std::int64_t kdim = 0;   ///< key features (0 = embed_dim)
  std::int64_t vdim = 0;   ///< value features (0 = embed_dim)
  bool batch_first = false;  ///< inputs [N, L, E] when true, [L, N, E] (PyTorch's default) when false
  Dtype dtype = Dtype::Float32;  ///< of the parameters
  /// Grouped-query attention: key/value heads (0 = num_heads), each shared by num_heads /
  /// num_kv_heads query heads; fewer than num_heads gives separate projections q_proj_weight
  /// [E, E], k_proj_weight [num_kv_heads D, kdim], v_proj_weight [num_kv_heads D, vdim] and an
  /// in_proj_bias of E + 2 num_kv_heads D. (torch.nn.MultiheadAttention has no such option.)
  std::int64_t num_kv_heads = 0;
};

/// The keyword arguments of torch.nn.MultiheadAttention.forward, with PyTorch's polarity:
/// a bool key_padding_mask / attn_mask is true where attention is *not* allowed; a float
/// one is added to the scores. `mask` takes a microtorch Mask (true = may attend) that
/// broadcasts against N x H x L x S; all given masks combine.
struct MhaForwardOptions {
  Tensor key_padding_mask{};  ///< [N, S] (or [S] unbatched)
  bool need_weights = true;   ///< return the attention weights (false: undefined)
  Tensor attn_mask{};         ///< [L, S] or [N * num_heads, L, S]
  bool average_attn_weights = true;  ///< weights averaged over heads [N, L, S], else [N, H, L, S]
  bool is_causal = false;   ///< add Mask::causal(L, S)
  Mask mask{};              ///< a microtorch Mask (true = may attend), broadcast to [N, H, L, S]
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
  /// embed_dim E split into num_heads heads of E / num_heads features (ValueError unless
  /// both are positive and num_heads divides E, when options.num_kv_heads does not divide
  /// num_heads, or when dropout is outside [0, 1)).
  /// Initialised as in PyTorch: Xavier-uniform projections, zero biases.
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, MultiheadAttentionOptions options = {});
  /// (output, weights): output like query ([N, L, E] batch_first, [L, N, E] otherwise,
  /// [L, E] unbatched); weights [N, L, S] averaged over heads or [N, H, L, S]; weights are
  /// undefined when need_weights is false. Shapes that do not fit throw ShapeError naming
  /// them (a key_padding_mask of transposed shape suggests batch_first); masks of another
  /// dtype than bool or float throw DtypeError.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const MhaForwardOptions& options = {});
  /// Self-attention on one input: forward(x, x, x).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  /// Draws fresh parameters as the constructor does.
  void reset_parameters();

  std::int64_t embed_dim;  ///< E, the model width
  std::int64_t num_heads;  ///< H
  std::int64_t num_kv_heads;  ///< key/value heads (= H unless options.num_kv_heads asks for fewer)
  std::int64_t head_dim;   ///< D = E / H
  std::int64_t kdim;       ///< key features (embed_dim unless options.kdim was set)
  std::int64_t vdim;       ///< value features (embed_dim unless options.vdim was set)
  MultiheadAttentionOptions options;  ///< as given to the constructor
  Tensor in_proj_weight;  ///< [3E, E], the packed q, k, v projections (when kdim == vdim == E)
  Tensor in_proj_bias;    ///< [3E], or [E + 2 num_kv_heads D] (undefined without bias)
  ///@{
  /// [E, E], [E, kdim] and [E, vdim] ([num_kv_heads D, ...] for k and v): the separate
  /// projections used when kdim or vdim differ from E or num_kv_heads from num_heads
  /// (undefined otherwise).
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;
  ///@}
  std::shared_ptr<Linear> out_proj;  ///< the output projection E -> E ("out_proj.weight", "out_proj.bias")

 private:
  /// The combined mask of the forward options, broadcastable to [N, H, L, S].
  Mask combined_mask(const MhaForwardOptions& o, std::int64_t N, std::int64_t L, std::int64_t S) const;
};

}  // namespace microtorch::nn
