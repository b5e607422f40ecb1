// benchmarks/steps.cpp — the named steps of steps.hpp.
#include "steps.hpp"

#include <array>
#include <stdexcept>

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

#include "decoder_model.hpp"
#include "iris_model.hpp"

namespace mt = microtorch;
namespace nn = microtorch::nn;
namespace F = microtorch::nn::functional;

namespace bench {

namespace {

// A value read from every result, so that no run can be optimised away.
volatile float g_sink = 0;
void keep(const mt::Tensor& t) { g_sink = t.data<float>()[0]; }

// Declared first in a step, so that its module and inputs are drawn from seed 0.
struct Seeded {
  Seeded() { mt::manual_seed(0); }
};

class MhaStep : public Step {
 public:
  enum class Mode { forward, forward_backward, inference };
  MhaStep(const AttentionShape& s, Mode mode)
      : mode_(mode), need_weights_(s.need_weights),
        mha_(s.embed, s.heads, nn::MultiheadAttentionOptions{.batch_first = true}),
        x_(mt::randn({s.batch, s.seq, s.embed})) {}

  void run() override {
    if (mode_ == Mode::inference) {
      mt::NoGradGuard no_grad;
      keep(std::get<0>(forward()));
      return;
    }
    if (mode_ == Mode::forward) {
      keep(std::get<0>(forward()));
      return;
    }
    mha_.zero_grad();
    std::get<0>(forward()).sum().backward();
    keep(mha_.in_proj_weight.grad());
  }

 private:
  std::tuple<mt::Tensor, mt::Tensor> forward() {
    return mha_.forward(x_, x_, x_, {.need_weights = need_weights_});
  }

  Seeded seeded_;
  Mode mode_;
  bool need_weights_;
  nn::MultiheadAttention mha_;
  mt::Tensor x_;
};

class AttentionStep : public Step {
 public:
  explicit AttentionStep(const AttentionShape& s) : heads_(s.heads), need_weights_(s.need_weights) {
    const mt::Shape shape{s.batch, s.seq, s.embed};
    q_ = mt::randn(shape).requires_grad_();
    k_ = mt::randn(shape).requires_grad_();
    v_ = mt::randn(shape).requires_grad_();
  }

  void run() override {
    for (mt::Tensor* t : {&q_, &k_, &v_}) t->zero_grad();
    const mt::AttentionHeadsOptions options{.need_weights = need_weights_, .average_weights = true};
    std::get<0>(mt::multi_head_attention(q_, k_, v_, heads_, options)).sum().backward();
    keep(q_.grad());
  }

 private:
  Seeded seeded_;
  std::int64_t heads_;
  bool need_weights_;
  mt::Tensor q_, k_, v_;
};

class IrisStep : public Step {
 public:
  static constexpr std::int64_t kBatch = 16;
  IrisStep()
      : opt_(model_.parameters(), {.lr = 1e-2}),
        x_(mt::randn({kBatch, 4})), y_(mt::randint(0, 3, {kBatch})) {}

  void run() override {
    mt::Tensor loss = F::cross_entropy(model_.forward(x_), y_);
    opt_.zero_grad();
    loss.backward();
    opt_.step();
    keep(loss);
  }

 private:
  Seeded seeded_;
  IrisTransformer model_;
  mt::optim::Adam opt_;
  mt::Tensor x_, y_;
};

class MatmulStep : public Step {
 public:
  explicit MatmulStep(std::int64_t n) : a_(mt::randn({n, n})), b_(mt::randn({n, n})) {}
  void run() override {
    mt::NoGradGuard no_grad;
    keep(mt::matmul(a_, b_));
  }

 private:
  Seeded seeded_;
  mt::Tensor a_, b_;
};

class SoftmaxStep : public Step {
 public:
  SoftmaxStep(std::int64_t rows, std::int64_t n) : x_(mt::randn({rows, n})) {}
  void run() override {
    mt::NoGradGuard no_grad;
    keep(mt::softmax(x_, -1));
  }

