// lower::evaluate — the float reference for a traced graph: every node re-executed by its
// op's float rule (the op table, rules.hpp) with its recorded attributes. Calibration and
// the accuracy checks of the fixed-point program both measure against it.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "microtorch/error.hpp"
#include "microtorch/lower/graph.hpp"
#include "microtorch/ops.hpp"
#include "rules.hpp"

namespace microtorch::lower {

Tensor evaluate_node(const Node& n, const std::vector<Tensor>& in) {
  const OpRule* rule = find_rule(n.op);
  if (!rule) {
    throw ValueError(fmt::format("evaluate: %{} = {}: the lowering knows no op of that name, so it has no float "
                                 "rule for it. Lowerable ops: {}",
                                 n.output, n.op, lowerable_ops()));
  }
  return rule->evaluate(n, in);
}
std::vector<Tensor> split_stacked(const Shape& in, const Tensor& data, const char* who) {
  if (data.shape() == in) return {data};
  const std::int64_t batch = in.empty() ? 1 : in[0];
  const std::string rest = in.size() > 1 ? fmt::format(", {}", fmt::join(in.begin() + 1, in.end(), ", ")) : "";
  if (in.empty() || batch <= 0 || data.dim() != static_cast<std::int64_t>(in.size()) ||
      !std::equal(in.begin() + 1, in.end(), data.shape().begin() + 1) || data.size(0) == 0) {
    throw ShapeError(fmt::format("{}: data of shape {} does not stack inputs of the graph's shape {}; pass "
                                 "[N * {}{}] (N samples along dim 0)",
                                 who, shape_str(data.shape()), shape_str(in), batch, rest));
  }
  if (data.size(0) % batch != 0) {
    throw ShapeError(fmt::format("{}: data of shape {} does not stack inputs of the graph's shape {}: its {} rows are "
                                 "not a multiple of the traced batch {} ({} left over); pass [N * {}{}], or trace "
                                 "with batch 1 to take any number of rows",
                                 who, shape_str(data.shape()), shape_str(in), data.size(0), batch,
                                 data.size(0) % batch, batch, rest));
  }
  std::vector<Tensor> out;
  for (std::int64_t s = 0; s < data.size(0) / batch; ++s) out.push_back(slice(data, 0, s * batch, (s + 1) * batch));
  return out;
}

std::vector<Tensor> split_inputs(const Graph& graph, const Tensor& data, const char* who) {
  return split_stacked(graph.value(graph.input).shape, data, who);
}

std::vector<Tensor> evaluate(const Graph& graph, const Tensor& input) {
  graph.validate();
  const Value& in = graph.value(graph.input);
  if (input.shape() != in.shape) {
    throw ShapeError(fmt::format("evaluate: the graph takes an input of shape {}, got {}", shape_str(in.shape),
                                 shape_str(input.shape())));
  }
  std::vector<Tensor> env(graph.values.size());
  for (const Value& v : graph.values) env[static_cast<std::size_t>(v.id)] = v.data;
  env[static_cast<std::size_t>(graph.input)] = input.to(in.dtype);
  NoGradGuard no_grad;
  for (const Node& n : graph.nodes) {
    std::vector<Tensor> args;
    for (const auto i : n.inputs) args.push_back(i >= 0 ? env[static_cast<std::size_t>(i)] : Tensor());
    Tensor y = evaluate_node(n, args);
    const Value& out = graph.value(n.output);
    if (y.shape() != out.shape || y.dtype() != out.dtype) {
      throw ShapeError(fmt::format("evaluate: %{} = {} gave {}{}, the graph says {}{}", n.output, n.op,
                                   dtype_name(y.dtype()), shape_str(y.shape()), dtype_name(out.dtype),
                                   shape_str(out.shape)));
    }
    env[static_cast<std::size_t>(n.output)] = std::move(y);
  }
  return env;
}

}  // namespace microtorch::lower
