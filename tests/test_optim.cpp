// Optimizers, clip_grad_norm_ and LR schedules against torch.optim 1.13 trajectories
// (tools/gen_training_fixtures.py; rtol 1e-5 / atol 1e-6 in float32), plus the
// hyperparameter errors.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "helpers.hpp"
#include "microtorch/io.hpp"
#include "microtorch/nn/checkpoint.hpp"
#include "microtorch/nn/layers.hpp"
#include "microtorch/nn/loss.hpp"
#include "microtorch/nn/optim.hpp"
#include "microtorch/random.hpp"

using mt::Tensor;
namespace optim = mt::optim;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-6;

// The fixture problem: loss(W, b) = mean((X W + b - Y)^2) + 0.1 * sum(tanh(X W + b)).
struct Problem {
  Tensor X = fixture("optim_problem__X"), Y = fixture("optim_problem__Y");
  // clone(): fixture() hands out the cached tensor, which the optimizers update in place.
  Tensor W = fixture("optim_problem__W0").clone().requires_grad_();
  Tensor b = fixture("optim_problem__b0").clone().requires_grad_();

  Tensor loss() const {
    const Tensor h = X.matmul(W) + b;
    const Tensor d = h - Y;
    return (d * d).mean() + 0.1 * mt::tanh(h).sum();
  }
};

// Runs 5 steps of the optimizer that make_opt builds and compares the parameters after
// every step (and the loss before it) with torch.optim's.
void check_trajectory(const std::string& name,
                      const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make_opt) {
  INFO("trajectory " << name);
  Problem p;
  auto opt = make_opt({p.W, p.b});
  const Tensor Ws = fixture("optim_" + name + "__W"), bs = fixture("optim_" + name + "__b");
  const Tensor losses = fixture("optim_" + name + "__loss");
  for (std::int64_t step = 0; step < 5; ++step) {
    INFO("step " << step + 1);
    opt->zero_grad();
    Tensor loss = p.loss();
    CHECK(loss.item() == doctest::Approx(losses.at<double>({step})).epsilon(kRtol));
    loss.backward();
    opt->step();
    CHECK_CLOSE(p.W, Ws.select(0, step), kRtol, kAtol);
    CHECK_CLOSE(p.b, bs.select(0, step), kRtol, kAtol);
  }
}

template <class O, class Opts>
std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> make(Opts opts) {
  return [opts](std::vector<Tensor> params) { return std::make_unique<O>(std::move(params), opts); };
}

}  // namespace

// ---- trajectories against torch.optim -----------------------------------------------------

TEST_CASE("SGD follows torch.optim.SGD: plain, momentum with dampening, nesterov with weight decay, maximize") {
  check_trajectory("sgd", make<optim::SGD>(optim::SGDOptions{.lr = 0.1}));
  check_trajectory("sgd_momentum", make<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1}));
  check_trajectory("sgd_nesterov", make<optim::SGD>(optim::SGDOptions{
                                       .lr = 0.1, .momentum = 0.9, .weight_decay = 0.05, .nesterov = true}));
  check_trajectory("sgd_maximize",
                   make<optim::SGD>(optim::SGDOptions{.lr = 0.01, .momentum = 0.5, .maximize = true}));
}

TEST_CASE("Adam follows torch.optim.Adam: defaults, betas/eps/weight decay, amsgrad") {
  check_trajectory("adam", make<optim::Adam>(optim::AdamOptions{.lr = 0.05}));
  check_trajectory("adam_wd", make<optim::Adam>(optim::AdamOptions{
                                  .lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1}));
  check_trajectory("adam_amsgrad", make<optim::Adam>(optim::AdamOptions{.lr = 0.05, .amsgrad = true}));
}

TEST_CASE("AdamW follows torch.optim.AdamW (decoupled weight decay), with and without amsgrad") {
  check_trajectory("adamw", make<optim::AdamW>(optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1}));
  check_trajectory("adamw_amsgrad",
                   make<optim::AdamW>(optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1, .amsgrad = true}));
}

