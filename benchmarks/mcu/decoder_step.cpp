// microtorch-mcu-decoder-bench — a decoder's step (lower::lower_decoder) for a model the size
// of llama2.c's stories260K (d_model 64, 5 layers, 8 query heads over 4 key/value heads,
// SwiGLU 172, vocabulary 512, tied embeddings, RoPE; random weights under a fixed seed), with
// a key/value cache of 128 positions, measured on emulated Cortex-M4, M7 and M55: the
// instructions of one generated token at context 128, flash, and RAM (arena + caches).
//
// Per token at context 128: the check program of the firmware (lower::emit_check) with
// -DCHECK_RUNS=1 steps once through its tokens from <name>_reset (then one more step from a
// reset, printed); built for 127 and for 128 tokens (CHECK_DIR, one folder each), the
// difference of the two whole-program counts under the counting plugin
// (src/lower/firmware/insncount.c) is the 128th step alone: the token at position 127, whose
// attention reads the 128 cached positions, the most any step of this firmware does. Both
// programs' output must equal the simulator's. Flash from lower::firmware_size (`make size`,
// Cortex-M4); the int16 weights (about 600 KB) do not fit the 512 KB of flash of QEMU's
// Cortex-M55 board (mps3-an547) and are not run there.
//
//   microtorch-mcu-decoder-bench [--out FILE] [--work DIR] [--jobs N] [--source DIR]
#include <sys/wait.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "microtorch/lower/decoder.hpp"
#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/microtorch.hpp"
#include "microtorch/nn.hpp"
#include "../firmware_bench.hpp"

namespace mt = microtorch;
namespace lower = microtorch::lower;
namespace nn = microtorch::nn;
namespace fs = std::filesystem;

#ifndef MICROTORCH_SOURCE_DIR
#define MICROTORCH_SOURCE_DIR "."
#endif

