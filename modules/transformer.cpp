#include "microtorch/nn/transformer.hpp"

#include <cmath>

#include <fmt/format.h>

#include "microtorch/random.hpp"

namespace microtorch::nn {

TransformerEncoderLayer::TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead,
                                                 TransformerEncoderLayerOptions opts)
    : options(std::move(opts)) {
  if (options.activation != "relu" && options.activation != "gelu") {
    throw ValueError(fmt::format("TransformerEncoderLayer: activation must be \"relu\" or \"gelu\", got \"{}\"",
                                 options.activation));
  }
  const LinearOptions lo{true, options.dtype};
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(
                                               d_model, nhead,
                                               MultiheadAttentionOptions{true, options.dropout, 0, 0,
                                                                         options.batch_first, options.dtype}));
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, options.dim_feedforward, lo));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(options.dim_feedforward, d_model, lo));
  const LayerNormOptions no{options.layer_norm_eps, true, options.dtype};
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{d_model}, no));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{d_model}, no));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const EncoderForwardOptions& o) {
  MhaForwardOptions mo;
  mo.attn_mask = o.src_mask;
  mo.key_padding_mask = o.src_key_padding_mask;
  mo.is_causal = o.is_causal;
  mo.mask = o.mask;
  mo.need_weights = false;
  return dropout1->forward(std::get<0>(self_attn->forward(x, x, x, mo)));
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  const Tensor h = linear1->forward(x);
  const Tensor a = options.activation == "gelu" ? gelu(h) : relu(h);
  return dropout2->forward(linear2->forward(dropout->forward(a)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const EncoderForwardOptions& o) {
  Tensor x = src;
  if (options.norm_first) {
    x = x + self_attention_block(norm1->forward(x), o);
    return x + feed_forward_block(norm2->forward(x));
  }
  x = norm1->forward(x + self_attention_block(x, o));
  return norm2->forward(x + feed_forward_block(x));
}

std::string TransformerEncoderLayer::extra_repr() const {
  return fmt::format("dim_feedforward={}, dropout={}, activation={}, norm_first={}, batch_first={}",
                     options.dim_feedforward, options.dropout, options.activation, options.norm_first,
                     options.batch_first);
}

TransformerEncoder::TransformerEncoder(std::int64_t d_model, std::int64_t nhead, std::int64_t num_layers,
                                       TransformerEncoderLayerOptions opts, bool final_norm) {
  if (num_layers <= 0) throw ValueError(fmt::format("TransformerEncoder: num_layers must be positive, got {}", num_layers));
  layers = register_module("layers", std::make_shared<ModuleList<TransformerEncoderLayer>>());
  for (std::int64_t i = 0; i < num_layers; ++i) {
    layers->push_back(std::make_shared<TransformerEncoderLayer>(d_model, nhead, opts));
  }
  if (final_norm) {
    norm = register_module("norm", std::make_shared<LayerNorm>(Shape{d_model},
                                                               LayerNormOptions{opts.layer_norm_eps, true, opts.dtype}));
  }
}

Tensor TransformerEncoder::forward(const Tensor& src, const EncoderForwardOptions& o) {
  Tensor x = src;
  for (const auto& layer : *layers) x = layer->forward(x, o);
  return norm ? norm->forward(x) : x;
}

namespace {

void check_sequence(const Tensor& x, std::int64_t max_len, std::int64_t d_model, const char* op) {
  if (x.dim() != 3 || x.size(2) != d_model || x.size(1) > max_len) {
    throw ShapeError(fmt::format("{}: expects [N, L, {}] with L <= max_len {}, got {}", op, d_model, max_len,
                                 shape_str(x.shape())));
  }
}

}  // namespace

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(std::int64_t d_model, std::int64_t max_len, Dtype dtype) {
  Tensor table = zeros({max_len, d_model}, Dtype::Float64);
  double* p = table.data<double>();
  for (std::int64_t pos = 0; pos < max_len; ++pos) {
    for (std::int64_t i = 0; i < d_model; ++i) {
      const double angle = static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(2 * (i / 2)) / d_model);
      p[pos * d_model + i] = i % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  }
  pe = register_buffer("pe", table.to(dtype));
}

Tensor SinusoidalPositionalEncoding::forward(const Tensor& x) {
  check_sequence(x, pe.size(0), pe.size(1), "SinusoidalPositionalEncoding");
  return x + pe.narrow(0, 0, x.size(1));
}

std::string SinusoidalPositionalEncoding::extra_repr() const {
  return fmt::format("d_model={}, max_len={}", pe.size(1), pe.size(0));
}

LearnedPositionalEncoding::LearnedPositionalEncoding(std::int64_t d_model, std::int64_t max_len, Dtype dtype) {
  weight = register_parameter("weight", empty({max_len, d_model}, dtype));
  init::normal_(weight);
}

Tensor LearnedPositionalEncoding::forward(const Tensor& x) {
  check_sequence(x, weight.size(0), weight.size(1), "LearnedPositionalEncoding");
  return x + weight.narrow(0, 0, x.size(1));
}

std::string LearnedPositionalEncoding::extra_repr() const {
  return fmt::format("d_model={}, max_len={}", weight.size(1), weight.size(0));
}

}  // namespace microtorch::nn
