#include "microtorch/nn/decoder.hpp"

#include <fmt/format.h>

#include "microtorch/random.hpp"

namespace microtorch::nn {

// ---- CausalSelfAttention ----------------------------------------------------------------

CausalSelfAttention::CausalSelfAttention(std::int64_t e, std::int64_t h, CausalSelfAttentionOptions opts)
    : embed_dim(e), num_heads(h), num_kv_heads(opts.num_kv_heads == 0 ? h : opts.num_kv_heads), head_dim(0),
      options(opts) {
  if (e <= 0 || h <= 0) {
    throw ValueError(fmt::format("CausalSelfAttention: embed_dim and num_heads must be positive, got {} and {}", e, h));
  }
  if (opts.head_dim == 0 && e % h != 0) {
    throw ValueError(fmt::format("CausalSelfAttention: embed_dim {} must be divisible by num_heads {} (or give "
                                 "head_dim)",
                                 e, h));
  }
  head_dim = opts.head_dim == 0 ? e / h : opts.head_dim;
  if (num_kv_heads <= 0 || h % num_kv_heads != 0 || head_dim <= 0) {
    throw ValueError(fmt::format("CausalSelfAttention: num_kv_heads = {} must divide num_heads = {} (each key/value "
                                 "head serves an equal group of query heads), and head_dim {} be positive",
                                 opts.num_kv_heads, h, head_dim));
  }
  if (!(opts.dropout >= 0.0 && opts.dropout < 1.0)) {
    throw ValueError(fmt::format("CausalSelfAttention: dropout must be in [0, 1), got {}", opts.dropout));
  }
  const LinearOptions in{opts.bias, opts.dtype};
  q_proj = register_module("q_proj", std::make_shared<Linear>(e, num_heads * head_dim, in));
  k_proj = register_module("k_proj", std::make_shared<Linear>(e, num_kv_heads * head_dim, in));
  v_proj = register_module("v_proj", std::make_shared<Linear>(e, num_kv_heads * head_dim, in));
  o_proj = register_module("o_proj", std::make_shared<Linear>(num_heads * head_dim, e, LinearOptions{opts.out_bias, opts.dtype}));
  if (opts.rope) {
    rotary_emb = register_module("rotary_emb", std::make_shared<RotaryEmbedding>(
                                                   head_dim, RotaryEmbeddingOptions{opts.rope_base, opts.rope_interleaved,
                                                                                    opts.max_seq_len, opts.dtype}));
  }
}

std::tuple<Tensor, Tensor, Tensor> CausalSelfAttention::project(const Tensor& x, std::int64_t offset) {
  if (x.dim() != 3 || x.size(2) != embed_dim) {
    throw ShapeError(fmt::format("CausalSelfAttention: expects x [N, L, {}], got {}", embed_dim, shape_str(x.shape())));
  }
  const std::int64_t N = x.size(0), L = x.size(1);
  Tensor q = q_proj->forward(x), k = k_proj->forward(x), v = v_proj->forward(x);
  if (rotary_emb) {  // [N, L, heads D] seen as [N, L, heads, D]: free reshapes around the rotation
    q = rotary_emb->forward(q.reshape({N, L, num_heads, head_dim}), offset).reshape({N, L, num_heads * head_dim});
    k = rotary_emb->forward(k.reshape({N, L, num_kv_heads, head_dim}), offset).reshape({N, L, num_kv_heads * head_dim});
  }
  return {q, k, v};
}

AttentionHeadsOptions CausalSelfAttention::heads_options() const {
  AttentionHeadsOptions o;
  o.dropout_p = is_training() ? options.dropout : 0.0;
  o.need_weights = false;
  o.num_kv_heads = num_kv_heads;
  return o;
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  auto [q, k, v] = project(x, 0);
  AttentionHeadsOptions o = heads_options();
  o.mask = Mask::causal(x.size(1));
  return o_proj->forward(std::get<0>(multi_head_attention(q, k, v, num_heads, o)));
}

Tensor CausalSelfAttention::forward(const Tensor& x, KVCache& cache, std::int64_t layer) {
  auto [q, k, v] = project(x, cache.length(layer));
  return o_proj->forward(std::get<0>(cache.attend(layer, q, k, v, num_heads, heads_options())));
}

std::string CausalSelfAttention::extra_repr() const {
  return fmt::format("embed_dim={}, num_heads={}, num_kv_heads={}, head_dim={}, dropout={}", embed_dim, num_heads,
                     num_kv_heads, head_dim, options.dropout);
}

// ---- DecoderMLP -------------------------------------------------------------------------

namespace {

Tensor activate(const std::string& name, const Tensor& x) {
  if (name == "silu") return silu(x);
  if (name == "gelu") return gelu(x);
  if (name == "gelu_tanh") return gelu(x, "tanh");
  return relu(x);
}

}  // namespace

DecoderMLP::DecoderMLP(std::int64_t d_model, std::int64_t hidden, DecoderMLPOptions opts) : options(std::move(opts)) {
  const std::string& a = options.activation;
  if (a != "silu" && a != "gelu" && a != "gelu_tanh" && a != "relu") {
    throw ValueError(fmt::format("DecoderMLP: activation must be \"silu\", \"gelu\", \"gelu_tanh\" or \"relu\", got "
                                 "\"{}\"",
                                 a));
  }
  const LinearOptions lo{options.bias, options.dtype};
  if (options.gated) gate_proj = register_module("gate_proj", std::make_shared<Linear>(d_model, hidden, lo));
  up_proj = register_module("up_proj", std::make_shared<Linear>(d_model, hidden, lo));
  down_proj = register_module("down_proj", std::make_shared<Linear>(hidden, d_model, lo));
}

// gated: down(act(gate(x)) * up(x)), with silu one fused op (silu_and_mul) ;  plain: down(act(up(x)))
Tensor DecoderMLP::forward(const Tensor& x) {
  const Tensor up = up_proj->forward(x);
  if (!gate_proj) return down_proj->forward(activate(options.activation, up));
  const Tensor gate = gate_proj->forward(x);
  return down_proj->forward(options.activation == "silu" ? silu_and_mul(gate, up) : activate(options.activation, gate) * up);
}

std::string DecoderMLP::extra_repr() const {
  return fmt::format("activation={}, gated={}", options.activation, options.gated);
}

// ---- DecoderLayer, DecoderModel, DecoderLM ----------------------------------------------

namespace {

void check_config(const DecoderConfig& c) {
  const bool positive = c.vocab_size > 0 && c.d_model > 0 && c.num_layers > 0 && c.num_heads > 0 && c.max_seq_len > 0 &&
                        c.num_kv_heads >= 0 && c.head_dim >= 0 && c.dim_feedforward >= 0;
  if (!positive) {
    throw ValueError(fmt::format("DecoderConfig: vocab_size, d_model, num_layers, num_heads and max_seq_len must be "
                                 "positive (and num_kv_heads, head_dim, dim_feedforward >= 0; 0 picks the default), got "
                                 "vocab_size {}, d_model {}, num_layers {}, num_heads {}, max_seq_len {}",
                                 c.vocab_size, c.d_model, c.num_layers, c.num_heads, c.max_seq_len));
  }
}

CausalSelfAttentionOptions attention_options(const DecoderConfig& c) {
  CausalSelfAttentionOptions o;
  o.num_kv_heads = c.num_kv_heads;
  o.head_dim = c.head_dim;
  o.bias = c.attention_bias;
  o.dropout = c.dropout;
  o.rope_base = c.rope_base;
  o.rope_interleaved = c.rope_interleaved;
  o.max_seq_len = c.max_seq_len;
  o.dtype = c.dtype;
  return o;
}

}  // namespace

DecoderLayer::DecoderLayer(const DecoderConfig& c) {
  check_config(c);
  const RMSNormOptions no{c.norm_eps, true, c.dtype};
  input_layernorm = register_module("input_layernorm", std::make_shared<RMSNorm>(Shape{c.d_model}, no));
  self_attn = register_module("self_attn", std::make_shared<CausalSelfAttention>(c.d_model, c.num_heads, attention_options(c)));
  post_attention_layernorm = register_module("post_attention_layernorm", std::make_shared<RMSNorm>(Shape{c.d_model}, no));
  const std::int64_t hidden = c.dim_feedforward == 0 ? 4 * c.d_model : c.dim_feedforward;
  mlp = register_module("mlp", std::make_shared<DecoderMLP>(c.d_model, hidden,
                                                            DecoderMLPOptions{c.activation, c.gated, false, c.dtype}));
  dropout = register_module("dropout", std::make_shared<Dropout>(c.dropout));
}

Tensor DecoderLayer::forward(const Tensor& x) {
  const Tensor h = x + dropout->forward(self_attn->forward(input_layernorm->forward(x)));
  return h + dropout->forward(mlp->forward(post_attention_layernorm->forward(h)));
}

Tensor DecoderLayer::forward(const Tensor& x, KVCache& cache, std::int64_t layer) {
  const Tensor h = x + dropout->forward(self_attn->forward(input_layernorm->forward(x), cache, layer));
  return h + dropout->forward(mlp->forward(post_attention_layernorm->forward(h)));
}

DecoderModel::DecoderModel(const DecoderConfig& c) : config(c) {
  check_config(c);
  embed_tokens = register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.d_model, c.dtype));
  layers = register_module("layers", std::make_shared<ModuleList<DecoderLayer>>());
  for (std::int64_t i = 0; i < c.num_layers; ++i) layers->push_back(std::make_shared<DecoderLayer>(c));
  norm = register_module("norm", std::make_shared<RMSNorm>(Shape{c.d_model}, RMSNormOptions{c.norm_eps, true, c.dtype}));
}

