// examples/demo.cpp — the whole mission in one run (`make demo`):
//
//   1. train the Iris transformer (examples/models/iris_transformer.hpp) with a live progress line;
//   2. evaluate it in float;
//   3. lower it to int16 and int8 C99 firmware, check each bit-exact against the simulator on
//      the host and under UBSan, then on QEMU's Cortex-M4 and Cortex-M0, and count its
//      instructions per inference on the M4 (tools/mcu/run_firmware_qemu.sh);
//   4. print one summary table;
//   5. leave everything in an output folder (default demo-output/).
//
//   demo [OUTPUT_DIR]
//
// Exits non-zero when a target is missed: float test accuracy >= 96.7%, agreement with the
// float model >= 99% (int16) / 97% (int8), max error <= 1% / 4% of the output range, and
// firmware bit-exact everywhere.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/core.h>

#include <microtorch/plot.hpp>
#include <microtorch/io.hpp>
#include <microtorch/lower/emit.hpp>
#include <microtorch/lower/graph.hpp>
#include <microtorch/lower/quantize.hpp>
#include <microtorch/lower/simulate.hpp>

#include "models/iris_figures.hpp"
#include "models/iris_transformer.hpp"
#include "progress.hpp"

namespace mt = microtorch;
namespace lower = microtorch::lower;
using iris_transformer::IrisTransformer;

namespace {

struct Lowered {
  int bits = 0;
  double test_accuracy = 0, agreement = 0, relative_error = 0;
  std::int64_t arena = 0, weights = 0, flash = 0, ram = 0, instructions = -1;
  bool bit_exact = false;
  std::string verify_summary;
};

std::string run_command(const std::string& cmd, int& status) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) {
    status = -1;
    return "cannot run " + cmd;
  }
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  status = pclose(pipe);
  return out;
}

