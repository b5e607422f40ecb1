// Training on the device in float32 (lower::train_program): the lowered forward against the
// float model, one training step against microtorch's autograd and SGD, the loss going down,
// the errors; the emitted training step bit-exact with the simulator on QEMU (Cortex-M4F).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "lower_firmware.hpp"
#include "lower_train_testing.hpp"
#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/firmware.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/lower/train.hpp"
#include "microtorch/lower/verify.hpp"
#include "microtorch/nn.hpp"

namespace lower = mt::lower;
namespace nn = mt::nn;
namespace F = mt::nn::functional;
using mt::Tensor;
using namespace lower_testing;

namespace {

struct Mlp {
  std::shared_ptr<nn::Sequential> model;
  lower::Graph graph;
  lower::Calibration calibration;
  Tensor xs;
  explicit Mlp(std::uint64_t seed) {
    mt::manual_seed(seed);
    model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3)});
    model->eval();
    xs = mt::randn({16, 4});
    graph = lower::trace(*model, {1, 4});
    calibration = lower::calibrate(graph, xs);
  }
};

}  // namespace

TEST_CASE("lower train float32: the lowered forward equals the float model") {
  Mlp m(3);
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  lower::Program p = lower::train_program(m.graph, m.calibration, named("mlp"), t);
  lower::Simulator sim(p);
  mt::NoGradGuard no_grad;
  for (std::int64_t i = 0; i < 8; ++i) {
    const Tensor x = m.xs.slice(0, i, i + 1);
    CHECK(max_abs_diff(sim.forward(x), m.model->forward(x)) <= 1e-5);
  }
}

TEST_CASE("lower train float32: an MLP's steps (cross entropy, every parameter) equal autograd and SGD") {
  for (const double momentum : {0.0, 0.9}) {
    for (const std::int64_t batch : {1, 4}) {
      Mlp m(5);
      const Tensor ys = mt::randint(0, 3, {16});
      lower::TrainOptions t;
      t.numeric = lower::Numeric::Float32;
      t.parameters = {"*"};
      t.lr = 0.1, t.momentum = momentum, t.batch = batch;
      INFO("momentum " << momentum << " batch " << batch);
      compare_steps(*m.model, m.graph, m.calibration, t, m.xs, ys, 5, 1e-5);
    }
  }
}

TEST_CASE("lower train float32: a transformer encoder layer's steps (attention, layer norms) equal autograd and SGD") {
  for (const auto& params : std::vector<std::vector<std::string>>{{"@layer_norms"}, {"*"}}) {
    for (const double momentum : {0.0, 0.5}) {
      mt::manual_seed(11);
      nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .batch_first = true});
      layer.eval();
      const Tensor xs = mt::randn({8, 5, 8}), ys = mt::randint(0, 8, {8, 5});
      const lower::Graph g = lower::trace(layer, {1, 5, 8});
      lower::TrainOptions t;
      t.numeric = lower::Numeric::Float32;
      t.parameters = params;
      t.lr = 0.05, t.momentum = momentum, t.batch = 2;
      INFO(params[0] << " momentum " << momentum);
      compare_steps(layer, g, lower::calibrate(g, xs), t, xs, ys, 4, 1e-5);
    }
  }
}

TEST_CASE("lower train float32: MSE on a tanh/sigmoid/GELU network equals autograd and SGD") {
  mt::manual_seed(21);
  nn::Sequential model({std::make_shared<nn::Linear>(3, 6), std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(6, 6),
                        std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(6, 2), std::make_shared<nn::Sigmoid>()});
  model.eval();
  const Tensor xs = mt::randn({12, 3}), ys = mt::rand({12, 2});
  const lower::Graph g = lower::trace(model, {1, 3});
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"*"};
  t.loss = lower::LossKind::Mse;
  t.lr = 0.2, t.momentum = 0.9, t.weight_decay = 0.01, t.batch = 3;
  compare_steps(model, g, lower::calibrate(g, xs), t, xs, ys, 4, 1e-5);
}

