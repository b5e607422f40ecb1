/// \file
/// Decoder-only language models in the style of Llama and Qwen2: KVCache, CausalSelfAttention
/// (rotary positions, grouped-query attention, incremental decoding), DecoderMLP (SwiGLU or
/// GELU), DecoderLayer, DecoderModel and DecoderLM, with Hugging Face's state-dict names.
///
///     DecoderLM
///       model: DecoderModel
///         embed_tokens: Embedding [vocab, d_model]
///         layers.i: DecoderLayer        x = x + self_attn(input_layernorm(x))
///                                       x = x + mlp(post_attention_layernorm(x))
///           input_layernorm, post_attention_layernorm: RMSNorm
///           self_attn: CausalSelfAttention (q_proj, k_proj, v_proj, o_proj, rotary_emb)
///           mlp: DecoderMLP (gate_proj, up_proj, down_proj)
///         norm: RMSNorm
///       lm_head: Linear d_model -> vocab, no bias (its weight is embed_tokens.weight when tied)
///
/// \code
///   nn::DecoderLM model({.vocab_size = 96, .d_model = 64, .num_layers = 2, .num_heads = 4,
///                        .num_kv_heads = 2, .max_seq_len = 128});
///   Tensor logits = model.forward(tokens);          // tokens [N, L] -> [N, L, 96], causal
///   nn::KVCache cache = model.make_cache(/*batch=*/1);
///   Tensor first = model.forward(prompt, cache);    // the prompt's logits; the cache holds it
///   Tensor next = model.forward(token, cache);      // one more position: [1, 1, 96]
/// \endcode
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "microtorch/nn/layers.hpp"
#include "microtorch/nn/rope.hpp"

namespace microtorch::nn {

/// The keys and values a decoder has computed for the positions it has seen, per layer, so
/// that each new position costs one position's work (incremental decoding). Layer i holds
/// keys [batch, capacity, num_kv_heads * head_dim] and values of the same shape, laid out as
/// the k and v projections write them (the attention reads the heads in place), and the
/// number of positions it holds. A plain buffer, not a module: it is not part of a model's
/// state. DecoderLM::make_cache makes one that fits the model.
class KVCache {
 public:
  /// Zeroed buffers for num_layers layers; every size must be positive (ValueError).
  KVCache(std::int64_t num_layers, std::int64_t batch, std::int64_t capacity, std::int64_t num_kv_heads,
          std::int64_t head_dim, Dtype dtype = Dtype::Float32);

  /// The positions held (those of the last layer: the whole model has seen them once its
  /// forward is done).
  std::int64_t length() const;
  /// The positions layer `layer` holds.
  std::int64_t length(std::int64_t layer) const;
  /// The most positions a layer can hold.
  std::int64_t capacity() const { return capacity_; }
  /// The number of sequences decoded side by side.
  std::int64_t batch() const { return batch_; }
  /// The number of layers.
  std::int64_t num_layers() const { return static_cast<std::int64_t>(layers_.size()); }
  /// Forgets every position (the buffers keep their memory), to decode a new sequence.
  void reset();
  /// Layer `layer`'s keys [batch, capacity, num_kv_heads * head_dim]; rows past length(layer)
  /// are stale. IndexError for a layer out of range.
  const Tensor& keys(std::int64_t layer) const;
  /// Layer `layer`'s values, as keys().
  const Tensor& values(std::int64_t layer) const;

  /// Layer `layer`'s attention of L new positions: multi_head_attention_cached(q, k, v,
  /// keys(layer), values(layer), length(layer), num_heads, options), after which the layer
  /// holds L more positions. q [batch, L, num_heads D], k and v [batch, L, num_kv_heads D]; a
  /// batch or width that differs from the cache's throws ShapeError, positions beyond the
  /// capacity ValueError (naming both), options.num_kv_heads other than the cache's ShapeError.
  std::tuple<Tensor, Tensor> attend(std::int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v,
                                    std::int64_t num_heads, const AttentionHeadsOptions& options = {});

