// examples/demo.cpp — the whole mission in one run (`make demo`):
//
//   1. train the Iris transformer (examples/models/iris_transformer.hpp) with a live progress line;
//   2. evaluate it in float;
//   3. lower it to int16 and int8 C99 firmware with lower::to_firmware: accuracy against float,
//      each firmware bit-exact with the simulator on the host, under UBSan and on QEMU's
//      Cortex-M0, M4, M7 and M33, instructions per inference counted on each;
//   4. print one summary table;
//   5. leave everything in an output folder (default demo-output/).
//
//   demo [OUTPUT_DIR]
//
// Exits non-zero when a target is missed: float test accuracy >= 96.7%, agreement with the
// float model >= 99% (int16) / 97% (int8), max error <= 1% / 4% of the output range, and
// firmware bit-exact everywhere.
#include <chrono>
#include <filesystem>

#include <fmt/core.h>

#include <microtorch/plot.hpp>
#include <microtorch/io.hpp>
#include <microtorch/lower/firmware.hpp>
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
  double test_accuracy = 0;
  lower::Firmware fw;
};

// lower::to_firmware: calibrated on the training flowers, measured against float on all 150,
// verified on all 150 (host, UBSan, QEMU Cortex-M0, M4, M7, M33 and RISC-V rv32imc, instructions
// counted).
Lowered lower_and_verify(const iris_transformer::Split& data, const lower::Graph& graph, int bits,
                         const std::string& out_dir) {
  Lowered r;
  r.bits = bits;
  lower::FirmwareOptions o;
  o.quantize.activation_bits = bits;
  o.quantize.name = fmt::format("iris_int{}", bits);
  const mt::Tensor all = mt::cat({data.x_test, data.x_train}, 0);
  o.check_inputs = all.size(0);
  o.verify.cpus = {"cortex-m0", "cortex-m4", "cortex-m7", "cortex-m33", "rv32imc"};
  o.compare_int16 = false;  // the demo lowers and verifies both widths itself; its table compares them
  r.fw = lower::to_firmware(graph, data.x_train, all, fmt::format("{}/firmware_int{}", out_dir, bits), o);
  // Accuracy of the integer model on the 30 test flowers (the simulator runs any batch).
  const mt::Tensor predicted = mt::argmax(lower::Simulator(r.fw.program).forward(data.x_test), -1);
  r.test_accuracy = mt::mean((predicted == data.y_test).to(mt::kFloat32)).item();
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
  fmt::print("[3/4] lowering: traced {} ops; calibrating on {} flowers, emitting and verifying int16 and int8 firmware "
             "(host, UBSan, QEMU Cortex-M0, M4, M7, M33 and rv32imc)\n",
             graph.nodes.size(), data.x_train.size(0));
  std::vector<Lowered> rows;
  for (const int bits : {16, 8}) {
    rows.push_back(lower_and_verify(data, graph, bits, out_dir));
    fmt::print("      int{}: {}\n", bits, rows.back().fw.verification.summary());
  }

  // ---- 4. summary --------------------------------------------------------------------------
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("[4/4] summary ({:.1f} s)\n\n", seconds);
  fmt::print("| model   | test accuracy | agrees with float | max error / range | weights | arena | flash (M4) | RAM (M4) | instructions (M4) | instructions (rv32imc) | bit-exact on M0/M4/M7/M33/rv32imc |\n");
  fmt::print("|---------|--------------:|------------------:|------------------:|--------:|------:|-----------:|---------:|------------------:|-----------------------:|:---------------------------------:|\n");
  fmt::print("| float32 | {:12.1f}% |                 - |                 - |       - |     - |          - |        - |                 - |                      - |                 -                 |\n",
             100 * float_acc);
  bool ok = float_acc >= 0.966;
  for (const Lowered& r : rows) {
    const lower::Firmware& fw = r.fw;
    lower::FirmwareSize m4;
    for (const auto& [cpu, size] : fw.sizes) {
      if (cpu == "cortex-m4") m4 = size;
    }
    const bool bit_exact = fw.verification.passed && fw.verification.cpus.size() == 5;
    fmt::print("| int{:<4} | {:12.1f}% | {:16.1f}% | {:16.2f}% | {:5} B | {:3} B | {:8} B | {:6} B | {:>17} | {:>22} | {:^33} |\n",
               r.bits, 100 * r.test_accuracy, 100 * fw.accuracy.agreement, 100 * fw.accuracy.relative_error(),
               fw.program.weight_bytes(), fw.program.arena_bytes, m4.flash(), m4.ram(),
               fw.verification.instructions("cortex-m4"), fw.verification.instructions("rv32imc"), bit_exact ? "yes" : "NO");
    ok = ok && bit_exact && fw.accuracy.agreement >= (r.bits == 16 ? 0.99 : 0.97) &&
         fw.accuracy.relative_error() <= (r.bits == 16 ? 0.01 : 0.04);
  }
  fmt::print("\noutput in {}/: firmware_int16/ and firmware_int8/ (C sources, headers, <name>_report.txt with the "
             "accuracy per layer, Makefile), firmware_int*.verify/ (check programs, builds, verification.txt), training.svg, attention.svg, confusion.svg, iris_transformer.json/.npz (the traced graph) and "
             "calibration.npy\n",
             out_dir);
  fmt::print("lower it again from the command line: build/tools/lower/microtorch-lower {0}/iris_transformer -c "
             "{0}/calibration.npy --bits 8 --out {0}/cli_int8 --check 10 -t cortex-m4\n",
             out_dir);
  if (!ok) {
    fmt::print(stderr, "demo: a target was missed (see the table)\n");
    return 1;
  }
  return 0;
}