TEST_CASE("lower train float32: the emitted training step on QEMU Cortex-M4F is bit-exact with the simulator") {
  if (!have_tool("arm-none-eabi-gcc") || !have_tool("qemu-system-arm")) {
    MESSAGE("arm-none-eabi-gcc or qemu-system-arm missing: the QEMU check is skipped");
    return;
  }
  mt::manual_seed(11);
  nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .batch_first = true});
  layer.eval();
  const Tensor xs = mt::randn({6, 5, 8}), ys = mt::randint(0, 8, {6, 5});
  const lower::Graph g = lower::trace(layer, {1, 5, 8});
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"*"};
  t.lr = 0.05, t.momentum = 0.9, t.batch = 2;
  const lower::Program p = lower::train_program(g, lower::calibrate(g, xs), named("enc_train"), t);
  std::vector<std::vector<std::int64_t>> inputs;
  for (std::int64_t i = 0; i < 2; ++i) inputs.push_back(lower::quantize_input(p, xs.slice(0, i, i + 1)));
  std::vector<lower::TrainingBatch> batches;
  for (std::int64_t k = 0; k < 3; ++k) {
    lower::TrainingBatch b;
    for (std::int64_t s = 0; s < t.batch; ++s) {
      const auto q = lower::quantize_input(p, xs.slice(0, 2 * k + s, 2 * k + s + 1));
      b.inputs.insert(b.inputs.end(), q.begin(), q.end());
      for (std::int64_t r = 0; r < 5; ++r) b.targets.push_back(ys.select(0, 2 * k + s).select(0, r).item<std::int64_t>());
    }
    batches.push_back(b);
  }
  const std::string dir = temp_dir(p.name);
  lower::emit_c(p, dir);
  lower::VerifyOptions o;
  o.cpus = {"cortex-m4", "cortex-m7"};
  o.training = batches;
  const lower::Verification v = lower::verify(p, inputs, dir, o);
  INFO(v.log);
  REQUIRE(v.passed);
  CHECK(v.skipped.empty());
  REQUIRE(v.cpus.size() == 2);
  for (const lower::CpuCheck& c : v.cpus) {
    CHECK(c.identical);
    CHECK(c.train_instructions > c.instructions);
  }
  // the firmware printed the simulator's losses, outputs after training and parameter hash
  CHECK(read_file(v.work + "/expected.txt").find("train 2: ") != std::string::npos);
  CHECK(read_file(v.work + "/expected.txt").find("params ") != std::string::npos);
  MESSAGE(v.summary());
}

TEST_CASE("lower train float32: the loss goes down on a learnable problem (three Gaussian blobs)") {
  mt::manual_seed(8);
  Mlp m(8);
  // class 0 around (-1, -1, 0, 0), class 1 around (1, 1, 0, 0), class 2 around (0, 0, 1.5, -1.5)
  const Tensor centers = mt::tensor({{-1.0, -1.0, 0.0, 0.0}, {1.0, 1.0, 0.0, 0.0}, {0.0, 0.0, 1.5, -1.5}});
  const Tensor ys = mt::randint(0, 3, {64});
  const Tensor xs = mt::index_select(centers, 0, ys) + mt::randn({64, 4}) * 0.3;
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"*"};
  t.lr = 0.2, t.momentum = 0.5, t.batch = 8;
  const lower::Program p = lower::train_program(m.graph, m.calibration, named("blobs"), t);
  lower::Simulator sim(p);
  double first = 0, last = 0;
  for (int epoch = 0; epoch < 6; ++epoch) {
    double sum = 0;
    for (std::int64_t b = 0; b < 8; ++b) sum += sim.train_step(xs.slice(0, 8 * b, 8 * b + 8), ys.slice(0, 8 * b, 8 * b + 8));
    (epoch == 0 ? first : last) = sum / 8;
  }
  MESSAGE("mean loss, first epoch " << first << ", sixth " << last);
  CHECK(sim.train_steps() == 48);
  CHECK(last < 0.5 * first);
  // the trained program's inference classifies the blobs
  const Tensor pred = mt::argmax(sim.forward(xs).reshape({64, 3}), -1);
  CHECK(mt::sum(pred == ys).item() >= 60);
}