 private:
  /// One layer's buffers and how many positions they hold.
  struct Layer {
    Tensor keys;              ///< [batch, capacity, num_kv_heads * head_dim]
    Tensor values;            ///< likewise
    std::int64_t length = 0;  ///< positions written
  };
  const Layer& at(std::int64_t layer) const;
  std::vector<Layer> layers_;
  std::int64_t batch_, capacity_, num_kv_heads_, head_dim_;
};

/// Constructor options of CausalSelfAttention.
struct CausalSelfAttentionOptions {
  std::int64_t num_kv_heads = 0;  ///< key/value heads (grouped-query attention); 0 = num_heads; must divide num_heads
  std::int64_t head_dim = 0;      ///< features per head; 0 = embed_dim / num_heads
  bool bias = false;              ///< biases on q_proj, k_proj, v_proj (Qwen2 has them, Llama not)
  bool out_bias = false;          ///< a bias on o_proj
  double dropout = 0.0;           ///< on the attention weights, in training
  bool rope = true;               ///< rotate q and k by position (rotary_emb); false: no positions here
  double rope_base = 10000.0;     ///< RotaryEmbeddingOptions::base
  bool rope_interleaved = false;  ///< RotaryEmbeddingOptions::interleaved
  std::int64_t max_seq_len = 4096;  ///< the positions rotary_emb has tables for
  Dtype dtype = Dtype::Float32;   ///< of the parameters
};

/// Causal self-attention of a decoder (Hugging Face's LlamaAttention and Qwen2Attention):
/// q_proj [H D, E], k_proj and v_proj [Hkv D, E], o_proj [E, H D]; q and k turned by
/// rotary_emb at their positions; heads read in place (multi_head_attention), each key/value
/// head shared by H / Hkv query heads. forward(x) attends over the whole sequence under the
/// causal mask; forward(x, cache, layer) attends the new positions x to everything the cache
/// holds plus themselves, and equals forward's output at those positions.
class CausalSelfAttention : public Module {
 public:
  /// embed_dim E and num_heads H (positive; num_kv_heads must divide H and head_dim must be
  /// even when rope is on: ValueError otherwise). Weights as nn.Linear's initialisation.
  CausalSelfAttention(std::int64_t embed_dim, std::int64_t num_heads, CausalSelfAttentionOptions options = {});
  /// x [N, L, E] -> [N, L, E], position l attending to positions 0..l.
  Tensor forward(const Tensor& x) override;
  /// x [N, L, E], the L positions after the cache's length(layer): writes their keys and
  /// values into the cache's layer `layer` and returns their outputs [N, L, E].
  Tensor forward(const Tensor& x, KVCache& cache, std::int64_t layer);
  std::string extra_repr() const override;

  std::int64_t embed_dim;     ///< E
  std::int64_t num_heads;     ///< H
  std::int64_t num_kv_heads;  ///< Hkv
  std::int64_t head_dim;      ///< D
  CausalSelfAttentionOptions options;        ///< as given to the constructor
  std::shared_ptr<Linear> q_proj;            ///< E -> H D ("q_proj")
  std::shared_ptr<Linear> k_proj;            ///< E -> Hkv D ("k_proj")
  std::shared_ptr<Linear> v_proj;            ///< E -> Hkv D ("v_proj")
  std::shared_ptr<Linear> o_proj;            ///< H D -> E ("o_proj")
  std::shared_ptr<RotaryEmbedding> rotary_emb;  ///< null when options.rope is false ("rotary_emb", no state)

 private:
  // q, k, v of x turned to positions offset.. (each [N, L, heads D]).
  std::tuple<Tensor, Tensor, Tensor> project(const Tensor& x, std::int64_t offset);
  AttentionHeadsOptions heads_options() const;
};

/// Constructor options of DecoderMLP.
struct DecoderMLPOptions {
  std::string activation = "silu";  ///< "silu", "gelu", "gelu_tanh" or "relu"
  bool gated = true;                ///< down(act(gate(x)) * up(x)) (SwiGLU with silu), else down(act(up(x)))
  bool bias = false;                ///< biases on the three projections
  Dtype dtype = Dtype::Float32;     ///< of the parameters
};

/// The feed-forward block of a decoder layer (Hugging Face's LlamaMLP): gated, down_proj(
/// act(gate_proj(x)) * up_proj(x)) (Shazeer's GLU variants; SwiGLU with silu), or plain,
/// down_proj(act(up_proj(x))) (GPT-2's MLP); gate_proj and up_proj are d_model -> hidden,
/// down_proj hidden -> d_model.
class DecoderMLP : public Module {
 public:
  /// Widths d_model and hidden (positive); an unknown activation throws ValueError.
  DecoderMLP(std::int64_t d_model, std::int64_t hidden, DecoderMLPOptions options = {});
  /// x [..., d_model] -> [..., d_model].
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  DecoderMLPOptions options;            ///< as given to the constructor
  std::shared_ptr<Linear> gate_proj;    ///< d_model -> hidden ("gate_proj"); null when not gated
  std::shared_ptr<Linear> up_proj;      ///< d_model -> hidden ("up_proj")
  std::shared_ptr<Linear> down_proj;    ///< hidden -> d_model ("down_proj")
};

/// The configuration of a decoder-only model (the fields of Hugging Face's LlamaConfig under
/// the names of torch.nn.Transformer where it has them); designated initialisers follow this
/// order.
struct DecoderConfig {
  std::int64_t vocab_size = 0;       ///< tokens 0 .. vocab_size - 1 (must be set)
  std::int64_t d_model = 128;        ///< the width of the residual stream (hidden_size)
  std::int64_t num_layers = 4;       ///< decoder layers (num_hidden_layers)
  std::int64_t num_heads = 4;        ///< query heads (num_attention_heads)
  std::int64_t num_kv_heads = 0;     ///< key/value heads (num_key_value_heads); 0 = num_heads
  std::int64_t head_dim = 0;         ///< features per head; 0 = d_model / num_heads
  std::int64_t dim_feedforward = 0;  ///< the MLP's hidden width (intermediate_size); 0 = 4 d_model
  std::string activation = "silu";   ///< the MLP's activation (DecoderMLPOptions)
  bool gated = true;                 ///< a gated MLP (SwiGLU with silu)
  double norm_eps = 1e-5;            ///< eps of every RMSNorm (rms_norm_eps)
  double rope_base = 10000.0;        ///< rope_theta
  bool rope_interleaved = false;     ///< RoPE's pairs (2i, 2i + 1) instead of (i, i + D/2)
  std::int64_t max_seq_len = 2048;   ///< the longest sequence (max_position_embeddings)
  bool tie_weights = false;          ///< lm_head reads embed_tokens.weight (tie_word_embeddings)
  bool attention_bias = false;       ///< biases on q_proj, k_proj, v_proj
  double dropout = 0.0;              ///< on attention weights and both residual branches, in training
  Dtype dtype = Dtype::Float32;      ///< of the parameters
};

/// One decoder layer (Hugging Face's LlamaDecoderLayer), pre-norm:
///
///     x = x + dropout(self_attn(input_layernorm(x)))
///     x = x + dropout(mlp(post_attention_layernorm(x)))
class DecoderLayer : public Module {
 public:
  /// The layer the configuration describes (see DecoderConfig).
  explicit DecoderLayer(const DecoderConfig& config);
  /// x [N, L, d_model] -> [N, L, d_model], causal.
  Tensor forward(const Tensor& x) override;
  /// The L new positions x after those the cache's layer `layer` holds (see CausalSelfAttention).
  Tensor forward(const Tensor& x, KVCache& cache, std::int64_t layer);

