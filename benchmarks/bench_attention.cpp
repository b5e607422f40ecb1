// benchmarks/bench_attention.cpp — MultiheadAttention and scaled_dot_product_attention.
//
// Each benchmark builds its module and input once, then times the op in a loop:
//   mha_fwd       forward with the graph recorded (as in training)
//   mha_fwd_bwd   forward, loss = output.sum(), backward (gradients reset each time)
//   mha_infer     forward under NoGradGuard
//   sdpa_fwd_bwd  scaled_dot_product_attention on q, k, v [N, H, L, D] that require grad
#include "benchmarks.hpp"

#include <microtorch/nn.hpp>

namespace mt = microtorch;
namespace nn = microtorch::nn;

namespace bench {

namespace {

struct MhaSetup {
  explicit MhaSetup(const AttentionShape& s)
      : mha(s.embed, s.heads, nn::MultiheadAttentionOptions{.batch_first = true}),
        x(mt::randn({s.batch, s.seq, s.embed})) {}
  nn::MultiheadAttention mha;
  mt::Tensor x;
};

void mha_fwd(benchmark::State& state, AttentionShape s, int threads) {
  ThreadScope scope(threads);
  mt::manual_seed(0);
  MhaSetup m(s);
  for (auto _ : state) {
    auto [out, w] = m.mha.forward(m.x, m.x, m.x);
    benchmark::DoNotOptimize(out.data<float>());
  }
  state.counters["flop"] = mha_forward_flops(s);
}

void mha_fwd_bwd(benchmark::State& state, AttentionShape s, int threads) {
  ThreadScope scope(threads);
  mt::manual_seed(0);
  MhaSetup m(s);
  for (auto _ : state) {
    m.mha.zero_grad();
    auto [out, w] = m.mha.forward(m.x, m.x, m.x);
    out.sum().backward();
    benchmark::DoNotOptimize(m.mha.in_proj_weight.grad().data<float>());
  }
  state.counters["flop"] = 3 * mha_forward_flops(s);
}

void mha_infer(benchmark::State& state, AttentionShape s, int threads) {
  ThreadScope scope(threads);
  mt::manual_seed(0);
  MhaSetup m(s);
  mt::NoGradGuard no_grad;
  for (auto _ : state) {
    auto [out, w] = m.mha.forward(m.x, m.x, m.x);
    benchmark::DoNotOptimize(out.data<float>());
  }
  state.counters["flop"] = mha_forward_flops(s);
}

void sdpa_fwd_bwd(benchmark::State& state, AttentionShape s, int threads) {
  ThreadScope scope(threads);
  mt::manual_seed(0);
  const mt::Shape shape{s.batch, s.heads, s.seq, s.embed / s.heads};
  mt::Tensor q = mt::randn(shape).requires_grad_(), k = mt::randn(shape).requires_grad_(),
             v = mt::randn(shape).requires_grad_();
  for (auto _ : state) {
    for (mt::Tensor* t : {&q, &k, &v}) t->zero_grad();
    auto [out, w] = mt::scaled_dot_product_attention(q, k, v);
    out.sum().backward();
    benchmark::DoNotOptimize(q.grad().data<float>());
  }
  state.counters["flop"] = 3 * sdpa_forward_flops(s);
}

}  // namespace

void register_attention_benchmarks(int t) {
  for (const auto& s : kShapes) {
    const std::string tag = shape_tag(s) + "/threads:" + std::to_string(t);
    for (auto [name, fn] : {std::pair{"mha_fwd/", &mha_fwd}, std::pair{"mha_fwd_bwd/", &mha_fwd_bwd},
                            std::pair{"mha_infer/", &mha_infer}, std::pair{"sdpa_fwd_bwd/", &sdpa_fwd_bwd}}) {
      benchmark::RegisterBenchmark((name + tag).c_str(), fn, s, t)->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
  }
}

/// One forward+backward of MultiheadAttention at shape s, for peak_memory_bytes.
std::int64_t mha_peak_memory(const AttentionShape& s) {
  mt::manual_seed(0);
  MhaSetup m(s);
  auto step = [&] {
    m.mha.zero_grad();
    auto [out, w] = m.mha.forward(m.x, m.x, m.x);
    out.sum().backward();
  };
  step();  // first-use costs (BLAS buffers) are not the op's
  m.mha.zero_grad();
  return peak_memory_bytes(step);
}

}  // namespace bench
