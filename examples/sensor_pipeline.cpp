// examples/sensor_pipeline.cpp — a Conv1d feature extractor feeding self-attention, from
// training to verified firmware: 3-axis accelerometer windows of 128 samples, six gesture
// classes, trained here in microtorch, lowered with lower::to_firmware to int16 and int8 and
// run on QEMU (Cortex-M0, M4, M7, M33 and RISC-V rv32imc) bit-exact with the simulator.
//
//   build/examples/sensor_pipeline [OUTPUT_DIR]      (default sensor-pipeline-output; fixed seeds)
//
// Data (gesture_data.hpp): 128-sample windows at 50 Hz of (x, y, z) in g, classes idle,
// walking, running, shaking, flick and circle, each window with its own frequency, amplitude,
// phase, sensor noise (0.05 g) and, per axis, a gain in [0.85, 1.15] and an offset in
// [-0.2, 0.2] g. Model (models/sensor_cnn.hpp, the twin of the PyTorch model the tests load):
// Conv1d(3, 16, 5, stride 2) + BatchNorm1d + ReLU -> depthwise Conv1d(16, k 3) + pointwise
// Conv1d(16, 32) + ReLU -> MaxPool1d(2) -> transpose(1, 2) -> TransformerEncoderLayer(32,
// 4 heads, ff 64) -> mean over time -> Linear(32, 6). Lowering folds the BatchNorm and both
// ReLUs into the convolutions.
//
// Prints one markdown table: float / int16 / int8 test accuracy, top-1 agreement with float
// and max error (share of the float logits' range) on the test windows, flash and RAM on
// Cortex-M4, instructions per inference on Cortex-M4 (QEMU); every CPU's numbers go to
// OUTPUT_DIR/int16_firmware.md and int8_firmware.md.
#include <fstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <microtorch/lower/firmware.hpp>
#include <microtorch/lower/simulate.hpp>
#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

#include "gesture_data.hpp"
#include "models/sensor_cnn.hpp"
#include "progress.hpp"

namespace mt = microtorch;
namespace nn = microtorch::nn;
namespace lower = microtorch::lower;

