// examples/models/iris_transformer.hpp — the Iris transformer (the TinyAI ESP32 example's
// configuration) and its data split, shared by the example, the lowering tests and the demo.
//
//   x [B, 4] cm  ->  standardise (train statistics, kept as buffers so firmware takes raw cm)
//                ->  Linear(4, 32) + ReLU  ->  reshape [B, 4 tokens, 8]
//                ->  MultiheadAttention(8, 2, batch_first)  ->  mean over tokens
//                ->  Linear(8, 3) logits
#pragma once

#include <algorithm>
#include <cstdint>

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

#include "../data/iris.hpp"

namespace iris_transformer {

namespace mt = microtorch;
namespace nn = microtorch::nn;

struct IrisTransformer : nn::Module {
  mt::Tensor mean, inv_std;  // [4] buffers: (x - mean) * inv_std
  std::shared_ptr<nn::Linear> embed, head;
  std::shared_ptr<nn::MultiheadAttention> attn;

  IrisTransformer() {
    mean = register_buffer("mean", mt::zeros({iris::kFeatures}));
    inv_std = register_buffer("inv_std", mt::ones({iris::kFeatures}));
    embed = register_module("embed", std::make_shared<nn::Linear>(iris::kFeatures, 32));
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(8, 2, nn::MultiheadAttentionOptions{.batch_first = true}));
    head = register_module("head", std::make_shared<nn::Linear>(8, iris::kClasses));
  }
  mt::Tensor forward(const mt::Tensor& x) override {
    const mt::Tensor t = tokens(x);
    const mt::Tensor mixed = std::get<0>(attn->forward(t, t, t, {.need_weights = false}));
    return head->forward(mt::mean(mixed, {1}));
  }
  // Per-head attention weights [B, 2, 4, 4] (for heat maps).
  mt::Tensor attention_weights(const mt::Tensor& x) {
    const mt::Tensor t = tokens(x);
    return std::get<1>(attn->forward(t, t, t, {.need_weights = true, .average_attn_weights = false}));
  }
  mt::Tensor tokens(const mt::Tensor& x) {
    return mt::relu(embed->forward((x - mean) * inv_std)).reshape({x.size(0), 4, 8});
  }
  std::string type_name() const override { return "IrisTransformer"; }
};

struct Split {
  mt::Tensor x_train, y_train, x_test, y_test;  // float32 [n, 4] in cm, int64 [n]
};

// After manual_seed(seed), randperm(150) orders the flowers: the first 120 train, the last
// 30 test (the generator is platform-independent, so the split is too).
inline Split split(std::uint64_t seed = 42) {
  mt::manual_seed(seed);
  mt::Tensor features = mt::empty({iris::kSamples, iris::kFeatures});
  mt::Tensor labels = mt::empty({iris::kSamples}, mt::kInt64);
  std::copy_n(&iris::kFeaturesData[0][0], iris::kSamples * iris::kFeatures, features.data<float>());
  std::copy_n(iris::kLabels, iris::kSamples, labels.data<std::int64_t>());
  const mt::Tensor order = mt::randperm(iris::kSamples);
  const mt::Tensor train = order.slice(0, 0, 120), test = order.slice(0, 120, iris::kSamples);
  return {features.index_select(0, train), labels.index_select(0, train), features.index_select(0, test),
          labels.index_select(0, test)};
}

inline double accuracy(IrisTransformer& model, const mt::Tensor& x, const mt::Tensor& y) {
  mt::NoGradGuard no_grad;
  return (model.forward(x).argmax(1) == y).to(mt::kFloat32).mean().item();
}

struct Options {
  int epochs = 120;
  std::int64_t batch = 16;
  double lr = 1e-2;
};

// Adam on shuffled minibatches; `on_batch(epoch, batch, loss)` sees every step and
// `on_epoch(epoch)` the end of every epoch (the model is in train mode there).
template <class OnBatch, class OnEpoch>
void train(IrisTransformer& model, const Split& data, const Options& o, OnBatch&& on_batch, OnEpoch&& on_epoch) {
  {
    mt::NoGradGuard no_grad;  // standardisation from the training rows only
    model.mean.copy_(data.x_train.mean({0}));
    model.inv_std.copy_(1.0 / data.x_train.var({0}, /*unbiased=*/false).sqrt());
  }
  model.train();
  mt::optim::Adam opt(model.parameters(), {.lr = o.lr});
  mt::data::DataLoader loader(mt::data::TensorDataset({data.x_train, data.y_train}), {.batch_size = o.batch, .shuffle = true});
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    std::int64_t b = 0;
    for (const auto& batch : loader) {
      const mt::Tensor loss = nn::functional::cross_entropy(model.forward(batch[0]), batch[1]);
      opt.zero_grad();
      loss.backward();
      opt.step();
      on_batch(epoch, b++, loss.item());
    }
    on_epoch(epoch);
  }
  model.eval();
}

inline void train(IrisTransformer& model, const Split& data, const Options& o = {}) {
  train(model, data, o, [](int, std::int64_t, double) {}, [](int) {});
}

}  // namespace iris_transformer
