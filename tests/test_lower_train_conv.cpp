// Training on the device through convolutions, pooling and batch norm (lower::train_program):
// float32 steps of a sensor CNN (Conv1d + BatchNorm1d + ReLU, depthwise + pointwise, MaxPool1d,
// Linear) against microtorch's autograd and SGD; each op's backward at its edges (padding,
// stride, dilation, groups, pool padding, ties); the step bit-exact on QEMU Cortex-M4F; the
// integer mode training the classifier head over a frozen conv stem; the errors.
#include <memory>
#include <string>
#include <vector>

#include "../examples/models/sensor_cnn.hpp"
#include "helpers.hpp"
#include "lower_firmware.hpp"
#include "lower_train_testing.hpp"
#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/lower/train.hpp"
#include "microtorch/lower/verify.hpp"
#include "microtorch/nn.hpp"

namespace lower = mt::lower;
namespace nn = mt::nn;
using mt::Tensor;
using namespace lower_testing;

namespace {

using Modules = std::initializer_list<std::shared_ptr<nn::Module>>;

// Running statistics, weight and bias of a batch norm set to values that are not the
// defaults (mean 0, var 1, weight 1, bias 0), so that each one counts.
void randomize(nn::BatchNorm& bn) {
  mt::NoGradGuard no_grad;
  const std::int64_t c = bn.running_mean.numel();
  bn.running_mean.copy_(mt::randn({c}) * 0.5);
  bn.running_var.copy_(mt::rand({c}) + 0.5);
  bn.weight.copy_(mt::rand({c}) + 0.5);
  bn.bias.copy_(mt::randn({c}) * 0.2);
}

// The sensor pipeline's stem at a small size: x [N, 3, 16] -> relu(bn(conv)) [N, 8, 8] ->
// relu(pointwise(depthwise)) [N, 12, 8] -> max pool [N, 12, 4] -> flatten -> Linear(48, 4).
struct SensorCnn {
  std::shared_ptr<nn::BatchNorm1d> bn = std::make_shared<nn::BatchNorm1d>(8);
  std::shared_ptr<nn::Sequential> model;
  lower::Graph graph;
  lower::Calibration calibration;
  Tensor xs, ys;
  explicit SensorCnn(std::uint64_t seed) {
    mt::manual_seed(seed);
    model = std::make_shared<nn::Sequential>(Modules{
        std::make_shared<nn::Conv1d>(3, 8, 5, nn::Conv1dOptions{.stride = 2, .padding = 2}), bn,
        std::make_shared<nn::ReLU>(), std::make_shared<nn::Conv1d>(8, 8, 3, nn::Conv1dOptions{.padding = 1, .groups = 8}),
        std::make_shared<nn::Conv1d>(8, 12, 1), std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool1d>(2),
        std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(48, 4)});
    randomize(*bn);
    model->eval();
    xs = mt::randn({8, 3, 16});
    ys = mt::randint(0, 4, {8});
    graph = lower::trace(*model, {1, 3, 16});
    calibration = lower::calibrate(graph, xs);
  }
};

}  // namespace

TEST_CASE("lower train float32: a sensor CNN's steps (conv, batch norm, depthwise, pointwise, max pool) equal autograd") {
  for (const auto& params : std::vector<std::vector<std::string>>{{"*"}, {"1.*", "8.*"}, {}}) {
    for (const double momentum : {0.0, 0.9}) {
      SensorCnn m(31);
      lower::TrainOptions t;
      t.numeric = lower::Numeric::Float32;
      t.parameters = params;
      t.lr = 0.1, t.momentum = momentum, t.batch = 2;
      INFO((params.empty() ? "(default)" : params[0]) << " momentum " << momentum);
      compare_steps(*m.model, m.graph, m.calibration, t, m.xs, m.ys, 4, 1e-5);
    }
  }
  // "*" trains the convolutions' and the norm's weights and biases, not the running statistics
  SensorCnn m(32);
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"*"};
  CHECK(lower::trained_parameters(m.graph, t) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                                                          "3.weight", "3.bias", "4.weight", "4.bias",
                                                                          "8.weight", "8.bias"});
  // the lowered forward equals the float model
  lower::Simulator sim(lower::train_program(m.graph, m.calibration, named("fwd"), t));
  mt::NoGradGuard no_grad;
  CHECK(max_abs_diff(sim.forward(m.xs.slice(0, 0, 1)), m.model->forward(m.xs.slice(0, 0, 1))) <= 1e-5);
}

