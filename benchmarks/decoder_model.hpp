// benchmarks/decoder_model.hpp — the decoder-only language model timed by the decoder_* steps
// (steps.cpp): examples/char_lm.cpp's, 4 layers of d_model 128, 4 query heads over 2 key/value
// heads, SwiGLU of 352, RoPE, tied embeddings, 76 tokens, 128 positions. tools/bench_torch.py
// builds the same model in PyTorch.
#pragma once

#include <cstdint>

#include <microtorch/nn.hpp>

namespace bench {

constexpr std::int64_t kDecoderVocab = 76, kDecoderBatch = 16, kDecoderContext = 128;

inline microtorch::nn::DecoderConfig decoder_config() {
  return {.vocab_size = kDecoderVocab, .d_model = 128, .num_layers = 4, .num_heads = 4, .num_kv_heads = 2,
          .dim_feedforward = 352, .max_seq_len = kDecoderContext, .tie_weights = true};
}

}  // namespace bench