 private:
  Seeded seeded_;
  mt::Tensor x_;
};

// A chain of convolutions (conv.hpp) on x that requires no grad, the layers' parameters do:
// forward with the graph recorded, or zero_grad, forward, loss = output.sum(), backward.
class ConvChainStep : public Step {
 public:
  ConvChainStep(std::shared_ptr<nn::Sequential> net, mt::Tensor x, bool backward)
      : net_(std::move(net)), x_(std::move(x)), backward_(backward) {}
  void run() override {
    if (!backward_) {
      keep(net_->forward(x_));
      return;
    }
    net_->zero_grad();
    net_->forward(x_).sum().backward();
    keep(net_->parameters().front().grad());
  }

 private:
  std::shared_ptr<nn::Sequential> net_;
  mt::Tensor x_;
  bool backward_;
};

// The sensor front end: Conv1d 3 -> 16 (kernel 5, stride 2, padding 2), depthwise Conv1d
// (kernel 3, padding 1) on 16 channels, pointwise Conv1d 16 -> 32; x [32, 3, 128].
std::unique_ptr<Step> sensor_step(bool backward) {
  Seeded seeded;
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv1d>(3, 16, 5, nn::Conv1dOptions{.stride = 2, .padding = 2}),
      std::make_shared<nn::Conv1d>(16, 16, 3, nn::Conv1dOptions{.padding = 1, .groups = 16}),
      std::make_shared<nn::Conv1d>(16, 32, 1)});
  return std::make_unique<ConvChainStep>(net, mt::randn({32, 3, 128}), backward);
}

// A DS-CNN layer pair: depthwise Conv2d 3x3 (padding 1) on 64 channels, pointwise 64 -> 64;
// x [32, 64, 25, 5] (25 frames x 5 features, the keyword-spotting DS-CNN's map, batch 32).
std::unique_ptr<Step> dscnn_step(bool backward) {
  Seeded seeded;
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(64, 64, 3, nn::Conv2dOptions{.padding = 1, .groups = 64}),
      std::make_shared<nn::Conv2d>(64, 64, 1)});
  return std::make_unique<ConvChainStep>(net, mt::randn({32, 64, 25, 5}), backward);
}

constexpr std::array<const char*, 4> kConvSteps{"sensor_fwd/32x3x128", "sensor_fwd_bwd/32x3x128",
                                                "dscnn_pair_fwd/32x64x25x5", "dscnn_pair_fwd_bwd/32x64x25x5"};
// ---- decoder-only language model (decoder_model.hpp) ----------------------------------

// One AdamW step of the decoder on kDecoderBatch x kDecoderContext tokens: forward, the
// cross-entropy of the next tokens, backward, the update.
class DecoderTrainStep : public Step {
 public:
  DecoderTrainStep()
      : model_(decoder_config()), opt_(model_.parameters(), {.lr = 1e-3}),
        x_(mt::randint(0, kDecoderVocab, {kDecoderBatch, kDecoderContext})),
        y_(mt::randint(0, kDecoderVocab, {kDecoderBatch * kDecoderContext})) {}

  void run() override {
    const mt::Tensor logits = model_.forward(x_);
    const mt::Tensor loss = F::cross_entropy(logits.reshape({-1, kDecoderVocab}), y_);
    opt_.zero_grad();
    loss.backward();
    opt_.step();
    keep(loss);
  }

 private:
  Seeded seeded_;
  nn::DecoderLM model_;
  mt::optim::AdamW opt_;
  mt::Tensor x_, y_;
};

// Decoding at batch 1 with the KV cache: kDecoderContext tokens fed one at a time from an
// empty cache (positions 0 .. kDecoderContext - 1), the logits of each computed.
class DecoderDecodeStep : public Step {
 public:
  DecoderDecodeStep()
      : model_(decoder_config()), cache_(model_.make_cache(1, kDecoderContext)),
        tokens_(mt::randint(0, kDecoderVocab, {kDecoderContext})) {
    model_.eval();
  }

  void run() override {
    mt::NoGradGuard no_grad;
    cache_.reset();
    const std::int64_t* t = tokens_.data<std::int64_t>();
    mt::Tensor token = mt::empty({1, 1}, mt::kInt64), logits;
    for (std::int64_t i = 0; i < kDecoderContext; ++i) {
      token.data<std::int64_t>()[0] = t[i];
      logits = model_.forward(token, cache_);
    }
    keep(logits);
  }