// ---- behaviour ---------------------------------------------------------------------------

TEST_CASE("optimizers skip parameters without a gradient and leave the gradients untouched") {
  Tensor a = mt::tensor({1.0, 2.0}).requires_grad_();
  Tensor unused = mt::tensor({5.0}).requires_grad_();
  optim::Adam adam({a, unused}, {.lr = 0.1, .weight_decay = 0.5});
  (a * a).sum().backward();
  const Tensor grad_before = a.grad().clone();
  adam.step();
  CHECK_CLOSE(unused, mt::tensor({5.0}), 0, 0);
  CHECK(adam.state(1).step == 0);
  CHECK_FALSE(adam.state(1).exp_avg.defined());
  CHECK(adam.state(0).step == 1);
  CHECK_CLOSE(a.grad(), grad_before, 0, 0);
  // First Adam step moves every coordinate by lr (m / sqrt(v) = sign(g) after bias correction).
  CHECK_CLOSE(a, mt::tensor({0.9, 1.9}), 1e-6, 1e-6);

  optim::SGD sgd({a, unused}, {.lr = 0.1, .momentum = 0.9});
  sgd.zero_grad();
  CHECK_FALSE(a.grad().defined());
  sgd.step();  // no gradients at all: nothing happens
  CHECK_CLOSE(a, mt::tensor({0.9, 1.9}), 1e-6, 1e-6);
  CHECK_FALSE(sgd.momentum_buffer(0).defined());
}

TEST_CASE("SGD updates float64 parameters in float64") {
  Tensor w = mt::tensor({1.0, -3.0}, mt::kFloat64).requires_grad_();
  optim::SGD sgd({w}, {.lr = 0.25});
  (w * w).sum().backward();  // g = 2w
  sgd.step();
  CHECK(w.dtype() == mt::kFloat64);
  CHECK(w.at<double>({0}) == 0.5);
  CHECK(w.at<double>({1}) == -1.5);
}

TEST_CASE("Adam drives a quadratic to its minimum") {
  Tensor w = mt::tensor({3.0, -2.0, 0.5}).requires_grad_();
  const Tensor target = mt::tensor({1.0, 1.0, -1.0});
  optim::Adam adam({w}, {.lr = 0.1});
  for (int i = 0; i < 300; ++i) {
    adam.zero_grad();
    const Tensor d = w - target;
    (d * d).sum().backward();
    adam.step();
  }
  CHECK_CLOSE(w, target, 0, 1e-2);
}

TEST_CASE("set_lr changes the step size; a negative lr is refused") {
  Tensor w = mt::tensor({1.0}).requires_grad_();
  optim::SGD sgd({w}, {.lr = 0.1});
  sgd.set_lr(0.5);
  CHECK(sgd.lr() == 0.5);
  w.sum().backward();
  sgd.step();
  CHECK(w.item() == doctest::Approx(0.5));
  CHECK_THROWS_MSG(sgd.set_lr(-1.0), mt::ValueError, "SGD", "learning rate", "-1");
}

// ---- clip_grad_norm_ ---------------------------------------------------------------------

TEST_CASE("clip_grad_norm_ matches torch for the 2-, 1- and inf-norms and leaves small gradients alone") {
  struct Case {
    const char* name;
    double max_norm, norm_type;
  };
  for (const Case& c : {Case{"l2", 0.5, 2.0}, Case{"l1", 1.0, 1.0},
                        Case{"inf", 0.1, std::numeric_limits<double>::infinity()}, Case{"noclip", 100.0, 2.0}}) {
    INFO("clip " << c.name);
    Problem p;
    p.loss().backward();
    const std::string base = std::string("optim_clip_") + c.name + "__";
    const double total = optim::clip_grad_norm_({p.W, p.b}, c.max_norm, c.norm_type);
    CHECK(total == doctest::Approx(fixture(base + "total_norm").item()).epsilon(kRtol));
    CHECK_CLOSE(p.W.grad(), fixture(base + "grad_W"), kRtol, kAtol);
    CHECK_CLOSE(p.b.grad(), fixture(base + "grad_b"), kRtol, kAtol);
  }
}

