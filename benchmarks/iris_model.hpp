// benchmarks/iris_model.hpp — the Iris transformer timed by the iris_train_step step (steps.cpp).
//
// Four features become four tokens: Linear(4, 32) + ReLU, reshape to [B, 4, 8],
// MultiheadAttention(8, 2, batch_first), mean over the tokens, Linear(8, 3).
// tools/bench_torch.py builds the same model in PyTorch.
#pragma once

#include <memory>
#include <string>

#include <microtorch/nn.hpp>

namespace bench {

struct IrisTransformer : microtorch::nn::Module {
  std::shared_ptr<microtorch::nn::Linear> embed, head;
  std::shared_ptr<microtorch::nn::MultiheadAttention> attn;

  IrisTransformer() {
    namespace nn = microtorch::nn;
    embed = register_module("embed", std::make_shared<nn::Linear>(4, 32));
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(
                                       8, 2, nn::MultiheadAttentionOptions{.batch_first = true}));
    head = register_module("head", std::make_shared<nn::Linear>(8, 3));
  }

  microtorch::Tensor forward(const microtorch::Tensor& x) override {  // x: [B, 4]
    const microtorch::Tensor tokens = microtorch::relu(embed->forward(x)).reshape({-1, 4, 8});
    const auto [y, weights] = attn->forward(tokens, tokens, tokens);
    return head->forward(y.mean({1}));
  }

  std::string type_name() const override { return "IrisTransformer"; }
};

}  // namespace bench
