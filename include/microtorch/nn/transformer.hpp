// microtorch/nn/transformer.hpp — TransformerEncoderLayer / TransformerEncoder and
// positional encodings, with PyTorch's parameter names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "microtorch/nn/attention.hpp"
#include "microtorch/nn/layers.hpp"

namespace microtorch::nn {

struct TransformerEncoderLayerOptions {
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  ///< "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;  ///< pre-LN when true, post-LN (the original Transformer) otherwise
  Dtype dtype = Dtype::Float32;
};

/// Masks passed through to self-attention, PyTorch's polarity (see MhaForwardOptions).
struct EncoderForwardOptions {
  Tensor src_mask{};              ///< [L, L] or [N * nhead, L, L]
  Tensor src_key_padding_mask{};  ///< [N, L], true = padding
  bool is_causal = false;
  Mask mask{};                    ///< a microtorch Mask, true = may attend
};

/// post-LN: x = norm1(x + dropout1(self_attn(x)));  x = norm2(x + dropout2(ff(x)))
/// pre-LN:  x = x + dropout1(self_attn(norm1(x)));  x = x + dropout2(ff(norm2(x)))
/// ff(x) = linear2(dropout(activation(linear1(x)))).
/// Children: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead, TransformerEncoderLayerOptions options = {});
  Tensor forward(const Tensor& src) override { return forward(src, EncoderForwardOptions{}); }
  Tensor forward(const Tensor& src, const EncoderForwardOptions& options);
  std::string extra_repr() const override;

  TransformerEncoderLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;

 private:
  Tensor self_attention_block(const Tensor& x, const EncoderForwardOptions& o);
  Tensor feed_forward_block(const Tensor& x);
};

/// num_layers encoder layers ("layers.0", "layers.1", ...) and an optional final LayerNorm
/// ("norm"), as torch.nn.TransformerEncoder(layer, num_layers, norm). Each layer is
/// initialised independently (PyTorch deep-copies one layer, so its layers start equal).
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(std::int64_t d_model, std::int64_t nhead, std::int64_t num_layers,
                     TransformerEncoderLayerOptions options = {}, bool final_norm = false);
  Tensor forward(const Tensor& src) override { return forward(src, EncoderForwardOptions{}); }
  Tensor forward(const Tensor& src, const EncoderForwardOptions& options);

  std::shared_ptr<ModuleList<TransformerEncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;  // null without final_norm
};

/// Adds the fixed sinusoids of "Attention Is All You Need" to [N, L, E] (batch first):
/// pe[pos, 2i] = sin(pos / 10000^(2i/E)), pe[pos, 2i+1] = cos(pos / 10000^(2i/E)).
/// The table is a buffer "pe" of [max_len, E].
class SinusoidalPositionalEncoding : public Module {
 public:
  SinusoidalPositionalEncoding(std::int64_t d_model, std::int64_t max_len = 512, Dtype dtype = Dtype::Float32);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Tensor pe;
};

/// Adds a learned [max_len, E] table ("weight", N(0, 1) initialised) to [N, L, E]. Takes
/// its sizes in the order SinusoidalPositionalEncoding does: (d_model, max_len).
class LearnedPositionalEncoding : public Module {
 public:
  LearnedPositionalEncoding(std::int64_t d_model, std::int64_t max_len = 512, Dtype dtype = Dtype::Float32);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Tensor weight;
};

}  // namespace microtorch::nn