namespace {

constexpr std::int64_t kWindow = sensor_cnn::kWindow, kClasses = gesture_data::kClasses;

struct Data {
  mt::Tensor x, y;  // [n, 3, kWindow] (channels first, as Conv1d takes them), [n]
};

Data make_data(std::int64_t n) {
  std::vector<mt::Tensor> xs;
  const mt::Tensor y = mt::randint(0, kClasses, {n});
  for (std::int64_t i = 0; i < n; ++i) {
    const mt::Tensor w = gesture_data::vary(gesture_data::window(y.data<std::int64_t>()[i], kWindow, 0.05), 0.15, 0.2);
    xs.push_back(mt::transpose(w, 0, 1).unsqueeze(0));
  }
  return {mt::cat(xs, 0).to(mt::kFloat32).contiguous(), y};
}

double accuracy(const mt::Tensor& logits, const mt::Tensor& y) {
  return (logits.argmax(1) == y).to(mt::kFloat32).mean().item();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "sensor-pipeline-output";
  mt::manual_seed(11);
  const Data train = make_data(1536), test = make_data(512);
  sensor_cnn::SensorCNN model(kClasses);
  fmt::print("gesture windows: {} train / {} test, {} samples x 3 axes at {} Hz, classes", train.x.size(0),
             test.x.size(0), kWindow, gesture_data::kRate);
  for (const char* name : gesture_data::kNames) fmt::print(" {}", name);
  fmt::print("\n");

  const int epochs = 20;
  const std::int64_t batch = 32;
  mt::optim::Adam opt(model.parameters(), {.lr = 3e-3});
  mt::data::DataLoader loader(mt::data::TensorDataset({train.x, train.y}), {.batch_size = batch, .shuffle = true});
  Progress progress(epochs, static_cast<std::int64_t>(loader.size()), batch, 5);
  for (int e = 0; e < epochs; ++e) {
    model.train();
    std::int64_t b = 0;
    for (const auto& xy : loader) {
      const mt::Tensor loss = nn::functional::cross_entropy(model.forward(xy[0]), xy[1]);
      opt.zero_grad();
      loss.backward();
      opt.step();
      progress.batch(e, b++, loss.item());
    }
    model.eval();
    mt::NoGradGuard no_grad;
    progress.epoch(e, accuracy(model.forward(train.x), train.y));
  }
  model.eval();
  mt::Tensor float_logits;
  {
    mt::NoGradGuard no_grad;
    float_logits = model.forward(test.x);
  }

  // int16 and int8 firmware: calibrated on 128 training windows, measured on the test windows,
  // verified on the first 16 of them on the host, UBSan and QEMU
  struct Row {
    std::string name;
    double test_accuracy, agreement, max_error;
    std::int64_t flash, ram, instructions;
  };
  std::vector<Row> rows;
  std::vector<std::string> cpus;
  bool ok = true;
  for (const int bits : {16, 8}) {
    lower::FirmwareOptions o;
    o.quantize.activation_bits = bits;
    o.quantize.name = fmt::format("gesture{}", bits);
    o.verify.cpus = {"cortex-m0", "cortex-m4", "cortex-m7", "cortex-m33", "rv32imc"};
    o.compare_int16 = false;  // both widths are lowered and compared here
    const lower::Firmware fw =
        lower::to_firmware(model, train.x.slice(0, 0, 128), test.x, fmt::format("{}/int{}", out, bits), o);
    // every CPU's flash, RAM, instructions and check, beside the firmware folder
    std::ofstream(fmt::format("{}/int{}_firmware.md", out, bits)) << fw.report();
    ok = ok && fw.verification.passed;
    lower::Simulator sim(fw.program);
    Row r{fmt::format("int{}", bits), accuracy(sim.forward(test.x), test.y), fw.accuracy.agreement,
          fw.accuracy.relative_error(), -1, -1, -1};
    for (const auto& [cpu, size] : fw.sizes) {
      if (cpu == "cortex-m4") r.flash = size.flash(), r.ram = size.ram();
    }
    cpus.clear();
    for (const lower::CpuCheck& c : fw.verification.cpus) {
      ok = ok && c.identical;
      if (c.identical) cpus.push_back(c.cpu);
      if (c.cpu == "cortex-m4") r.instructions = c.instructions;
    }
    rows.push_back(r);
  }

  auto cell = [](std::int64_t v) { return v < 0 ? std::string("-") : fmt::format("{}", v); };
  fmt::print("\n| {} test windows | float32 (host) | {} | {} |\n|---|---|---|---|\n", test.x.size(0), rows[0].name,
             rows[1].name);
  fmt::print("| test accuracy | {:.1f}% | {:.1f}% | {:.1f}% |\n", 100 * accuracy(float_logits, test.y),
             100 * rows[0].test_accuracy, 100 * rows[1].test_accuracy);
  fmt::print("| top-1 agreement with float | | {:.1f}% | {:.1f}% |\n", 100 * rows[0].agreement, 100 * rows[1].agreement);
  fmt::print("| max error (of the logits' range) | | {:.2f}% | {:.2f}% |\n", 100 * rows[0].max_error,
             100 * rows[1].max_error);
  fmt::print("| flash on Cortex-M4 | | {} B | {} B |\n", cell(rows[0].flash), cell(rows[1].flash));
  fmt::print("| RAM on Cortex-M4 | | {} B | {} B |\n", cell(rows[0].ram), cell(rows[1].ram));
  fmt::print("| Cortex-M4 instructions per inference | | {} | {} |\n", cell(rows[0].instructions),
             cell(rows[1].instructions));
  std::string on = "host, UBSan/ASan";
  for (const std::string& c : cpus) on += ", " + c;
  fmt::print("\nfirmware in {0}/int16 and {0}/int8 (every CPU's numbers: {0}/int16_firmware.md, int8_firmware.md); "
             "bit-exact with the simulator on {1}: {2}\n",
             out, on, ok ? "yes" : "NO");
  return ok && accuracy(float_logits, test.y) >= 0.9 && rows[1].agreement >= 0.97 ? 0 : 1;
}
