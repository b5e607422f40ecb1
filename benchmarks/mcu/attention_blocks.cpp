// microtorch-mcu-bench — reference attention blocks lowered to fixed-point firmware and
// measured on emulated Cortex-M0, M4 and RISC-V rv32imc (the ESP32-C3 class): instructions per
// inference, flash, arena and RAM; on Cortex-M4 both the portable C kernels (-DMT_NO_DSP) and
// the DSP variants, on rv32imc the portable C (-DMT_NO_RV) and the RISC-V variants, so the
// "before" and "after" come from one run; streaming vs two-pass attention at L = 128.
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
// src/lower/firmware/run_firmware_qemu.sh: arm-none-eabi-gcc -mcpu=<cpu> -mthumb -O2 or
// riscv64-unknown-elf-gcc -march=rv32imc -mabi=ilp32 -O2, picolibc, semihosting;
// build/<target>/ per target) and run on the CPU's QEMU board (the Makefile's `make
// qemu-command`) with the instruction-counting plugin src/lower/firmware/insncount.c. The
// difference of the two whole-program counts is one inference (startup and printing cancel).
// Every output must equal the host simulator's, so every measured firmware is also checked
// bit-exact on every core. Flash and RAM come from lower::firmware_size (`make size`: model +
// kernels linked for cortex-m4, DSP variants included, with unused sections removed; for
// cortex-m0; for rv32imc), the arena from Program::arena_bytes.
//
//   microtorch-mcu-bench [--out FILE] [--work DIR] [--jobs N] [--filter TEXT] [--source DIR]
//
// The work folder is emptied at start (only a folder this benchmark made, or an empty one);
// builds and emulator runs go --jobs at a time (2).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
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

// The CPUs, extra compiler flags. "m4-c" is the Cortex-M4 with the portable C kernels, "rv-c"
// rv32imc with them. The firmware folder's Makefile builds for the CPU and names its QEMU board.
struct Target {
  const char *name, *label, *cpu, *flags;
};
constexpr Target kTargets[] = {
    {"m0", "Cortex-M0", "cortex-m0", ""},
    {"m4-c", "M4 portable C", "cortex-m4", "-DMT_NO_DSP"},
    {"m4", "M4 DSP", "cortex-m4", ""},
    {"rv-c", "rv32imc portable C", "rv32imc", "-DMT_NO_RV"},
    {"rv", "rv32imc", "rv32imc", ""},
    // Cortex-M7 ("cortex-m7", "mps2-an500") and M33 ("cortex-m33", "mps2-an505") run the
    // same DSP variants; tools/mcu/bench_kernels.sh measures them per kernel and the firmware
    // checks run them. Left out here to keep the run short on two shared cores.
};
enum { kM0, kM4Portable, kM4, kRvPortable, kRv };
constexpr std::size_t kNumTargets = sizeof kTargets / sizeof kTargets[0];

// ---- one measurement -------------------------------------------------------------------

