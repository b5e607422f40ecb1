// Independent models in independent threads (parallel.hpp, random.hpp). `make test` also
// runs the suite under ThreadSanitizer (build-tsan), which is what finds a data race here;
// the checks below find the races that change results: each thread, drawing from its own
// generator, must get bit for bit what the same work gives alone.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"
#include "microtorch/nn/attention.hpp"
#include "microtorch/nn/checkpoint.hpp"
#include "microtorch/nn/layers.hpp"
#include "microtorch/nn/loss.hpp"
#include "microtorch/nn/optim.hpp"
#include "microtorch/parallel.hpp"
#include "microtorch/random.hpp"

using mt::Tensor;
namespace nn = mt::nn;
namespace F = mt::nn::functional;

namespace {

// Attention, dropout and a classifier head: the ops with saved tensors, random draws and the
// attention kernels' thread pool.
struct Net : nn::Module {
  std::shared_ptr<nn::Linear> embed, head;
  std::shared_ptr<nn::MultiheadAttention> attn;
  std::shared_ptr<nn::Dropout> drop;
  Net() {
    embed = register_module("embed", std::make_shared<nn::Linear>(3, 16));
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(8, 2, nn::MultiheadAttentionOptions{.batch_first = true}));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.2));
    head = register_module("head", std::make_shared<nn::Linear>(8, 4));
  }
  Tensor forward(const Tensor& x) override {  // x [N, 6]: two tokens of 3 features
    const Tensor tokens = drop->forward(mt::relu(embed->forward(x.reshape({-1, 2, 3})))).reshape({-1, 4, 8});
    auto [y, w] = attn->forward(tokens, tokens, tokens);
    return head->forward(y.mean({1}));
  }
};

struct Run {
  std::vector<float> losses;
  nn::NamedTensors state;  // after a save and a load into a fresh model
};

// Builds, trains (Adam, dropout on) and checkpoints one model from its own generator.
Run train(std::uint64_t seed, const std::string& path) {
  mt::Generator gen(seed);
  mt::GeneratorGuard use(gen);
  auto model = std::make_shared<Net>();
  const Tensor x = mt::randn({32, 6}), y = mt::randint(0, 4, {32});
  mt::optim::Adam opt(model->parameters(), {.lr = 1e-2});
  Run run;
  for (int step = 0; step < 15; ++step) {
    Tensor loss = F::cross_entropy(model->forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    run.losses.push_back(loss.item<float>());
  }
  nn::save(*model, path);
  auto fresh = std::make_shared<Net>();
  nn::load(*fresh, path);
  run.state = fresh->state_dict();
  return run;
}

void check_same(const Run& a, const Run& b) {
  CHECK(a.losses == b.losses);
  REQUIRE(a.state.size() == b.state.size());
  for (std::size_t i = 0; i < a.state.size(); ++i) {
    INFO(a.state[i].first);
    CHECK(mt::equal(a.state[i].second, b.state[i].second));
  }
}

std::string temp_path(const std::string& name) {
  return "/tmp/microtorch-threads-" + std::to_string(::getpid()) + "-" + name + ".npz";
}

}  // namespace

TEST_CASE("two models trained in two threads, each from its own generator, equal the same runs alone") {
  const int threads_before = mt::get_num_threads();
  mt::set_num_threads(2);  // the attention kernels' pool is shared by both threads
  const std::string p1 = temp_path("a"), p2 = temp_path("b");
  const Run alone1 = train(1, p1), alone2 = train(2, p2);
  CHECK(alone1.losses.back() < alone1.losses.front());
  CHECK_FALSE(alone1.losses == alone2.losses);
  Run both1, both2;
  std::thread t1([&] { both1 = train(1, p1); });
  std::thread t2([&] { both2 = train(2, p2); });
  t1.join();
  t2.join();
  check_same(both1, alone1);
  check_same(both2, alone2);
  std::remove(p1.c_str());
  std::remove(p2.c_str());
  mt::set_num_threads(threads_before);
}

TEST_CASE("the default generator may be shared by threads: every draw is taken once") {
  // Each of 4 threads draws integers from the default generator; together they must have
  // consumed exactly the sequence one thread would have drawn (interleaved, none repeated).
  constexpr int kThreads = 4, kDraws = 2000;
  mt::manual_seed(7);
  const Tensor expected = mt::randint(0, std::int64_t{1} << 40, {kThreads * kDraws});
  mt::manual_seed(7);
  std::vector<Tensor> got(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&got, t] {
      std::vector<Tensor> parts;
      for (int i = 0; i < kDraws / 100; ++i) parts.push_back(mt::randint(0, std::int64_t{1} << 40, {100}));
      got[static_cast<std::size_t>(t)] = mt::cat(parts, 0);
    });
  }
  for (auto& th : pool) th.join();
  const Tensor all = mt::cat(got, 0);
  REQUIRE(all.numel() == kThreads * kDraws);
  std::vector<std::int64_t> a(all.data<std::int64_t>(), all.data<std::int64_t>() + all.numel());
  std::vector<std::int64_t> e(expected.data<std::int64_t>(), expected.data<std::int64_t>() + expected.numel());
  std::sort(a.begin(), a.end());
  std::sort(e.begin(), e.end());
  CHECK(a == e);
}

TEST_CASE("set_num_threads may be called from any thread and is seen by all") {
  const int before = mt::get_num_threads();
  std::thread([] { mt::set_num_threads(3); }).join();
  CHECK(mt::get_num_threads() == 3);
  CHECK_THROWS_MSG(mt::set_num_threads(0), mt::ValueError, "set_num_threads", "at least 1");
  mt::set_num_threads(before);
}