TEST_CASE("lower train float32: errors say what is wrong") {
  Mlp m(4);
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"0.weigth"};
  CHECK_THROWS_WITH_AS(lower::train_program(m.graph, m.calibration, named("e"), t),
                       doctest::Contains("\"0.weigth\" selects no parameter of the graph (did you mean \"0.weight\"?); "
                                         "its parameters are: 0.weight, 0.bias, 2.weight, 2.bias"),
                       mt::ValueError);
  t.parameters = {};
  CHECK(lower::trained_parameters(m.graph, t) == std::vector<std::string>{"2.weight", "2.bias"});
  t.parameters = {"@biases"};
  CHECK(lower::trained_parameters(m.graph, t) == std::vector<std::string>{"0.bias", "2.bias"});
  t.parameters = {"0.*"};
  const lower::Program p = lower::train_program(m.graph, m.calibration, named("e"), t);
  lower::Simulator sim(p);
  const Tensor x = m.xs.slice(0, 0, 1);
  CHECK_THROWS_WITH_AS(sim.train_step(x, mt::tensor({0.5})), doctest::Contains("takes int64 class index targets"),
                       mt::DtypeError);
  CHECK_THROWS_WITH_AS(sim.train_step(x, mt::tensor({1, 2}, mt::kInt64)), doctest::Contains("1 targets for a batch of 1"),
                       mt::ShapeError);
  CHECK_THROWS_WITH_AS(sim.train_step(m.xs.slice(0, 0, 2), mt::tensor({1}, mt::kInt64)),
                       doctest::Contains("the step takes a batch of 1 inputs [1, 4]"), mt::ShapeError);
  CHECK_THROWS_WITH_AS(sim.parameter("2.weight"), doctest::Contains("trained: 0.weight, 0.bias"), mt::ValueError);
  lower::Simulator plain(lower::quantize(m.graph, m.calibration, named("plain")));
  CHECK_THROWS_WITH_AS(plain.train_step(x, mt::tensor({1}, mt::kInt64)), doctest::Contains("has no training step"),
                       mt::ValueError);
}

TEST_CASE("lower::to_firmware with train: a float32 training firmware, verified on Cortex-M4F, the M0 skipped") {
  if (!have_tool("arm-none-eabi-gcc") || !have_tool("qemu-system-arm")) {
    MESSAGE("arm-none-eabi-gcc or qemu-system-arm missing: the QEMU check is skipped");
    return;
  }
  Mlp m(6);
  lower::FirmwareOptions o;
  o.quantize = named("mlp_fw");
  o.check_inputs = 3;
  o.verify.cpus = {"cortex-m0", "cortex-m4"};
  o.verify.count_instructions = false;  // counted by the test above
  lower::TrainOptions t;
  t.numeric = lower::Numeric::Float32;
  t.parameters = {"2.*"};
  t.batch = 2;
  o.train = t;
  o.train_checks = 2;
  const lower::Firmware fw = lower::to_firmware(m.graph, m.xs, m.xs, temp_dir("mlp_fw") + "/fw", o);
  const std::string report = fw.report();
  INFO(report);
  INFO(fw.verification.log);
  REQUIRE(fw.verification.passed);
  CHECK(fw.verification.skipped == "cortex-m0: no FPU for a float32 program");
  REQUIRE(fw.verification.cpus.size() == 1);
  CHECK(fw.verification.cpus[0].identical);
  CHECK(fw.accuracy.max_abs_error <= 1e-5);
  REQUIRE(fw.sizes.size() == 1);
  CHECK(report.find("float32; weights") != std::string::npos);
  CHECK(report.find("trains (float32, batch 2, lr 0.01): 2.weight, 2.bias") != std::string::npos);
  CHECK(report.find(fmt::format("| cortex-m4 | {} | {} | - | - | yes (mps2-an386) |", fw.sizes[0].second.flash(),
                                fw.sizes[0].second.ram())) != std::string::npos);
}

