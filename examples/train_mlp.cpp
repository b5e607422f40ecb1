// examples/train_mlp.cpp — a 2-layer MLP learns Fisher's Iris flowers with plain tensors.
//
// The whole training loop, written the way nn::Linear and optim::SGD will do it for you
// later: parameters are tensors with requires_grad_(), the loss is built from
// differentiable ops, backward() fills .grad(), and the update runs under a NoGradGuard.
//
//   model:  logits = tanh(x W1 + b1) W2 + b2        4 -> 16 -> 3
//   loss:   cross-entropy = -mean_i log_softmax(logits_i)[y_i]
//   update: p -= lr * dL/dp                          (minibatch SGD)
//
// Exits with status 1 when the final test accuracy is below 90%, so `make demo` fails
// loudly if training breaks.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include <fmt/core.h>

#include <microtorch/microtorch.hpp>

#include "data/iris.hpp"

namespace mt = microtorch;

namespace {

constexpr std::uint64_t kSeed = 42;  // fixes the split, the initial weights and the batch order
constexpr std::int64_t kTest = 30;   // held-out flowers; the other 120 train
constexpr std::int64_t kHidden = 16;
constexpr std::int64_t kBatch = 16;
constexpr int kEpochs = 60;
constexpr double kLearningRate = 0.1;

struct Mlp {
  mt::Tensor w1, b1, w2, b2;  // weights are [in, out], so a layer is x.matmul(w) + b

  mt::Tensor forward(const mt::Tensor& x) const { return mt::tanh(x.matmul(w1) + b1).matmul(w2) + b2; }
  mt::TensorList parameters() const { return {w1, b1, w2, b2}; }
};

Mlp make_mlp() {
  // Glorot/Xavier uniform with the tanh gain for W1; biases start at zero.
  Mlp m{mt::empty({iris::kFeatures, kHidden}), mt::zeros({kHidden}), mt::empty({kHidden, iris::kClasses}),
        mt::zeros({iris::kClasses})};
  mt::init::xavier_uniform_(m.w1, mt::init::calculate_gain("tanh"));
  mt::init::xavier_uniform_(m.w2);
  for (mt::Tensor p : m.parameters()) p.requires_grad_();  // p is a handle: this marks the model's tensor
  return m;
}

// Mean negative log-likelihood of the targets: the target log-probabilities are picked
// by multiplying with a one-hot matrix and summing each row.
mt::Tensor cross_entropy(const mt::Tensor& logits, const mt::Tensor& targets) {
  const mt::Tensor one_hot = (targets.unsqueeze(1) == mt::arange(iris::kClasses)).to(mt::kFloat32);  // [N, 3]
  return -(mt::log_softmax(logits, 1) * one_hot).sum({1}).mean();
}

double accuracy(const mt::Tensor& logits, const mt::Tensor& targets) {
  return (logits.argmax(1) == targets).to(mt::kFloat32).mean().item();
}

}  // namespace

int main() {
  const auto start = std::chrono::steady_clock::now();
  mt::manual_seed(kSeed);

  // ---- data: the 150 embedded flowers as tensors ---------------------------------------
  mt::Tensor features = mt::empty({iris::kSamples, iris::kFeatures});                // float32 [150, 4]
  mt::Tensor labels = mt::empty({iris::kSamples}, mt::kInt64);                       // int64 [150]
  std::copy_n(&iris::kFeaturesData[0][0], iris::kSamples * iris::kFeatures, features.data<float>());
  std::copy_n(iris::kLabels, iris::kSamples, labels.data<std::int64_t>());

  // Split: after manual_seed(42), randperm(150) shuffles the rows; the first 120 train,
  // the last 30 test. The generator is platform-independent, so the split is too.
  const mt::Tensor order = mt::randperm(iris::kSamples);
  const mt::Tensor train_idx = order.slice(0, 0, iris::kSamples - kTest);
  const mt::Tensor test_idx = order.slice(0, iris::kSamples - kTest, iris::kSamples);
  mt::Tensor x_train = features.index_select(0, train_idx), y_train = labels.index_select(0, train_idx);
  mt::Tensor x_test = features.index_select(0, test_idx), y_test = labels.index_select(0, test_idx);

  // Standardize with the statistics of the training rows only (no peeking at the test set).
  const mt::Tensor mu = x_train.mean({0}, /*keepdim=*/true);                          // [1, 4]
  const mt::Tensor sigma = x_train.var({0}, /*unbiased=*/false, /*keepdim=*/true).sqrt();
  x_train = (x_train - mu) / sigma;
  x_test = (x_test - mu) / sigma;

  const std::int64_t n_train = x_train.size(0);
  fmt::print("iris: {} train / {} test flowers, {} features, {} classes; MLP {}-{}-{} (tanh), SGD lr={} batch={}\n",
             n_train, x_test.size(0), iris::kFeatures, iris::kClasses, iris::kFeatures, kHidden, iris::kClasses,
             kLearningRate, kBatch);

  // ---- training ------------------------------------------------------------------------
  Mlp model = make_mlp();
  double train_acc = 0.0, test_acc = 0.0, train_loss = 0.0;
  auto evaluate = [&] {
    mt::NoGradGuard no_grad;  // inference: record no graph
    const mt::Tensor logits = model.forward(x_train);
    train_loss = cross_entropy(logits, y_train).item();
    train_acc = accuracy(logits, y_train);
    test_acc = accuracy(model.forward(x_test), y_test);
  };

  evaluate();
  fmt::print("epoch {:3d}  loss {:.4f}  train acc {:5.1f}%  test acc {:5.1f}%\n", 0, train_loss, 100 * train_acc,
             100 * test_acc);
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    const mt::Tensor shuffled = mt::randperm(n_train);
    for (std::int64_t begin = 0; begin < n_train; begin += kBatch) {
      const mt::Tensor idx = shuffled.slice(0, begin, begin + kBatch);
      const mt::Tensor loss = cross_entropy(model.forward(x_train.index_select(0, idx)), y_train.index_select(0, idx));
      loss.backward();  // fills p.grad() for every parameter, then frees the graph

      mt::NoGradGuard no_grad;  // the update itself must not be recorded
      for (mt::Tensor p : model.parameters()) {
        p.add_(p.grad(), -kLearningRate);  // p -= lr * grad
        p.zero_grad();                     // gradients accumulate otherwise
      }
    }
    if (epoch % 10 == 0) {
      evaluate();
      fmt::print("epoch {:3d}  loss {:.4f}  train acc {:5.1f}%  test acc {:5.1f}%\n", epoch, train_loss,
                 100 * train_acc, 100 * test_acc);
    }
  }

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("final: loss {:.4f}, train accuracy {:.1f}%, test accuracy {:.1f}% ({:.2f} s)\n", train_loss,
             100 * train_acc, 100 * test_acc, seconds);
  if (test_acc < 0.9) {
    fmt::print(stderr, "train_mlp: test accuracy {:.1f}% is below 90%: training is broken\n", 100 * test_acc);
    return 1;
  }
  return 0;
}
