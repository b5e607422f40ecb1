/// \file
/// Step 6 of the lowering pipeline: prove that an emitted firmware computes what the
/// simulator computes, on the host and on emulated Cortex-M CPUs, and count its instructions.
///
/// \code
///   lower::emit_c(program, "out/fw");
///   lower::Verification v = lower::verify(program, inputs, "out/fw");   // inputs: quantize_input() rows
///   fmt::print("{}\n", v.summary());   // "verified on 16 inputs: host, UBSan/ASan host, cortex-m0 (41,210
///                                      //  instructions), cortex-m4 (...) ... identical to the simulator"
/// \endcode
///
/// The check program, the simulator's expected output and every build go to a work folder
/// beside the firmware folder (`<dir>.verify`), so the firmware folder keeps only what goes
/// into an MCU project. The steps are src/lower/firmware/run_firmware_qemu.sh (installed as
/// `microtorch-run-firmware-qemu`): warning-free C99 builds, the host build and the same under
/// UBSan/ASan, then each CPU's build on its QEMU board, every one printing the simulator's
/// integers; instructions per inference from QEMU's counting plugin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "microtorch/lower/program.hpp"

namespace microtorch::lower {

/// What verify() checks and where it works.
struct VerifyOptions {
  /// The CPUs to build for and run on QEMU: cortex-m0, cortex-m0plus and cortex-m3 (board
  /// mps2-an385), cortex-m4 (mps2-an386), cortex-m7 (mps2-an500), cortex-m33 (mps2-an505),
  /// cortex-m55 (mps3-an547).
  /// Empty: the host steps only.
  std::vector<std::string> cpus{"cortex-m0", "cortex-m4", "cortex-m7", "cortex-m33"};
  /// Also count instructions per inference on each CPU (two extra QEMU runs per CPU).
  bool count_instructions = true;
  /// The work folder: check program, expected output, builds, log. Default `<dir>.verify`.
  /// Emptied first, but only when it is empty or a work folder verify() made (ValueError
  /// otherwise: nothing of the user's is deleted).
  std::string work;
};

/// One CPU's result.
struct CpuCheck {
  std::string cpu;                 ///< "cortex-m4"
  std::string board;               ///< the QEMU board it ran on, "mps2-an386"
  bool identical = false;          ///< printed the simulator's integers for every input
  std::int64_t instructions = -1;  ///< per inference (QEMU counting plugin); -1 when not counted
};

/// What verify() found.
struct Verification {
  std::int64_t inputs = 0;       ///< how many inputs the firmware ran
  bool host = false;             ///< the host build (cc -O2) printed the simulator's integers
  bool sanitizer = false;        ///< so did the UBSan/ASan build, with no report
  std::vector<CpuCheck> cpus;    ///< one per CPU that was built and run
  /// What could not run and why ("QEMU and arm-none-eabi-gcc not found: ..."); empty when
  /// everything asked for ran.
  std::string skipped;
  std::string work;  ///< the work folder
  std::string log;   ///< the check's whole output (also `<work>/verification.txt`)
  /// Every step that ran (at least the host steps) agreed with the simulator, and every
  /// count asked for was made.
  bool passed = false;
  /// Instructions per inference on `cpu`, -1 when it was not counted.
  std::int64_t instructions(const std::string& cpu) const;
  /// One line: what ran, what agreed, instruction counts, what was skipped.
  std::string summary() const;
};

/// Runs the firmware emit_c() wrote to `dir` on `inputs` (rows of integers for the input
/// buffer, from quantize_input()) on the host and on QEMU for each CPU of `options`, and
/// compares every output with the simulator's. CPUs are skipped, and said so in `skipped`,
/// when arm-none-eabi-gcc or qemu-system-arm is missing; the host steps need make and cc.
/// ShapeError for an input of the wrong size, ValueError for an unknown CPU or a work folder
/// that is not verify()'s, IoError when files cannot be written or the check script is not
/// found (MICROTORCH_RUN_FIRMWARE_QEMU names it explicitly).
Verification verify(const Program& program, const std::vector<std::vector<std::int64_t>>& inputs,
                    const std::string& dir, const VerifyOptions& options = {});

}  // namespace microtorch::lower