TEST_CASE("lower train float32: frozen layers before the trained ones keep nothing for a backward that does not run") {
  mt::manual_seed(11);
  nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .batch_first = true});
  layer.eval();
  const Tensor xs = mt::randn({4, 5, 8});
  const lower::Graph g = lower::trace(layer, {1, 5, 8});
  auto kept = [&](const std::vector<std::string>& params) {
    lower::TrainOptions t;
    t.numeric = lower::Numeric::Float32;
    t.parameters = params;
    const lower::Program p = lower::train_program(g, lower::calibrate(g, xs), named("kept"), t);
    std::int64_t lse = 0, stats = 0;
    for (const lower::Buffer& b : p.buffers) {
      lse += b.origin.find("log-sum-exp") != std::string::npos;
      stats += b.origin.find("the mean and 1/std") != std::string::npos;
    }
    return std::pair{lse, stats};
  };
  CHECK(kept({"norm2.*"}) == std::pair<std::int64_t, std::int64_t>{0, 1});  // only norm2's backward runs
  CHECK(kept({"self_attn.in_proj_weight"}) == std::pair<std::int64_t, std::int64_t>{1, 2});
}

// ---- integer mode (Numeric::Integer, the default) ----

namespace {

lower::QuantOptions bits(const std::string& name, int activation_bits, int weight_bits) {
  lower::QuantOptions q = named(name);
  q.activation_bits = activation_bits, q.weight_bits = weight_bits;
  return q;
}

// Three Gaussian blobs in 4-D: class 0 around (-1, -1, 0, 0), 1 around (1, 1, 0, 0), 2 around (0, 0, 1.5, -1.5).
std::pair<Tensor, Tensor> blobs(std::int64_t n) {
  const Tensor centers = mt::tensor({{-1.0, -1.0, 0.0, 0.0}, {1.0, 1.0, 0.0, 0.0}, {0.0, 0.0, 1.5, -1.5}});
  const Tensor ys = mt::randint(0, 3, {n});
  return {mt::index_select(centers, 0, ys) + mt::randn({n, 4}) * 0.3, ys};
}

}  // namespace

TEST_CASE("lower train integer: one step's gradients of the last layer equal autograd's within the formats' rounding") {
  for (const int b : {16, 8}) {
    Mlp m(5);
    const Tensor ys = mt::randint(0, 3, {16});
    lower::TrainOptions t;  // integer (the default): the last linear layer's weight and every bias
    t.parameters = {"2.weight", "@biases"};
    t.lr = 0.5, t.batch = 4;
    const lower::Program p = lower::train_program(m.graph, m.calibration, bits("g", b, b), t);
    CHECK(p.training->numeric == "integer");
    lower::Simulator sim(p);
    const Tensor w0 = sim.parameter("2.weight"), b0 = sim.parameter("2.bias"), h0 = sim.parameter("0.bias");
    const Tensor x = m.xs.slice(0, 0, 4), y = ys.slice(0, 0, 4);
    const double loss = sim.train_step(x, y);
    const Tensor out = m.model->forward(x);
    const Tensor host = F::cross_entropy(out, y);
    host.backward();
    Tensor hw, hb, hh;
    for (auto& [name, w] : m.model->named_parameters()) {
      if (name == "2.weight") hw = w.grad();
      if (name == "2.bias") hb = w.grad();
      if (name == "0.bias") hh = w.grad();
    }
    const Tensor gw = (w0 - sim.parameter("2.weight")) / t.lr, gb = (b0 - sim.parameter("2.bias")) / t.lr;
    const Tensor gh = (h0 - sim.parameter("0.bias")) / t.lr;
    const double scale = mt::max(mt::abs(hw)).item();
    const double tol = b == 16 ? 2e-3 : 4e-2;  // relative to the largest gradient
    INFO(b << "-bit: loss " << loss << " vs " << host.item() << "; dW error " << max_abs_diff(gw, hw) / scale
            << ", db error " << max_abs_diff(gb, hb) / scale << ", hidden db error " << max_abs_diff(gh, hh) / scale);
    CHECK(std::abs(loss - host.item()) <= (b == 16 ? 2e-3 : 3e-2));
    CHECK(max_abs_diff(gw, hw) <= tol * scale);
    CHECK(max_abs_diff(gb, hb) <= tol * scale);
    INFO("hidden bias gradients: " << gh << " vs " << hh);
    if (b == 16) {
      CHECK(max_abs_diff(gh, hh) <= tol * scale);
    } else {  // int8 hidden activations may flip a relu's mask for a unit near 0 (one sample's term): one unit at most
      const Tensor off = mt::abs(gh.to(mt::Dtype::Float64) - hh.to(mt::Dtype::Float64)) > tol * scale;
      CHECK(mt::sum(off).item() <= 1);
    }
    // frozen: the first layer is not a trained parameter
    CHECK_THROWS_AS(sim.parameter("0.weight"), mt::ValueError);
  }
}

