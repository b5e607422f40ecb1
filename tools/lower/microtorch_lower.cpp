// microtorch-lower — lower a saved graph (lower::save: <prefix>.json + <prefix>.npz) to a
// fixed-point C99 firmware folder, from the command line.
//
//   microtorch-lower out/iris --calibration out/iris_calib.npy --bits 8 --out out/fw
//   microtorch-lower out/iris -c calib.npy --bits 16 --weight-bits 8 --check 20 --size cortex-m4
//
// Prints the lowering report, the per-tensor formats and the memory plan; --check N also
// writes a check program and the simulator's expected output for the first N calibration
// samples (run them with tools/mcu/run_firmware_qemu.sh DIR NAME).
#include <cstdio>
#include <fstream>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <microtorch/io.hpp>
#include <microtorch/lower/emit.hpp>
#include <microtorch/lower/graph.hpp>
#include <microtorch/lower/quantize.hpp>
#include <microtorch/lower/simulate.hpp>
#include <microtorch/ops.hpp>

namespace lower = microtorch::lower;

int main(int argc, char** argv) {
  CLI::App app{"Lower a traced microtorch model to fixed-point C99 firmware (weights in flash, one static arena)."};
  std::string prefix, calibration, out = "firmware", name = "model", attention = "stream", size_cpu;
  int bits = 16, weight_bits = 0, check = 0;
  bool print_graph = false, print_program = false;
  app.add_option("model", prefix, "graph saved by lower::save, without extension (reads <model>.json, <model>.npz)")
      ->required();
  app.add_option("-c,--calibration", calibration,
                 "representative inputs (.npy) stacked along dim 0: [N * B, ...] for a graph input [B, ...]")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-b,--bits", bits, "activation bits")->check(CLI::IsMember({8, 16}));
  app.add_option("-w,--weight-bits", weight_bits, "weight bits (default: the activation bits)")
      ->check(CLI::IsMember({8, 16}));
  app.add_option("-a,--attention", attention, "attention kernel")->check(CLI::IsMember({"stream", "twopass"}));
  app.add_option("-n,--name", name, "C identifier prefix of the firmware (<name>_run, <name>.h)");
  app.add_option("-o,--out", out, "output folder");
  app.add_option("--check", check, "also write <name>_check.c and expected.txt for the first N calibration samples")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--size", size_cpu, "report flash/RAM from arm-none-eabi-size for this CPU (e.g. cortex-m4)");
  app.add_flag("--print-graph", print_graph, "print the traced graph");
  app.add_flag("--print-program", print_program, "print the kernel calls");
  CLI11_PARSE(app, argc, argv);

  try {
    const lower::Graph graph = lower::load(prefix);
    if (print_graph) fmt::print("{}\n", graph.to_string());
    const microtorch::Tensor data = microtorch::load_npy(calibration);
    const lower::Calibration cal = lower::calibrate(graph, data);
    lower::QuantOptions options;
    options.activation_bits = bits;
    options.weight_bits = weight_bits;
    options.attention = attention == "stream" ? lower::AttentionKernel::Streaming : lower::AttentionKernel::TwoPass;
    options.name = name;
    const lower::Program program = lower::quantize(graph, cal, options);
    for (const std::string& w : program.warnings) fmt::print(stderr, "microtorch-lower: warning: {}\n", w);
    if (print_program) fmt::print("{}\n", program.to_string());
    lower::emit_c(program, out);
    fmt::print("{}\n{}\n{}\n", lower::report(program), program.format_table(), program.memory_plan());
    if (check > 0) {
      const auto& in_shape = graph.value(graph.input).shape;
      const std::int64_t batch = in_shape.empty() ? 1 : in_shape[0];
      std::vector<std::vector<std::int64_t>> inputs;
      for (std::int64_t i = 0; i < check && (i + 1) * batch <= data.size(0); ++i) {
        inputs.push_back(lower::quantize_input(program, microtorch::slice(data, 0, i * batch, (i + 1) * batch)));
      }
      lower::emit_check(program, inputs, out);
      lower::Simulator sim(program);
      std::ofstream(out + "/expected.txt") << lower::expected_check_output(sim, inputs);
      fmt::print("{}\n", sim.saturation_report());
      fmt::print("check program: {0}/{1}_check.c, expected output {0}/expected.txt ({2} inputs); verify with\n"
                 "  tools/mcu/run_firmware_qemu.sh {0} {1}\n",
                 out, program.name, inputs.size());
    }
    if (!size_cpu.empty()) {
      const lower::FirmwareSize s = lower::firmware_size(program, out, size_cpu);
      fmt::print("{} ({}): flash {} bytes (text {} + data {}), RAM {} bytes (data {} + bss {})\n", program.name, size_cpu,
                 s.flash(), s.text, s.data, s.ram(), s.data, s.bss);
    }
    fmt::print("firmware written to {}/ ({}.h, {}.c, mt_kernels.h, mt_kernels.c, {}_report.txt)\n", out, program.name,
               program.name, program.name);
  } catch (const std::exception& e) {
    fmt::print(stderr, "microtorch-lower: {}\n", e.what());
    return 1;
  }
  return 0;
}
