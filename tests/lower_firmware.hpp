// Lowering test helpers: a fresh folder per firmware, shell runs, and the firmware check
// (lower::verify: host, UBSan/ASan host and QEMU Cortex-M0/M4/M7/M33 against the simulator).
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
#include "microtorch/lower/verify.hpp"

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

// Emits the firmware and verifies it on `inputs` (lower::verify: host, UBSan/ASan host and
// QEMU Cortex-M0, M4, M7, M33 against the simulator).
inline void check_firmware(const lower::Program& p, const std::vector<std::vector<std::int64_t>>& inputs) {
  const std::string dir = temp_dir(p.name);
  lower::emit_c(p, dir);
  lower::VerifyOptions o;
  o.count_instructions = false;
  const lower::Verification v = lower::verify(p, inputs, dir, o);
  INFO(v.log);
  REQUIRE(v.passed);
  CHECK(v.skipped.empty());
  CHECK(v.cpus.size() == o.cpus.size());
  for (const lower::CpuCheck& c : v.cpus) CHECK(c.identical);
  MESSAGE(v.summary());
}

}  // namespace lower_testing
