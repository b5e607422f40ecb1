// benchmarks/steps.cpp — the steps of steps.hpp.
#include "steps.hpp"

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

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
      : mode_(mode), mha_(s.embed, s.heads, nn::MultiheadAttentionOptions{.batch_first = true}),
        x_(mt::randn({s.batch, s.seq, s.embed})) {}

  void run() override {
    if (mode_ == Mode::inference) {
      mt::NoGradGuard no_grad;
      keep(std::get<0>(mha_.forward(x_, x_, x_)));
      return;
    }
    if (mode_ == Mode::forward) {
      keep(std::get<0>(mha_.forward(x_, x_, x_)));
      return;
    }
    mha_.zero_grad();
    std::get<0>(mha_.forward(x_, x_, x_)).sum().backward();
    keep(mha_.in_proj_weight.grad());
  }

 private:
  Seeded seeded_;
  Mode mode_;
  nn::MultiheadAttention mha_;
  mt::Tensor x_;
};

class SdpaStep : public Step {
 public:
  explicit SdpaStep(const AttentionShape& s) {
    const mt::Shape shape{s.batch, s.heads, s.seq, s.embed / s.heads};
    q_ = mt::randn(shape).requires_grad_();
    k_ = mt::randn(shape).requires_grad_();
    v_ = mt::randn(shape).requires_grad_();
  }

  void run() override {
    for (mt::Tensor* t : {&q_, &k_, &v_}) t->zero_grad();
    std::get<0>(mt::scaled_dot_product_attention(q_, k_, v_)).sum().backward();
    keep(q_.grad());
  }

 private:
  Seeded seeded_;
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

}  // namespace

std::unique_ptr<Step> make_step(const std::string& kind, const AttentionShape& s) {
  if (kind == "mha_fwd") return std::make_unique<MhaStep>(s, MhaStep::Mode::forward);
  if (kind == "mha_fwd_bwd") return std::make_unique<MhaStep>(s, MhaStep::Mode::forward_backward);
  if (kind == "mha_infer") return std::make_unique<MhaStep>(s, MhaStep::Mode::inference);
  if (kind == "sdpa_fwd_bwd") return std::make_unique<SdpaStep>(s);
  if (kind == "iris_train_step") return std::make_unique<IrisStep>();
  return nullptr;
}

double step_flops(const std::string& kind, const AttentionShape& s) {
  if (kind == "mha_fwd" || kind == "mha_infer") return mha_forward_flops(s);
  if (kind == "mha_fwd_bwd") return 3 * mha_forward_flops(s);
  if (kind == "sdpa_fwd_bwd") return 3 * sdpa_forward_flops(s);
  return 0;
}

}  // namespace bench