namespace {

constexpr std::int64_t kContext = 128;

nn::DecoderConfig stories260k() {
  nn::DecoderConfig c;
  c.vocab_size = 512, c.d_model = 64, c.num_layers = 5, c.num_heads = 8, c.num_kv_heads = 4, c.max_seq_len = 256;
  c.dim_feedforward = 172, c.tie_weights = true;
  return c;
}

struct Target {
  const char *label, *cpu;
};
constexpr Target kTargets[] = {{"Cortex-M4", "cortex-m4"}, {"Cortex-M7", "cortex-m7"}, {"Cortex-M55", "cortex-m55"}};
constexpr std::size_t kNumTargets = sizeof kTargets / sizeof kTargets[0];

struct Job {
  int weight_bits = 16, cache_bits = 16;
  lower::Program program;
  std::string dir, expected;
  std::int64_t insns[kNumTargets] = {};  // -1: not run (does not fit)
  lower::FirmwareSize size;
  std::string error;
  std::string id() const { return fmt::format("stories_w{}_c{}", weight_bits, cache_bits); }
};

int sh(const std::string& cmd, const std::string& log) {
  const int rc = std::system(fmt::format("{} >'{}' 2>&1", cmd, log).c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The whole-program instruction count of the CHECK_RUNS=1 program for the tokens in
// dir/check<n> on `t`, its output checked; -1 and j.error on failure.
std::int64_t count(Job& j, const Target& t, int n, const std::string& plugin) {
  const std::string& d = j.dir;
  const std::string b = fmt::format("build/{}-{}", t.cpu, n);
  const std::string log = fmt::format("{}/build-{}-{}.log", d, t.cpu, n);
  if (sh(fmt::format("make --no-print-directory -C '{}' CPU={} B={} CHECK_DIR=check{} {}/count1.elf", d, t.cpu, b, n, b),
         log)) {
    j.error = fmt::format("{} build failed: {}", t.cpu, slurp(log));
    return -1;
  }
  const std::string qemu_log = fmt::format("{}/qemu-{}.txt", d, t.cpu);
  if (sh(fmt::format("make --no-print-directory -s -C '{}' CPU={} qemu-command", d, t.cpu), qemu_log)) {
    j.error = fmt::format("{}: no QEMU command: {}", t.cpu, slurp(qemu_log));
    return -1;
  }
  std::string qemu = slurp(qemu_log);
  while (!qemu.empty() && std::isspace(static_cast<unsigned char>(qemu.back()))) qemu.pop_back();
  const std::string out = fmt::format("{}/run-{}-{}.txt", d, t.cpu, n), insns = fmt::format("{}/insns-{}-{}.txt", d, t.cpu, n);
  const int rc = sh(fmt::format("timeout 900 {} -display none -serial null -monitor none -semihosting-config "
                                "enable=on,target=native -plugin '{}' -d plugin -D '{}' -kernel '{}/{}/count1.elf' </dev/null",
                                qemu, plugin, insns, d, b),
                    out);
  if (rc != 0 || slurp(out) != j.expected) {
    j.error = fmt::format("{}: exit {}, output (want '{}'): {}", t.cpu, rc, j.expected, slurp(out));
    return -1;
  }
  unsigned long long v = 0;
  if (std::sscanf(slurp(insns).c_str(), "insns: %llu", &v) != 1) {
    j.error = "no instruction count in " + insns;
    return -1;
  }
  return static_cast<std::int64_t>(v);
}

void measure(Job& j, const std::string& plugin) {
  for (std::size_t t = 0; t < kNumTargets; ++t) {
    j.insns[t] = -1;
    if (j.weight_bits == 16 && std::string(kTargets[t].cpu) == "cortex-m55") continue;  // flash
    const std::int64_t a = count(j, kTargets[t], kContext - 1, plugin);
    if (a < 0) return;
    const std::int64_t b = count(j, kTargets[t], kContext, plugin);
    if (b < 0) return;
    j.insns[t] = b - a;
  }
  try {
    j.size = lower::firmware_size(j.program, j.dir, "cortex-m4");
  } catch (const std::exception& e) {
    j.error = e.what();
  }
}

int usage(const char* argv0) {
  std::cerr << fmt::format(
      "usage: {} [--out FILE] [--work DIR] [--jobs N] [--source DIR]\n"
      "  --out FILE     also write the markdown table to FILE\n"
      "  --work DIR     work folder, emptied first (refused if it holds other files; default: <tmp>/microtorch-mcu-decoder-bench)\n"
      "  --jobs N       parallel builds and emulator runs (default 2)\n"
      "  --source DIR   microtorch source tree, for src/lower/firmware/insncount.c (default: {})\n",
      argv0, MICROTORCH_SOURCE_DIR);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_file, source = MICROTORCH_SOURCE_DIR;
  std::string work = (fs::temp_directory_path() / "microtorch-mcu-decoder-bench").string();
  int jobs = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) std::exit(usage(argv[0]));
      return argv[++i];
    };
    if (a == "--out") out_file = value();
    else if (a == "--work") work = value();
    else if (a == "--jobs") jobs = std::max(1, std::atoi(value().c_str()));
    else if (a == "--source") source = value();
    else return usage(argv[0]);
  }
  for (const char* tool : {"gcc", "arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm", "timeout"}) {
    if (std::system(fmt::format("command -v {} >/dev/null 2>&1", tool).c_str()) != 0) {
      std::cerr << fmt::format("microtorch-mcu-decoder-bench: {} not found (tools/install-deps.sh installs it)\n", tool);
      return 2;
    }
  }
  const std::string plugin_src = source + "/src/lower/firmware/insncount.c";
  if (!fs::exists(plugin_src)) {
    std::cerr << fmt::format("microtorch-mcu-decoder-bench: {} not found (pass --source)\n", plugin_src);
    return 2;
  }
  if (!prepare_work_folder(work, "microtorch-mcu-decoder-bench")) return 2;
  const std::string plugin = work + "/libinsncount.so";
  if (sh(fmt::format("gcc -O2 -shared -fPIC -o '{}' '{}'", plugin, plugin_src), work + "/plugin.log")) {
    std::cerr << "microtorch-mcu-decoder-bench: building the plugin failed; see " << work << "/plugin.log\n";
    return 1;
  }