  std::shared_ptr<RMSNorm> input_layernorm;           ///< before self-attention ("input_layernorm")
  std::shared_ptr<CausalSelfAttention> self_attn;     ///< ("self_attn")
  std::shared_ptr<RMSNorm> post_attention_layernorm;  ///< before the MLP ("post_attention_layernorm")
  std::shared_ptr<DecoderMLP> mlp;                    ///< ("mlp")
  std::shared_ptr<Dropout> dropout;                   ///< on both residual branches ("dropout", no state)
};

/// The decoder stack without its output head (Hugging Face's LlamaModel): embed_tokens,
/// layers, and a final RMSNorm ("norm").
class DecoderModel : public Module {
 public:
  /// The stack the configuration describes; vocab_size, d_model, num_layers, num_heads and
  /// max_seq_len must be positive, num_heads divide d_model unless head_dim is set, and
  /// num_kv_heads divide num_heads (ValueError otherwise).
  explicit DecoderModel(const DecoderConfig& config);
  /// int64 tokens [N, L] (L <= max_seq_len) -> hidden states [N, L, d_model], causal.
  Tensor forward(const Tensor& tokens) override;
  /// The hidden states of L new tokens [N, L] after those the cache holds; the cache then
  /// holds them too.
  Tensor forward(const Tensor& tokens, KVCache& cache);

  DecoderConfig config;                                 ///< as given to the constructor
  std::shared_ptr<Embedding> embed_tokens;              ///< [vocab_size, d_model] ("embed_tokens")
  std::shared_ptr<ModuleList<DecoderLayer>> layers;     ///< ("layers.0", "layers.1", ...)
  std::shared_ptr<RMSNorm> norm;                        ///< the final norm ("norm")

 private:
  Tensor embed(const Tensor& tokens, std::int64_t offset) const;
};

/// A decoder-only language model (Hugging Face's LlamaForCausalLM): DecoderModel ("model")
/// and lm_head, logits = lm_head(model(tokens)). Parameters are initialised as GPT-2's and
/// Llama's: N(0, 0.02) for every Linear and Embedding weight, zero biases, RMSNorm weights 1.
/// With tie_weights the output layer reads the embedding's weight: parameters() lists it once
/// (as "model.embed_tokens.weight") and the state dict under both names, as PyTorch does.
class DecoderLM : public Module {
 public:
  /// The model the configuration describes (see DecoderModel for what is checked).
  explicit DecoderLM(const DecoderConfig& config);
  /// int64 tokens [N, L] -> logits [N, L, vocab_size]; position l sees tokens 0..l.
  Tensor forward(const Tensor& tokens) override;
  /// The logits [N, L, vocab_size] of L new tokens after those the cache holds (prefill a
  /// prompt, then one token at a time); equal to forward's at the same positions.
  Tensor forward(const Tensor& tokens, KVCache& cache);
  /// A cache for `batch` sequences of up to `capacity` positions (0 = max_seq_len) in the
  /// parameters' dtype.
  KVCache make_cache(std::int64_t batch, std::int64_t capacity = 0) const;
  std::string extra_repr() const override;

  DecoderConfig config;                 ///< as given to the constructor
  std::shared_ptr<DecoderModel> model;  ///< the stack ("model")
  std::shared_ptr<Linear> lm_head;      ///< d_model -> vocab_size, no bias ("lm_head")
};

}  // namespace microtorch::nn
