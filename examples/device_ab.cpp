// examples/device_ab.cpp — on-device fine-tuning after a sensor change: a transformer sensor
// model trained on the host with data from "device A" is deployed to "device B", whose
// sensors differ; its accuracy drops; it fine-tunes on 160 labelled windows from device B and
// is measured on device B's held-out windows, in four ways with the same parameters, data,
// order and SGD settings:
//
//   | before | host float fine-tuning | firmware float | firmware integer |
//
// host float: microtorch's autograd and SGD; firmware float: the Numeric::Float32 training
// step (the simulator, bit-exact with the firmware on Cortex-M4F); firmware integer: the
// Numeric::Integer step (int16, bit-exact on Cortex-M0 and M4). Then the firmware of each
// is emitted and verified on QEMU with its flash, training arena and instructions per step.
//
//   build/examples/device_ab [OUTPUT_DIR]      (default device-ab-output; fixed seeds)
//
// Data: 24-sample windows of (x, y, z) accelerometer readings in g, four classes (idle,
// walking, running, shaking), from the seeded generator in gesture_data.hpp. Device B: the
// x and y axes swapped, per-axis gains 1.25, 0.8, 1.1 and offsets 0.15, -0.1, 0.2 g, twice
// the noise.
// Model: Linear(3, 16) + ReLU per sample -> TransformerEncoderLayer(16, 2 heads, ff 32) ->
// mean over time -> Linear(16, 4), the head. Fine-tuned: the head's weight and bias (the
// integer mode's reach through a transformer: its backward stops at the mean over time).
#include <algorithm>
#include <cstdio>

#include <fmt/core.h>

#include <microtorch/lower/emit.hpp>
#include <microtorch/lower/firmware.hpp>
#include <microtorch/lower/quantize.hpp>
#include <microtorch/lower/simulate.hpp>
#include <microtorch/lower/train.hpp>
#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

#include "gesture_data.hpp"

namespace mt = microtorch;
namespace nn = microtorch::nn;
namespace lower = microtorch::lower;

