// affine_input (affine_input.hpp): the elementwise affine chain in front of a linear layer.
#include "affine_input.hpp"

#include <algorithm>
#include <cmath>

#include "microtorch/ops.hpp"
#include "rules.hpp"
#include "value_uses.hpp"

namespace microtorch::lower {

std::vector<bool> constant_values(const Graph& g) {
  std::vector<bool> c(g.values.size(), false);
  for (const Value& v : g.values) {
    c[static_cast<std::size_t>(v.id)] = v.kind == ValueKind::Parameter || v.kind == ValueKind::Constant;
  }
  for (const Node& n : g.nodes) {
    c[static_cast<std::size_t>(n.output)] = std::all_of(n.inputs.begin(), n.inputs.end(), [&c](std::int64_t v) {
      return v < 0 || c[static_cast<std::size_t>(v)];
    });
  }
  return c;
}

std::optional<AffineInput> affine_input(const Graph& g, const Node& linear,
                                        const std::function<Tensor(std::int64_t)>& data) {
  const OpRule* layer = find_rule(linear.op);
  const std::vector<bool> constant = constant_values(g);
  if (!layer || !layer->folds_affine_input || !layer->weighted(linear, constant)) return std::nullopt;
  const Shape& xs = g.value(linear.inputs[0]).shape;
  const std::int64_t in = xs.empty() ? 1 : xs.back();
  const ValueUses uses = value_uses(g);
  const std::vector<std::int64_t>&producer = uses.producer, &readers = uses.readers;
  AffineInput chain;
  std::vector<double> a(static_cast<std::size_t>(in), 1.0), c(static_cast<std::size_t>(in), 0.0);
  std::int64_t x = linear.inputs[0];
  while (x != g.output && readers[static_cast<std::size_t>(x)] == 1 && producer[static_cast<std::size_t>(x)] >= 0) {
    const Node& n = g.nodes[static_cast<std::size_t>(producer[static_cast<std::size_t>(x)])];
    const OpRule* link = find_rule(n.op);
    if (!link || !link->affine_link || n.inputs.size() != 2 || n.inputs[0] < 0 || n.inputs[1] < 0) break;
    const bool k0 = constant[static_cast<std::size_t>(n.inputs[0])], k1 = constant[static_cast<std::size_t>(n.inputs[1])];
    double s0, o0;
    if (k0 == k1 || !link->affine_link(1.0, k0, s0, o0)) break;  // one constant operand, on a side that is affine
    const std::int64_t act = k0 ? n.inputs[1] : n.inputs[0], k = k0 ? n.inputs[0] : n.inputs[1];
    if (g.value(act).shape != g.value(n.output).shape) break;
    const Shape& ks = g.value(k).shape;  // a scalar or one value per feature: [..., 1, in] or all ones
    const std::int64_t kn = numel_of(ks);
    if (!(kn == 1 || (kn == in && !ks.empty() && ks.back() == in))) break;
    if (data) {
      const Tensor t = data(k);
      if (!t.defined()) break;
      const Tensor d = t.to(Dtype::Float64).contiguous().reshape({-1});
      std::vector<double> s(static_cast<std::size_t>(in)), o(static_cast<std::size_t>(in));
      bool ok = true;
      for (std::int64_t j = 0; j < in; ++j) {
        const double v = d.data<double>()[kn == 1 ? 0 : j];
        // this link: next = s * prev + o
        ok = ok && std::isfinite(v) && link->affine_link(v, k0, s[j], o[j]);
      }
      if (!ok) break;
      // the chain so far maps this link's output: lin = a * next + c = a s prev + (a o + c)
      for (std::size_t j = 0; j < a.size(); ++j) c[j] += a[j] * o[j], a[j] *= s[j];
    }
    chain.nodes.push_back(producer[static_cast<std::size_t>(x)]);
    x = act;
  }
  if (chain.nodes.empty()) return std::nullopt;
  std::reverse(chain.nodes.begin(), chain.nodes.end());
  chain.root = x;
  if (data) chain.scale = std::move(a), chain.shift = std::move(c);
  return chain;
}

}  // namespace microtorch::lower
