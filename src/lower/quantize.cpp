// quantize — a traced Graph to a Program of integer kernel calls (see quantize.hpp): each
// node is folded into a constant when it depends on constants alone, and otherwise lowered
// by its op's rule from the op table (rules.hpp); then the output buffer and the arena.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "lowering.hpp"
#include "microtorch/error.hpp"
#include "microtorch/ops.hpp"
#include "rules.hpp"

namespace microtorch::lower {

void check_firmware_name(const std::string& name) {
  auto refuse = [&name](const std::string& why) {
    throw ValueError(fmt::format("lower: the firmware name \"{}\" {}; it prefixes the firmware's files and C "
                                 "symbols (<name>.h, <name>_run), so it must be a C identifier (letters, digits and _, "
                                 "starting with a letter), e.g. \"model\"",
                                 name, why));
  };
  if (name.empty()) refuse("is empty");
  if (name.size() > 40) refuse("is longer than 40 characters");
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') refuse(fmt::format("contains '{}'", c));
  }
  if (std::isdigit(static_cast<unsigned char>(name[0]))) refuse("starts with a digit");
  if (name[0] == '_') refuse("starts with '_' (C reserves such names)");
  std::string lower_case = name;
  for (char& c : lower_case) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower_case == "mt" || lower_case.rfind("mt_", 0) == 0) {
    refuse("is in the runtime's namespace (mt_kernels.h/.c, mt_* functions, MT_* macros)");
  }
}

void lower_nodes(Lowering& L) {
  const Graph& graph = L.graph();
  // Every node is also evaluated in float, on zeros for the input: that checks the shape and
  // dtype the graph declares for it against what its op computes (the rules rely on them),
  // and gives the values of nodes of constants only, which fold into constants (a
  // positional table sliced to the sequence length); not those of a trained parameter.
  std::vector<Tensor> env(graph.values.size());
  for (const Value& v : graph.values) env[static_cast<std::size_t>(v.id)] = v.data;
  const Value& in = graph.value(graph.input);
  env[static_cast<std::size_t>(graph.input)] = zeros(in.shape, in.dtype);
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    L.begin_node(static_cast<std::int64_t>(i));
    const OpRule* rule = find_rule(n.op);
    if (!rule) {
      L.fail(n, fmt::format("the fixed-point runtime has no kernel for {}. Lowerable ops: {}", n.op, lowerable_ops()));
    }
    std::vector<Tensor> args;
    for (auto v : n.inputs) args.push_back(v >= 0 ? env[static_cast<std::size_t>(v)] : Tensor());
    Tensor y;
    try {
      y = rule->evaluate(n, args);
    } catch (const Error& e) {
      L.fail(n, fmt::format("the graph is inconsistent: {}", e.what()));
    }
    const Value& out = graph.value(n.output);
    if (y.shape() != out.shape || y.dtype() != out.dtype) {
      L.fail(n, fmt::format("the graph declares {}{} for its output, but {} gives {}{}", dtype_name(out.dtype),
                            shape_str(out.shape), n.op, dtype_name(y.dtype()), shape_str(y.shape())));
    }
    env[static_cast<std::size_t>(n.output)] = y;
    if (std::all_of(n.inputs.begin(), n.inputs.end(),
                    [&L](std::int64_t v) { return v < 0 || (L.is_const(v) && !L.needs_grad(v)); })) {
      L.fold(n.output, y);
      continue;
    }
    if (L.absorbed(i)) continue;  // folded into the linear layer that reads it
    const auto& lower = L.float32() ? rule->lower_f32 : rule->lower;
    if (!lower) {
      L.fail(n, L.float32() ? fmt::format("{} has no float32 kernel, so neither a float32 program nor its training "
                                          "step runs through it; train with Numeric::Integer, or replace it by an op "
                                          "that trains in float32 (docs/lowering.md lists them)",
                                          n.op)
                            : fmt::format("the fixed-point runtime has no kernel for {}. Lowerable ops: {}", n.op,
                                          lowerable_ops()));
    }
    lower(L, n);
  }
}

Program quantize(const Graph& graph, const Calibration& calibration, const QuantOptions& options) {
  graph.validate();
  Lowering L(graph, calibration, options);
  lower_nodes(L);
  L.finish_output();
  Program p = std::move(L.program());
  plan_memory(p);
  return p;
}

}  // namespace microtorch::lower
