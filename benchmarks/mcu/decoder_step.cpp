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
//   microtorch-mcu-decoder-bench [--out FILE] [--work DIR] [--jobs N] [--filter TEXT] [--source DIR]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
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
  const std::string qemu = qemu_command(d, t.cpu, fmt::format("{}/qemu-{}.txt", d, t.cpu), j.error);
  if (qemu.empty()) return -1;
  return counted_run(qemu, plugin, fmt::format("{}/{}/count1.elf", d, b), fmt::format("{}/run-{}-{}.txt", d, t.cpu, n),
                     fmt::format("{}/insns-{}-{}.txt", d, t.cpu, n), j.expected, 900, j.error);
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

}  // namespace

int main(int argc, char** argv) {
  const std::string program = "microtorch-mcu-decoder-bench";
  BenchArgs args = parse_bench_args(
      argc, argv, program,
      {{"--out FILE", "also write the markdown table to FILE"},
       {"--work DIR", "work folder, emptied first (refused if it holds other files; default: "
                     "<tmp>/microtorch-mcu-decoder-bench)"},
       {"--jobs N", "parallel builds and emulator runs (default 2)"},
       {"--filter TEXT", "only the configurations whose id contains TEXT (stories_w16_c8, ..._w8_c16, ...)"},
       {"--source DIR", "microtorch source tree, for src/lower/firmware/insncount.c (default: " MICROTORCH_SOURCE_DIR ")"}});
  if (!require_tools(program, {"gcc", "arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm", "timeout"})) return 2;
  if (!prepare_work_folder(args.work, program)) return 2;
  const std::string plugin = build_count_plugin(program, args.work, args.source);
  if (plugin.empty()) return 1;
  const std::string& work = args.work;

  // Lowering on the host: the model's weights N(0, 0.1) (norms left at 1), calibrated on two
  // random windows of 128 tokens; the tokens a greedy generation from token 1 (the simulator).
  mt::NoGradGuard no_grad;
  std::vector<Job> all;
  for (const auto& [wb, cb] : {std::pair{16, 16}, std::pair{8, 16}, std::pair{16, 8}, std::pair{8, 8}}) {
    if (!args.filter.empty() && fmt::format("stories_w{}_c{}", wb, cb).find(args.filter) == std::string::npos) continue;
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
  if (all.empty()) {
    std::cerr << program << ": no configuration matches --filter " << args.filter << "\n";
    return 2;
  }
  std::vector<std::size_t> order(all.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  run_parallel(
      order, args.jobs, [&](std::size_t i) { measure(all[i], plugin); },
      [&](std::size_t i) {
        std::cerr << fmt::format("  {} {}\n", all[i].id(), all[i].error.empty() ? "ok" : "FAILED: " + all[i].error);
      });

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
  if (!args.out_file.empty()) {
    std::ofstream f(args.out_file);
    f << table;
  }
  return failures ? 1 : 0;
}
