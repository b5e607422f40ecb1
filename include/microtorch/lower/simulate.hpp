/// \file
/// Run a lowered Program on the host with the runtime's C kernels (the same mt_kernels.c the
/// firmware compiles), one call per Step.
///
/// \code
///   lower::Simulator sim(program);
///   auto q = lower::quantize_input(program, x);          // float -> the input format
///   auto y = sim.run(q);                                  // integers, bit-exact with the firmware
///   Tensor yf = lower::dequantize_output(program, y);     // -> float (or sim.forward(x))
///   fmt::print("{}", sim.saturation_report());            // values at the limits of their type
/// \endcode
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "microtorch/lower/program.hpp"
#include "microtorch/tensor.hpp"

namespace microtorch::lower {

/// Executes a Program. Every buffer gets its own storage (no arena sharing), so after run()
/// each intermediate can be read with values(); the firmware's shared arena is checked
/// against this by comparing outputs bit for bit.
class Simulator {
 public:
  /// Takes the program and allocates every buffer (weights filled in, the rest zero). Each
  /// step is checked against its kernel's C signature (kernel name, number of arguments,
  /// buffer element types, integers within their C types): ValueError naming the step when
  /// one does not match.
  explicit Simulator(Program program);
  /// The program it runs.
  const Program& program() const { return program_; }

  /// Runs one inference. `input` holds the input buffer's integers (token ids for an
  /// embedding model), `program.buffer(program.input).size` of them. Returns the output
  /// buffer's integers. ShapeError when `input` has another size, ValueError when a value
  /// does not fit the input's C type.
  std::vector<std::int64_t> run(const std::vector<std::int64_t>& input);
  /// Float in, float out: quantize_input, run, dequantize_output (and their errors). `x` is
  /// one input of the program's input shape [B, ...] or any number N of them stacked along
  /// dim 0 ([N * B, ...]: a program traced with batch 1 takes any batch), run one after the
  /// other; their outputs are joined along dim 0 when the output's dim 0 is the batch
  /// ([N * B, ...]), else stacked ([N, ...output shape]). ShapeError for anything else.
  Tensor forward(const Tensor& x);

  /// One training step (Program::training, train_program): `x` holds the step's batch of
  /// inputs, each of the program's input shape, stacked along dim 0; `target` their targets
  /// stacked likewise: int64 class indices (cross entropy: one per row of the output) or floats
  /// of the output's shape (MSE). Runs the step's kernels as the firmware's
  /// `<name>_train_step` does and returns the step's mean loss. ValueError for a program
  /// without a training step; ShapeError or DtypeError naming what it takes otherwise.
  double train_step(const Tensor& x, const Tensor& target);
  /// train_step() on integers: the batch's input-buffer values, sample after sample (a float
  /// program's as the floats' bits), and targets (class indices, or float bits).
  double train_step_integers(const std::vector<std::int64_t>& inputs, const std::vector<std::int64_t>& targets);
  /// A trained parameter's current values as float, in its shape (ValueError, listing the
  /// trained parameters, for another name).
  Tensor parameter(const std::string& name) const;
  /// The trained parameters' bytes in blob order, as `<name>_get_params` copies them.
  std::vector<std::uint8_t> parameter_blob() const;
  /// How many training steps have completed.
  std::int64_t train_steps() const { return steps_; }

  /// A decoder's step program (Program::decoding, lower_decoder): forgets every position
  /// (the position counter to 0; cache rows past it are never read), as the firmware's
  /// `<name>_reset` does. ValueError for another program.
  void reset();
  /// A decoder's step: the logits of `token` at the next position, which the caches then hold
  /// (run({token}), as the firmware's `<name>_step`). ValueError for another program.
  std::vector<std::int64_t> step(std::int64_t token);
  /// The position of the next step (the positions the caches hold).
  std::int64_t position() const;

  /// The status the firmware's run function would return: 0, or 1 when a kernel reported
  /// bad data (an out-of-range token id).
  int status() const { return status_; }
  /// A buffer's integers after the last run().
  std::vector<std::int64_t> values(std::int64_t buffer) const;
  /// How many elements of a fixed-point buffer sit at the limits of its type after the last
  /// run() (saturated, or exactly at the limit).
  std::int64_t at_limit(std::int64_t buffer) const;
  /// Summed over every run() so far: per buffer, the elements found at the limits of their
  /// type (a value there was saturated, or landed exactly on the limit), and the elements seen.
  const std::vector<std::int64_t>& limit_counts() const { return limit_counts_; }
  /// How many times run() has completed.
  std::int64_t runs() const { return runs_; }
  /// One line per fixed-point activation with its format and the share of its values at the
  /// limits over all runs: the place to look when a lowered model drifts from the float one.
  std::string saturation_report() const;
  /// Keep each graph value the program computes (Program::probes) as it was right after the
  /// step that made it, on every run from now on (off by default: it costs a copy per value).
  void record_values(bool on) { record_ = on; }
  /// A graph value of the last run (record_values on): its integers dequantized to float
  /// (or int64 for integer values), shaped like the graph value. Undefined when the program
  /// does not compute it.
  Tensor value(std::int64_t graph_value) const;

 private:
  Program program_;
  std::vector<std::vector<std::uint64_t>> storage_;  // one 8-byte-aligned block per buffer
  int status_ = 0;
  std::vector<std::int64_t> limit_counts_;
  std::int64_t runs_ = 0;
  bool record_ = false;
  std::vector<std::vector<std::int64_t>> recorded_;  // per probe
  std::int64_t steps_ = 0;
  void record_probes(std::int64_t step);
  void* ptr(std::int64_t buffer, std::int64_t offset = 0);
  void execute(const std::vector<Step>& steps, bool probes);
  void fill(std::int64_t buffer, const std::vector<std::int64_t>& values, const char* what);
};

/// float -> the input buffer's integers: q = round(x / scale) + zero_point (half away from
/// zero), saturated to the input's C type, with the scale and zero point of x's channel (index
/// of dim 1) when the input has a format per channel (Buffer::channel_scales, as the
/// firmware's `<name>_input_scales[]`); token ids pass through unchanged (ValueError
/// unless they fit int32). ShapeError unless x has the program's input_shape, ValueError for
/// a NaN or infinite element.
std::vector<std::int64_t> quantize_input(const Program& program, const Tensor& x);
/// The output buffer's integers -> float (scale * (q - zero_point)), shaped like the graph output; int64
/// for integer outputs (argmax). ShapeError unless `q` has the output buffer's size.
Tensor dequantize_output(const Program& program, const std::vector<std::int64_t>& q);

}  // namespace microtorch::lower
