// microtorch-mcu-bench — reference attention blocks lowered to fixed-point firmware and
// measured on an emulated Cortex-M4: instructions per inference, flash, arena and RAM,
// streaming vs two-pass attention.
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
// Instructions per inference: a small main() calls <name>_run RUNS times on one fixed input
// and hashes the output; it is built twice (-DRUNS=1, -DRUNS=2) with arm-none-eabi-gcc
// -mcpu=cortex-m4 -mthumb -O2 (picolibc, semihosting) and run on qemu-system-arm -M
// mps2-an386 with the instruction-counting plugin tools/mcu/insncount.c. The difference of
// the two whole-program counts is one inference (startup, hashing and printing cancel).
// The output hash must equal the host simulator's, so every measured firmware is also
// checked bit-exact. Flash and RAM come from lower::firmware_size (model + kernels linked
// for cortex-m4 with unused sections removed), the arena from Program::arena_bytes.
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
    for (const std::int64_t E : {32, 64}) {
      for (const std::int64_t H : {2, 4}) {
        for (const int bits : {8, 16}) {
          for (const auto k : {lower::AttentionKernel::Streaming, lower::AttentionKernel::TwoPass}) {
            out.push_back({false, L, E, H, bits, k});
          }
        }
      }
    }
  }
  // The single attention block of the arena goal: L = 128, head dim P = 16, int8.
  for (const bool sdpa : {false, true}) {
    for (const auto k : {lower::AttentionKernel::Streaming, lower::AttentionKernel::TwoPass}) {
      out.push_back({sdpa, 128, 16, 1, 8, k});
    }
  }
  return out;
}

// ---- one measurement -------------------------------------------------------------------

struct Job {
  Config config;
  lower::Program program;
  std::string dir;
  std::uint32_t expected_hash = 0;
  // results
  std::int64_t insns[2] = {-1, -1};
  lower::FirmwareSize size;
  bool large_map = false;  // sized with firmware_size_large_map (see measure)
  std::string error;
};

// FNV-1a over the output integers as little-endian int32 (the bench main computes the same).
std::uint32_t output_hash(const std::vector<std::int64_t>& y) {
  std::uint32_t h = 2166136261u;
  for (const std::int64_t v : y) {
    const auto u = static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
    for (int b = 0; b < 4; ++b) h = (h ^ ((u >> (8 * b)) & 0xffu)) * 16777619u;
  }
  return h;
}

