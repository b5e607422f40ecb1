// examples/sensor_classifier.cpp — activity recognition for a microcontroller: synthetic
// 3-axis accelerometer windows, a LinearAttention classifier (O(L) memory, no softmax),
// lowered to int8 firmware with its RAM and flash report.
//
//   build/examples/sensor_classifier [OUTPUT_DIR]      (default sensor-output)
//
// Data: 32-sample windows at 50 Hz of (x, y, z) in g, four classes, from the seeded
// generator in gesture_data.hpp: idle (gravity + noise), walking (~2 Hz bounce on z, sway
// on x), running (~3 Hz, larger), shaking (~6 Hz on all axes). Phase, amplitude and frequency are
// randomised per window, so the model must look at the shape of the signal, not its offset.
//
// Model: Linear(3, 16) + ReLU per sample -> LinearAttention(16, 2 heads) + residual ->
// mean over time -> Linear(16, 4).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/core.h>

#include <microtorch/lower/emit.hpp>
#include <microtorch/lower/quantize.hpp>
#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

#include "gesture_data.hpp"
#include "progress.hpp"

namespace mt = microtorch;
namespace nn = microtorch::nn;
namespace lower = microtorch::lower;

namespace {

constexpr std::int64_t kWindow = 32, kAxes = gesture_data::kAxes, kClasses = 4, kDim = 16;
constexpr double kRate = gesture_data::kRate;
const char* const* const kNames = gesture_data::kNames;

// One window of class c: [kWindow, kAxes] in g.
mt::Tensor window(std::int64_t c) { return gesture_data::window(c, kWindow, 0.05); }

struct Data {
  mt::Tensor x, y;  // [n, kWindow, kAxes], [n]
};

Data make_data(std::int64_t n) {
  std::vector<mt::Tensor> xs;
  mt::Tensor y = mt::randint(0, kClasses, {n});
  for (std::int64_t i = 0; i < n; ++i) xs.push_back(window(y.data<std::int64_t>()[i]).unsqueeze(0));
  return {mt::cat(xs, 0), y};
}

struct SensorNet : nn::Module {
  std::shared_ptr<nn::Linear> embed, head;
  std::shared_ptr<nn::LinearAttention> attn;
  SensorNet() {
    embed = register_module("embed", std::make_shared<nn::Linear>(kAxes, kDim));
    attn = register_module("attn", std::make_shared<nn::LinearAttention>(kDim, 2));
    head = register_module("head", std::make_shared<nn::Linear>(kDim, kClasses));
  }
  mt::Tensor forward(const mt::Tensor& x) override {
    const mt::Tensor h = mt::relu(embed->forward(x));  // [B, T, 16]
    return head->forward(mt::mean(h + attn->forward(h, h, h), {1}));
  }
  std::string type_name() const override { return "SensorNet"; }
};

double accuracy(SensorNet& m, const Data& d) {
  mt::NoGradGuard no_grad;
  return (m.forward(d.x).argmax(1) == d.y).to(mt::kFloat32).mean().item();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "sensor-output";
  mt::manual_seed(3);
  const Data train = make_data(512), test = make_data(256);
  SensorNet model;
  const int epochs = 30;
  const std::int64_t batch = 32;
  fmt::print("sensor windows: {} train / {} test, {} samples x {} axes at {} Hz, classes {} {} {} {}\n", train.x.size(0),
             test.x.size(0), kWindow, kAxes, kRate, kNames[0], kNames[1], kNames[2], kNames[3]);
  mt::optim::Adam opt(model.parameters(), {.lr = 1e-2});
  mt::data::DataLoader loader(mt::data::TensorDataset({train.x, train.y}), {.batch_size = batch, .shuffle = true});
  Progress progress(epochs, static_cast<std::int64_t>(loader.size()), batch, 5);
  for (int e = 0; e < epochs; ++e) {
    std::int64_t b = 0;
    for (const auto& xy : loader) {
      const mt::Tensor loss = nn::functional::cross_entropy(model.forward(xy[0]), xy[1]);
      opt.zero_grad();
      loss.backward();
      opt.step();
      progress.batch(e, b++, loss.item());
    }
    progress.epoch(e, accuracy(model, train));
  }
  model.eval();
  const double float_acc = accuracy(model, test);

  // Lower to int8: trace one window, calibrate on 128 training windows, emit.
  const lower::Graph g = lower::trace(model, {1, kWindow, kAxes});
  lower::QuantOptions o;
  o.activation_bits = 8;
  o.name = "sensor";
  const lower::Program p = lower::quantize(g, lower::calibrate(g, train.x.slice(0, 0, 128)), o);
  lower::Simulator sim(p);
  std::int64_t correct = 0, agree = 0;
  {
    mt::NoGradGuard no_grad;
    for (std::int64_t i = 0; i < test.x.size(0); ++i) {
      const mt::Tensor x = test.x.slice(0, i, i + 1);
      const std::int64_t q = mt::argmax(sim.forward(x)).item<std::int64_t>();
      correct += q == test.y.data<std::int64_t>()[i];
      agree += q == mt::argmax(model.forward(x)).item<std::int64_t>();
    }
  }
  lower::emit_c(p, out);
  const lower::FirmwareSize m0 = lower::firmware_size(p, out, "cortex-m0");
  const lower::FirmwareSize m4 = lower::firmware_size(p, out, "cortex-m4");
  const auto n = static_cast<double>(test.x.size(0));
  fmt::print("\n{}\n{}", lower::report(p), p.memory_plan());
  fmt::print("\ntest accuracy: float32 {:.1f}%, int8 firmware {:.1f}% ({:.1f}% agreement with float)\n",
             100 * float_acc, 100 * static_cast<double>(correct) / n, 100 * static_cast<double>(agree) / n);
  fmt::print("firmware in {}/: flash {} B on Cortex-M0, {} B on Cortex-M4; RAM {} B (arena {} B); {} MACs per window\n",
             out, m0.flash(), m4.flash(), m4.ram(), p.arena_bytes, p.total_macs());
  return float_acc >= 0.9 && static_cast<double>(agree) / n >= 0.97 ? 0 : 1;
}
