// choose_precision (precision.hpp): sensitivity per layer, a greedy raise to the target,
// then a pass that lowers again what is not needed.
#include "microtorch/lower/precision.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "microtorch/ops.hpp"
#include "module_path.hpp"

namespace microtorch::lower {

namespace {

// The three precisions of a layer, cheapest first.
constexpr int kLevels = 3;
LayerPrecision level_precision(const std::string& module, int level) {
  return level == 0 ? LayerPrecision{module, 8, 8} : level == 1 ? LayerPrecision{module, 16, 8} : LayerPrecision{module, 16, 16};
}
std::string level_name(int level) { return level == 0 ? "8" : level == 1 ? "16x8" : "16"; }

bool meets(const Accuracy& a, const PrecisionTarget& t) {
  return a.relative_error() <= t.max_error && a.agreement >= t.agreement;
}

std::string pct(double x) { return fmt::format("{:.3f}%", 100 * x); }

}  // namespace

std::vector<std::string> precision_layers(const Graph& graph) {
  std::vector<std::string> out;
  for (const Node& n : graph.nodes) {
    const ModulePath m = module_path(graph, n);
    if (m.own && !m.path.empty() && std::find(out.begin(), out.end(), m.path) == out.end()) out.push_back(m.path);
  }
  return out;
}

std::pair<std::int64_t, std::int64_t> int8_weight_bytes(const Program& program) {
  std::int64_t s8 = 0, all = 0;
  for (const Buffer& b : program.buffers) {
    if (b.kind != BufferKind::Weight || !b.fixed_point) continue;
    all += b.bytes();
    if (b.elem == Elem::S8) s8 += b.bytes();
  }
  return {s8, all};
}

PrecisionSearch choose_precision(const Graph& graph, const Calibration& calibration, const Tensor& eval_data,
                                 const QuantOptions& options, const PrecisionTarget& target) {
  if (!(target.max_error > 0) || !(target.agreement >= 0 && target.agreement <= 1)) {
    throw ValueError(fmt::format("choose_precision: the target needs a max error > 0 and an agreement in [0, 1], got {} "
                                 "and {}",
                                 target.max_error, target.agreement));
  }
  const std::vector<Tensor> inputs = split_inputs(graph, eval_data, "choose_precision");
  std::vector<Tensor> float_outputs;
  {
    NoGradGuard no_grad;
    for (const Tensor& x : inputs) float_outputs.push_back(evaluate(graph, x)[static_cast<std::size_t>(graph.output)]);
  }
  const std::vector<std::string> layers = precision_layers(graph);
  // Entries from the outermost module in, so that a nested module's entry (attn.out_proj)
  // comes after its parent's (attn) and wins for its nodes.
  std::vector<std::size_t> order(layers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&layers](std::size_t a, std::size_t b) {
    return std::count(layers[a].begin(), layers[a].end(), '.') < std::count(layers[b].begin(), layers[b].end(), '.');
  });

  // The decisions: one per layer (levels 8, 16x8, 16), then the input's (8, 16) when it
  // holds real numbers.
  const bool real_input = is_floating(graph.value(graph.input).dtype);
  const std::size_t decisions = layers.size() + (real_input ? 1 : 0), in_k = layers.size();
  auto top = [&](std::size_t i) { return i == in_k ? 1 : kLevels - 1; };
  auto name = [&](std::size_t i, int level) { return i == in_k ? (level == 0 ? "8" : "16") : level_name(level); };
  auto label = [&](std::size_t i) { return i == in_k ? std::string("input") : layers[i]; };
  auto apply = [&](QuantOptions& o, const std::vector<int>& level) {
    o.precision.clear();
    for (const std::size_t i : order) o.precision.push_back(level_precision(layers[i], level[i]));
    o.input_bits = !real_input ? 0 : level[in_k] == 0 ? 8 : 16;
  };
  PrecisionSearch s;
  s.options = options;
  s.options.activation_bits = 8, s.options.weight_bits = 0;
  std::string log;
  auto evaluate_levels = [&](const std::vector<int>& level) {
    QuantOptions o = s.options;
    apply(o, level);
    ++s.evaluations;
    return measure_outputs(quantize(graph, calibration, o), inputs, float_outputs);
  };

