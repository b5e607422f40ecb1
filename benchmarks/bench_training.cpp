// benchmarks/bench_training.cpp — one training step of the Iris transformer
// (iris_model.hpp): forward on a batch of 16 flowers, cross-entropy, zero_grad,
// backward, Adam step.
#include "benchmarks.hpp"
#include "iris_model.hpp"

namespace mt = microtorch;
namespace F = microtorch::nn::functional;

namespace bench {

namespace {

constexpr std::int64_t kBatch = 16;

void iris_train_step(benchmark::State& state, int threads) {
  ThreadScope scope(threads);
  mt::manual_seed(0);
  IrisTransformer model;
  mt::optim::Adam opt(model.parameters(), {.lr = 1e-2});
  const mt::Tensor x = mt::randn({kBatch, 4}), y = mt::randint(0, 3, {kBatch});
  for (auto _ : state) {
    mt::Tensor loss = F::cross_entropy(model.forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
}

}  // namespace

void register_training_benchmarks(int t) {
  benchmark::RegisterBenchmark(("iris_train_step/batch:16/threads:" + std::to_string(t)).c_str(), iris_train_step, t)
      ->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace bench
