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
/// The emitted code has no malloc, no stdio and no float arithmetic (a float convenience
/// wrapper is compiled only with `-D<NAME>_FLOAT_API`; an input with a format per channel
/// exports its scales as `const float <name>_input_scales[]`), keeps weights in `static const` arrays (flash),
/// places every intermediate in one static arena planned by plan_memory(), and compiles
/// warning-free with -std=c99 -Wall -Wextra -Wconversion -Werror (gcc, arm-none-eabi-gcc
/// for Cortex-M0 to M55, riscv64-unknown-elf-gcc for rv32imc, rv32imac, rv32imafc). The kernels are src/lower/runtime/mt_kernels.{h,c}, copied verbatim.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "microtorch/lower/program.hpp"
#include "microtorch/lower/simulate.hpp"

namespace microtorch::lower {

/// Writes `<dir>/<name>.h`, `<name>.c`, `mt_kernels.h`, `mt_kernels.c`, `<name>_report.txt`
/// (report() + formats + memory plan) and `Makefile`, the build recipe for Cortex-M, RISC-V and the
/// host that firmware_size(), src/lower/firmware/run_firmware_qemu.sh and the MCU benchmark use
/// (`make size CPU=cortex-m0`, `make check-elf CPU=rv32imc`, `make count-elfs`, `make host`,
/// `make san`, `make run MAIN=app.c`);
/// creates `dir`. ValueError for a program name that cannot name a firmware
/// (check_firmware_name), IoError when a directory or file cannot be written.
void emit_c(const Program& program, const std::string& dir);

/// One training step's data for a check program: the batch's inputs (the input buffer's
/// integers of each sample, one sample after the other; a float32 program's are the floats'
/// IEEE bits) and targets (class indices, or the bits of float targets), as
/// Simulator::train_step takes them after quantize_input.
struct TrainingBatch {
  std::vector<std::int64_t> inputs;   ///< Training::batch samples of the input buffer's size
  std::vector<std::int64_t> targets;  ///< Training::batch samples of the target buffer's size
};

/// Writes `<dir>/<name>_check.c`: a main() that runs the firmware on each input (integers
/// of the input buffer; a float32 program's floats given by their bits) and prints one line
/// per input, `<index> <status>: <outputs...>` (a float output as its bits in hex). With
/// `training` (a program with a training step) it then takes one training step per batch,
/// printing `train <k>: <loss bits>`, runs the inputs again (`after <index> ...`) and prints
/// an FNV-1a hash of the trained parameters' blob. Compiled with -DCHECK_RUNS=n it runs the
/// first input n times and prints its line only (for counting instructions: the difference
/// of n = 2 and n = 1 is one inference); with -DCHECK_TRAIN_RUNS=n, the first batch's
/// training step n times. ShapeError for an input or batch whose size differs from the
/// program's, IoError when the file cannot be written.
void emit_check(const Program& program, const std::vector<std::vector<std::int64_t>>& inputs, const std::string& dir,
                const std::vector<TrainingBatch>& training = {});
/// What that program must print, computed by the simulator (which takes the training steps).
std::string expected_check_output(Simulator& sim, const std::vector<std::vector<std::int64_t>>& inputs,
                                  const std::vector<TrainingBatch>& training = {});

/// Per step: kernel, what it computes, output format, MACs and weight bytes; then totals
/// (MACs, weight and table bytes, arena bytes).
std::string report(const Program& program);

/// Section sizes of the linked firmware in bytes, as the cross size program's -A reports them.
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
/// Flash and RAM of the firmware from arm-none-eabi-size (riscv64-unknown-elf-size for a RISC-V
/// `cpu` such as rv32imc): model + kernels linked for `cpu`
/// with unused sections removed (entry point `<name>_run`), by the emitted folder's Makefile
/// (`make size CPU=<cpu>`). Needs the folder emit_c() wrote to `dir`. ValueError for a `cpu`
/// that is not a CPU name (letters, digits, '-', '+', '.'), IoError when the link fails
/// (make, the cross compiler or picolibc missing: tools/install-deps.sh installs them).
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
