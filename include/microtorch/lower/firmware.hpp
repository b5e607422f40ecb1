/// \file
/// The lowering front door: one call from a trained model to verified firmware.
///
/// \code
///   lower::FirmwareOptions o;
///   o.quantize.activation_bits = 8;                 // int8 (QuantOptions: scheme, ranges, name, ...)
///   o.quantize.name = "iris";
///   lower::Firmware fw = lower::to_firmware(model, x_train, x_test, "out/iris_fw", o);
///   fmt::print("{}", fw.report());   // accuracy against float, then per CPU: flash, RAM,
///                                    // instructions per inference, bit-exact on QEMU
///   if (!fw.verification.passed) return 1;
/// \endcode
///
/// It runs the pipeline's steps in order: trace (a module, with one sample of the calibration
/// data as the example: batch 1), calibrate on `calibration`, choose per-layer precision when
/// asked (choose_precision on `evaluation`), quantize, measure against the float graph on
/// `evaluation` (measure: outputs and every layer), emit_c to `dir`, verify on the first
/// FirmwareOptions::check_inputs samples of `evaluation` (host, UBSan/ASan, QEMU for each CPU,
/// instruction counts; skipped CPUs are said so when the cross tools are missing), and link
/// for each CPU for its flash and RAM (firmware_size). The firmware folder gets the sources,
/// headers, the report (with the accuracy table) and the Makefile; the check program and
/// every build go to the verification's work folder (`<dir>.verify`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "microtorch/lower/accuracy.hpp"
#include "microtorch/lower/decoder.hpp"
#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/precision.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/lower/train.hpp"
#include "microtorch/lower/verify.hpp"

namespace microtorch::lower {

/// What to_firmware() does besides its defaults.
struct FirmwareOptions {
  QuantOptions quantize;  ///< precision, scheme, ranges, attention kernel and the firmware's name
  /// When set, each layer's precision is chosen on the evaluation data to meet this target
  /// (choose_precision); quantize's bits and precision are then replaced.
  std::optional<PrecisionTarget> auto_precision;
  /// How many evaluation samples the firmware is verified on (0: no verification).
  std::int64_t check_inputs = 16;
  /// The CPUs to verify on (also those whose flash and RAM are reported), instruction counts,
  /// the work folder.
  VerifyOptions verify;
  /// When set, the firmware also trains (train_program): `<name>_train_step`, the parameter
  /// blob functions; the check then takes `train_checks` training steps too, on the check's
  /// samples with the float model's own predictions as targets (class indices: its argmax;
  /// MSE: its outputs), and counts instructions per training step.
  std::optional<TrainOptions> train;
  std::int64_t train_checks = 3;  ///< training steps the verification takes (with `train`)
  /// int8 must pay for itself: for a program with int8 weights that was verified, also lower
  /// the model at int16 (same options, every value and weight 16 bits), link it and run it on
  /// the same CPUs (in the verification's work folder, `<work>/int16`), and say in the report
  /// where int8 is larger in flash or slower than int16, why, and that int16 is the better
  /// choice there (Firmware::int16, Firmware::advice). Doubles the verification's time.
  bool compare_int16 = true;
};

/// Flash and instructions per inference of one firmware on one CPU.
struct FirmwareCost {
  std::string cpu;                 ///< the CPU (as in Firmware::sizes: "cortex-m4", "rv32imc", ...)
  std::int64_t flash = 0;          ///< bytes of flash: model and kernels, unused sections removed
  std::int64_t instructions = -1;  ///< per inference; -1 when not counted
};

/// Everything to_firmware() made and measured.
struct Firmware {
  std::string dir;          ///< the firmware folder
  Graph graph;              ///< the traced graph (what was lowered)
  Program program;          ///< the lowered program (Simulator(program) runs it on the host)
  Accuracy accuracy;        ///< against the float graph on the evaluation data, with every layer (none without it)
  std::string precision;    ///< choose_precision's report, when it ran
  Verification verification;  ///< the firmware on the host and QEMU against the simulator
  /// Flash and RAM per CPU (model + kernels, unused sections removed); empty when
  /// its cross compiler (arm-none-eabi-gcc, riscv64-unknown-elf-gcc) is missing.
  std::vector<std::pair<std::string, FirmwareSize>> sizes;
  /// The same model at int16, per CPU of `sizes` (FirmwareOptions::compare_int16); empty when
  /// it was not compared (no int8 weights, no verification, no cross compiler).
  std::vector<FirmwareCost> int16;
  /// Where this firmware is larger in flash or takes more instructions than its int16 twin:
  /// by how much, why (weight bytes saved against the code and tables the int8 kernels add;
  /// the conversions between int8 and int16 values) and the advice to lower at int16. Empty
  /// when int8 pays for itself on every CPU compared (or nothing was compared).
  std::string advice;
  /// Accuracy, verification and one row per CPU (flash, RAM, instructions per inference and,
  /// for firmware that trains, per training step, bit-exact), as text.
  std::string report() const;
};

/// A module to verified firmware in `dir` (see the top of this header). `calibration` and
/// `evaluation` stack samples along dim 0 ([N, ...features] for a model traced with batch 1);
/// the model is traced in eval mode (each module's mode restored afterwards) with
/// `calibration[0:1]` as its example. An undefined `evaluation` measures no accuracy and
/// verifies the firmware on calibration samples (auto_precision needs it). The errors of the
/// steps: ShapeError for data the model does not take, ValueError for ops that do not lower
/// or bad options, IoError when files cannot be written.
Firmware to_firmware(nn::Module& model, const Tensor& calibration, const Tensor& evaluation, const std::string& dir,
                     const FirmwareOptions& options = {});
/// The same from a traced (or loaded: lower::load) graph; the data stacks inputs of the
/// graph's input shape.
Firmware to_firmware(const Graph& graph, const Tensor& calibration, const Tensor& evaluation, const std::string& dir,
                     const FirmwareOptions& options = {});

}  // namespace microtorch::lower
