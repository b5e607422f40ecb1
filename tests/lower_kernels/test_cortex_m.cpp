// Every runtime kernel (src/lower/runtime) bit-exact between the host and emulated Cortex-M0,
// M4, M7, M33, M55 and RISC-V rv32imc, rv32imac and rv32imafc, and UBSan/ASan-clean on the host:
// tools/mcu/run_kernels_qemu.sh.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <doctest/doctest.h>

#ifndef MICROTORCH_SOURCE_DIR
#define MICROTORCH_SOURCE_DIR "."
#endif

namespace {
bool have_tool(const char* name) {
  return std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0;
}
}  // namespace

TEST_CASE("lower kernels: bit-exact on emulated Cortex-M0, M4, M7, M33, M55, rv32imc, rv32imac and rv32imafc (QEMU), UBSan-clean "
          "on the host") {
  for (const char* tool : {"arm-none-eabi-gcc", "qemu-system-arm", "riscv64-unknown-elf-gcc", "qemu-system-riscv32"}) {
    if (!have_tool(tool)) {
      MESSAGE("skipped: " << tool << " not installed (tools/install-deps.sh adds it)");
      return;
    }
  }
  // compiles the kernels for cortex-m0/m4/m7/m33/m55 (-Werror, no division or float helpers
  // on M0), runs tools/mcu/kernel_vectors.c on the host, under UBSan+ASan, and under QEMU on
  // mps2-an385 (M0 code: the portable C) and, with the DSP variants, on mps2-an386 (M4),
  // mps2-an500 (M7), mps2-an505 (M33) and mps3-an547 (M55), the M4 build also at -O0 (a
  // frame pointer: the inline assembly's registers), with the RISC-V variants on QEMU's virt
  // board as rv32imc, rv32imac and rv32imafc cores, and compares the outputs byte for byte
  const std::string cmd = std::string("bash '") + MICROTORCH_SOURCE_DIR + "/tools/mcu/run_kernels_qemu.sh' 2>&1";
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  const int status = pclose(pipe);
  INFO(cmd << "\n" << out);
  CHECK(status == 0);
  CHECK(out.find("run_kernels_qemu: PASS (host == UBSan/ASan host == cortex-m0 == cortex-m4 (-O2, -O0, switches off) == cortex-m7 == "
                 "cortex-m33 == cortex-m55 == rv32imc == rv32imac == rv32imafc)") != std::string::npos);
}