TEST_CASE("lower train integer: the loss goes down and the blobs are learnt as in float32 (int8, int16, momentum)") {
  // the last layer alone trains: the same steps in float32 are the reference
  auto train = [](const lower::TrainOptions& t, const lower::QuantOptions& q) {
    mt::manual_seed(8);
    Mlp m(8);
    const auto [xs, ys] = blobs(64);
    const lower::Program p = lower::train_program(m.graph, m.calibration, q, t);
    lower::Simulator sim(p);
    const double before = mt::sum(mt::argmax(sim.forward(xs).reshape({64, 3}), -1) == ys).item();
    std::vector<double> losses;
    for (int epoch = 0; epoch < 8; ++epoch) {
      double sum = 0;
      for (std::int64_t k = 0; k < 8; ++k) sum += sim.train_step(xs.slice(0, 8 * k, 8 * k + 8), ys.slice(0, 8 * k, 8 * k + 8));
      losses.push_back(sum / 8);
    }
    const double correct = mt::sum(mt::argmax(sim.forward(xs).reshape({64, 3}), -1) == ys).item();
    return std::tuple{losses.front(), losses.back(), before, correct};
  };
  for (const auto& params : std::vector<std::vector<std::string>>{{}, {"2.weight", "@biases"}}) {
    lower::TrainOptions t;
    t.parameters = params;
    t.lr = 0.2, t.momentum = 0.5, t.batch = 8;
    lower::TrainOptions f = t;
    f.numeric = lower::Numeric::Float32;
    const auto [f_first, f_last, f_before, f_correct] = train(f, named("blobs"));
    MESSAGE(std::string(params.empty() ? "last layer" : "last layer + biases")
            << ", float32: mean loss, first epoch " << f_first << ", eighth " << f_last << "; correct " << f_correct
            << " of 64 (before: " << f_before << ")");
    for (const int b : {8, 16}) {
      const auto [first, last, before, correct] = train(t, bits("blobs", b, b));
      MESSAGE(b << "-bit: mean loss, first epoch " << first << ", eighth " << last << "; correct " << correct
                << " of 64 (before: " << before << ")");
      CHECK(last < 0.9 * first);
      CHECK(std::abs(last - f_last) <= 0.02);
      CHECK(correct >= f_correct - 2);
      CHECK(correct >= before + 20);
    }
  }
}

