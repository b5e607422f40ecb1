// microtorch-mcu-bench — reference attention blocks lowered to fixed-point firmware and
// measured on emulated Cortex-M0 and M4: instructions per inference, flash, arena and RAM; on
// Cortex-M4 both the portable C kernels (-DMT_NO_DSP) and the DSP variants, so the "before"
// and "after" come from one run; streaming vs two-pass attention at L = 128.
//
// Every configuration is a model traced, calibrated, quantized and emitted with the public
// lowering API (trace -> calibrate -> quantize -> emit_c):
//
//   MHA   nn::MultiheadAttention(E, H, batch_first) as self-attention on x [1, L, E]:
//         in_proj (one [3E, E] linear) -> H heads of scaled dot-product attention (head dim
//         P = E / H) -> out_proj. Weights: the module's own initialisation under a fixed seed.
//   SDPA  the attention core alone: x [1, L, 3P] sliced into q, k, v (in place, no copy)
//         -> scaled_dot_product_attention, one head of dim P.
//
// Instructions per inference: the firmware's check program (lower::emit_check) runs
// <name>_run RUNS times on one fixed input and prints the output; it is built twice
// (-DCHECK_RUNS=1 and =2) by the emitted folder's Makefile (`make count-elfs`, the recipe of
// src/lower/firmware/run_firmware_qemu.sh: arm-none-eabi-gcc -mcpu=<cpu> -mthumb -O2, picolibc,
// semihosting; build/<target>/ per target) and run on the CPU's QEMU board (kTargets) with the
// instruction-counting plugin src/lower/firmware/insncount.c. The difference of the two whole-program
// counts is one inference (startup and printing cancel). Every output must equal the host
// simulator's, so every measured firmware is also checked bit-exact on every core. Flash and
// RAM come from lower::firmware_size (`make size`: model + kernels linked for cortex-m4, DSP
// variants included, with unused sections removed; and for cortex-m0), the arena from
// Program::arena_bytes.
//
//   microtorch-mcu-bench [--out FILE] [--work DIR] [--jobs N] [--filter TEXT] [--source DIR]
//
// The work folder is emptied at start (only a folder this benchmark made, or an empty one);
// builds and emulator runs go --jobs at a time (2).
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/microtorch.hpp"
#include "microtorch/nn.hpp"
#include "../firmware_bench.hpp"

namespace mt = microtorch;
namespace lower = microtorch::lower;
namespace nn = microtorch::nn;
namespace fs = std::filesystem;
using mt::Tensor;

#ifndef MICROTORCH_SOURCE_DIR
#define MICROTORCH_SOURCE_DIR "."
#endif

namespace {

constexpr std::uint64_t kSeed = 2024;
constexpr std::int64_t kCalibrationSamples = 8;

// ---- the models ------------------------------------------------------------------------

// Self-attention with nn::MultiheadAttention: forward(x) = mha(x, x, x).output.
struct MhaBlock : nn::Module {
  std::shared_ptr<nn::MultiheadAttention> mha;
  MhaBlock(std::int64_t E, std::int64_t H) {
    nn::MultiheadAttentionOptions o;
    o.batch_first = true;
    mha = register_module("mha", std::make_shared<nn::MultiheadAttention>(E, H, o));
  }
  Tensor forward(const Tensor& x) override { return mha->forward(x); }
  std::string type_name() const override { return "MhaBlock"; }
};

// The attention core alone: x [1, L, 3P] holds q | k | v side by side.
struct SdpaCore : nn::Module {
  std::int64_t P;
  explicit SdpaCore(std::int64_t P) : P(P) {}
  Tensor forward(const Tensor& x) override {
    const Tensor q = x.slice(2, 0, P), k = x.slice(2, P, 2 * P), v = x.slice(2, 2 * P, 3 * P);
    return std::get<0>(mt::scaled_dot_product_attention(q, k, v));
  }
  std::string type_name() const override { return "SdpaCore"; }
};

struct Config {
  bool sdpa = false;  // the attention core alone instead of MultiheadAttention
  std::int64_t L = 0, E = 0, H = 1;
  int bits = 8;
  lower::AttentionKernel kernel = lower::AttentionKernel::Streaming;