TEST_CASE("lower train float32: the sensor pipeline's model (conv stem, encoder, mean, head) trains whole as autograd") {
  mt::manual_seed(37);
  sensor_cnn::SensorCNN model(4);
  randomize(*model.bn);
  model.eval();
  const Tensor xs = mt::randn({4, sensor_cnn::kAxes, sensor_cnn::kWindow}), ys = mt::randint(0, 4, {4});
  const lower::Graph g = lower::trace(model, {1, sensor_cnn::kAxes, sensor_cnn::kWindow});
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"*"};
  t.lr = 0.02, t.momentum = 0.9, t.batch = 2;
  compare_steps(model, g, lower::calibrate(g, xs), t, xs, ys, 2, 1e-5);
}

namespace {

// A trained pointwise convolution in front of `op` (so that op's input gradient reaches a
// parameter), then flatten and a linear layer; every parameter trained for three steps (MSE),
// checked against autograd.
void check_backward(const std::shared_ptr<nn::Module>& op, const Tensor& xs, bool two_d, std::uint64_t seed) {
  mt::manual_seed(seed);
  const std::int64_t c = xs.size(1);
  std::shared_ptr<nn::Module> front = two_d ? std::shared_ptr<nn::Module>(std::make_shared<nn::Conv2d>(c, c, mt::Sizes2d(1, 1)))
                                            : std::shared_ptr<nn::Module>(std::make_shared<nn::Conv1d>(c, c, 1));
  auto probe = std::make_shared<nn::Sequential>(Modules{front, op, std::make_shared<nn::Flatten>()});
  probe->eval();
  const std::int64_t features = probe->forward(xs.slice(0, 0, 1)).size(1);
  nn::Sequential model(Modules{front, op, std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(features, 3)});
  model.eval();
  auto shape = xs.shape();
  shape[0] = 1;
  const lower::Graph g = lower::trace(model, shape);
  const Tensor ys = mt::randn({xs.size(0), 3});
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"*"};
  t.loss = lower::LossKind::Mse;
  t.lr = 0.05, t.batch = 2;
  compare_steps(model, g, lower::calibrate(g, xs), t, xs, ys, 3, 1e-5);
}

}  // namespace