TEST_CASE("clip_grad_norm_ ignores parameters without gradients and checks its arguments") {
  Tensor a = mt::tensor({3.0, 4.0}).requires_grad_();
  Tensor b = mt::tensor({1.0}).requires_grad_();
  CHECK(optim::clip_grad_norm_({a, b}, 1.0) == 0.0);
  (a * 1.0).sum().backward();  // grad (1, 1): norm sqrt(2)
  CHECK(optim::clip_grad_norm_({a, b}, 1.0) == doctest::Approx(std::sqrt(2.0)));
  CHECK_CLOSE(a.grad(), mt::full({2}, 1.0 / (std::sqrt(2.0) + 1e-6)), 1e-6, 0);
  CHECK_FALSE(b.grad().defined());
  CHECK_THROWS_MSG(optim::clip_grad_norm_({a}, 1.0, 0.0), mt::ValueError, "clip_grad_norm_", "norm_type");
  CHECK_THROWS_MSG(optim::clip_grad_norm_({a}, -1.0), mt::ValueError, "max_norm");
  {
    mt::NoGradGuard g;
    a.grad().fill_(std::nan(""));
  }
  CHECK_THROWS_MSG(optim::clip_grad_norm_({a}, 1.0, 2.0, /*error_if_nonfinite=*/true), mt::ValueError, "nan",
                   "diverged");
}

// ---- schedules ---------------------------------------------------------------------------

TEST_CASE("StepLR follows torch.optim.lr_scheduler.StepLR and sets the optimizer's lr") {
  Tensor w = mt::zeros({1}).requires_grad_();
  optim::SGD sgd({w}, {.lr = 0.2});
  optim::StepLR sched(sgd, /*step_size=*/3, /*gamma=*/0.5);
  const Tensor expected = fixture("optim_steplr__lr");
  for (std::int64_t t = 0; t < expected.numel(); ++t) {
    INFO("step " << t);
    CHECK(sgd.lr() == doctest::Approx(expected.at<double>({t})).epsilon(1e-12));
    CHECK(sched.get_lr() == sgd.lr());
    sgd.step();
    sched.step();
  }
  CHECK(sched.last_step() == expected.numel());
  CHECK(sched.base_lr() == 0.2);
}

TEST_CASE("CosineWithWarmup warms up linearly from 0, decays by a half cosine to min_lr, then stays there") {
  Tensor w = mt::zeros({1}).requires_grad_();
  optim::AdamW opt({w}, {.lr = 0.2});
  optim::CosineWithWarmup sched(opt, /*warmup_steps=*/3, /*total_steps=*/10, /*min_lr=*/0.01);
  const Tensor expected = fixture("optim_cosine__lr");
  CHECK(opt.lr() == 0.0);
  for (std::int64_t t = 0; t < expected.numel(); ++t) {
    INFO("step " << t);
    CHECK(opt.lr() == doctest::Approx(expected.at<double>({t})).epsilon(1e-12));
    sched.step();
  }
  CHECK(sched.lr_at(3) == doctest::Approx(0.2));
  CHECK(sched.lr_at(10) == doctest::Approx(0.01));
  CHECK(sched.lr_at(1000) == doctest::Approx(0.01));
}

// ---- errors ------------------------------------------------------------------------------

