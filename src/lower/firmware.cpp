// to_firmware — the lowering pipeline's steps in one call (include/microtorch/lower/firmware.hpp).
#include "microtorch/lower/firmware.hpp"

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "microtorch/file.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/nn/module.hpp"
#include "microtorch/ops.hpp"
#include "shell.hpp"

namespace microtorch::lower {

std::string Firmware::report() const {
  std::string r = fmt::format("firmware {} in {}/: {}.h, {}.c, mt_kernels.h, mt_kernels.c, {}_report.txt, Makefile\n",
                              program.name, dir, program.name, program.name, program.name);
  if (program.float32()) {
    r += fmt::format("float32; weights {} B, arena {} B\n", program.weight_bytes(), program.arena_bytes);
  } else {
    r += fmt::format("{}-bit activations, {}-bit weights, {}; weights {} B, arena {} B\n", program.activation_bits,
                     program.weight_bits, program.scheme, program.weight_bytes(), program.arena_bytes);
  }
  if (program.training) {
    std::string names;
    for (const TrainedParameter& tp : program.training->parameters) names += (names.empty() ? "" : ", ") + tp.name;
    r += fmt::format("trains ({}, batch {}, lr {}): {}; parameters, gradients and momentum {} B of RAM\n",
                     program.training->numeric, program.training->batch, program.training->lr, names,
                     program.training->state_bytes);
  }
  if (accuracy.samples > 0) {
    r += fmt::format("accuracy on {} evaluation samples: max error {:.3f}% of the float output range, argmax "
                     "agreement {:.2f}%\n",
                     accuracy.samples, 100 * accuracy.relative_error(), 100 * accuracy.agreement);
  }
  if (verification.inputs > 0 || !verification.skipped.empty()) r += verification.summary() + "\n";
  if (sizes.empty()) return r;
  const bool trains = program.training.has_value();
  r += fmt::format("\n| CPU | flash B | RAM B | instructions per inference |{} same results as the simulator |\n",
                   trains ? " instructions per training step |" : "");
  r += trains ? "|---|---:|---:|---:|---:|:---:|\n" : "|---|---:|---:|---:|:---:|\n";
  for (const auto& [cpu, size] : sizes) {
    std::string same = "not run";
    std::string insns = "-", train = "-";
    for (const CpuCheck& c : verification.cpus) {
      if (c.cpu != cpu) continue;
      same = c.identical ? "yes (" + c.board + ")" : "NO";
      if (c.instructions >= 0) insns = fmt::format("{}", c.instructions);
      if (c.train_instructions >= 0) train = fmt::format("{}", c.train_instructions);
    }
    r += fmt::format("| {} | {} | {} | {} |{} {} |\n", cpu, size.flash(), size.ram(), insns,
                     trains ? " " + train + " |" : "", same);
  }
  if (!int16.empty()) {
    r += "\nthe same model at int16 (every value and weight 16 bits):\n";
    for (const FirmwareCost& c : int16) {
      r += fmt::format("  {}: flash {} B, instructions per inference {}\n", c.cpu, c.flash,
                       c.instructions >= 0 ? std::to_string(c.instructions) : "-");
    }
    r += advice.empty() ? "int8 pays for itself: no larger in flash and no slower than int16 on every CPU compared\n"
                        : advice;
  }
  return r;
}

namespace {

// Training steps for the check: consecutive batches of the samples (wrapping around), each
// sample's target the float graph's own prediction (its argmax per row for cross entropy,
// its output for MSE).
std::vector<TrainingBatch> check_batches(const Graph& graph, const Program& p, const std::vector<Tensor>& samples,
                                         std::int64_t steps) {
  std::vector<TrainingBatch> batches;
  if (samples.empty()) return batches;
  const Training& t = *p.training;
  const bool classes = p.buffer(t.target).elem == Elem::S32;
  std::size_t next = 0;
  for (std::int64_t k = 0; k < steps; ++k) {
    TrainingBatch b;
    for (std::int64_t s = 0; s < t.batch; ++s, next = (next + 1) % samples.size()) {
      const auto q = quantize_input(p, samples[next]);
      b.inputs.insert(b.inputs.end(), q.begin(), q.end());
      const Tensor y = evaluate(graph, samples[next])[static_cast<std::size_t>(graph.output)];
      if (classes) {
        const Tensor c = argmax(y.reshape({-1, y.size(-1)}), -1);
        for (std::int64_t i = 0; i < c.numel(); ++i) b.targets.push_back(c.data<std::int64_t>()[i]);
      } else {
        const Tensor f = y.to(Dtype::Float32).contiguous();
        for (std::int64_t i = 0; i < f.numel(); ++i) {
          std::uint32_t u;
          std::memcpy(&u, &f.data<float>()[i], sizeof u);
          b.targets.push_back(u);
        }
      }
    }
    batches.push_back(std::move(b));
  }
  return batches;
}

// Steps that convert between int8 and int16 values (mt_requant_s8_s16, mt_requant_s16_s8).
std::int64_t width_conversions(const Program& p) {
  std::int64_t n = 0;
  for (const Step& st : p.steps) {
    n += st.kernel == "mt_requant_s8_s16" || st.kernel == "mt_requant_s16_s8";
  }
  return n;
}

// int8 against int16 (FirmwareOptions::compare_int16): the int16 twin lowered with the same
// options at 16 bits, emitted, linked and run in `<work>/int16`; the advice where int8 is
// larger or slower, from the measured numbers: int16 outright where int8 gains on neither
// count on some CPU, else (int8 larger but faster, or smaller but slower) the trade by CPU
// and int16 where flash is the constraint.
void compare_with_int16(Firmware& fw, const Calibration& cal, const QuantOptions& q, const std::vector<Tensor>& samples,
                        const FirmwareOptions& options) {
  QuantOptions o16 = q;
  o16.activation_bits = 16, o16.weight_bits = 16, o16.input_bits = 16, o16.precision.clear();
  const Program p16 = quantize(fw.graph, cal, o16);
  const std::string dir16 = (std::filesystem::path(fw.verification.work) / "int16").string();
  emit_c(p16, dir16);
  Verification v16;
  if (options.verify.count_instructions) {
    std::vector<std::vector<std::int64_t>> inputs;
    for (std::size_t i = 0; i < samples.size() && static_cast<std::int64_t>(i) < options.check_inputs; ++i) {
      inputs.push_back(quantize_input(p16, samples[i]));
    }
    VerifyOptions vo = options.verify;
    vo.work = dir16 + ".verify";
    v16 = verify(p16, inputs, dir16, vo);
  }
  const std::int64_t saved = p16.weight_bytes() - fw.program.weight_bytes();
  std::string why, loses, trades;  // loses: CPUs where int16 is no worse on both counts and better on one
  bool int8_faster = false;         // a trade where int8 is the faster (else the smaller)
  for (const auto& [cpu, size] : fw.sizes) {
    FirmwareCost c{cpu, firmware_size(p16, dir16, cpu).flash(), v16.instructions(cpu)};
    const std::int64_t flash8 = size.flash(), insns8 = fw.verification.instructions(cpu);
    const bool counted = insns8 >= 0 && c.instructions >= 0;
    const bool larger = flash8 > c.flash, smaller = flash8 < c.flash;
    const bool slower = counted && insns8 > c.instructions, faster = counted && insns8 < c.instructions;
    const double speed = counted ? 100.0 * static_cast<double>(insns8 - c.instructions) / static_cast<double>(c.instructions) : 0.0;
    if (larger) {
      why += fmt::format("  {}: flash {} B at int8 vs {} B at int16: int8 saves {} B of weights, but its kernels and "
                         "tables add {} B of code and constants (the int16 kernels stay for the values kept at 16 bits), "
                         "more than a model with {} B of int16 weights saves\n",
                         cpu, flash8, c.flash, saved, flash8 - c.flash + saved, p16.weight_bytes());
    }
    if (slower) {
      why += fmt::format("  {}: {} instructions per inference at int8 vs {} at int16 (+{:.1f}%): {} conversions between "
                         "int8 and int16 values, and int8 kernels no faster than int16 ones at these sizes\n",
                         cpu, insns8, c.instructions, speed, width_conversions(fw.program));
    }
    if ((larger || slower) && !smaller && !faster) {
      loses += (loses.empty() ? "" : ", ") + cpu;
    } else if (larger && faster) {
      trades += fmt::format("  {}: int8 costs {} B more flash and takes {:.1f}% fewer instructions\n", cpu,
                            flash8 - c.flash, -speed);
      int8_faster = true;
    } else if (slower && smaller) {
      trades += fmt::format("  {}: int8 saves {} B of flash and takes {:.1f}% more instructions\n", cpu, c.flash - flash8,
                            speed);
    }
    fw.int16.push_back(std::move(c));
  }
  if (why.empty()) return;
  fw.advice = "int8 does not pay for itself here:\n" + why;
  if (!loses.empty()) {
    fw.advice += fmt::format("advice: lower this model at int16 (QuantOptions activation_bits = 16, weight_bits = 16; "
                             "microtorch-lower --bits 16): on {} int16 is no larger and no slower\n",
                             loses);
  } else {
    fw.advice += "int8 trades one cost for the other:\n" + trades +
                 "advice: lower this model at int16 (QuantOptions activation_bits = 16, weight_bits = 16; "
                 "microtorch-lower --bits 16) where " +
                 (int8_faster ? "flash is what runs short, keep int8 where time does\n"
                              : "time is what runs short, keep int8 where flash does\n");
  }
}

}  // namespace

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
  if (options.train && options.auto_precision) {
    throw ValueError("to_firmware: auto_precision chooses integer precisions; it does not combine with train");
  }
  fw.program = options.train ? train_program(graph, cal, q, *options.train) : quantize(graph, cal, q);
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
    VerifyOptions vo = options.verify;
    if (options.train) vo.training = check_batches(graph, fw.program, samples, options.train_checks);
    fw.verification = verify(fw.program, inputs, dir, vo);
  }
  for (const std::string& cpu : options.verify.cpus) {
    if (fw.program.float32() && !detail::cpu_has_fpu(cpu)) continue;  // no FPU: a float32 program does not build
    if (detail::have_program(detail::cross_tools(cpu).cc)) fw.sizes.emplace_back(cpu, firmware_size(fw.program, dir, cpu));
  }
  if (options.compare_int16 && !options.train && !fw.sizes.empty() && !fw.verification.work.empty() &&
      int8_weight_bytes(fw.program).first > 0) {
    compare_with_int16(fw, cal, q, split_inputs(graph, evaluation.defined() ? evaluation : calibration, "to_firmware"),
                       options);
    const std::string report_file = dir + "/" + fw.program.name + "_report.txt";
    if (!fw.advice.empty()) write_file(report_file, read_file(report_file, "to_firmware") + "\n" + fw.advice, "to_firmware");
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