Tensor DecoderModel::embed(const Tensor& tokens, std::int64_t offset) const {
  if (tokens.dim() != 2) {
    throw ShapeError(fmt::format("DecoderModel: expects int64 tokens [N, L], got {} {}", dtype_name(tokens.dtype()),
                                 shape_str(tokens.shape())));
  }
  if (offset + tokens.size(1) > config.max_seq_len) {
    throw ValueError(fmt::format("DecoderModel: positions {} .. {} are beyond max_seq_len {}; shorten the sequence or "
                                 "build the model with a larger max_seq_len",
                                 offset, offset + tokens.size(1) - 1, config.max_seq_len));
  }
  return embed_tokens->forward(tokens);
}

Tensor DecoderModel::forward(const Tensor& tokens) {
  Tensor x = embed(tokens, 0);
  for (const auto& layer : *layers) x = layer->forward(x);
  return norm->forward(x);
}

Tensor DecoderModel::forward(const Tensor& tokens, KVCache& cache) {
  if (cache.num_layers() != static_cast<std::int64_t>(layers->size())) {
    throw ValueError(fmt::format("DecoderModel: the cache has {} layers, the model {}; make it with make_cache()",
                                 cache.num_layers(), layers->size()));
  }
  Tensor x = embed(tokens, cache.length());
  for (std::size_t i = 0; i < layers->size(); ++i) x = (*layers)[i]->forward(x, cache, static_cast<std::int64_t>(i));
  return norm->forward(x);
}

