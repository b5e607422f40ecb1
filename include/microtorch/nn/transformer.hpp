/// \file
/// TransformerEncoderLayer, TransformerEncoder and positional encodings, with PyTorch's
/// constructor arguments and parameter names.
///
/// \code
///   nn::TransformerEncoderLayerOptions opts;
///   opts.dim_feedforward = 32;
///   opts.dropout = 0.0;
///   opts.batch_first = true;
///   nn::TransformerEncoderLayer layer(/*d_model=*/16, /*nhead=*/2, opts);
///   nn::EncoderForwardOptions fwd;
///   fwd.src_key_padding_mask = padded;   // bool [N, L], true = padding (PyTorch's polarity)
///   Tensor y = layer.forward(x, fwd);    // x, y: [N, L, 16]
/// \endcode
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "microtorch/nn/attention.hpp"
#include "microtorch/nn/layers.hpp"

namespace microtorch::nn {

/// The keyword arguments of torch.nn.TransformerEncoderLayer, with its defaults; designated
/// initialisers must follow this order.
struct TransformerEncoderLayerOptions {
  std::int64_t dim_feedforward = 2048;  ///< the feed-forward block's hidden width
  double dropout = 0.1;                 ///< in attention, after each block and inside the feed-forward block
  std::string activation = "relu";  ///< "relu" or "gelu"
  double layer_norm_eps = 1e-5;     ///< eps of norm1 and norm2
  bool batch_first = false;         ///< inputs [N, L, E] when true, [L, N, E] (PyTorch's default) when false
  bool norm_first = false;  ///< pre-LN when true, post-LN (the original Transformer) otherwise
  Dtype dtype = Dtype::Float32;     ///< of the parameters
};

/// Masks passed through to self-attention, PyTorch's polarity (see MhaForwardOptions).
struct EncoderForwardOptions {
  Tensor src_mask{};              ///< [L, L] or [N * nhead, L, L]
  Tensor src_key_padding_mask{};  ///< [N, L], true = padding
  bool is_causal = false;         ///< add a causal mask (each position attends to itself and earlier ones)
  Mask mask{};                    ///< a microtorch Mask, true = may attend
};

/// One encoder layer (torch.nn.TransformerEncoderLayer): self-attention and a feed-forward
/// block, each with a residual connection and a LayerNorm.
///
///     post-LN: x = norm1(x + dropout1(self_attn(x)));  x = norm2(x + dropout2(ff(x)))
///     pre-LN:  x = x + dropout1(self_attn(norm1(x)));  x = x + dropout2(ff(norm2(x)))
///     ff(x) = linear2(dropout(activation(linear1(x)))).
///
/// Children: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
class TransformerEncoderLayer : public Module {
 public:
  /// A layer of width d_model with nhead attention heads (nhead must divide d_model; an
  /// activation other than "relu" or "gelu" throws ValueError).
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead, TransformerEncoderLayerOptions options = {});
  /// forward(src, {}): no masks.
  Tensor forward(const Tensor& src) override { return forward(src, EncoderForwardOptions{}); }
  /// The layer on src ([N, L, E] with batch_first, else [L, N, E]), masks as in options;
  /// the result has src's shape.
  Tensor forward(const Tensor& src, const EncoderForwardOptions& options);
  std::string extra_repr() const override;

  TransformerEncoderLayerOptions options;         ///< as given to the constructor
  std::shared_ptr<MultiheadAttention> self_attn;  ///< self-attention ("self_attn")
  ///@{
  /// The feed-forward block: d_model -> dim_feedforward -> d_model.
  std::shared_ptr<Linear> linear1, linear2;
  ///@}
  ///@{
  /// Dropout inside the feed-forward block, after self-attention and after the feed-forward block.
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  ///@}
  ///@{
  /// The LayerNorms around self-attention and the feed-forward block (see the formulas above).
  std::shared_ptr<LayerNorm> norm1, norm2;
  ///@}

 private:
  Tensor self_attention_block(const Tensor& x, const EncoderForwardOptions& o);
  Tensor feed_forward_block(const Tensor& x);
};

/// A stack of num_layers encoder layers ("layers.0", "layers.1", ...) and an optional final LayerNorm
/// ("norm"), as torch.nn.TransformerEncoder(layer, num_layers, norm). Each layer is
/// initialised independently (PyTorch deep-copies one layer, so its layers start equal).
class TransformerEncoder : public Module {
 public:
  /// num_layers layers of TransformerEncoderLayer(d_model, nhead, options), then a LayerNorm
  /// when final_norm; num_layers <= 0 throws ValueError.
  TransformerEncoder(std::int64_t d_model, std::int64_t nhead, std::int64_t num_layers,
                     TransformerEncoderLayerOptions options = {}, bool final_norm = false);
  /// forward(src, {}): no masks.
  Tensor forward(const Tensor& src) override { return forward(src, EncoderForwardOptions{}); }
  /// Every layer in turn with the same masks, then the final norm if any.
  Tensor forward(const Tensor& src, const EncoderForwardOptions& options);

  std::shared_ptr<ModuleList<TransformerEncoderLayer>> layers;  ///< the layers ("layers.0", ...)
  std::shared_ptr<LayerNorm> norm;  ///< the final LayerNorm ("norm"); null without final_norm
};

/// Adds the fixed sinusoids of "Attention Is All You Need" to [N, L, E] (batch first):
/// pe[pos, 2i] = sin(pos / 10000^(2i/E)), pe[pos, 2i+1] = cos(pos / 10000^(2i/E)).
/// The table is a buffer "pe" of [max_len, E].
class SinusoidalPositionalEncoding : public Module {
 public:
  /// The table for positions 0..max_len-1 of width d_model, computed in float64 and
  /// stored in `dtype`.
  SinusoidalPositionalEncoding(std::int64_t d_model, std::int64_t max_len = 512, Dtype dtype = Dtype::Float32);
  /// x + pe[:L]; x must be [N, L, d_model] with L <= max_len (ShapeError otherwise).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Tensor pe;  ///< [max_len, d_model], a buffer ("pe")
};

/// Adds a learned [max_len, E] table ("weight", N(0, 1) initialised) to [N, L, E]. Takes
/// its sizes in the order SinusoidalPositionalEncoding does: (d_model, max_len).
class LearnedPositionalEncoding : public Module {
 public:
  /// A learned table for positions 0..max_len-1 of width d_model.
  LearnedPositionalEncoding(std::int64_t d_model, std::int64_t max_len = 512, Dtype dtype = Dtype::Float32);
  /// x + weight[:L]; x must be [N, L, d_model] with L <= max_len (ShapeError otherwise).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Tensor weight;  ///< [max_len, d_model], a parameter ("weight")
};

}  // namespace microtorch::nn
