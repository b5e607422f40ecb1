// Lowering test helpers: a fresh folder per firmware, shell runs, and the firmware check
// (tools/mcu/run_firmware_qemu.sh: host, UBSan/ASan host, Cortex-M4 and M0 against the
// simulator).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/simulate.hpp"

namespace lower_testing {

namespace lower = microtorch::lower;

// <tmp>/microtorch-test-lower-<pid>/<name>: emptied first; one root per test process, so that
// suites running at the same time (two checkouts, the sanitizer builds) never share a folder.
inline std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("microtorch-test-lower-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline bool have_tool(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0; }

struct Run {
  int status;
  std::string out;
};
inline Run run(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  return {pclose(pipe), out};
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), {}};
}

// tools/mcu/run_firmware_qemu.sh on an emitted folder with a check program and expected.txt.
inline void check_firmware_folder(const std::string& dir, const std::string& name) {
  const Run r = run(fmt::format("bash '{}/tools/mcu/run_firmware_qemu.sh' '{}' {}", MICROTORCH_SOURCE_DIR, dir, name));
  INFO(r.out);
  CHECK(r.status == 0);
  REQUIRE(r.out.find("run_firmware_qemu: PASS") != std::string::npos);
  MESSAGE(r.out.substr(r.out.rfind("run_firmware_qemu:")));
}

// Emits the firmware and a check program for `inputs`, then runs tools/mcu/run_firmware_qemu.sh.
inline void check_firmware(const lower::Program& p, const std::vector<std::vector<std::int64_t>>& inputs) {
  const std::string dir = temp_dir(p.name);
  lower::emit_c(p, dir);
  lower::emit_check(p, inputs, dir);
  lower::Simulator sim(p);
  std::ofstream(dir + "/expected.txt") << lower::expected_check_output(sim, inputs);
  check_firmware_folder(dir, p.name);
}

}  // namespace lower_testing
