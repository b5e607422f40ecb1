/// \file
/// Steps 4 and 5 of the lowering pipeline: write a Program as a C99 firmware folder and
/// report its costs.
///
/// \code
///   lower::emit_c(program, "out/fw");   // out/fw/model.h, model.c, mt_kernels.h, mt_kernels.c,
///                                       // model_report.txt, Makefile
///   fmt::print("{}", lower::report(program));
///   lower::FirmwareSize s = lower::firmware_size(program, "out/fw", "cortex-m0");
///   // firmware:  int16_t y[MODEL_OUTPUT_SIZE];  int status = model_run(x, y);
/// \endcode
///
/// The emitted code has no malloc, no stdio and no float (a float convenience wrapper is
/// compiled only with `-D<NAME>_FLOAT_API`), keeps weights in `static const` arrays (flash),
/// places every intermediate in one static arena planned by plan_memory(), and compiles
/// warning-free with -std=c99 -Wall -Wextra -Wconversion -Werror (gcc, and arm-none-eabi-gcc
/// for Cortex-M0/M4/M7). The kernels are src/lower/runtime/mt_kernels.{h,c}, copied verbatim.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "microtorch/lower/program.hpp"
#include "microtorch/lower/simulate.hpp"

namespace microtorch::lower {

/// Writes `<dir>/<name>.h`, `<name>.c`, `mt_kernels.h`, `mt_kernels.c`, `<name>_report.txt`
/// (report() + formats + memory plan) and `Makefile`, the build recipe for Cortex-M and the
/// host that firmware_size(), src/lower/firmware/run_firmware_qemu.sh and the MCU benchmark use
/// (`make size CPU=cortex-m0`, `make check-elf`, `make count-elfs`, `make host`, `make san`);
/// creates `dir`. ValueError for a program name that cannot name a firmware
/// (check_firmware_name), IoError when a directory or file cannot be written.
void emit_c(const Program& program, const std::string& dir);

/// Writes `<dir>/<name>_check.c`: a main() that runs the firmware on each input (integers
/// of the input buffer) and prints one line per input, `<index> <status>: <outputs...>`.
/// Compiled with -DCHECK_RUNS=n it runs the first input n times and prints its line only
/// (for counting instructions: the difference of n = 2 and n = 1 is one inference).
/// ShapeError for an input whose size differs from the input buffer's, IoError when the
/// file cannot be written.
void emit_check(const Program& program, const std::vector<std::vector<std::int64_t>>& inputs, const std::string& dir);
/// What that program must print, computed by the simulator.
std::string expected_check_output(Simulator& sim, const std::vector<std::vector<std::int64_t>>& inputs);

/// Per step: kernel, what it computes, output format, MACs and weight bytes; then totals
/// (MACs, weight and table bytes, arena bytes).
std::string report(const Program& program);

/// Section sizes of the linked firmware in bytes, as arm-none-eabi-size -A reports them.
struct FirmwareSize {
  ///@{
  /// Bytes of code and read-only data (.text, .rodata, .init, .fini: the weights are here),
  /// of initialised data (.data) and of zeroed data (.bss: the arena).
  std::int64_t text = 0, data = 0, bss = 0;
  ///@}
  /// Flash: text + data (initialised data is stored in flash and copied to RAM at start).
  std::int64_t flash() const { return text + data; }
  /// RAM: data + bss.
  std::int64_t ram() const { return data + bss; }
};
/// Flash and RAM of the firmware from arm-none-eabi-size: model + kernels linked for `cpu`
/// with unused sections removed (entry point `<name>_run`), by the emitted folder's Makefile
/// (`make size CPU=<cpu>`). Needs the folder emit_c() wrote to `dir`. ValueError for a `cpu`
/// that is not a CPU name (letters, digits, '-', '+', '.'), IoError when the link fails
/// (make, gcc-arm-none-eabi or picolibc missing: tools/install-deps.sh installs them).
FirmwareSize firmware_size(const Program& program, const std::string& dir, const std::string& cpu = "cortex-m4");

/// The text of the runtime's mt_kernels.h, embedded at build time (the emitter's copy of
/// src/lower/runtime/mt_kernels.h).
const char* runtime_header();
/// The text of the runtime's mt_kernels.c, embedded at build time like runtime_header().
const char* runtime_source();
/// The text of the firmware folder's Makefile (src/lower/firmware/Makefile.in), embedded at
/// build time like runtime_header(), with `@NAME@` where emit_c() puts the firmware's name.
const char* firmware_makefile_template();

}  // namespace microtorch::lower
