// benchmarks/firmware_bench.hpp — what the firmware benchmarks (benchmarks/lower,
// benchmarks/mcu) share: their command line; the work folder, emptied on every run but only
// when it is the benchmark's own (a marker file) or already empty, so a mistyped --work never
// deletes someone's files; the tools they need; the instruction-counting QEMU plugin and a
// counted, checked run of one program under it; a pool of worker threads; and counts printed
// with thousands separators.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <locale>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#ifndef MICROTORCH_SOURCE_DIR
#define MICROTORCH_SOURCE_DIR "."
#endif

// Runs `cmd` with its stdout and stderr into `log`; its exit status (-1: it did not run).
inline int sh(const std::string& cmd, const std::string& log) {
  const int rc = std::system(fmt::format("{} >'{}' 2>&1", cmd, log).c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The command line: each benchmark takes the options it lists, of these.
struct BenchArgs {
  std::string out_file;                   // --out FILE: also write the table there
  std::string work;                       // --work DIR (default <tmp>/<program>)
  std::string filter;                     // --filter TEXT: only the configurations whose id holds it
  std::string source = MICROTORCH_SOURCE_DIR;  // --source DIR: the microtorch source tree
  int jobs = 2;                           // --jobs N: builds and emulator runs at a time
  bool mcu = true;                        // --no-mcu: no cross-builds, no QEMU
};

// An option a benchmark takes: its flag with the value's name ("--jobs N"), and its help.
struct BenchOption {
  std::string flag, help;
};

// argv parsed into BenchArgs for `program`, which takes `options`; anything else, or an
// option without its value, prints the usage and exits with status 2.
inline BenchArgs parse_bench_args(int argc, char** argv, const std::string& program,
                                  std::initializer_list<BenchOption> options) {
  BenchArgs a;
  a.work = (std::filesystem::temp_directory_path() / program).string();
  auto usage = [&]() {
    std::string text = fmt::format("usage: {}", argv[0]);
    for (const BenchOption& o : options) text += fmt::format(" [{}]", o.flag);
    text += "\n";
    for (const BenchOption& o : options) text += fmt::format("  {:<14} {}\n", o.flag, o.help);
    std::cerr << text;
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const BenchOption* o = nullptr;
    for (const BenchOption& c : options) {
      if (c.flag.substr(0, c.flag.find(' ')) == arg) o = &c;
    }
    if (!o) usage();
    if (arg == "--no-mcu") {
      a.mcu = false;
      continue;
    }
    if (i + 1 >= argc) usage();
    const std::string v = argv[++i];
    if (arg == "--out") a.out_file = v;
    else if (arg == "--work") a.work = v;
    else if (arg == "--filter") a.filter = v;
    else if (arg == "--source") a.source = v;
    else if (arg == "--jobs") a.jobs = std::max(1, std::atoi(v.c_str()));
  }
  return a;
}

// Every one of `tools` on PATH; false, naming the first missing one (and `hint`), if not.
inline bool require_tools(const std::string& program, std::initializer_list<const char*> tools,
                          const std::string& hint = "") {
  for (const char* tool : tools) {
    if (std::system(fmt::format("command -v {} >/dev/null 2>&1", tool).c_str()) != 0) {
      std::cerr << fmt::format("{}: {} not found (tools/install-deps.sh installs it{})\n", program, tool, hint);
      return false;
    }
  }
  return true;
}

// Empties `work` (made absolute in place) for `program`; false, with a message, when the
// folder holds anything that is not this benchmark's.
inline bool prepare_work_folder(std::string& work, const std::string& program) {
  namespace fs = std::filesystem;
  const std::string marker = "." + program;
  if (fs::exists(work) && !fs::is_empty(work) && !fs::exists(fs::path(work) / marker)) {
    std::cerr << fmt::format("{}: {} is not empty and not a work folder of this benchmark; pass another --work\n",
                             program, work);
    return false;
  }
  fs::remove_all(work);
  fs::create_directories(work);
  std::ofstream(fs::path(work) / marker) << "work folder of " << program << "; emptied on every run\n";
  work = fs::absolute(work).string();
  return true;
}

// The instruction-counting plugin (src/lower/firmware/insncount.c of the source tree) built
// into `work`: its path, or "" with a message.
inline std::string build_count_plugin(const std::string& program, const std::string& work, const std::string& source) {
  const std::string src = source + "/src/lower/firmware/insncount.c";
  if (!std::filesystem::exists(src)) {
    std::cerr << fmt::format("{}: {} not found (pass --source)\n", program, src);
    return "";
  }
  const std::string plugin = work + "/libinsncount.so";
  if (sh(fmt::format("gcc -O2 -shared -fPIC -o '{}' '{}'", plugin, src), work + "/plugin.log")) {
    std::cerr << fmt::format("{}: building the plugin failed; see {}/plugin.log\n", program, work);
    return "";
  }
  return plugin;
}

// The QEMU command line for `cpu` of the firmware folder `dir` (its Makefile's
// `qemu-command`, output kept in `log`); "" and `error` on failure.
inline std::string qemu_command(const std::string& dir, const std::string& cpu, const std::string& log,
                                std::string& error) {
  if (sh(fmt::format("make --no-print-directory -s -C '{}' CPU={} qemu-command", dir, cpu), log)) {
    error = fmt::format("{}: no QEMU command: {}", cpu, slurp(log));
    return "";
  }
  std::string qemu = slurp(log);
  while (!qemu.empty() && std::isspace(static_cast<unsigned char>(qemu.back()))) qemu.pop_back();
  return qemu;
}

// Runs `elf` on `qemu` with the counting plugin (semihosting for its output and exit code,
// stopped after `timeout` seconds), its output into `out` and the count into `count`; the
// whole-program instruction count, or -1 and `error` when it exits non-zero, prints anything
// but `expected` (the simulator's output) or gives no count.
inline std::int64_t counted_run(const std::string& qemu, const std::string& plugin, const std::string& elf,
                                const std::string& out, const std::string& count, const std::string& expected,
                                int timeout, std::string& error) {
  const int rc = sh(fmt::format("timeout {} {} -display none -serial null -monitor none -semihosting-config "
                                "enable=on,target=native -plugin '{}' -d plugin -D '{}' -kernel '{}' </dev/null",
                                timeout, qemu, plugin, count, elf),
                    out);
  if (rc != 0) {
    error = fmt::format("{}: qemu exited with {}: {}", elf, rc, slurp(out));
    return -1;
  }
  if (slurp(out) != expected) {
    error = fmt::format("{}: the output differs from the simulator's (want '{}'): {}", elf, expected, slurp(out));
    return -1;
  }
  unsigned long long v = 0;
  if (std::sscanf(slurp(count).c_str(), "insns: %llu", &v) != 1) {
    error = "no instruction count in " + count;
    return -1;
  }
  return static_cast<std::int64_t>(v);
}

// work(i) for every i of `order`, `jobs` at a time on threads; then done(i), one at a time.
inline void run_parallel(const std::vector<std::size_t>& order, int jobs, const std::function<void(std::size_t)>& work,
                         const std::function<void(std::size_t)>& done) {
  std::atomic<std::size_t> next{0};
  std::mutex lock;
  std::vector<std::thread> workers;
  for (int w = 0; w < jobs; ++w) {
    workers.emplace_back([&] {
      for (std::size_t k; (k = next++) < order.size();) {
        work(order[k]);
        std::lock_guard<std::mutex> hold(lock);
        done(order[k]);
      }
    });
  }
  for (auto& t : workers) t.join();
}

// 1,503,402: the classic locale with comma grouping by threes.
inline std::string thousands(long long v) {
  struct Grouping : std::numpunct<char> {
    char do_thousands_sep() const override { return ','; }
    std::string do_grouping() const override { return "\3"; }
  };
  static const std::locale grouped(std::locale::classic(), new Grouping);
  return fmt::format(grouped, "{:L}", v);
}
