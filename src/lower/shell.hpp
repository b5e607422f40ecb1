// Running the tools the lowering checks firmware with (make, cc, the cross compilers, QEMU):
// one command through /bin/sh, its output captured.
#pragma once

#include <string>

namespace microtorch::lower::detail {

struct CommandResult {
  int status = -1;  ///< 0 on success (pclose's status otherwise)
  std::string out;  ///< stdout and stderr together
};
/// Runs `cmd` with /bin/sh, stderr merged into stdout. IoError when it cannot be started.
CommandResult run_command(const std::string& cmd, const char* who);
/// Whether `program` is on PATH.
bool have_program(const std::string& program);
/// The cross tools that build and run firmware for a CPU: Arm Cortex-M (arm-none-eabi-gcc,
/// qemu-system-arm) or, for a RISC-V ISA name such as rv32imc, riscv64-unknown-elf-gcc and
/// qemu-system-riscv32 (src/lower/firmware/targets.sh).
struct CrossTools {
  const char* cc;        ///< the cross compiler
  const char* size;      ///< its size program
  const char* qemu;      ///< the emulator
  const char* packages;  ///< the Debian packages that hold them, for messages
};
CrossTools cross_tools(const std::string& cpu);
/// ValueError naming `who` unless `cpu` is a CPU name (letters, digits, '-', '+', '.'), so
/// that it can go on a command line as it is.
void check_cpu_name(const std::string& cpu, const char* who);
/// Whether the core has a single-precision FPU (the float32 programs' cores): every Cortex-M
/// but cortex-m0, cortex-m0plus and cortex-m3; a RISC-V core with the F extension (rv32imafc).
bool cpu_has_fpu(const std::string& cpu);
/// `s` as one single-quoted /bin/sh word.
std::string shell_quote(const std::string& s);

}  // namespace microtorch::lower::detail