DecoderLM::DecoderLM(const DecoderConfig& c) : config(c) {
  model = register_module("model", std::make_shared<DecoderModel>(c));
  lm_head = register_module("lm_head", std::make_shared<Linear>(c.d_model, c.vocab_size, LinearOptions{false, c.dtype}));
  // GPT-2's and Llama's initialisation (initializer_range 0.02)
  for (auto& [name, m] : named_modules()) {
    if (auto* linear = dynamic_cast<Linear*>(m)) {
      init::normal_(linear->weight, 0.0, 0.02);
      if (linear->bias.defined()) init::zeros_(linear->bias);
    } else if (auto* embedding = dynamic_cast<Embedding*>(m)) {
      init::normal_(embedding->weight, 0.0, 0.02);
    }
  }
  if (c.tie_weights) lm_head->weight = lm_head->replace_parameter("weight", model->embed_tokens->weight);
}

Tensor DecoderLM::forward(const Tensor& tokens) { return lm_head->forward(model->forward(tokens)); }

Tensor DecoderLM::forward(const Tensor& tokens, KVCache& cache) { return lm_head->forward(model->forward(tokens, cache)); }

KVCache DecoderLM::make_cache(std::int64_t batch, std::int64_t capacity) const {
  const auto& attn = *(*model->layers)[0]->self_attn;
  return KVCache(config.num_layers, batch, capacity == 0 ? config.max_seq_len : capacity, attn.num_kv_heads,
                 attn.head_dim, config.dtype);
}

std::string DecoderLM::extra_repr() const {
  return fmt::format("vocab_size={}, d_model={}, num_layers={}, num_heads={}, num_kv_heads={}, max_seq_len={}, "
                     "tie_weights={}",
                     config.vocab_size, config.d_model, config.num_layers, config.num_heads,
                     config.num_kv_heads == 0 ? config.num_heads : config.num_kv_heads, config.max_seq_len,
                     config.tie_weights);
}

}  // namespace microtorch::nn