std::string bench_main(const lower::Program& p, const std::vector<std::int64_t>& input) {
  std::string N = p.name;
  std::transform(N.begin(), N.end(), N.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  const std::string in_t(lower::elem_ctype(p.buffer(p.input).elem)), out_t(lower::elem_ctype(p.buffer(p.output).elem));
  std::string c = fmt::format(
      "/* {0}_bench.c - runs {0}_run RUNS times on one fixed input, then prints status and an\n"
      " * FNV-1a hash of the output (generated by microtorch-mcu-bench). */\n"
      "#include <stdint.h>\n#include <stdio.h>\n\n#include \"{0}.h\"\n\n"
      "#ifndef RUNS\n#define RUNS 1\n#endif\n\n"
      "static const {1} input[{2}_INPUT_SIZE] = {{",
      p.name, in_t, N);
  for (std::size_t i = 0; i < input.size(); ++i) c += fmt::format("{}{}{}", i % 16 ? " " : "\n  ", input[i], i + 1 < input.size() ? "," : "");
  c += fmt::format(
      "\n}};\nstatic {0} output[{1}_OUTPUT_SIZE];\n\n"
      "/* volatile: the same loop code for every RUNS, so only the {2}_run calls differ */\n"
      "static volatile int runs = RUNS;\n\n"
      "int main(void) {{\n  int r, i, b, status = 0;\n  uint32_t h = 2166136261u;\n"
      "  for (r = 0; r < runs; ++r) status |= {2}_run(input, output);\n"
      "  for (i = 0; i < {1}_OUTPUT_SIZE; ++i) {{\n"
      "    uint32_t u = (uint32_t)(int32_t)output[i];\n"
      "    for (b = 0; b < 4; ++b) h = (h ^ ((u >> (8 * b)) & 0xffu)) * 16777619u;\n  }}\n"
      "  printf(\"status %d hash %08lx\\n\", status, (unsigned long)h);\n  return 0;\n}}\n",
      out_t, N, p.name);
  return c;
}

// Runs a shell command, output to `log`; returns the exit status.
int sh(const std::string& cmd, const std::string& log) {
  const int rc = std::system(fmt::format("{} >'{}' 2>&1", cmd, log).c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct Tools {
  std::string plugin, kernels_obj, kernels_sections_obj;
};

const char* kCc = "arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -O2 -std=c99";
const char* kSections = "-ffunction-sections -fdata-sections --specs=picolibc.specs";
// picolibc with semihosting: the recipe of tools/mcu/run_firmware_qemu.sh
const char* kLink =
    "--specs=picolibc.specs --oslib=semihost --crt0=semihost -Wl,--defsym=__flash=0x0 -Wl,--defsym=__flash_size=1M "
    "-Wl,--defsym=__ram=0x20000000 -Wl,--defsym=__ram_size=256K -Wl,--defsym=__stack_size=16K";

// lower::firmware_size's link (model + kernels for cortex-m4, -ffunction-sections and
// --gc-sections, entry <name>_run) with the board's 1 MB flash / 256 KB RAM map; the kernels
// object is the one built once per run with the same flags. text/data/bss as firmware_size
// counts them, from arm-none-eabi-size -A.
std::optional<lower::FirmwareSize> firmware_size_large_map(const lower::Program& p, const std::string& d,
                                                           const Tools& t) {
  const std::string obj = fmt::format("{}/{}-sections.o", d, p.name), elf = fmt::format("{}/{}-cortex-m4-large.elf", d, p.name),
                    log = d + "/size-large.log";
  if (sh(fmt::format("{} {} -I'{}' -c '{}/{}.c' -o '{}'", kCc, kSections, d, d, p.name, obj), log) ||
      sh(fmt::format("{} {} -nostartfiles -Wl,--gc-sections -Wl,-e,{}_run -Wl,--defsym=__flash=0x0 "
                     "-Wl,--defsym=__flash_size=1M -Wl,--defsym=__ram=0x20000000 -Wl,--defsym=__ram_size=256K '{}' '{}' "
                     "-o '{}'",
                     kCc, kSections, p.name, obj, t.kernels_sections_obj, elf),
         log) ||
      sh(fmt::format("arm-none-eabi-size -A -d '{}'", elf), log)) {
    return std::nullopt;
  }
  lower::FirmwareSize s;
  std::istringstream lines(slurp(log));
  for (std::string line; std::getline(lines, line);) {
    char name[128];
    long long size = 0, addr = 0;
    if (std::sscanf(line.c_str(), "%127s %lld %lld", name, &size, &addr) != 3) continue;
    const std::string n = name;
    auto starts = [&](const char* prefix) { return n.rfind(prefix, 0) == 0; };
    if (starts(".text") || starts(".rodata") || n == ".init" || n == ".fini") s.text += size;
    else if (starts(".data")) s.data += size;
    else if (starts(".bss")) s.bss += size;
  }
  return s;
}

void measure(Job& j, const Tools& t) {
  const std::string& d = j.dir;
  const std::string& n = j.program.name;
  if (sh(fmt::format("{} --specs=picolibc.specs -I'{}' -c '{}/{}.c' -o '{}/{}.o'", kCc, d, d, n, d, n), d + "/model-o.log")) {
    j.error = "model compile failed: " + slurp(d + "/model-o.log");
    return;
  }
  for (const int runs : {1, 2}) {
    const std::string elf = fmt::format("{}/bench{}.elf", d, runs);
    if (sh(fmt::format("{} -DRUNS={} -I'{}' {} '{}/{}_bench.c' '{}/{}.o' '{}' -o '{}'", kCc, runs, d, kLink, d, n, d, n,
                       t.kernels_obj, elf),
           fmt::format("{}/bench{}-build.log", d, runs))) {
      j.error = "bench link failed: " + slurp(fmt::format("{}/bench{}-build.log", d, runs));
      return;
    }
    const std::string out = fmt::format("{}/run{}.txt", d, runs), count = fmt::format("{}/insns{}.txt", d, runs);
    const int rc = sh(fmt::format("timeout 600 qemu-system-arm -M mps2-an386 -display none -serial null -monitor none "
                                  "-semihosting-config enable=on,target=native -plugin '{}' -d plugin -D '{}' "
                                  "-kernel '{}' </dev/null",
                                  t.plugin, count, elf),
                      out);
    if (rc != 0) {
      j.error = fmt::format("qemu exited with {}: {}", rc, slurp(out));
      return;
    }
    const std::string want = fmt::format("status 0 hash {:08x}", j.expected_hash);
    if (slurp(out).find(want) == std::string::npos) {
      j.error = fmt::format("firmware output differs from the simulator (want '{}'): {}", want, slurp(out));
      return;
    }
    unsigned long long v = 0;
    if (std::sscanf(slurp(count).c_str(), "insns: %llu", &v) != 1) {
      j.error = "no instruction count in " + count;
      return;
    }
    j.insns[runs - 1] = static_cast<std::int64_t>(v);
  }
  try {
    j.size = lower::firmware_size(j.program, d, "cortex-m4");
  } catch (const std::exception& e) {
    // firmware_size links against picolibc's default memory map, whose RAM region is
    // smaller than a two-pass arena at L = 128; section sizes do not depend on the region
    // sizes, so the same link with the QEMU board's map (as above) gives the same numbers.
    if (std::string(e.what()).find("will not fit in region") == std::string::npos) {
      j.error = e.what();
      return;
    }
    if (auto s = firmware_size_large_map(j.program, d, t)) {
      j.size = *s, j.large_map = true;
    } else {
      j.error = e.what();
    }
  }
}

std::string thousands(std::int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (v < 0 ? "-" : "") + out;
}

int usage(const char* argv0) {
  std::cerr << fmt::format(
      "usage: {} [--out FILE] [--work DIR] [--jobs N] [--filter TEXT] [--source DIR]\n"
      "  --out FILE     also write the markdown table to FILE\n"
      "  --work DIR     work folder, emptied first (refused if it holds other files; default: <tmp>/microtorch-mcu-bench)\n"
      "  --jobs N       parallel builds and emulator runs (default 2)\n"
      "  --filter TEXT  only configurations whose id contains TEXT (e.g. l128_e16, s8_stream)\n"
      "  --source DIR   microtorch source tree, for tools/mcu/insncount.c (default: {})\n",
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
  const std::string plugin_src = source + "/tools/mcu/insncount.c";
  if (!fs::exists(plugin_src)) {
    std::cerr << fmt::format("microtorch-mcu-bench: {} not found (pass --source)\n", plugin_src);
    return 2;
  }
  // Emptied only when it is this benchmark's folder (marker file) or already empty.
  const std::string marker = ".microtorch-mcu-bench";
  if (fs::exists(work) && !fs::is_empty(work) && !fs::exists(fs::path(work) / marker)) {
    std::cerr << fmt::format("microtorch-mcu-bench: {} is not empty and not a work folder of this benchmark; "
                             "pass another --work\n",
                             work);
    return 2;
  }
  fs::remove_all(work);
  fs::create_directories(work);
  std::ofstream(fs::path(work) / marker) << "work folder of microtorch-mcu-bench; emptied on every run\n";
  work = fs::absolute(work).string();

  // Built once per run, in the work folder: the plugin and the runtime kernels (the text
  // emit_c copies into every firmware folder).
  Tools tools{work + "/libinsncount.so", work + "/runtime/mt_kernels.o", work + "/runtime/mt_kernels-sections.o"};
  fs::create_directories(work + "/runtime");
  std::ofstream(work + "/runtime/mt_kernels.h") << lower::runtime_header();
  std::ofstream(work + "/runtime/mt_kernels.c") << lower::runtime_source();
  if (sh(fmt::format("gcc -O2 -shared -fPIC -o '{}' '{}'", tools.plugin, plugin_src), work + "/plugin.log") ||
      sh(fmt::format("{} --specs=picolibc.specs -c '{}/runtime/mt_kernels.c' -o '{}'", kCc, work, tools.kernels_obj),
         work + "/runtime/build.log") ||
      sh(fmt::format("{} {} -c '{}/runtime/mt_kernels.c' -o '{}'", kCc, kSections, work, tools.kernels_sections_obj),
         work + "/runtime/build-sections.log")) {
    std::cerr << "microtorch-mcu-bench: building the plugin or the kernels failed; see " << work << "\n";
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
    const auto input = lower::quantize_input(j.program, xs.slice(0, kCalibrationSamples, kCalibrationSamples + 1));
    lower::Simulator sim(j.program);
    j.expected_hash = output_hash(sim.run(input));
    std::ofstream(j.dir + "/" + c.id() + "_bench.c") << bench_main(j.program, input);
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
        measure(j, tools);
        std::lock_guard<std::mutex> lock(progress);
        std::cerr << fmt::format("  [{}/{}] {} {}\n", ++done, all.size(), j.config.id(), j.error.empty() ? "ok" : "FAILED");
      }
    });
  }
  for (auto& t : workers) t.join();
  std::cerr << fmt::format("microtorch-mcu-bench: built, ran and sized in {:.0f} s\n", seconds(t1, std::chrono::steady_clock::now()));

  std::string table =
      "| config | bits | kernel | instructions/inference | flash B | arena B | RAM B |\n"
      "|---|---|---|---:|---:|---:|---:|\n";
  int failures = 0;
  bool large_map = false;
  for (const Job& j : all) {
    const Config& c = j.config;
    if (!j.error.empty()) {
      ++failures;
      std::cerr << fmt::format("microtorch-mcu-bench: {}: {}\n", c.id(), j.error);
      table += fmt::format("| {} | int{} | {} | failed | | {} | |\n", c.label(), c.bits, c.kernel_name(),
                         thousands(j.program.arena_bytes));
      continue;
    }
    const char* mark = j.large_map ? " *" : "";
    table += fmt::format("| {} | int{} | {} | {} | {}{} | {} | {}{} |\n", c.label(), c.bits, c.kernel_name(),
                         thousands(j.insns[1] - j.insns[0]), thousands(j.size.flash()), mark,
                         thousands(j.program.arena_bytes), thousands(j.size.ram()), mark);
    large_map = large_map || j.large_map;
  }
  if (large_map) {
    table += "\n\\* lower::firmware_size could not link it (the arena overflows picolibc's default RAM region); "
             "sized by the same link with the board's 1 MB flash / 256 KB RAM map.\n";
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