struct Job {
  Config config;
  lower::Program program;
  std::string dir;
  std::string expected;  // the simulator's line for the one input
  // results
  std::int64_t insns[kNumTargets] = {};  // one inference per target
  lower::FirmwareSize size, size_m0, size_rv;
  std::string error;
};

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
    const std::string qemu = qemu_command(d, tg.cpu, fmt::format("{}/qemu-{}.txt", d, tg.name), j.error);
    if (qemu.empty()) return;
    std::int64_t counts[2] = {0, 0};
    for (const int runs : {1, 2}) {
      counts[runs - 1] = counted_run(qemu, plugin, fmt::format("{}/{}/count{}.elf", d, b, runs),
                                     fmt::format("{}/run-{}-{}.txt", d, tg.name, runs),
                                     fmt::format("{}/insns-{}-{}.txt", d, tg.name, runs), j.expected, 600, j.error);
      if (counts[runs - 1] < 0) return;
    }
    j.insns[t] = counts[1] - counts[0];
  }
  try {
    j.size = lower::firmware_size(j.program, d, "cortex-m4");
    j.size_m0 = lower::firmware_size(j.program, d, "cortex-m0");
    j.size_rv = lower::firmware_size(j.program, d, "rv32imc");
  } catch (const std::exception& e) {
    j.error = e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string program = "microtorch-mcu-bench";
  BenchArgs args = parse_bench_args(
      argc, argv, program,
      {{"--out FILE", "also write the markdown table to FILE"},
       {"--work DIR", "work folder, emptied first (refused if it holds other files; default: <tmp>/microtorch-mcu-bench)"},
       {"--jobs N", "parallel builds and emulator runs (default 2)"},
       {"--filter TEXT", "only configurations whose id contains TEXT (e.g. l128_e16, s8_stream)"},
       {"--source DIR", "microtorch source tree, for src/lower/firmware/insncount.c (default: " MICROTORCH_SOURCE_DIR ")"}});
  if (!require_tools(program, {"gcc", "arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm",
                               "riscv64-unknown-elf-gcc", "riscv64-unknown-elf-size", "qemu-system-riscv32", "timeout"})) {
    return 2;
  }
  if (!prepare_work_folder(args.work, program)) return 2;
  // Built once per run, in the work folder: the instruction-counting plugin.
  const std::string plugin = build_count_plugin(program, args.work, args.source);
  if (plugin.empty()) return 1;
  const std::string &work = args.work, &filter = args.filter;

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
                           all.size(), work, seconds(t0, t1), args.jobs);

  // Cross-builds and emulator runs: `jobs` workers over the list (largest first for balance).
  std::vector<std::size_t> order(all.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return all[a].program.total_macs() > all[b].program.total_macs();
  });
  std::size_t done = 0;
  run_parallel(
      order, args.jobs, [&](std::size_t i) { measure(all[i], plugin); },
      [&](std::size_t i) {
        std::cerr << fmt::format("  [{}/{}] {} {}\n", ++done, all.size(), all[i].config.id(),
                                 all[i].error.empty() ? "ok" : "FAILED");
      });
  std::cerr << fmt::format("microtorch-mcu-bench: built, ran and sized in {:.0f} s\n", seconds(t1, std::chrono::steady_clock::now()));

  std::string table = "| config | bits | kernel | MACs |";
  for (const Target& t : kTargets) table += fmt::format(" {} |", t.label);
  table += " M4 DSP instr/MAC | M4 speed-up | rv32imc instr/MAC | rv32imc speed-up | rv32imc / M4 DSP | flash B (M4 / M0 / "
           "rv32imc) | arena B | RAM B |\n|---|---|---|---:|";
  for (std::size_t t = 0; t < kNumTargets; ++t) table += "---:|";
  table += "---:|---:|---:|---:|---:|---:|---:|---:|\n";
  int failures = 0;
  for (const Job& j : all) {
    const Config& c = j.config;
    const std::int64_t macs = j.program.total_macs();
    table += fmt::format("| {} | int{} | {} | {} |", c.label(), c.bits, c.kernel_name(), thousands(macs));
    if (!j.error.empty()) {
      ++failures;
      std::cerr << fmt::format("microtorch-mcu-bench: {}: {}\n", c.id(), j.error);
      for (std::size_t t = 0; t < kNumTargets; ++t) table += " failed |";
      table += fmt::format(" | | | | | | {} | |\n", thousands(j.program.arena_bytes));
      continue;
    }
    for (std::size_t t = 0; t < kNumTargets; ++t) table += fmt::format(" {} |", thousands(j.insns[t]));
    const std::int64_t m4c = j.insns[kM4Portable], m4 = j.insns[kM4], rvc = j.insns[kRvPortable], rv = j.insns[kRv];
    auto ratio = [](std::int64_t a, std::int64_t b) { return b ? double(a) / double(b) : 0.0; };
    table += fmt::format(" {:.2f} | {:.2f}x | {:.2f} | {:.2f}x | {:.2f}x | {} / {} / {} | {} | {} |\n", ratio(m4, macs),
                         ratio(m4c, m4), ratio(rv, macs), ratio(rvc, rv), ratio(rv, m4), thousands(j.size.flash()),
                         thousands(j.size_m0.flash()), thousands(j.size_rv.flash()), thousands(j.program.arena_bytes),
                         thousands(j.size.ram()));
  }
  std::cout << table << std::flush;
  if (!args.out_file.empty()) {
    std::ofstream f(args.out_file);
    f << table;
    if (!f) {
      std::cerr << "microtorch-mcu-bench: cannot write " << args.out_file << "\n";
      return 1;
    }
  }
  return failures ? 1 : 0;
}
