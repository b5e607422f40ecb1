// microtorch-lower-bench — the lowering schemes side by side on five models trained in
// PyTorch 1.13 (state dicts and data in tests/fixtures): two transformers on token ids
// (tools/torch_lowering_models.py), two on raw real-valued inputs, a post-LN sensor encoder
// and a digits classifier (tools/torch_lowering_raw_inputs.py), and a Conv1d + attention
// sensor CNN (tools/torch_sensor_model.py); and the Iris demo model (trained here, seed 42):
// accuracy against float on held-out data, the share of weight bytes at int8, flash, arena
// and Cortex-M4 instructions per inference.
//
//   microtorch-lower-bench [--work DIR] [--out FILE] [--no-mcu] [--filter TEXT] [--source DIR]
//
// Schemes (lower::QuantOptions):
//   pow2 int8   every value int8 with a power-of-two scale (shifts, no multiplies), weights
//               per tensor and rounded to nearest: the scheme before real-valued scales
//   int8        the default int8: affine activations, per-channel weights, GPTQ rounding,
//               the residual stream, attention and the output at int16 (sensitive_bits)
//   int16x8     int16 activations, int8 weights
//   int16       int16 activations and weights
//   auto 1%     lower::choose_precision on the evaluation data, target max error 1%
// Calibration and evaluation data are disjoint: the models' calib_x / eval_x (1000 held-out
// sequences), Iris's 120 training flowers / 30 test flowers.
//
// Each firmware is made by lower::to_firmware and verified by it (lower::verify): host,
// UBSan/ASan host, Cortex-M0 and M4 under QEMU each print what the simulator computed for 8
// evaluation inputs, then the instruction-counting plugin gives the count per inference.
// Flash is lower::firmware_size (model + kernels for cortex-m4, unused sections removed).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <locale>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../../examples/models/digits_classifier.hpp"
#include "../../examples/models/iris_transformer.hpp"
#include "../../examples/models/sensor_cnn.hpp"
#include "../../examples/models/sensor_encoder.hpp"
#include "../../examples/models/sequence_classifier.hpp"
#include "../../examples/models/token_tagger.hpp"
#include "microtorch/io.hpp"
#include "microtorch/lower/firmware.hpp"
#include "microtorch/nn/checkpoint.hpp"
#include "../firmware_bench.hpp"

namespace mt = microtorch;
namespace lower = microtorch::lower;
namespace fs = std::filesystem;
using mt::Tensor;