  std::vector<int> all_top(decisions);
  for (std::size_t i = 0; i < decisions; ++i) all_top[i] = top(i);
  // 1. sensitivity: each layer (and the input) alone at 8, the rest at 16
  std::vector<double> sensitivity(decisions);
  for (std::size_t i = 0; i < decisions; ++i) {
    std::vector<int> level = all_top;
    level[i] = 0;
    sensitivity[i] = evaluate_levels(level).relative_error();
  }
  // 2. from all at 8, raise the most sensitive layer below 16 while the target is not met
  std::vector<int> level(decisions, 0);
  std::vector<std::string> why(decisions);
  Accuracy a = evaluate_levels(level);
  log += fmt::format("start: every layer{} at 8: max error {}, agreement {:.2f}%\n", real_input ? " and the input" : "",
                     pct(a.relative_error()), 100 * a.agreement);
  int step = 0;
  while (!meets(a, target)) {
    // the lowest level first (activations before weights), the most sensitive among them
    std::size_t pick = decisions;
    for (std::size_t i = 0; i < decisions; ++i) {
      if (level[i] < top(i) && (pick == decisions || level[i] < level[pick] ||
                                (level[i] == level[pick] && sensitivity[i] > sensitivity[pick]))) {
        pick = i;
      }
    }
    if (pick == decisions) break;  // everything at 16
    ++level[pick], ++step;
    const Accuracy b = evaluate_levels(level);
    why[pick] = fmt::format("raised to {} at step {} (sensitivity {}): max error {} -> {}", name(pick, level[pick]), step,
                            pct(sensitivity[pick]), pct(a.relative_error()), pct(b.relative_error()));
    log += fmt::format("step {}: {} to {}: max error {}, agreement {:.2f}%\n", step, label(pick),
                       name(pick, level[pick]), pct(b.relative_error()), 100 * b.agreement);
    a = b;
  }
  s.met = meets(a, target);
  // 3. lower again what is not needed, least sensitive first
  if (s.met) {
    std::vector<std::size_t> raised;
    for (std::size_t i = 0; i < decisions; ++i) {
      if (level[i] > 0) raised.push_back(i);
    }
    std::sort(raised.begin(), raised.end(), [&sensitivity](std::size_t x, std::size_t y) { return sensitivity[x] < sensitivity[y]; });
    for (const std::size_t i : raised) {
      while (level[i] > 0) {
        --level[i];
        const Accuracy b = evaluate_levels(level);
        if (!meets(b, target)) {
          ++level[i];
          break;
        }
        log += fmt::format("back: {} to {}: max error {} still meets the target\n", label(i), name(i, level[i]),
                           pct(b.relative_error()));
        why[i] = level[i] == 0 ? "8 met the target (lowered back)" : fmt::format("lowered back to {}", name(i, level[i]));
        a = b;
      }
    }
  }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    LayerChoice c;
    c.module = layers[i];
    const LayerPrecision p = level_precision(layers[i], level[i]);
    c.activation_bits = p.activation_bits, c.weight_bits = p.weight_bits;
    c.sensitivity = sensitivity[i];
    c.why = level[i] == 0 && why[i].empty() ? "8 met the target" : why[i];
    s.layers.push_back(std::move(c));
  }
  if (real_input) {
    s.input.module = "input";
    s.input.activation_bits = s.input.weight_bits = level[in_k] == 0 ? 8 : 16;
    s.input.sensitivity = sensitivity[in_k];
    s.input.why = level[in_k] == 0 && why[in_k].empty() ? "8 met the target" : why[in_k];
  }
  apply(s.options, level);
  const Program p = quantize(graph, calibration, s.options);
  ++s.evaluations;
  s.accuracy = measure_outputs(p, inputs, float_outputs);
  const auto [s8, all] = int8_weight_bytes(p);
  s.int8_weight_share = all ? static_cast<double>(s8) / static_cast<double>(all) : 1.0;

  std::string& r = s.report;
  r = fmt::format("automatic precision for max error <= {}{} on {} evaluation samples: {}\n", pct(target.max_error),
                  target.agreement > 0 ? fmt::format(" and agreement >= {:.2f}%", 100 * target.agreement) : "",
                  inputs.size(), s.met ? "met" : "NOT met (every layer at 16 is as far as it goes)");
  r += fmt::format("  {:<40} {:>6} {:>12}  {}\n", "layer", "bits", "sensitivity", "why");
  if (real_input) {
    r += fmt::format("  {:<40} {:>6} {:>12}  {}\n", "(input)", s.input.activation_bits, pct(s.input.sensitivity),
                     s.input.why);
  }
  for (const LayerChoice& c : s.layers) {
    r += fmt::format("  {:<40} {:>6} {:>12}  {}\n", c.module,
                     c.activation_bits == c.weight_bits ? std::to_string(c.activation_bits)
                                                        : fmt::format("{}x{}", c.activation_bits, c.weight_bits),
                     pct(c.sensitivity), c.why);
  }
  r += "  (sensitivity: the output's max error with that layer (or the input) alone at 8 bits, every other at 16)\n";
  r += log;
  r += fmt::format("result: max error {}, agreement {:.2f}%, {} of {} weight bytes int8 ({:.1f}%), {} programs "
                   "evaluated\n",
                   pct(s.accuracy.relative_error()), 100 * s.accuracy.agreement, s8, all, 100 * s.int8_weight_share,
                   s.evaluations);
  return s;
}

}  // namespace microtorch::lower
