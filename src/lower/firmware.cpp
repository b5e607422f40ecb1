// to_firmware — the lowering pipeline's steps in one call (include/microtorch/lower/firmware.hpp).
#include "microtorch/lower/firmware.hpp"

#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/nn/module.hpp"
#include "microtorch/ops.hpp"
#include "shell.hpp"

namespace microtorch::lower {

std::string Firmware::report() const {
  std::string r = fmt::format("firmware {} in {}/: {}.h, {}.c, mt_kernels.h, mt_kernels.c, {}_report.txt, Makefile\n",
                              program.name, dir, program.name, program.name, program.name);
  r += fmt::format("{}-bit activations, {}-bit weights, {}; weights {} B, arena {} B\n", program.activation_bits,
                   program.weight_bits, program.scheme, program.weight_bytes(), program.arena_bytes);
  if (accuracy.samples > 0) {
    r += fmt::format("accuracy on {} evaluation samples: max error {:.3f}% of the float output range, argmax "
                     "agreement {:.2f}%\n",
                     accuracy.samples, 100 * accuracy.relative_error(), 100 * accuracy.agreement);
  }
  if (verification.inputs > 0 || !verification.skipped.empty()) r += verification.summary() + "\n";
  if (sizes.empty()) return r;
  r += "\n| CPU | flash B | RAM B | instructions per inference | same integers as the simulator |\n";
  r += "|---|---:|---:|---:|:---:|\n";
  for (const auto& [cpu, size] : sizes) {
    std::string same = "not run";
    std::string insns = "-";
    for (const CpuCheck& c : verification.cpus) {
      if (c.cpu != cpu) continue;
      same = c.identical ? "yes (" + c.board + ")" : "NO";
      if (c.instructions >= 0) insns = fmt::format("{}", c.instructions);
    }
    r += fmt::format("| {} | {} | {} | {} | {} |\n", cpu, size.flash(), size.ram(), insns, same);
  }
  return r;
}

Firmware to_firmware(const Graph& graph, const Tensor& calibration, const Tensor& evaluation, const std::string& dir,
                     const FirmwareOptions& options) {
  if (options.check_inputs < 0) {
    throw ValueError(fmt::format("to_firmware: check_inputs is {}; pass 0 (no verification) or more", options.check_inputs));
  }
  Firmware fw;
  fw.dir = dir;
  fw.graph = graph;
  const Calibration cal = calibrate(graph, calibration);
  QuantOptions q = options.quantize;
  if (options.auto_precision && !evaluation.defined()) {
    throw ValueError("to_firmware: auto_precision chooses precisions on evaluation data; pass it (evaluation)");
  }
  if (options.auto_precision) {
    const PrecisionSearch search = choose_precision(graph, cal, evaluation, q, *options.auto_precision);
    q = search.options;
    fw.precision = search.report;
  }
  fw.program = quantize(graph, cal, q);
  if (evaluation.defined()) {
    fw.accuracy = measure(graph, fw.program, evaluation);
    fw.program.evaluation = fw.precision + (fw.precision.empty() ? "" : "\n") + layer_report(fw.accuracy);
  }
  emit_c(fw.program, dir);

  if (options.check_inputs > 0) {
    const std::vector<Tensor> samples =
        split_inputs(graph, evaluation.defined() ? evaluation : calibration, "to_firmware");
    std::vector<std::vector<std::int64_t>> inputs;
    for (std::size_t i = 0; i < samples.size() && static_cast<std::int64_t>(i) < options.check_inputs; ++i) {
      inputs.push_back(quantize_input(fw.program, samples[i]));
    }
    fw.verification = verify(fw.program, inputs, dir, options.verify);
  }
  for (const std::string& cpu : options.verify.cpus) {
    if (detail::have_program(detail::cross_tools(cpu).cc)) fw.sizes.emplace_back(cpu, firmware_size(fw.program, dir, cpu));
  }
  return fw;
}

Firmware to_firmware(nn::Module& model, const Tensor& calibration, const Tensor& evaluation, const std::string& dir,
                     const FirmwareOptions& options) {
  if (calibration.dim() < 1 || calibration.size(0) < 1) {
    throw ShapeError(fmt::format("to_firmware: the calibration data has shape {}; pass samples stacked along dim 0",
                                 shape_str(calibration.shape())));
  }
  // Traced in eval mode (dropout off), each module's mode restored afterwards.
  std::vector<std::pair<nn::Module*, bool>> modes;
  for (const auto& [path, m] : model.named_modules()) modes.emplace_back(m, m->is_training());
  model.eval();
  Graph graph;
  try {
    graph = trace(model, slice(calibration, 0, 0, 1));
  } catch (...) {
    for (auto& [m, training] : modes) m->train(training);
    throw;
  }
  for (auto& [m, training] : modes) m->train(training);
  return to_firmware(graph, calibration, evaluation, dir, options);
}

}  // namespace microtorch::lower
