#include "shell.hpp"

#include <cctype>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "microtorch/error.hpp"

namespace microtorch::lower::detail {

CommandResult run_command(const std::string& cmd, const char* who) {
  // stdin from /dev/null: QEMU reads its console from stdin, which is not the tools' to take
  // (a REPL or a pipe feeding the caller would lose its input)
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(("{ " + cmd + "\n} </dev/null 2>&1").c_str(), "r"), pclose);
  if (!pipe) throw IoError(fmt::format("{}: cannot run {}", who, cmd));
  CommandResult r;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe.get())) r.out += buf;
  r.status = pclose(pipe.release());
  return r;
}

bool have_program(const std::string& program) {
  return run_command("command -v " + shell_quote(program) + " >/dev/null", "have_program").status == 0;
}

CrossTools cross_tools(const std::string& cpu) {
  if (cpu.rfind("rv32", 0) == 0) {
    return {"riscv64-unknown-elf-gcc", "riscv64-unknown-elf-size", "qemu-system-riscv32",
            "gcc-riscv64-unknown-elf, picolibc-riscv64-unknown-elf and qemu-system-misc"};
  }
  return {"arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm",
          "gcc-arm-none-eabi, picolibc-arm-none-eabi and qemu-system-arm"};
}

void check_cpu_name(const std::string& cpu, const char* who) {
  for (const char c : cpu) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '+' && c != '.') {
      throw ValueError(fmt::format("{}: \"{}\" is not a CPU name such as cortex-m4 or rv32imc", who, cpu));
    }
  }
}

bool cpu_has_fpu(const std::string& cpu) {
  if (cpu.rfind("rv32", 0) == 0) return cpu.find('f', 4) != std::string::npos;  // the F extension: rv32imafc
  return cpu != "cortex-m0" && cpu != "cortex-m0plus" && cpu != "cortex-m3";
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace microtorch::lower::detail