TEST_CASE("lower train integer: errors name what blocks it") {
  Mlp m(4);
  lower::TrainOptions t;
  t.parameters = {"0.weigth"};
  CHECK_THROWS_WITH_AS(lower::train_program(m.graph, m.calibration, named("e"), t),
                       doctest::Contains("\"0.weigth\" selects no parameter of the graph (did you mean \"0.weight\"?)"),
                       mt::ValueError);
  t.parameters = {"0.weight"};  // a weight below the output layer
  CHECK_THROWS_WITH_AS(lower::train_program(m.graph, m.calibration, named("e"), t),
                       doctest::Contains("0.weight cannot train in Numeric::Integer: it is the weight of %"),
                       mt::ValueError);
  CHECK_THROWS_WITH_AS(lower::train_program(m.graph, m.calibration, named("e"), t),
                       doctest::Contains("Numeric::Float32 trains it"), mt::ValueError);
  t.parameters = {};
  t.loss = lower::LossKind::Mse;
  CHECK_THROWS_WITH_AS(lower::train_program(m.graph, m.calibration, named("e"), t),
                       doctest::Contains("the MSE loss trains in Numeric::Float32"), mt::ValueError);
  t.loss = lower::LossKind::CrossEntropy;
  t.weight_decay = 0.01;
  CHECK_THROWS_WITH_AS(lower::train_program(m.graph, m.calibration, named("e"), t),
                       doctest::Contains("Numeric::Integer has no weight decay"), mt::ValueError);
  t.weight_decay = 0;
  t.batch = 1024;  // 16-bit inputs: 1024 samples of 2^16 products leave 30 - 16 - 11 = 3 bits
  CHECK_THROWS_WITH_AS(lower::train_program(m.graph, m.calibration, bits("e", 16, 16), t),
                       doctest::Contains("an integer training step would overflow"), mt::ValueError);
  CHECK_NOTHROW(lower::train_program(m.graph, m.calibration, bits("e", 8, 8), t));  // 8-bit inputs: 11 bits
  t.batch = 1;
  // a model whose output is not a linear layer's
  nn::Sequential sig({std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::Sigmoid>()});
  sig.eval();
  const lower::Graph g = lower::trace(sig, {1, 4});
  CHECK_THROWS_WITH_AS(lower::train_program(g, lower::calibrate(g, m.xs), named("e"), t),
                       doctest::Contains("its gradient would flow back through %4 = sigmoid"), mt::ValueError);
  // a bias behind a GELU: the integer backward does not pass it
  nn::Sequential gelu({std::make_shared<nn::Linear>(4, 5), std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(5, 3)});
  gelu.eval();
  const lower::Graph gg = lower::trace(gelu, {1, 4});
  t.parameters = {"@biases"};
  CHECK_THROWS_WITH_AS(lower::train_program(gg, lower::calibrate(gg, m.xs), named("e"), t),
                       doctest::Contains("0.bias cannot train in Numeric::Integer: its gradient would flow back through "
                                         "%4 = gelu"),
                       mt::ValueError);
}

TEST_CASE("lower train integer: the emitted training step on QEMU Cortex-M0 and M4 is bit-exact with the simulator") {
  if (!have_tool("arm-none-eabi-gcc") || !have_tool("qemu-system-arm")) {
    MESSAGE("arm-none-eabi-gcc or qemu-system-arm missing: the QEMU check is skipped");
    return;
  }
  for (const int b : {8, 16}) {
    mt::manual_seed(8);
    Mlp m(8);
    const auto [xs, ys] = blobs(16);
    lower::TrainOptions t;
    t.parameters = {"2.weight", "@biases"};
    t.lr = 0.2, t.momentum = 0.9, t.batch = 2;
    const lower::Program p = lower::train_program(m.graph, m.calibration, bits(fmt::format("int_train{}", b), b, b), t);
    std::vector<std::vector<std::int64_t>> inputs;
    for (std::int64_t i = 0; i < 2; ++i) inputs.push_back(lower::quantize_input(p, xs.slice(0, i, i + 1)));
    std::vector<lower::TrainingBatch> batches;
    for (std::int64_t k = 0; k < 4; ++k) {
      lower::TrainingBatch tb;
      for (std::int64_t s = 0; s < t.batch; ++s) {
        const auto q = lower::quantize_input(p, xs.slice(0, 2 * k + s, 2 * k + s + 1));
        tb.inputs.insert(tb.inputs.end(), q.begin(), q.end());
        tb.targets.push_back(ys.select(0, 2 * k + s).item<std::int64_t>());
      }
      batches.push_back(tb);
    }
    const std::string dir = temp_dir(p.name);
    lower::emit_c(p, dir);
    lower::VerifyOptions o;
    o.cpus = {"cortex-m0", "cortex-m4"};
    o.training = batches;
    const lower::Verification v = lower::verify(p, inputs, dir, o);
    INFO(v.log);
    REQUIRE(v.passed);
    CHECK(v.skipped.empty());
    REQUIRE(v.cpus.size() == 2);
    for (const lower::CpuCheck& c : v.cpus) {
      CHECK(c.identical);
      CHECK(c.train_instructions > c.instructions);
    }
    CHECK(read_file(v.work + "/expected.txt").find("train 3: ") != std::string::npos);
    CHECK(read_file(v.work + "/expected.txt").find("params ") != std::string::npos);
    MESSAGE(b << "-bit: " << v.summary());
  }
}