Lowered lower_and_verify(IrisTransformer& model, const iris_transformer::Split& data, const lower::Graph& graph,
                         const lower::Calibration& cal, int bits, const std::string& out_dir) {
  Lowered r;
  r.bits = bits;
  lower::QuantOptions o;
  o.activation_bits = bits;
  o.name = fmt::format("iris_int{}", bits);
  const lower::Program program = lower::quantize(graph, cal, o);
  lower::Simulator sim(program);

  // Against float on all 150 flowers; accuracy on the 30 test flowers.
  const mt::Tensor all = mt::cat({data.x_test, data.x_train}, 0);
  double lo = 1e300, hi = -1e300, err = 0;
  std::int64_t agree = 0, correct = 0;
  std::vector<std::vector<std::int64_t>> inputs;
  mt::NoGradGuard no_grad;
  for (std::int64_t i = 0; i < all.size(0); ++i) {
    const mt::Tensor x = all.slice(0, i, i + 1);
    inputs.push_back(lower::quantize_input(program, x));
    const mt::Tensor yf = model.forward(x), yq = sim.forward(x);
    err = std::max(err, mt::max(mt::abs(yf - yq)).item());
    lo = std::min(lo, mt::min(yf).item()), hi = std::max(hi, mt::max(yf).item());
    const std::int64_t cq = mt::argmax(yq).item<std::int64_t>();
    agree += cq == mt::argmax(yf).item<std::int64_t>();
    if (i < data.x_test.size(0)) correct += cq == data.y_test.at({i});
  }
  r.relative_error = err / (hi - lo);
  r.agreement = static_cast<double>(agree) / static_cast<double>(all.size(0));
  r.test_accuracy = static_cast<double>(correct) / static_cast<double>(data.x_test.size(0));
  r.arena = program.arena_bytes;
  r.weights = program.weight_bytes();

  // The firmware folder, its check program on the 150 flowers, and the proof.
  const std::string dir = fmt::format("{}/firmware_int{}", out_dir, bits);
  lower::emit_c(program, dir);
  lower::emit_check(program, inputs, dir);
  std::ofstream(dir + "/expected.txt") << lower::expected_check_output(sim, inputs);
  std::ofstream(dir + "/saturation.txt") << sim.saturation_report();
  int status = 0;
  const std::string log = run_command(
      fmt::format("COUNT_INSTRUCTIONS=1 bash '{}/tools/mcu/run_firmware_qemu.sh' '{}' {}", MICROTORCH_SOURCE_DIR, dir,
                  program.name),
      status);
  std::ofstream(dir + "/verification.txt") << log;
  r.bit_exact = status == 0;
  r.verify_summary = log.substr(log.rfind("run_firmware_qemu:"));
  const std::string key = "instructions per inference (cortex-m4): ";
  if (const auto at = log.find(key); at != std::string::npos) r.instructions = std::stoll(log.substr(at + key.size()));
  const lower::FirmwareSize size = lower::firmware_size(program, dir, "cortex-m4");
  r.flash = size.flash();
  r.ram = size.ram();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_dir = argc > 1 ? argv[1] : "demo-output";
  std::filesystem::create_directories(out_dir);
  const auto start = std::chrono::steady_clock::now();
  mt::set_num_threads(1);

  // ---- 1. train ----------------------------------------------------------------------------
  const iris_transformer::Split data = iris_transformer::split();
  IrisTransformer model;
  const iris_transformer::Options opt;
  const std::int64_t batches = (data.x_train.size(0) + opt.batch - 1) / opt.batch;
  fmt::print("[1/4] training the Iris transformer: {} train / {} test flowers, {} parameters, Adam lr={}, batch {}\n",
             data.x_train.size(0), data.x_test.size(0), model.num_parameters(), opt.lr, opt.batch);
  Progress progress(opt.epochs, batches, opt.batch);
  const iris_transformer::History history = iris_transformer::train_with_history(
      model, data, opt, [&](int epoch, std::int64_t b, double loss) { progress.batch(epoch, b, loss); },
      [&](int epoch, const iris_transformer::History& h) { progress.epoch(epoch, h.train_accuracy.back() / 100); });

  // ---- 2. float ----------------------------------------------------------------------------
  const double float_acc = iris_transformer::accuracy(model, data.x_test, data.y_test);
  fmt::print("[2/4] float32 test accuracy {:.1f}% (final training loss {:.4f})\n", 100 * float_acc,
             history.train_loss.back());

  // Pictures (examples/models/iris_figures.hpp): loss and accuracy per epoch, the attention of
  // the held-out flowers per head, their confusion matrix.
  mt::write_file(out_dir + "/training.svg", iris_transformer::training_figure(history));
  mt::write_file(out_dir + "/attention.svg", iris_transformer::attention_figure(model, data));
  mt::write_file(out_dir + "/confusion.svg", iris_transformer::confusion_figure(model, data));

  // ---- 3. lower, emit, verify -------------------------------------------------------------
  const lower::Graph graph = lower::trace(model, {1, 4});
  lower::save(graph, out_dir + "/iris_transformer");  // for microtorch-lower
  mt::save_npy(data.x_train, out_dir + "/calibration.npy");
  const lower::Calibration cal = lower::calibrate(graph, data.x_train);
  fmt::print("[3/4] lowering: traced {} ops, calibrated on {} flowers; emitting and verifying int16 and int8 firmware "
             "(host, UBSan, QEMU Cortex-M4 and M0)\n",
             graph.nodes.size(), cal.samples);
  std::vector<Lowered> rows;
  for (const int bits : {16, 8}) {
    rows.push_back(lower_and_verify(model, data, graph, cal, bits, out_dir));
    fmt::print("      int{}: {}", bits, rows.back().verify_summary);
  }

  // ---- 4. summary --------------------------------------------------------------------------
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("[4/4] summary ({:.1f} s)\n\n", seconds);
  fmt::print("| model   | test accuracy | agrees with float | max error / range | weights | arena | flash (M4) | RAM (M4) | instructions (M4) | bit-exact on M4/M0 |\n");
  fmt::print("|---------|--------------:|------------------:|------------------:|--------:|------:|-----------:|---------:|------------------:|:------------------:|\n");
  fmt::print("| float32 | {:12.1f}% |                 - |                 - |       - |     - |          - |        - |                 - |         -          |\n",
             100 * float_acc);
  bool ok = float_acc >= 0.966;
  for (const Lowered& r : rows) {
    fmt::print("| int{:<4} | {:12.1f}% | {:16.1f}% | {:16.2f}% | {:5} B | {:3} B | {:8} B | {:6} B | {:>17} | {:^18} |\n",
               r.bits, 100 * r.test_accuracy, 100 * r.agreement, 100 * r.relative_error, r.weights, r.arena, r.flash,
               r.ram, r.instructions, r.bit_exact ? "yes" : "NO");
    ok = ok && r.bit_exact && r.agreement >= (r.bits == 16 ? 0.99 : 0.97) &&
         r.relative_error <= (r.bits == 16 ? 0.01 : 0.04);
  }
  fmt::print("\noutput in {}/: firmware_int16/ and firmware_int8/ (C sources, <name>_report.txt, saturation.txt, "
             "verification.txt), training.svg, attention.svg, confusion.svg, iris_transformer.json/.npz (the traced graph) and "
             "calibration.npy\n",
             out_dir);
  fmt::print("lower it again from the command line: build/tools/lower/microtorch-lower {0}/iris_transformer -c "
             "{0}/calibration.npy --bits 8 --out {0}/cli_int8\n",
             out_dir);
  if (!ok) {
    fmt::print(stderr, "demo: a target was missed (see the table)\n");
    return 1;
  }
  return 0;
}
