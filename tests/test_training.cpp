// End to end: a tiny causal decoder learns a task that the causal mask allows, and the
// same model without the mask "cheats" on a task that needs future tokens — so the mask
// demonstrably removes the future.
#include <chrono>

#include "helpers.hpp"
#include "microtorch/nn.hpp"

using mt::Tensor;
namespace nn = microtorch::nn;
namespace F = microtorch::nn::functional;

namespace {

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
    pos = register_module("pos", std::make_shared<nn::LearnedPositionalEncoding>(len, dim));
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(dim, 2, nn::MultiheadAttentionOptions{.batch_first = true}));
    ff = register_module("ff", std::make_shared<nn::Linear>(dim, dim));
    head = register_module("head", std::make_shared<nn::Linear>(dim, kVocab));
  }
  Tensor forward(const Tensor& tokens) override {
    Tensor x = pos->forward(tok->forward(tokens) * 0.5);
    x = x + std::get<0>(attn->forward(x, x, x, {.need_weights = false, .is_causal = causal}));
    x = x + mt::relu(ff->forward(x));
    return head->forward(x);
  }
  std::string type_name() const override { return "TinyDecoder"; }
};

struct Batch {
  Tensor inputs, targets;  // targets: -100 where not scored
};

// Copy: [x0..x4, SEP, x0..x3] -> predict x_{t-5} after the separator (looks back only).
Batch copy_batch(std::int64_t n) {
  const std::int64_t half = 5, len = 2 * half;
  Tensor digits = mt::randint(0, kDigits, {n, half});
  Tensor seq = mt::cat({digits, mt::full({n, 1}, static_cast<double>(kSep), mt::kInt64), digits}, 1);  // [n, 11]
  Tensor inputs = seq.narrow(1, 0, len);
  Tensor targets = seq.narrow(1, 1, len).clone();
  std::int64_t* t = targets.data<std::int64_t>();
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t i = 0; i < half; ++i) t[b * len + i] = -100;  // first half is unpredictable
  }
  return {inputs, targets};
}

// Peek: predict the *next* random token (needs the future; impossible under a causal mask).
Batch peek_batch(std::int64_t n) {
  const std::int64_t len = 10;
  Tensor seq = mt::randint(0, kDigits, {n, len});
  Tensor targets = mt::cat({seq.narrow(1, 1, len - 1), mt::full({n, 1}, -100.0, mt::kInt64)}, 1);  // last: nothing to peek at
  return {seq, targets};
}

double token_accuracy(TinyDecoder& model, const Batch& b) {
  mt::NoGradGuard no_grad;
  Tensor pred = mt::argmax(model.forward(b.inputs), -1);
  Tensor scored = b.targets != -100.0;
  return mt::sum((pred == b.targets) & scored).item() / mt::sum(scored).item();
}

double train(TinyDecoder& model, Batch (*make)(std::int64_t), int steps) {
  microtorch::optim::Adam opt(model.parameters(), {.lr = 1e-2});
  for (int step = 0; step < steps; ++step) {
    Batch b = make(64);
    Tensor logits = model.forward(b.inputs);
    Tensor loss = F::cross_entropy(logits.reshape({-1, kVocab}), b.targets.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  return token_accuracy(model, make(512));
}

}  // namespace

TEST_CASE("a causal decoder learns to copy a sequence to >= 99% token accuracy") {
  mt::manual_seed(7);
  TinyDecoder model(10, 32, /*causal=*/true);
  const auto start = std::chrono::steady_clock::now();
  const double acc = train(model, copy_batch, 400);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("copy task: token accuracy " << acc << " after 400 steps in " << seconds << " s");
  CHECK(acc >= 0.99);
}

TEST_CASE("without the causal mask the same model cheats on next-token peeking; with it, it cannot") {
  mt::manual_seed(8);
  TinyDecoder open(10, 32, /*causal=*/false);
  const double cheat = train(open, peek_batch, 300);
  mt::manual_seed(8);
  TinyDecoder masked(10, 32, /*causal=*/true);
  const double honest = train(masked, peek_batch, 300);
  MESSAGE("peek task: without mask " << cheat << ", with causal mask " << honest << " (chance 1/8)");
  CHECK(cheat >= 0.95);
  CHECK(honest <= 0.25);
}