TEST_CASE("invalid hyperparameters throw ValueError naming the optimizer and the value") {
  Tensor w = mt::zeros({2}).requires_grad_();
  CHECK_THROWS_MSG(optim::SGD({w}, {}), mt::ValueError, "SGD", "lr is required");
  CHECK_THROWS_MSG(optim::SGD({w}, {.lr = -0.1}), mt::ValueError, "SGD", "learning rate", "-0.1");
  CHECK_THROWS_MSG(optim::SGD({w}, {.lr = 0.1, .nesterov = true}), mt::ValueError, "nesterov", "momentum");
  CHECK_THROWS_MSG(optim::SGD({w}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}), mt::ValueError,
                   "dampening");
  CHECK_THROWS_MSG(optim::SGD({w}, {.lr = 0.1, .momentum = -0.9}), mt::ValueError, "momentum", "-0.9");
  CHECK_THROWS_MSG(optim::Adam({w}, {.beta1 = 1.0}), mt::ValueError, "Adam", "beta1", "[0, 1)");
  CHECK_THROWS_MSG(optim::Adam({w}, {.beta2 = -0.1}), mt::ValueError, "beta2");
  CHECK_THROWS_MSG(optim::AdamW({w}, {.eps = -1e-8}), mt::ValueError, "AdamW", "eps");
  CHECK_THROWS_MSG(optim::AdamW({w}, {.weight_decay = -0.01}), mt::ValueError, "weight_decay");
  CHECK_THROWS_MSG(optim::Adam({w}, {.lr = -1e-3}), mt::ValueError, "Adam", "learning rate");
}

TEST_CASE("bad parameter lists are refused: empty, duplicated, non-leaf, integer") {
  Tensor w = mt::zeros({2}).requires_grad_();
  CHECK_THROWS_MSG(optim::Adam({}, {}), mt::ValueError, "Adam", "empty parameter list");
  CHECK_THROWS_MSG(optim::Adam({w, w}, {}), mt::ValueError, "appears twice");
  CHECK_THROWS_MSG(optim::Adam({w * 2.0}, {}), mt::ValueError, "not a leaf", "MulBackward");
  CHECK_THROWS_MSG(optim::SGD({mt::zeros({2}, mt::kInt64)}, {.lr = 0.1}), mt::ValueError, "int64", "float32");
}

TEST_CASE("invalid schedules are refused") {
  Tensor w = mt::zeros({2}).requires_grad_();
  optim::SGD sgd({w}, {.lr = 0.1});
  CHECK_THROWS_MSG(optim::StepLR(sgd, 0), mt::ValueError, "StepLR", "step_size");
  CHECK_THROWS_MSG(optim::CosineWithWarmup(sgd, 20, 10), mt::ValueError, "CosineWithWarmup", "warmup_steps 20",
                   "total_steps 10");
  CHECK_THROWS_MSG(optim::CosineWithWarmup(sgd, 0, 10, 1.0), mt::ValueError, "min_lr");
}

namespace {

// A small model with dropout, for resuming a run.
struct Resumable : mt::nn::Module {
  std::shared_ptr<mt::nn::Linear> fc1, fc2;
  std::shared_ptr<mt::nn::Dropout> drop;
  Resumable() {
    fc1 = register_module("fc1", std::make_shared<mt::nn::Linear>(4, 8));
    drop = register_module("drop", std::make_shared<mt::nn::Dropout>(0.25));
    fc2 = register_module("fc2", std::make_shared<mt::nn::Linear>(8, 1));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(drop->forward(mt::tanh(fc1->forward(x)))); }
};

// Everything a run is: the model, its optimizer and schedule, the dropout stream.
template <class Opt>
struct Run {
  Resumable model;
  mt::Generator gen{7};
  Opt opt;
  optim::StepLR schedule;
  template <class Options>
  explicit Run(const Options& o) : opt(model.parameters(), o), schedule(opt, 3, 0.5) {}