namespace {

constexpr std::int64_t kWindow = 24, kAxes = gesture_data::kAxes, kClasses = 4, kDim = 16;

// One window of class c on device A: [kWindow, kAxes] in g, noise `noise`.
mt::Tensor window(std::int64_t c, double noise) { return gesture_data::window(c, kWindow, noise); }

struct Data {
  mt::Tensor x, y;  // [n, kWindow, kAxes], [n]
};

// n windows of device A, or of device B (axes x, y swapped, gains, offsets, twice the noise).
Data make_data(std::int64_t n, bool device_b) {
  std::vector<mt::Tensor> xs;
  const mt::Tensor y = mt::randint(0, kClasses, {n});
  const mt::Tensor gain = mt::tensor({1.25, 0.8, 1.1}), offset = mt::tensor({0.15, -0.1, 0.2});
  for (std::int64_t i = 0; i < n; ++i) {
    mt::Tensor w = window(y.data<std::int64_t>()[i], device_b ? 0.1 : 0.05);
    if (device_b) w = mt::index_select(w, 1, mt::tensor({1, 0, 2}, mt::kInt64)) * gain + offset;
    xs.push_back(w.unsqueeze(0));
  }
  return {mt::cat(xs, 0).to(mt::kFloat32), y};
}

struct SensorNet : nn::Module {
  std::shared_ptr<nn::Linear> embed, head;
  std::shared_ptr<nn::TransformerEncoderLayer> encoder;
  SensorNet() {
    embed = register_module("embed", std::make_shared<nn::Linear>(kAxes, kDim));
    encoder = register_module("encoder", std::make_shared<nn::TransformerEncoderLayer>(
                                             kDim, 2, nn::TransformerEncoderLayerOptions{.dim_feedforward = 32, .dropout = 0.0, .batch_first = true}));
    head = register_module("head", std::make_shared<nn::Linear>(kDim, kClasses));
  }
  mt::Tensor forward(const mt::Tensor& x) override {
    return head->forward(mt::mean(encoder->forward(mt::relu(embed->forward(x))), {1}));
  }
  std::string type_name() const override { return "SensorNet"; }
};

double host_accuracy(SensorNet& m, const Data& d) {
  mt::NoGradGuard no_grad;
  return (m.forward(d.x).argmax(1) == d.y).to(mt::kFloat32).mean().item();
}

double sim_accuracy(lower::Simulator& sim, const Data& d) {
  const mt::Tensor out = sim.forward(d.x).reshape({d.x.size(0), kClasses});
  return (out.argmax(1) == d.y).to(mt::kFloat32).mean().item();
}

constexpr std::int64_t kBatch = 8, kEpochs = 6;
constexpr double kLr = 0.1, kMomentum = 0.9;

}  // namespace

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "device-ab-output";
  mt::manual_seed(7);
  const Data a_train = make_data(512, false), a_test = make_data(256, false);
  const Data b_tune = make_data(160, true), b_test = make_data(256, true);
  SensorNet model;
  {  // device A, on the host
    mt::optim::Adam opt(model.parameters(), {.lr = 1e-2});
    for (int e = 0; e < 25; ++e) {
      for (std::int64_t k = 0; k + 32 <= a_train.x.size(0); k += 32) {
        const mt::Tensor loss = nn::functional::cross_entropy(model.forward(a_train.x.slice(0, k, k + 32)),
                                                              a_train.y.slice(0, k, k + 32));
        opt.zero_grad();
        loss.backward();
        opt.step();
      }
    }
  }
  model.eval();
  const double acc_a = host_accuracy(model, a_test), before = host_accuracy(model, b_test);
  fmt::print("device A: test accuracy {:.1f}%; on device B: {:.1f}%\n", 100 * acc_a, 100 * before);

  // the firmware programs: traced, calibrated on device A's windows and device B's (unlabelled) tuning windows
  const lower::Graph g = lower::trace(model, {1, kWindow, kAxes});
  const mt::Tensor calib = mt::cat({a_train.x.slice(0, 0, 128), b_tune.x}, 0);
  const lower::Calibration cal = lower::calibrate(g, calib);
  lower::TrainOptions t;  // the head's weight and bias
  t.lr = kLr, t.momentum = kMomentum, t.batch = kBatch;
  lower::TrainOptions tf = t;
  tf.numeric = lower::Numeric::Float32;
  lower::QuantOptions q;
  q.name = "device_ab", q.activation_bits = 16, q.weight_bits = 16;
  lower::Simulator sim_f(lower::train_program(g, cal, q, tf)), sim_i(lower::train_program(g, cal, q, t));
  const double before_int = sim_accuracy(sim_i, b_test);

  // fine-tuning on device B's 160 windows: the same batches in the same order for each
  const std::vector<std::string> names = lower::trained_parameters(g, t);
  std::vector<mt::Tensor> params;
  for (auto& [name, p] : model.named_parameters()) {
    if (std::find(names.begin(), names.end(), name) != names.end()) params.push_back(p);
  }
  mt::optim::SGD sgd(params, {.lr = kLr, .momentum = kMomentum});
  for (std::int64_t e = 0; e < kEpochs; ++e) {
    for (std::int64_t k = 0; k + kBatch <= b_tune.x.size(0); k += kBatch) {
      const mt::Tensor x = b_tune.x.slice(0, k, k + kBatch), y = b_tune.y.slice(0, k, k + kBatch);
      const mt::Tensor loss = nn::functional::cross_entropy(model.forward(x), y);
      sgd.zero_grad();
      loss.backward();
      sgd.step();
      sim_f.train_step(x, y);
      sim_i.train_step(x, y);
    }
  }
  const double host_ft = host_accuracy(model, b_test), fw_f = sim_accuracy(sim_f, b_test), fw_i = sim_accuracy(sim_i, b_test);
  auto recovered = [&](double acc) { return 100 * (acc - before) / (host_ft - before); };
  fmt::print("\n| | before | host float fine-tuning | firmware float | firmware integer |\n|---|---|---|---|---|\n");
  fmt::print("| device B accuracy ({} windows) | {:.1f}% | {:.1f}% | {:.1f}% | {:.1f}% |\n", b_test.x.size(0), 100 * before,
             100 * host_ft, 100 * fw_f, 100 * fw_i);
  fmt::print("| of the host's recovery | | 100% | {:.0f}% | {:.0f}% |\n", recovered(fw_f), recovered(fw_i));
  fmt::print("(the int16 firmware before fine-tuning: {:.1f}%)\n", 100 * before_int);

  // the firmware of each mode: flash, RAM, training arena, instructions per step on QEMU
  fmt::print("\n| firmware | CPU | flash B | RAM B | training arena B | trained state B | instructions per inference "
             "| per training step (batch {}) |\n|---|---|---|---|---|---|---|---|\n",
             kBatch);
  bool ok = true;
  for (const auto& [mode, opts] : {std::pair{"float32", tf}, std::pair{"integer", t}}) {
    lower::FirmwareOptions fo;
    fo.quantize = q;
    fo.train = opts;
    fo.check_inputs = 2;
    fo.train_checks = 2;
    fo.verify.cpus = {"cortex-m0", "cortex-m4"};
    const lower::Firmware fw = lower::to_firmware(g, calib, mt::Tensor(), out + "/" + mode, fo);
    ok = ok && fw.verification.passed;
    for (const auto& [cpu, size] : fw.sizes) {
      std::string ins = "-", step = "-";
      for (const lower::CpuCheck& c : fw.verification.cpus) {
        if (c.cpu != cpu) continue;
        ok = ok && c.identical;
        ins = fmt::format("{}", c.instructions), step = fmt::format("{}", c.train_instructions);
      }
      if (ins == "-" && mode == std::string("float32") && cpu == "cortex-m0") ins = step = "(no FPU)";
      fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} |\n", mode, cpu, size.flash(), size.ram(), fw.program.arena_bytes,
                 fw.program.training->state_bytes, ins, step);
    }
  }
  fmt::print("\nfirmware and reports in {}/float32 and {}/integer; every build bit-exact with the simulator: {}\n", out,
             out, ok ? "yes" : "NO");
  return ok && fw_i - before >= 0.9 * (host_ft - before) ? 0 : 1;
}
