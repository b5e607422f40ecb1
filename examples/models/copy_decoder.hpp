// examples/models/copy_decoder.hpp — a tiny causal decoder and two digit-sequence tasks:
// "copy" (needs only the past: learnable under a causal mask) and "peek" (needs the next
// token: learnable only without the mask). Shared by the training tests, the lowering tests
// and the sequence example.
//
//   tokens [B, L] -> token embedding * 0.5 + learned positions
//                 -> x + MultiheadAttention(x, causal)  -> x + relu(Linear(x))  -> logits [B, L, 9]
#pragma once

#include <cstdint>
#include <memory>

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

namespace copy_decoder {

namespace mt = microtorch;
namespace nn = microtorch::nn;

constexpr std::int64_t kDigits = 8;         // tokens 0..7
constexpr std::int64_t kSep = kDigits;      // separator token
constexpr std::int64_t kVocab = kDigits + 1;

// token + learned position -> self-attention (residual) -> feed-forward (residual) -> logits
struct TinyDecoder : nn::Module {
  std::shared_ptr<nn::Embedding> tok;
  std::shared_ptr<nn::LearnedPositionalEncoding> pos;
  std::shared_ptr<nn::MultiheadAttention> attn;
  std::shared_ptr<nn::Linear> ff, head;
  bool causal;
  TinyDecoder(std::int64_t len, std::int64_t dim, bool causal_) : causal(causal_) {
    tok = register_module("tok", std::make_shared<nn::Embedding>(kVocab, dim));
    pos = register_module("pos", std::make_shared<nn::LearnedPositionalEncoding>(dim, len));
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(dim, 2, nn::MultiheadAttentionOptions{.batch_first = true}));
    ff = register_module("ff", std::make_shared<nn::Linear>(dim, dim));
    head = register_module("head", std::make_shared<nn::Linear>(dim, kVocab));
  }
  mt::Tensor forward(const mt::Tensor& tokens) override {
    const mt::Tensor x0 = embed(tokens);
    mt::Tensor x = x0;
    x = x + std::get<0>(attn->forward(x, x, x, {.need_weights = false, .is_causal = causal}));
    x = x + mt::relu(ff->forward(x));
    return head->forward(x);
  }
  // The self-attention weights [B, L, L], averaged over the heads (for heat maps).
  mt::Tensor attention_weights(const mt::Tensor& tokens) {
    const mt::Tensor x = embed(tokens);
    return std::get<1>(attn->forward(x, x, x, {.need_weights = true, .is_causal = causal}));
  }
  std::string type_name() const override { return "TinyDecoder"; }

 private:
  mt::Tensor embed(const mt::Tensor& tokens) { return pos->forward(tok->forward(tokens) * 0.5); }
};

struct Batch {
  mt::Tensor inputs, targets;  // targets: -100 where not scored
};

// Copy: [x0..x4, SEP, x0..x3] -> predict x_{t-5} after the separator (looks back only).
inline Batch copy_batch(std::int64_t n) {
  const std::int64_t half = 5, len = 2 * half;
  mt::Tensor digits = mt::randint(0, kDigits, {n, half});
  mt::Tensor seq = mt::cat({digits, mt::full({n, 1}, static_cast<double>(kSep), mt::kInt64), digits}, 1);  // [n, 11]
  mt::Tensor inputs = seq.narrow(1, 0, len);
  mt::Tensor targets = seq.narrow(1, 1, len).clone();
  std::int64_t* t = targets.data<std::int64_t>();
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t i = 0; i < half; ++i) t[b * len + i] = -100;  // first half is unpredictable
  }
  return {inputs, targets};
}

// Peek: predict the *next* random token (needs the future; impossible under a causal mask).
inline Batch peek_batch(std::int64_t n) {
  const std::int64_t len = 10;
  mt::Tensor seq = mt::randint(0, kDigits, {n, len});
  mt::Tensor targets = mt::cat({seq.narrow(1, 1, len - 1), mt::full({n, 1}, -100.0, mt::kInt64)}, 1);  // last: nothing to peek at
  return {seq, targets};
}

inline double token_accuracy(TinyDecoder& model, const Batch& b) {
  mt::NoGradGuard no_grad;
  mt::Tensor pred = mt::argmax(model.forward(b.inputs), -1);
  mt::Tensor scored = b.targets != -100.0;
  return mt::sum((pred == b.targets) & scored).item() / mt::sum(scored).item();
}

inline double train(TinyDecoder& model, Batch (*make)(std::int64_t), int steps) {
  mt::optim::Adam opt(model.parameters(), {.lr = 1e-2});
  for (int step = 0; step < steps; ++step) {
    Batch b = make(64);
    mt::Tensor logits = model.forward(b.inputs);
    mt::Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, kVocab}), b.targets.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  return token_accuracy(model, make(512));
}

}  // namespace copy_decoder