namespace {

constexpr std::int64_t kCheckInputs = 8;  // evaluation inputs run on every target
constexpr double kAutoTarget = 0.01;

struct Model {
  std::string name, id;
  std::shared_ptr<mt::nn::Module> module;
  lower::Graph graph;
  Tensor calibration_x, eval_x;
};

Tensor member(const std::string& npz, const std::string& name) {
  for (auto& [k, t] : mt::load_npz(npz)) {
    if (k == name) return t;
  }
  throw mt::IoError(fmt::format("{} has no member {}", npz, name));
}

// A model trained in PyTorch: its C++ twin `m`, the state dict, calibration and evaluation
// data; traced on `example` (one input: token ids or real values).
Model pytorch_model(const std::string& source, const std::string& label, const std::string& id,
                    std::shared_ptr<mt::nn::Module> m, const Tensor& example) {
  const std::string fixtures = source + "/tests/fixtures/lower_" + id;
  mt::nn::load(*m, fixtures + ".npz");
  m->eval();
  return {label, id, m, lower::trace(*m, example), member(fixtures + "_data.npz", "calib_x"),
          member(fixtures + "_data.npz", "eval_x")};
}

Model iris_model() {
  const iris_transformer::Split data = iris_transformer::split(42);
  mt::manual_seed(42);
  auto m = std::make_shared<iris_transformer::IrisTransformer>();
  iris_transformer::train(*m, data);
  return {"Iris transformer (C++)", "iris", m, lower::trace(*m, {1, 4}), data.x_train, data.x_test};
}

struct Scheme {
  std::string label;
  lower::QuantOptions options;
  bool automatic = false;
};

std::vector<Scheme> schemes() {
  std::vector<Scheme> s(5);
  s[0].label = "pow2 int8";
  s[0].options.scheme = lower::Scheme::PowerOfTwo;
  s[0].options.activation_bits = 8, s[0].options.sensitive_bits = 8;
  s[0].options.rounding = lower::WeightRounding::Nearest;
  s[1].label = "int8";
  s[1].options.activation_bits = 8;
  s[2].label = "int16x8";
  s[2].options.activation_bits = 16, s[2].options.weight_bits = 8;
  s[3].label = "int16";
  s[3].options.activation_bits = 16;
  s[4].label = fmt::format("auto {:g}%", 100 * kAutoTarget);
  s[4].automatic = true;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string program = "microtorch-lower-bench";
  BenchArgs args = parse_bench_args(
      argc, argv, program,
      {{"--work DIR", "firmware folders, emptied first (refused if it holds other files; default: "
                      "<tmp>/microtorch-lower-bench)"},
       {"--out FILE", "also write the markdown table to FILE"},
       {"--no-mcu", "accuracy, arena and weights only (no cross-builds, no QEMU)"},
       {"--filter TEXT", "only the models whose id contains TEXT (sequence_classifier, token_tagger, sensor_encoder, "
                         "digits_classifier, sensor_cnn, iris)"},
       {"--source DIR", "microtorch source tree (fixtures, tools/mcu; default: " MICROTORCH_SOURCE_DIR ")"}});
  const std::string &work = args.work, &source = args.source, &out_file = args.out_file;
  const bool mcu = args.mcu;
  try {
    if (mcu && !require_tools(program, {"arm-none-eabi-gcc", "qemu-system-arm"}, "; or --no-mcu")) return 2;
    if (!prepare_work_folder(args.work, program)) return 2;
    std::vector<Model> models;
    auto wanted = [&](const std::string& id) { return args.filter.empty() || id.find(args.filter) != std::string::npos; };
    if (wanted("sequence_classifier")) {
      models.push_back(pytorch_model(source, "causal MHA sequence classifier (PyTorch)", "sequence_classifier",
                                     std::make_shared<sequence_classifier::SequenceClassifier>(),
                                     mt::zeros({1, sequence_classifier::kLength}, mt::kInt64)));
    }
    if (wanted("token_tagger")) {
      models.push_back(pytorch_model(source, "2-layer pre-LN encoder tagger (PyTorch)", "token_tagger",
                                     std::make_shared<token_tagger::TokenTagger>(),
                                     mt::zeros({1, token_tagger::kLength}, mt::kInt64)));
    }
    if (wanted("sensor_encoder")) {
      models.push_back(pytorch_model(source, "post-LN encoder on raw sensor windows (PyTorch)", "sensor_encoder",
                                     std::make_shared<sensor_encoder::SensorEncoder>(),
                                     mt::zeros({1, sensor_encoder::kWindow, sensor_encoder::kAxes})));
    }
    if (wanted("digits_classifier")) {
      models.push_back(pytorch_model(source, "pre-LN GELU digits classifier (PyTorch)", "digits_classifier",
                                     std::make_shared<digits_classifier::DigitsClassifier>(),
                                     mt::zeros({1, digits_classifier::kRows, digits_classifier::kRows})));
    }
    if (wanted("sensor_cnn")) {
      models.push_back(pytorch_model(source, "Conv1d + attention sensor CNN (PyTorch)", "sensor_cnn",
                                     std::make_shared<sensor_cnn::SensorCNN>(6),  // six gestures
                                     mt::zeros({1, sensor_cnn::kAxes, sensor_cnn::kWindow})));
    }
    if (wanted("iris")) models.push_back(iris_model());
    if (models.empty()) {
      std::cerr << "microtorch-lower-bench: no model id contains --filter " << args.filter << "\n";
      return 2;
    }

    std::string table =
        "| model | scheme | max error % of range | agreement | weight bytes int8 | flash B | arena B | Cortex-M4 "
        "instructions |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
    std::string choices, advice;
    int failures = 0;
    for (const Model& m : models) {
      for (const Scheme& s : schemes()) {
        lower::FirmwareOptions o;
        o.quantize = s.options;
        o.quantize.name = fmt::format("{}_{}", m.id, s.automatic ? "auto" : s.label.substr(0, s.label.find(' ')));
        if (s.automatic) o.auto_precision = lower::PrecisionTarget{.max_error = kAutoTarget};
        // int8 against int16 (lower::Firmware::advice): the int8 row's own comparison
        o.compare_int16 = mcu && s.label == "int8";
        o.check_inputs = mcu ? kCheckInputs : 0;
        o.verify.cpus = mcu ? std::vector<std::string>{"cortex-m0", "cortex-m4"} : std::vector<std::string>{};
        const lower::Firmware fw = lower::to_firmware(m.graph, m.calibration_x, m.eval_x, work + "/" + o.quantize.name, o);
        if (s.automatic) choices += fmt::format("\n{}:\n{}", m.name, fw.precision);
        if (!fw.advice.empty()) advice += fmt::format("\n{} ({}):\n{}", m.name, s.label, fw.advice);
        const lower::Program& p = fw.program;
        const lower::Accuracy& a = fw.accuracy;
        const auto [s8, all] = lower::int8_weight_bytes(p);
        std::string flash = "-", insns = "-";
        if (mcu) {
          flash = thousands(fw.sizes.at(1).second.flash());
          const std::int64_t n = fw.verification.instructions("cortex-m4");
          const bool ok = fw.verification.passed && n >= 0;
          if (!ok) std::cerr << fmt::format("microtorch-lower-bench: {}: {}\n", p.name, fw.verification.summary());
          insns = ok ? thousands(n) : "FAILED";
          failures += !ok;
        }
        const std::string row = fmt::format("| {} | {} | {:.3f} | {:.2f}% | {:.0f}% | {} | {} | {} |\n", m.name, s.label,
                                            100 * a.relative_error(), 100 * a.agreement,
                                            all ? 100.0 * static_cast<double>(s8) / static_cast<double>(all) : 0.0,
                                            flash, thousands(p.arena_bytes), insns);
        std::cerr << row;
        table += row;
      }
    }
    const std::string pays = "\nint8 against int16 (lower::to_firmware's comparison of the int8 firmware with its int16 twin):\n" +
                             (advice.empty() ? std::string("int8 is no larger and no slower than int16 on every model\n") : advice);
    std::cout << table << pays << "\nAutomatic precision (lower::choose_precision), per model:\n" << choices << std::flush;
    if (!out_file.empty()) mt::write_file(out_file, table + pays);
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "microtorch-lower-bench: " << e.what() << "\n";
    return 1;
  }
}