  // Lowering on the host: the model's weights N(0, 0.1) (norms left at 1), calibrated on two
  // random windows of 128 tokens; the tokens a greedy generation from token 1 (the simulator).
  mt::NoGradGuard no_grad;
  std::vector<Job> all;
  for (const auto& [wb, cb] : {std::pair{16, 16}, std::pair{8, 16}, std::pair{16, 8}, std::pair{8, 8}}) {
    mt::manual_seed(11);
    nn::DecoderLM model(stories260k());
    mt::manual_seed(7);
    for (auto& [name, p] : model.named_parameters()) {
      if (name.find("norm") == std::string::npos) p.copy_(mt::randn(p.shape()) * 0.1);
    }
    model.eval();
    Job j;
    j.weight_bits = wb, j.cache_bits = cb;
    j.program = lower::lower_decoder(model, mt::randint(0, 512, {2, kContext}),
                                     {.weight_bits = wb, .cache_bits = cb, .capacity = kContext, .name = "stories"});
    j.dir = work + "/" + j.id();
    lower::emit_c(j.program, j.dir);
    lower::Simulator sim(j.program);
    const std::vector<std::int64_t> tokens = lower::greedy_generate(sim, {1}, kContext - 1);
    for (const std::int64_t n : {kContext - 1, kContext}) {
      std::vector<std::vector<std::int64_t>> inputs;
      for (std::int64_t i = 0; i < n; ++i) inputs.push_back({tokens[static_cast<std::size_t>(i)]});
      lower::emit_check(j.program, inputs, fmt::format("{}/check{}", j.dir, n));
    }
    sim.reset();  // the check program's printed line: the first token's step from a reset
    j.expected = lower::expected_check_output(sim, {{tokens[0]}});
    all.push_back(std::move(j));
  }
  std::atomic<std::size_t> next{0};
  std::mutex progress;
  std::vector<std::thread> workers;
  for (int w = 0; w < jobs; ++w) {
    workers.emplace_back([&] {
      for (std::size_t i; (i = next++) < all.size();) {
        measure(all[i], plugin);
        std::lock_guard<std::mutex> lock(progress);
        std::cerr << fmt::format("  {} {}\n", all[i].id(), all[i].error.empty() ? "ok" : "FAILED: " + all[i].error);
      }
    });
  }
  for (auto& t : workers) t.join();

  std::string table = "| weights | caches |";
  for (const Target& t : kTargets) table += fmt::format(" {} |", t.label);
  table += " flash B (M4) | RAM B (arena + caches) | arena B | caches B |\n|---|---|";
  for (std::size_t t = 0; t < kNumTargets; ++t) table += "---:|";
  table += "---:|---:|---:|---:|\n";
  int failures = 0;
  for (const Job& j : all) {
    failures += !j.error.empty();
    table += fmt::format("| int{} | int{} |", j.weight_bits, j.cache_bits);
    for (std::size_t t = 0; t < kNumTargets; ++t) {
      table += !j.error.empty() ? " failed |" : j.insns[t] < 0 ? " (does not fit) |" : fmt::format(" {} |", thousands(j.insns[t]));
    }
    const std::int64_t state = j.program.decoding->state_bytes;
    table += fmt::format(" {} | {} | {} | {} |\n", thousands(j.size.flash()), thousands(j.program.arena_bytes + state),
                         thousands(j.program.arena_bytes), thousands(state));
  }
  std::cout << table << std::flush;
  if (!out_file.empty()) {
    std::ofstream f(out_file);
    f << table;
  }
  return failures ? 1 : 0;
}
