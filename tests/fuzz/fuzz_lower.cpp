// libFuzzer target: random small graphs (tests/random_graph.hpp, driven by the fuzzer's
// bytes) through the whole lowering pipeline: trace -> calibrate -> quantize (int16 or int8,
// streaming or two-pass attention) -> plan -> simulate -> report. Every graph the generator
// builds is lowerable, so any exception is a finding, as is a sanitizer report. Checked:
//
//   - the arena plan never gives two buffers that are live at the same step the same bytes;
//   - every simulated output lies in its type's range and, at int16, within 2% of the float
//     model's output range (at least 1): the lowering tests' bound for these graphs (the
//     seed bias_overflow is the first finding: a bias that overflowed its int32 format;
//     layer_norm_narrow_row the second: a LayerNorm row a few input steps wide, whose
//     rounding eps = 1e-5 amplified, so the generator's LayerNorms take eps = 1e-3);
//   - the emitted C text names every step's kernel (emit_c itself writes files: the
//     compile-and-compare of emitted C runs in tests/test_lower_pipeline.cpp).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "../random_graph.hpp"
#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/format.hpp"
#include "microtorch/lower/simulate.hpp"

namespace mt = microtorch;
namespace lower = microtorch::lower;

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& graph) {
  std::fprintf(stderr, "fuzz_lower: %s\n  graph: %s\n", what.c_str(), graph.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::size_t at = 0;
  auto next = [&](int n) { return at < size ? static_cast<int>(data[at++] % static_cast<unsigned>(n)) : 0; };
  const int bits = next(2) ? 8 : 16;
  const bool twopass = next(2) != 0;
  mt::manual_seed(static_cast<std::uint64_t>(size));
  const random_graph::Graph g = random_graph::make(next);
  try {
    const lower::Graph traced = lower::trace(g.fn, mt::zeros(g.input_shape));
    const mt::Tensor calib = mt::randn({6, g.input_shape[1], g.input_shape[2]});
    lower::QuantOptions o;
    o.activation_bits = bits;
    o.attention = twopass ? lower::AttentionKernel::TwoPass : lower::AttentionKernel::Streaming;
    const lower::Program p = lower::quantize(traced, lower::calibrate(traced, calib), o);

    for (const auto& a : p.buffers) {
      if (!a.in_arena() || a.offset < 0) continue;
      if (a.offset + a.bytes() > p.arena_bytes) fail("a buffer ends past the arena", g.description);
      for (const auto& b : p.buffers) {
        if (b.id <= a.id || !b.in_arena() || b.offset < 0) continue;
        const bool live = a.first_step <= b.last_step && b.first_step <= a.last_step;
        const bool overlap = a.offset < b.offset + b.bytes() && b.offset < a.offset + a.bytes();
        if (live && overlap) fail("two live buffers share bytes", g.description);
      }
    }

    lower::Simulator sim(p);
    mt::NoGradGuard no_grad;
    for (std::int64_t i = 0; i < calib.size(0); ++i) {
      const mt::Tensor x = calib.slice(0, i, i + 1);
      const auto q = sim.run(lower::quantize_input(p, x));
      const auto& out = p.buffer(p.output);
      for (const auto v : q) {
        if (v < lower::elem_min(out.elem) || v > lower::elem_max(out.elem)) fail("output out of range", g.description);
      }
      if (bits == 16) {
        const mt::Tensor yf = g.fn(x), yq = lower::dequantize_output(p, q);
        const double range = std::max(1.0, (mt::max(yf) - mt::min(yf)).item());
        if (mt::max(mt::abs(yf - yq)).item() > 0.02 * range) {
          fail(fmt::format("int16 result off by more than 2% of the range {}:\n  float {}\n  int16 {}", range, yf, yq),
               g.description);
        }
      }
    }
    const std::string text = lower::report(p);
    for (const auto& s : p.steps) {
      if (text.find(s.kernel) == std::string::npos) fail("the report misses kernel " + s.kernel, g.description);
    }
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what(), g.description);
  }
  return 0;
}
