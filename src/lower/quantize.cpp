// quantize — a traced Graph to a Program of integer kernel calls (see quantize.hpp): each
// node is folded into a constant when it depends on constants alone, and otherwise lowered
// by its op's rule from the op table (rules.hpp); then the output buffer and the arena.
#include <algorithm>

#include <fmt/format.h>

#include "lowering.hpp"
#include "microtorch/error.hpp"
#include "rules.hpp"

namespace microtorch::lower {

Program quantize(const Graph& graph, const Calibration& calibration, const QuantOptions& options) {
  Lowering L(graph, calibration, options);
  L.set_last_uses();
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    L.begin_node(static_cast<std::int64_t>(i));
    const OpRule* rule = find_rule(n.op);
    // A node of parameters and constants only (a positional table sliced to the sequence
    // length) is computed now, in float, and becomes a constant.
    if (std::all_of(n.inputs.begin(), n.inputs.end(), [&L](std::int64_t v) { return v < 0 || L.is_const(v); })) {
      std::vector<Tensor> in;
      for (auto v : n.inputs) in.push_back(v >= 0 ? L.data(v) : Tensor());
      L.fold(n.output, evaluate_node(n, in));
      continue;
    }
    if (!rule || !rule->lower) {
      L.fail(n, fmt::format("the fixed-point runtime has no kernel for {}. Lowerable ops: {}", n.op, lowerable_ops()));
    }
    rule->lower(L, n);
  }
  L.finish_output();
  Program p = std::move(L.program());
  plan_memory(p);
  return p;
}

}  // namespace microtorch::lower
