/// \file
/// Text generation with a decoder-only model: generate() (greedy or sampled, with a KV cache)
/// and sample_tokens(), the sampling step on its own (temperature, top-k, top-p).
///
/// \code
///   model.eval();
///   Tensor out = nn::generate(model, prompt, {.max_new_tokens = 50, .temperature = 0.8, .top_k = 20, .seed = 7});
///   // out: [N, P + 50], the prompt followed by the new tokens
/// \endcode
#pragma once

#include <cstdint>
#include <optional>

#include "microtorch/nn/decoder.hpp"

namespace microtorch::nn {

/// The options of generate(), in the order designated initialisers need.
struct GenerateOptions {
  std::int64_t max_new_tokens = 16;  ///< tokens to append (>= 0)
  double temperature = 1.0;          ///< logits / temperature before sampling; 0 = greedy (argmax, ties to the lowest id)
  std::int64_t top_k = 0;            ///< sample among the k most likely tokens only; 0 = all
  double top_p = 1.0;                ///< nucleus sampling: the fewest most likely tokens whose probability reaches top_p; 1 = all
  std::optional<std::uint64_t> seed = std::nullopt;  ///< draw from a Generator of this seed; none = the current generator
  std::int64_t eos_token_id = -1;    ///< stop once every sequence has produced it (later tokens of a finished one are it too); -1 = never
  bool use_cache = true;             ///< decode with a KVCache (one position per step); false recomputes the whole sequence each step
};

/// Appends up to max_new_tokens tokens to each sequence of `prompt` (int64 [N, P] or [P],
/// P >= 1) and returns the prompt followed by them, [N, P + new] ([P + new] for a 1-D
/// prompt). Each step takes the logits of the last position, then the argmax (temperature 0)
/// or a draw from sample_tokens(). With use_cache the prompt runs once (prefill) and every
/// later step feeds one token against the cache; without it, each step recomputes the whole
/// sequence: both give the same tokens. Runs without a graph (NoGradGuard); put the model in
/// eval() first, or dropout stays on. Throws ValueError for options out of range or a prompt
/// whose P + max_new_tokens exceeds the model's max_seq_len; ShapeError / DtypeError for a
/// prompt that is not int64 [N, P]; IndexError (the embedding's) for a token outside the
/// vocabulary.
Tensor generate(DecoderLM& model, const Tensor& prompt, const GenerateOptions& options = {});

/// One sampling step: a token id per row of logits [N, V] (int64 [N]), drawn from the current
/// generator from softmax(logits / temperature) restricted to the top_k most likely tokens
/// (0 = all) and then to the fewest most likely whose probabilities add up to top_p (at least
/// one); temperature 0 takes the argmax. A temperature < 0 or NaN, top_k < 0, top_p outside
/// (0, 1], or logits that are not floating [N, V] throw ValueError / ShapeError / DtypeError.
Tensor sample_tokens(const Tensor& logits, double temperature = 1.0, std::int64_t top_k = 0, double top_p = 1.0);

}  // namespace microtorch::nn
