/// \file
/// A decoder-only language model (nn::DecoderLM) lowered to a firmware that generates: one
/// token per call against a key/value cache kept in RAM between calls.
///
/// \code
///   nn::DecoderLM model({.vocab_size = 96, .d_model = 64, .num_layers = 2, .num_heads = 4,
///                        .num_kv_heads = 2, .max_seq_len = 128});
///   lower::Program p = lower::lower_decoder(model, calibration_tokens, {.name = "lm"});
///   lower::Simulator sim(p);
///   auto tokens = lower::greedy_generate(sim, {1, 2, 3}, 20);   // the firmware's integers
///   lower::emit_c(p, "out/lm");   // lm_reset(), lm_step(token, logits), lm_greedy(logits)
/// \endcode
///
/// The step program. Its input is one int32 token id, its output the int16 logits of the next
/// token; the keys and values of every layer ([capacity, kv_heads head_dim] int16 each) and the
/// position counter are State buffers: static arrays beside the arena that keep their values
/// from one call to the next, zeroed by `<name>_reset` (and at start-up). One step:
///
///     x = embed_tokens[token]                                  mt_embedding_s16
///     per layer:
///       h = rms_norm(x) (input_layernorm)                      mt_rmsnorm_s16
///       q | k | v = h W_qkv^T (+ b)                            mt_linear_s16_* (one call, three formats)
///       q, k turned by RoPE at the position                    mt_rope_s16 (cos, sin tables in Q14, flash)
///       k, v appended to the layer's cache at the position      mt_cache_append_s16
///       a = attention of q over the cache, GQA                 mt_attention_cached_s16 (streaming)
///       x = x + a W_o^T                                        mt_linear_s16_*, mt_add_s16_s16_s16
///       h = rms_norm(x) (post_attention_layernorm)
///       x = x + down(act(gate(h)) * up(h))                     linear, mt_swiglu_s16 (SiLU) or mt_gelu_s16
///                                                              and mt_mul_s16, linear, add
///     logits = rms_norm(x) W_head^T                            mt_rmsnorm_s16, mt_linear_s16_*
///     position += 1                                            mt_position_next
///
/// Number formats: int16 activations, symmetric, each with one real scale covering the range
/// the calibration saw (the float model run on `calibration` tokens through the same modules)
/// widened by `margin`; weights int16 or int8 (weight_bits), symmetric per output row, rounded
/// to nearest; the sigmoid of SiLU in Q0.15. A cache holds its keys and values in the format
/// of the k and v projections. The emitted C has no float, no division and no malloc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "microtorch/lower/program.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/nn/decoder.hpp"

namespace microtorch::lower {

/// Options of lower_decoder().
struct DecoderLowerOptions {
  int weight_bits = 16;       ///< 16 or 8: the linear layers' weights (activations are int16)
  /// 16 or 8: the key/value caches, and with them the queries and the attention's output (int8:
  /// half the caches' RAM, mt_attention_cached_s8)
  int cache_bits = 16;
  double margin = 0.25;       ///< each activation's scale covers its calibrated |max| times 1 + margin
  /// positions the caches hold (1 .. max_seq_len); 0 = the model's max_seq_len. The caches take
  /// 2 x layers x capacity x kv_heads x head_dim x cache_bits / 8 bytes of RAM; a step past the
  /// last position returns 1 from `<name>_step` (the simulator's status() 1) and writes no cache row
  std::int64_t capacity = 0;
  std::string name = "model";  ///< C identifier prefix of the firmware
};

/// Lowers `model` to its step program (Program::decoding). `calibration` holds int64 token
/// ids [N, L] (L <= capacity): the float model runs on them, in eval mode (its mode given
/// back), to choose the formats. The MLP's
/// activation must be "silu" or "gelu" (ValueError naming the others); RoPE, GQA, biases on
/// q/k/v and weight tying lower as they are.
Program lower_decoder(nn::DecoderLM& model, const Tensor& calibration, const DecoderLowerOptions& options = {});

/// lower::verify() checks such a program on a sequence of tokens (one input each, in order,
/// from start-up: the logits of every step, bit for bit); the instructions it counts per
/// "inference" are those of the whole sequence from a reset.

/// The first index of the largest logit (the firmware's `<name>_greedy`).
std::int64_t greedy_token(const std::vector<std::int64_t>& logits);

/// The firmware's `<name>_sample`: a token drawn among the `top_k` largest logits (1..64) at
/// `temperature` (> 0) with the integers of mt_sample_s16 (mt_kernels.h), `seed` advanced one
/// xorshift32 step; the same token as the firmware for the same logits and seed. ValueError
/// for a temperature <= 0 or a program that is not a decoder's step.
std::int64_t sample_token(const Program& program, const std::vector<std::int64_t>& logits, int top_k,
                          double temperature, std::uint32_t& seed);
/// round(65536 / temperature), the firmware's inv_temperature_q16 (clamped to [1, 2^31 - 1]).
std::int32_t inv_temperature_q16(double temperature);
/// round(scale log2(e) 2^24) of the program's logits (the header's `<NAME>_LOGIT_LOG2E_Q24`).
std::int32_t logit_log2e_q24(const Program& program);

/// Greedy generation with the simulator from a reset: the prompt's tokens in turn, then
/// `new_tokens` more, each the greedy_token of the step before. Returns prompt and new tokens.
std::vector<std::int64_t> greedy_generate(Simulator& sim, const std::vector<std::int64_t>& prompt,
                                          std::int64_t new_tokens);

}  // namespace microtorch::lower