  std::vector<float> steps(int n, const Tensor& x, const Tensor& y) {
    mt::GeneratorGuard use(gen);
    std::vector<float> losses;
    for (int i = 0; i < n; ++i) {
      opt.zero_grad();
      Tensor loss = mt::nn::functional::mse_loss(model.forward(x), y);
      loss.backward();
      opt.step();
      schedule.step();
      losses.push_back(loss.item<float>());
    }
    return losses;
  }
  void save(const std::string& dir) {
    mt::nn::save(model, dir + "/model.npz");
    mt::save_npz(opt.state_dict(), dir + "/optim.npz");
    mt::save_npz(schedule.state_dict(), dir + "/schedule.npz");
    mt::save_npy(gen.get_state(), dir + "/rng.npy");
  }
  void load(const std::string& dir) {
    mt::nn::load(model, dir + "/model.npz");
    opt.load_state_dict(mt::load_npz(dir + "/optim.npz"));
    schedule.load_state_dict(mt::load_npz(dir + "/schedule.npz"));
    gen.set_state(mt::load_npy(dir + "/rng.npy"));
  }
};

template <class Opt, class Options>
void check_resume(const Options& options) {
  mt::manual_seed(11);
  const Tensor x = mt::randn({16, 4}), y = mt::randn({16, 1});
  testing::TempDir dir;
  mt::manual_seed(5);
  Run<Opt> straight(options);
  mt::manual_seed(5);
  Run<Opt> stopped(options);
  const auto first = straight.steps(5, x, y);
  CHECK(stopped.steps(5, x, y) == first);
  stopped.save(dir.path);
  const auto rest = straight.steps(5, x, y);

  mt::manual_seed(99);  // another initialisation, then the checkpoint
  Run<Opt> resumed(options);
  resumed.load(dir.path);
  CHECK(resumed.opt.lr() == stopped.opt.lr());  // the schedule's step came back with it
  CHECK(resumed.steps(5, x, y) == rest);          // bit for bit
  CHECK(resumed.opt.lr() == straight.opt.lr());
  for (std::size_t i = 0; i < straight.opt.params().size(); ++i) {
    CHECK(mt::equal(resumed.opt.params()[i], straight.opt.params()[i]));
  }
}

}  // namespace

TEST_CASE("optimizer, schedule and generator state: a resumed run continues bit for bit") {
  SUBCASE("Adam with amsgrad") { check_resume<optim::Adam>(optim::AdamOptions{.lr = 0.01, .amsgrad = true}); }
  SUBCASE("AdamW") { check_resume<optim::AdamW>(optim::AdamWOptions{.lr = 0.01}); }
  SUBCASE("SGD with nesterov momentum") {
    check_resume<optim::SGD>(optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
  }
}

TEST_CASE("optimizer load_state_dict checks every entry first and lists the problems") {
  Resumable m;
  optim::Adam opt(m.parameters(), {.lr = 0.01});
  m.fc1->weight.sum().backward();
  opt.step();
  const mt::NamedTensors good = opt.state_dict();
  CHECK(good.size() == 1 + 3);  // lr, then step, exp_avg, exp_avg_sq of the one stepped parameter
  CHECK(good[1].first == "state.0.step");
  mt::NamedTensors bad = good;
  bad[2].second = mt::zeros({3});                        // exp_avg of the wrong shape
  bad.emplace_back("state.9.exp_avg", mt::zeros({1}));    // no parameter 9
  bad.emplace_back("state.1.exp_avg", mt::zeros({8}));    // a lone buffer
  optim::Adam fresh(m.parameters(), {.lr = 0.5});
  CHECK_THROWS_MSG(fresh.load_state_dict(bad), mt::ValueError, "Adam: load_state_dict", "state.0.exp_avg: expected float32 [8, 4]",
                   "state.9.exp_avg: unexpected key", "state.1: has 1 of the 3 buffers");
  CHECK(fresh.lr() == 0.5);  // nothing changed
  CHECK(fresh.state_dict().size() == 1);
  optim::SGD sgd(m.parameters(), {.lr = 0.1, .momentum = 0.9});
  CHECK_THROWS_MSG(sgd.load_state_dict(good), mt::ValueError, "SGD", "state.0.step: unexpected key",
                   "state.<i>.momentum_buffer");
  fresh.load_state_dict(good);
  CHECK(fresh.lr() == 0.01);
  CHECK(fresh.state(0).step == 1);
}