TEST_CASE("lower train float32: each conv, pool and norm backward equals autograd (padding, stride, dilation, groups)") {
  mt::manual_seed(40);
  const Tensor x1 = mt::randn({6, 4, 12}), x2 = mt::randn({6, 4, 6, 7});
  using C1 = nn::Conv1dOptions;
  using C2 = nn::Conv2dOptions;
  SUBCASE("conv1d: stride 2, padding 3, dilation 2, groups 2") {
    check_backward(std::make_shared<nn::Conv1d>(4, 6, 3, C1{.stride = 2, .padding = 3, .dilation = 2, .groups = 2}), x1,
                   false, 1);
  }
  SUBCASE("conv1d: depthwise, \"same\" padding of an even kernel (one zero more after)") {
    check_backward(std::make_shared<nn::Conv1d>(4, 4, 4, C1{.padding = mt::ConvPadding("same"), .groups = 4}), x1, false, 2);
  }
  SUBCASE("conv1d: pointwise, no bias, stride 3") {
    check_backward(std::make_shared<nn::Conv1d>(4, 5, 1, C1{.stride = 3, .bias = false}), x1, false, 3);
  }
  SUBCASE("conv2d: stride (2, 1), padding (1, 2), dilation (1, 2), groups 2") {
    check_backward(std::make_shared<nn::Conv2d>(4, 6, mt::Sizes2d(3, 2),
                                                C2{.stride = mt::Sizes2d(2, 1), .padding = mt::ConvPadding(1, 2),
                                                   .dilation = mt::Sizes2d(1, 2), .groups = 2}),
                   x2, true, 4);
  }
  SUBCASE("conv2d: depthwise 3x3, padding 1") {
    check_backward(std::make_shared<nn::Conv2d>(4, 4, mt::Sizes2d(3, 3), C2{.padding = mt::ConvPadding(1, 1), .groups = 4}),
                   x2, true, 5);
  }
  SUBCASE("max_pool1d: overlapping windows, padding 1") {
    check_backward(std::make_shared<nn::MaxPool1d>(3, nn::MaxPool1dOptions{.stride = 2, .padding = 1}), x1, false, 6);
  }
  SUBCASE("max_pool2d: (2, 3) windows, stride 2, padding 1") {
    check_backward(std::make_shared<nn::MaxPool2d>(mt::Sizes2d(2, 3),
                                                   nn::MaxPool2dOptions{.stride = mt::Sizes2d(2, 2), .padding = mt::Sizes2d(1, 1)}),
                   x2, true, 7);
  }
  for (const bool cip : {true, false}) {
    SUBCASE((std::string("avg_pool1d/2d: padding 1, count_include_pad ") + (cip ? "true" : "false")).c_str()) {
      check_backward(std::make_shared<nn::AvgPool1d>(3, nn::AvgPool1dOptions{.stride = 2, .padding = 1, .count_include_pad = cip}),
                     x1, false, 8);
      check_backward(std::make_shared<nn::AvgPool2d>(mt::Sizes2d(3, 3), nn::AvgPool2dOptions{.stride = mt::Sizes2d(2, 2),
                                                                                             .padding = mt::Sizes2d(1, 1),
                                                                                             .count_include_pad = cip}),
                     x2, true, 9);
    }
  }
  SUBCASE("adaptive_avg_pool1d/2d: windows that overlap (12 -> 5, 6 x 7 -> 4 x 3)") {
    check_backward(std::make_shared<nn::AdaptiveAvgPool1d>(5), x1, false, 10);
    check_backward(std::make_shared<nn::AdaptiveAvgPool2d>(mt::Sizes2d(4, 3)), x2, true, 11);
  }
  SUBCASE("batch_norm in eval: BatchNorm1d over [N, C, L], BatchNorm2d") {
    auto bn1 = std::make_shared<nn::BatchNorm1d>(4);
    auto bn2 = std::make_shared<nn::BatchNorm2d>(4);
    randomize(*bn1);
    randomize(*bn2);
    check_backward(bn1, x1, false, 12);
    check_backward(bn2, x2, true, 13);
  }
}

TEST_CASE("lower train float32: a max pool's gradient goes to the first maximum of a window (PyTorch's tie rule)") {
  // runs of three equal values: a kernel-2 convolution gives ties inside each run, and its
  // weight's gradient tells which of the tied positions each window's gradient went to
  const Tensor runs = mt::randn({6, 1, 6});
  const Tensor xs = mt::expand(runs.reshape({6, 1, 6, 1}), {6, 1, 6, 3}).contiguous().reshape({6, 1, 18});
  mt::manual_seed(50);
  nn::Sequential model(Modules{std::make_shared<nn::Conv1d>(1, 1, 2),
                               std::make_shared<nn::MaxPool1d>(3, nn::MaxPool1dOptions{.stride = 2, .padding = 1}),
                               std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(9, 2)});
  model.eval();
  const lower::Graph g = lower::trace(model, {1, 1, 18});
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"*"};
  t.loss = lower::LossKind::Mse;
  t.lr = 0.05, t.batch = 2;
  compare_steps(model, g, lower::calibrate(g, xs), t, xs, mt::randn({6, 2}), 3, 1e-5);
}