  std::string kernel_name() const { return kernel == lower::AttentionKernel::Streaming ? "streaming" : "two-pass"; }
  std::string label() const {
    if (sdpa) return fmt::format("SDPA core L={} P={}", L, E);
    return fmt::format("MHA L={} E={} H={} (P={})", L, E, H, E / H);
  }
  std::string id() const {  // C identifier and folder name
    return fmt::format("{}_l{}_e{}_h{}_s{}_{}", sdpa ? "sdpa" : "mha", L, E, H, bits,
                       kernel == lower::AttentionKernel::Streaming ? "stream" : "twopass");
  }
  std::int64_t features() const { return sdpa ? 3 * E : E; }
};

std::vector<Config> configurations() {
  std::vector<Config> out;
  for (const std::int64_t L : {32, 64, 128}) {
    for (const std::int64_t E : {16, 32}) {
      for (const std::int64_t H : {1, 2, 4}) {
        for (const int bits : {8, 16}) out.push_back({false, L, E, H, bits, lower::AttentionKernel::Streaming});
      }
    }
  }
  // The attention core alone at L = 128, head dim P = 16, and the two-pass kernel beside the
  // streaming one (its L x S buffer is the memory baseline).
  for (const int bits : {8, 16}) out.push_back({true, 128, 16, 1, bits, lower::AttentionKernel::Streaming});
  for (const bool sdpa : {false, true}) out.push_back({sdpa, 128, 16, 1, 8, lower::AttentionKernel::TwoPass});
  return out;
}

// The CPUs: QEMU board (src/lower/firmware/targets.sh's), extra compiler flags. "m4-c" is the
// Cortex-M4 with the portable C kernels. The firmware folder's Makefile links for the board.
struct Target {
  const char *name, *label, *cpu, *board, *flags;
};
constexpr Target kTargets[] = {
    {"m0", "Cortex-M0", "cortex-m0", "mps2-an385", ""},
    {"m4-c", "M4 portable C", "cortex-m4", "mps2-an386", "-DMT_NO_DSP"},
    {"m4", "M4 DSP", "cortex-m4", "mps2-an386", ""},
    // Cortex-M7 ("cortex-m7", "mps2-an500") and M33 ("cortex-m33", "mps2-an505") run the
    // same DSP variants; tools/mcu/bench_kernels.sh measures them per kernel and the firmware
    // checks run them. Left out here to keep the run short on two shared cores.
};
constexpr std::size_t kNumTargets = sizeof kTargets / sizeof kTargets[0];

// ---- one measurement -------------------------------------------------------------------

struct Job {
  Config config;
  lower::Program program;
  std::string dir;
  std::string expected;  // the simulator's line for the one input
  // results
  std::int64_t insns[kNumTargets] = {};  // one inference per target
  lower::FirmwareSize size, size_m0;
  std::string error;
};

// Runs a shell command, output to `log`; returns the exit status.
int sh(const std::string& cmd, const std::string& log) {
  const int rc = std::system(fmt::format("{} >'{}' 2>&1", cmd, log).c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Per target: builds the check program with -DCHECK_RUNS=1 and =2 through the folder's
// Makefile (the one recipe, as src/lower/firmware/run_firmware_qemu.sh; the target's flags passed to
// it), runs both under the counting plugin and requires the simulator's output from both;
// then sizes the firmware (lower::firmware_size).
void measure(Job& j, const std::string& plugin) {
  const std::string& d = j.dir;
  for (std::size_t t = 0; t < kNumTargets; ++t) {
    const Target& tg = kTargets[t];
    const std::string b = fmt::format("build/{}", tg.name);
    if (sh(fmt::format("make --no-print-directory -C '{}' CPU={} B={} OPT='-O2 {}' count-elfs", d, tg.cpu, b,
                       tg.flags),
           fmt::format("{}/build-{}.log", d, tg.name))) {
      j.error = fmt::format("{} build failed: {}", tg.name, slurp(fmt::format("{}/build-{}.log", d, tg.name)));
      return;
    }
    std::int64_t counts[2] = {0, 0};
    for (const int runs : {1, 2}) {
      const std::string elf = fmt::format("{}/{}/count{}.elf", d, b, runs);
      const std::string out = fmt::format("{}/run-{}-{}.txt", d, tg.name, runs);
      const std::string count = fmt::format("{}/insns-{}-{}.txt", d, tg.name, runs);
      const int rc = sh(fmt::format("timeout 600 qemu-system-arm -M {} -display none -serial null -monitor none "
                                    "-semihosting-config enable=on,target=native -plugin '{}' -d plugin -D '{}' "
                                    "-kernel '{}' </dev/null",
                                    tg.board, plugin, count, elf),
                        out);
      if (rc != 0) {
        j.error = fmt::format("{}: qemu exited with {}: {}", tg.name, rc, slurp(out));
        return;
      }
      if (slurp(out) != j.expected) {
        j.error = fmt::format("{}: firmware output differs from the simulator (want '{}'): {}", tg.name, j.expected,
                              slurp(out));
        return;
      }
      unsigned long long v = 0;
      if (std::sscanf(slurp(count).c_str(), "insns: %llu", &v) != 1) {
        j.error = "no instruction count in " + count;
        return;
      }
      counts[runs - 1] = static_cast<std::int64_t>(v);
    }
    j.insns[t] = counts[1] - counts[0];
  }
  try {
    j.size = lower::firmware_size(j.program, d, "cortex-m4");
    j.size_m0 = lower::firmware_size(j.program, d, "cortex-m0");
  } catch (const std::exception& e) {
    j.error = e.what();
  }
}

int usage(const char* argv0) {
  std::cerr << fmt::format(
      "usage: {} [--out FILE] [--work DIR] [--jobs N] [--filter TEXT] [--source DIR]\n"
      "  --out FILE     also write the markdown table to FILE\n"
      "  --work DIR     work folder, emptied first (refused if it holds other files; default: <tmp>/microtorch-mcu-bench)\n"
      "  --jobs N       parallel builds and emulator runs (default 2)\n"
      "  --filter TEXT  only configurations whose id contains TEXT (e.g. l128_e16, s8_stream)\n"
      "  --source DIR   microtorch source tree, for src/lower/firmware/insncount.c (default: {})\n",
      argv0, MICROTORCH_SOURCE_DIR);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_file, filter, source = MICROTORCH_SOURCE_DIR;
  std::string work = (fs::temp_directory_path() / "microtorch-mcu-bench").string();
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
    else if (a == "--filter") filter = value();
    else if (a == "--source") source = value();
    else return usage(argv[0]);
  }
  for (const char* tool : {"gcc", "arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm", "timeout"}) {
    if (std::system(fmt::format("command -v {} >/dev/null 2>&1", tool).c_str()) != 0) {
      std::cerr << fmt::format("microtorch-mcu-bench: {} not found (tools/install-deps.sh installs it)\n", tool);
      return 2;
    }
  }
  const std::string plugin_src = source + "/src/lower/firmware/insncount.c";
  if (!fs::exists(plugin_src)) {
    std::cerr << fmt::format("microtorch-mcu-bench: {} not found (pass --source)\n", plugin_src);
    return 2;
  }
  if (!prepare_work_folder(work, "microtorch-mcu-bench")) return 2;

  // Built once per run, in the work folder: the instruction-counting plugin.
  const std::string plugin = work + "/libinsncount.so";
  if (sh(fmt::format("gcc -O2 -shared -fPIC -o '{}' '{}'", plugin, plugin_src), work + "/plugin.log")) {
    std::cerr << "microtorch-mcu-bench: building the plugin failed; see " << work << "/plugin.log\n";
    return 1;
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  // Lowering on the host, one configuration after the other (the library's generator is global).
  mt::NoGradGuard no_grad;
  std::vector<Job> all;
  for (const Config& c : configurations()) {
    if (!filter.empty() && c.id().find(filter) == std::string::npos) continue;
    mt::manual_seed(kSeed);
    std::unique_ptr<nn::Module> model;
    if (c.sdpa) model = std::make_unique<SdpaCore>(c.E);
    else model = std::make_unique<MhaBlock>(c.E, c.H);
    model->eval();
    const Tensor xs = mt::randn({kCalibrationSamples + 1, c.L, c.features()});
    const lower::Graph g = lower::trace(*model, {1, c.L, c.features()});
    const lower::Calibration cal = lower::calibrate(g, xs.slice(0, 0, kCalibrationSamples));
    lower::QuantOptions o;
    o.activation_bits = c.bits;
    o.weight_bits = c.bits;
    o.attention = c.kernel;
    o.name = c.id();
    Job j;
    j.config = c;
    j.program = lower::quantize(g, cal, o);
    j.dir = work + "/" + c.id();
    lower::emit_c(j.program, j.dir);
    const std::vector<std::vector<std::int64_t>> input{
        lower::quantize_input(j.program, xs.slice(0, kCalibrationSamples, kCalibrationSamples + 1))};
    lower::emit_check(j.program, input, j.dir);
    lower::Simulator sim(j.program);
    j.expected = lower::expected_check_output(sim, input);
    all.push_back(std::move(j));
  }
  if (all.empty()) {
    std::cerr << "microtorch-mcu-bench: no configuration matches --filter " << filter << "\n";
    return 2;
  }
  const auto t1 = std::chrono::steady_clock::now();
  std::cerr << fmt::format("microtorch-mcu-bench: {} firmwares lowered into {} in {:.0f} s; building and running {} at a time\n",
                           all.size(), work, seconds(t0, t1), jobs);

  // Cross-builds and emulator runs: `jobs` workers over the list (largest first for balance).
  std::vector<std::size_t> order(all.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return all[a].program.total_macs() > all[b].program.total_macs();
  });
  std::atomic<std::size_t> next{0};
  std::mutex progress;
  std::size_t done = 0;
  std::vector<std::thread> workers;
  for (int w = 0; w < jobs; ++w) {
    workers.emplace_back([&] {
      for (std::size_t i; (i = next++) < order.size();) {
        Job& j = all[order[i]];
        measure(j, plugin);
        std::lock_guard<std::mutex> lock(progress);
        std::cerr << fmt::format("  [{}/{}] {} {}\n", ++done, all.size(), j.config.id(), j.error.empty() ? "ok" : "FAILED");
      }
    });
  }
  for (auto& t : workers) t.join();
  std::cerr << fmt::format("microtorch-mcu-bench: built, ran and sized in {:.0f} s\n", seconds(t1, std::chrono::steady_clock::now()));

  std::string table = "| config | bits | kernel | MACs |";
  for (const Target& t : kTargets) table += fmt::format(" {} |", t.label);
  table += " M4 DSP instr/MAC | M4 speed-up | flash B (M4 / M0) | arena B | RAM B |\n|---|---|---|---:|";
  for (std::size_t t = 0; t < kNumTargets; ++t) table += "---:|";
  table += "---:|---:|---:|---:|---:|\n";
  int failures = 0;
  for (const Job& j : all) {
    const Config& c = j.config;
    const std::int64_t macs = j.program.total_macs();
    table += fmt::format("| {} | int{} | {} | {} |", c.label(), c.bits, c.kernel_name(), thousands(macs));
    if (!j.error.empty()) {
      ++failures;
      std::cerr << fmt::format("microtorch-mcu-bench: {}: {}\n", c.id(), j.error);
      for (std::size_t t = 0; t < kNumTargets; ++t) table += " failed |";
      table += fmt::format(" | | | {} | |\n", thousands(j.program.arena_bytes));
      continue;
    }
    for (std::size_t t = 0; t < kNumTargets; ++t) table += fmt::format(" {} |", thousands(j.insns[t]));
    const std::int64_t m4c = j.insns[1], m4 = j.insns[2];  // kTargets: m0, m4-c, m4
    table += fmt::format(" {:.2f} | {:.2f}x | {} / {} | {} | {} |\n", macs ? double(m4) / double(macs) : 0.0,
                         m4 ? double(m4c) / double(m4) : 0.0, thousands(j.size.flash()), thousands(j.size_m0.flash()),
                         thousands(j.program.arena_bytes), thousands(j.size.ram()));
  }
  std::cout << table << std::flush;
  if (!out_file.empty()) {
    std::ofstream f(out_file);
    f << table;
    if (!f) {
      std::cerr << "microtorch-mcu-bench: cannot write " << out_file << "\n";
      return 1;
    }
  }
  return failures ? 1 : 0;
}