 private:
  Seeded seeded_;
  nn::DecoderLM model_;
  nn::KVCache cache_;
  mt::Tensor tokens_;
};

const std::string kDecoderTrainName = "decoder_train_step/" + std::to_string(kDecoderBatch) + "x" +
                                      std::to_string(kDecoderContext);
const std::string kDecoderDecodeName = "decoder_decode/1x" + std::to_string(kDecoderContext);

constexpr std::array<std::int64_t, 2> kMatmulSizes{64, 256};
constexpr std::array<std::array<std::int64_t, 2>, 2> kSoftmaxSizes{{{256, 16}, {16384, 512}}};
constexpr std::array<const char*, 4> kAttentionKinds{"mha_fwd", "mha_fwd_bwd", "mha_infer", "attn_fwd_bwd"};

// The kind and the attention shape of a name "<kind>/<NxLxExH>" (false when it is not one).
bool attention_name(const std::string& name, std::string& kind, AttentionShape& shape) {
  for (const char* k : kAttentionKinds) {
    for (const auto& s : kShapes) {
      if (name == std::string(k) + "/" + shape_tag(s)) {
        kind = k;
        shape = s;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::string shape_tag(const AttentionShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.seq) + "x" + std::to_string(s.embed) + "x" +
         std::to_string(s.heads) + (s.need_weights ? "" : "-noweights");
}

std::vector<std::string> step_names() {
  std::vector<std::string> names;
  for (auto n : kMatmulSizes) names.push_back("matmul/" + std::to_string(n));
  for (auto [rows, n] : kSoftmaxSizes) names.push_back("softmax/" + std::to_string(rows) + "x" + std::to_string(n));
  for (const auto& s : kShapes) {
    for (const char* k : kAttentionKinds) names.push_back(std::string(k) + "/" + shape_tag(s));
  }
  names.push_back("iris_train_step/batch:16");
  for (const char* n : kConvSteps) names.emplace_back(n);
  names.push_back(kDecoderTrainName);
  names.push_back(kDecoderDecodeName);
  return names;
}

std::unique_ptr<Step> make_step(const std::string& name) {
  for (auto n : kMatmulSizes) {
    if (name == "matmul/" + std::to_string(n)) return std::make_unique<MatmulStep>(n);
  }
  for (auto [rows, n] : kSoftmaxSizes) {
    if (name == "softmax/" + std::to_string(rows) + "x" + std::to_string(n)) return std::make_unique<SoftmaxStep>(rows, n);
  }
  if (name == "iris_train_step/batch:16") return std::make_unique<IrisStep>();
  if (name == kConvSteps[0] || name == kConvSteps[1]) return sensor_step(name == kConvSteps[1]);
  if (name == kConvSteps[2] || name == kConvSteps[3]) return dscnn_step(name == kConvSteps[3]);
  if (name == kDecoderTrainName) return std::make_unique<DecoderTrainStep>();
  if (name == kDecoderDecodeName) return std::make_unique<DecoderDecodeStep>();
  std::string kind;
  AttentionShape s{};
  if (!attention_name(name, kind, s)) throw std::invalid_argument("no benchmark step is called " + name);
  if (kind == "mha_fwd") return std::make_unique<MhaStep>(s, MhaStep::Mode::forward);
  if (kind == "mha_fwd_bwd") return std::make_unique<MhaStep>(s, MhaStep::Mode::forward_backward);
  if (kind == "mha_infer") return std::make_unique<MhaStep>(s, MhaStep::Mode::inference);
  return std::make_unique<AttentionStep>(s);
}

double step_flops(const std::string& name) {
  for (auto n : kMatmulSizes) {
    if (name == "matmul/" + std::to_string(n)) return 2.0 * n * n * n;
  }
  std::string kind;
  AttentionShape s{};
  if (!attention_name(name, kind, s)) return 0;
  if (kind == "mha_fwd" || kind == "mha_infer") return mha_forward_flops(s);
  if (kind == "mha_fwd_bwd") return 3 * mha_forward_flops(s);
  return 3 * attention_forward_flops(s);
}

}  // namespace bench