TEST_CASE("lower train float32: the sensor CNN's emitted training step on QEMU Cortex-M4F is bit-exact with the simulator") {
  if (!have_tool("arm-none-eabi-gcc") || !have_tool("qemu-system-arm")) {
    MESSAGE("arm-none-eabi-gcc or qemu-system-arm missing: the QEMU check is skipped");
    return;
  }
  SensorCnn m(33);
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"*"};
  t.lr = 0.05, t.momentum = 0.9, t.batch = 2;
  const lower::Program p = lower::train_program(m.graph, m.calibration, named("cnn_train"), t);
  std::vector<std::vector<std::int64_t>> inputs;
  for (std::int64_t i = 0; i < 2; ++i) inputs.push_back(lower::quantize_input(p, m.xs.slice(0, i, i + 1)));
  std::vector<lower::TrainingBatch> batches;
  for (std::int64_t k = 0; k < 3; ++k) {
    lower::TrainingBatch b;
    for (std::int64_t s = 0; s < t.batch; ++s) {
      const auto q = lower::quantize_input(p, m.xs.slice(0, 2 * k + s, 2 * k + s + 1));
      b.inputs.insert(b.inputs.end(), q.begin(), q.end());
      b.targets.push_back(m.ys.select(0, 2 * k + s).item<std::int64_t>());
    }
    batches.push_back(b);
  }
  const std::string dir = temp_dir(p.name);
  lower::emit_c(p, dir);
  lower::VerifyOptions o;
  o.cpus = {"cortex-m4"};
  o.training = batches;
  const lower::Verification v = lower::verify(p, inputs, dir, o);
  INFO(v.log);
  REQUIRE(v.passed);
  CHECK(v.skipped.empty());
  REQUIRE(v.cpus.size() == 1);
  CHECK(v.cpus[0].identical);
  CHECK(v.cpus[0].train_instructions > v.cpus[0].instructions);
  CHECK(read_file(v.work + "/expected.txt").find("train 2: ") != std::string::npos);
  MESSAGE(v.summary());
}

TEST_CASE("lower train: errors name the op that blocks a float32 step, and what to do") {
  SensorCnn m(34);
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  // the running statistics are frozen on the device: naming one is an error naming the norm
  t.parameters = {"1.running_mean"};
  CHECK_THROWS_WITH_AS(lower::train_program(m.graph, m.calibration, named("e"), t),
                       doctest::Contains("a batch_norm's running statistics are frozen on the device (a step never "
                                         "updates them); train its weight and bias instead"),
                       mt::ValueError);
  // an op without a float32 rule
  mt::manual_seed(35);
  nn::Sequential model(Modules{std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::RMSNorm>(mt::Shape{6}),
                               std::make_shared<nn::Linear>(6, 3)});
  model.eval();
  const lower::Graph g = lower::trace(model, {1, 4});
  t.parameters = {"*"};
  CHECK_THROWS_WITH_AS(lower::train_program(g, lower::calibrate(g, mt::randn({8, 4})), named("e"), t),
                       doctest::Contains("rms_norm has no float32 kernel, so neither a float32 program nor its training "
                                         "step runs through it; train with Numeric::Integer"),
                       mt::ValueError);
}

TEST_CASE("lower train integer: the classifier head over a frozen conv stem trains (integer forward); a conv does not") {
  SensorCnn m(36);
  lower::TrainOptions t;  // integer (the default): the last linear layer's weight and bias
  t.lr = 0.2, t.batch = 4;
  lower::QuantOptions q = named("head");
  q.activation_bits = q.weight_bits = 16;
  const lower::Program p = lower::train_program(m.graph, m.calibration, q, t);
  CHECK(p.training->numeric == "integer");
  lower::Simulator sim(p);
  const Tensor w0 = sim.parameter("8.weight"), b0 = sim.parameter("8.bias");
  const Tensor x = m.xs.slice(0, 0, 4), y = m.ys.slice(0, 0, 4);
  const double loss = sim.train_step(x, y);
  // the host's step on the head alone: autograd through the float model
  const Tensor host = mt::nn::functional::cross_entropy(m.model->forward(x), y);
  host.backward();
  const auto params = m.model->named_parameters();
  Tensor gw, gb;
  for (const auto& [name, w] : params) {
    if (name == "8.weight") gw = w.grad();
    if (name == "8.bias") gb = w.grad();
  }
  MESSAGE("integer step loss " << loss << ", float " << host.item());
  CHECK(std::abs(loss - host.item()) <= 0.01);
  // the step moved the head by lr times autograd's gradient, within the int16 formats' rounding
  const Tensor dw = (w0 - sim.parameter("8.weight")) / t.lr, db = (b0 - sim.parameter("8.bias")) / t.lr;
  CHECK(max_abs_diff(dw, gw) <= 0.01 * (mt::max(mt::abs(gw)).item() + 1e-3));
  CHECK(max_abs_diff(db, gb) <= 0.01 * (mt::max(mt::abs(gb)).item() + 1e-3));
  // a conv's parameters need the float32 mode
  t.parameters = {"0.bias"};
  CHECK_THROWS_WITH_AS(lower::train_program(m.graph, m.calibration, q, t),
                       doctest::Contains("Numeric::Float32 trains this parameter of a conv1d"), mt::ValueError);
}
