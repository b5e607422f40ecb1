// benchmarks/bench_training.cpp — one training step of the Iris transformer
// (iris_train_step of steps.hpp: forward on 16 flowers, cross-entropy, zero_grad,
// backward, Adam step).
#include "benchmarks.hpp"
#include "steps.hpp"

namespace bench {

namespace {

void iris_train_step(benchmark::State& state, int threads) {
  ThreadScope scope(threads);
  const auto step = make_step("iris_train_step", {});
  for (auto _ : state) step->run();
}

}  // namespace

void register_training_benchmarks(int t) {
  benchmark::RegisterBenchmark(("iris_train_step/batch:16/threads:" + std::to_string(t)).c_str(), iris_train_step, t)
      ->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace bench
