// verify — an emitted firmware against the simulator, through src/lower/firmware/run_firmware_qemu.sh.
#include "microtorch/lower/verify.hpp"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "microtorch/io.hpp"
#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/simulate.hpp"
#include "shell.hpp"

namespace microtorch::lower {

namespace fs = std::filesystem;

namespace {

// The check script: $MICROTORCH_RUN_FIRMWARE_QEMU, else the source tree's, else the installed one.
std::string check_script() {
  if (const char* e = std::getenv("MICROTORCH_RUN_FIRMWARE_QEMU"); e && *e) return e;
  for (const char* p : {MICROTORCH_RUN_FIRMWARE_SOURCE, MICROTORCH_RUN_FIRMWARE_INSTALLED}) {
    if (fs::is_regular_file(p)) return p;
  }
  throw IoError(fmt::format("verify: the check script is missing (looked for {} and {}); set "
                            "MICROTORCH_RUN_FIRMWARE_QEMU to src/lower/firmware/run_firmware_qemu.sh",
                            MICROTORCH_RUN_FIRMWARE_SOURCE, MICROTORCH_RUN_FIRMWARE_INSTALLED));
}

// Empties `work` when it is empty or one of ours; refuses anything else.
void prepare_work(const std::string& work) {
  const fs::path marker = fs::path(work) / ".microtorch-verify";
  if (fs::exists(work) && (!fs::is_directory(work) || (!fs::is_empty(work) && !fs::exists(marker)))) {
    throw ValueError(fmt::format("verify: the work folder {} holds other files; pass an empty or new folder "
                                 "(VerifyOptions::work)",
                                 work));
  }
  fs::remove_all(work);
  fs::create_directories(work);
  write_file(marker.string(), "work folder of microtorch::lower::verify; emptied on every run\n", "verify");
}

std::string default_work(const std::string& dir) {
  fs::path d(dir);
  if (!d.has_filename()) d = d.parent_path();  // "out/fw/" -> "out/fw"
  return d.string() + ".verify";
}

}  // namespace

std::int64_t Verification::instructions(const std::string& cpu) const {
  for (const CpuCheck& c : cpus) {
    if (c.cpu == cpu) return c.instructions;
  }
  return -1;
}

std::string Verification::summary() const {
  if (!host && !passed && log.empty()) return "not verified: " + skipped;
  std::string ran = "host, UBSan/ASan host";
  for (const CpuCheck& c : cpus) {
    ran += ", " + c.cpu + (c.identical ? "" : " (DIFFERS)");
    if (c.instructions >= 0) ran += fmt::format(" ({} instructions)", c.instructions);
  }
  std::string s = fmt::format("{} on {} inputs: {}{}", passed ? "verified" : "FAILED", inputs, ran,
                              passed ? " identical to the simulator" : fmt::format(" (see {}/verification.txt)", work));
  if (!skipped.empty()) s += "; skipped: " + skipped;
  return s;
}

Verification verify(const Program& program, const std::vector<std::vector<std::int64_t>>& inputs, const std::string& dir,
                    const VerifyOptions& options) {
  Verification v;
  v.inputs = static_cast<std::int64_t>(inputs.size());
  v.work = fs::absolute(options.work.empty() ? default_work(dir) : options.work).string();
  for (const std::string& cpu : options.cpus) detail::check_cpu_name(cpu, "verify");
  if (!fs::is_regular_file(fs::path(dir) / (program.name + ".c"))) {
    throw IoError(fmt::format("verify: {}/{}.c is missing; emit_c(program, \"{}\") writes the firmware first", dir,
                              program.name, dir));
  }
  for (const char* tool : {"make", "cc"}) {
    if (!detail::have_program(tool)) {
      v.skipped = fmt::format("{} not found: the host steps need make and cc (tools/install-deps.sh installs them)", tool);
      return v;
    }
  }
  std::vector<std::string> cpus = options.cpus;
  if (!cpus.empty()) {
    for (const char* tool : {"arm-none-eabi-gcc", "qemu-system-arm"}) {
      if (!detail::have_program(tool)) {
        v.skipped = fmt::format("{}: {} not found (tools/install-deps.sh installs gcc-arm-none-eabi, "
                                "picolibc-arm-none-eabi and qemu-system-arm)",
                                fmt::join(cpus, ", "), tool);
        cpus.clear();
        break;
      }
    }
  }

  prepare_work(v.work);
  emit_check(program, inputs, v.work);
  Simulator sim(program);
  write_file(v.work + "/expected.txt", expected_check_output(sim, inputs), "verify");
  const detail::CommandResult r = detail::run_command(
      fmt::format("CPUS={} COUNT_INSTRUCTIONS={} bash {} {} {} {}", detail::shell_quote(fmt::format("{}", fmt::join(cpus, " "))),
                  options.count_instructions ? 1 : 0, detail::shell_quote(check_script()), detail::shell_quote(dir),
                  program.name, detail::shell_quote(v.work)),
      "verify");
  v.log = r.out;
  write_file(v.work + "/verification.txt", v.log, "verify");
  if (r.status != 0 && r.out.find("no QEMU board for") != std::string::npos) {
    throw ValueError(fmt::format("verify: {}", r.out.substr(r.out.find("no QEMU board for"))));
  }
  for (const std::string& cpu : cpus) v.cpus.push_back({cpu, "", false, -1});
  std::istringstream lines(v.log);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find_first_not_of(' ');
    if (at == std::string::npos) continue;
    line = line.substr(at);
    const bool same = line.find("identical to the simulator") != std::string::npos;
    if (line.rfind("host: ", 0) == 0) v.host = same;
    if (line.rfind("UBSan/ASan host (no report): ", 0) == 0) v.sanitizer = same;
    for (CpuCheck& c : v.cpus) {
      if (line.rfind(c.cpu + " on ", 0) == 0) {
        c.board = line.substr(c.cpu.size() + 4, line.find(':') - c.cpu.size() - 4);
        c.identical = same;
      }
      const std::string key = "instructions per inference (" + c.cpu + "): ";
      if (line.rfind(key, 0) == 0) c.instructions = std::stoll(line.substr(key.size()));
    }
  }
  v.passed = r.status == 0 && v.host && v.sanitizer;
  return v;
}

}  // namespace microtorch::lower
