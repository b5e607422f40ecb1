// The graph IR (graph.hpp): its values, validation against the op table, and printing.
#include "microtorch/lower/graph.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "rules.hpp"
#include "value_shape.hpp"

namespace microtorch::lower {

std::string_view kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Input: return "input";
    case ValueKind::Parameter: return "parameter";
    case ValueKind::Constant: return "constant";
    case ValueKind::OpOutput: return "op";
  }
  return "?";
}

const Value& Graph::value(std::int64_t id) const {
  if (id < 0 || id >= static_cast<std::int64_t>(values.size())) {
    throw IndexError(fmt::format("Graph::value: no value %{} (the graph has {})", id, values.size()));
  }
  return values[static_cast<std::size_t>(id)];
}

// ---- validation ----------------------------------------------------------------------------

// The largest tensor the lowering handles: the firmware indexes elements with C int.
constexpr std::int64_t kMaxElements = INT32_MAX;

void check_value_shape(std::int64_t id, const Shape& shape) {
  std::int64_t n = 1;
  for (const auto d : shape) {
    if (d < 0) throw ValueError(fmt::format("value %{} has a negative dim in its shape {}", id, shape_str(shape)));
  }
  for (const auto d : shape) {
    if (d != 0 && n > kMaxElements / d) {
      throw ValueError(fmt::format("value %{} has shape {}: more than 2^31 - 1 elements, more than the lowering "
                                   "and the firmware's int indexing handle",
                                   id, shape_str(shape)));
    }
    n *= d;
  }
}

namespace {

bool attr_has_type(const autograd::Attr& a, AttrSpec::Type t) {
  switch (t) {
    case AttrSpec::Type::Int: return std::holds_alternative<std::int64_t>(a);
    case AttrSpec::Type::Float: return std::holds_alternative<double>(a);
    case AttrSpec::Type::Bool: return std::holds_alternative<bool>(a);
    case AttrSpec::Type::String: return std::holds_alternative<std::string>(a);
    case AttrSpec::Type::Shape: return std::holds_alternative<Shape>(a);
  }
  return false;
}

}  // namespace

void Graph::validate() const {
  const auto n_values = static_cast<std::int64_t>(values.size());
  auto in_range = [n_values](std::int64_t id) { return id >= 0 && id < n_values; };
  if (!in_range(input) || values[static_cast<std::size_t>(input)].kind != ValueKind::Input) {
    throw ValueError(fmt::format("\"input\" is %{}, which is not an input value of the {} values", input, n_values));
  }
  for (std::int64_t i = 0; i < n_values; ++i) {
    const Value& v = values[static_cast<std::size_t>(i)];
    if (v.id != i) throw ValueError(fmt::format("value at position {} has id {}; ids must be 0, 1, 2, ...", i, v.id));
    check_value_shape(i, v.shape);
    const bool holds_data = v.kind == ValueKind::Parameter || v.kind == ValueKind::Constant;
    if (holds_data && !v.data.defined()) {
      throw ValueError(fmt::format("value %{} is a {} without data", i, kind_name(v.kind)));
    }
    if (holds_data && (v.data.shape() != v.shape || v.data.dtype() != v.dtype)) {
      throw ValueError(fmt::format("value %{} is declared {}{} but its data is {}{}", i, dtype_name(v.dtype),
                                   shape_str(v.shape), dtype_name(v.data.dtype()), shape_str(v.data.shape())));
    }
    if (v.kind == ValueKind::Input && i != input) {
      throw ValueError(fmt::format("value %{} is an input, but the graph's input is %{} (a graph has one input)", i, input));
    }
  }
  if (!in_range(output)) throw ValueError(fmt::format("\"output\" is %{}, not one of the {} values", output, n_values));
  // Every value is defined before it is read: nodes come in topological order, so a cycle
  // (or a node that reads a later node's output) is refused here.
  std::vector<char> defined(values.size(), 0);
  for (const Value& v : values) defined[static_cast<std::size_t>(v.id)] = v.kind != ValueKind::OpOutput;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = nodes[k];
    const std::string where = fmt::format("node {} ({} -> %{})", k, n.op, n.output);
    if (!in_range(n.output)) throw ValueError(fmt::format("{}: its output %{} is not one of the {} values", where, n.output, n_values));
    const Value& out = values[static_cast<std::size_t>(n.output)];
    if (out.kind != ValueKind::OpOutput) {
      throw ValueError(fmt::format("{}: its output %{} is a {}, not an op output", where, n.output, kind_name(out.kind)));
    }
    if (defined[static_cast<std::size_t>(n.output)]) {
      throw ValueError(fmt::format("{}: %{} is already the output of an earlier node", where, n.output));
    }
    for (const auto i : n.inputs) {
      if (i == -1) continue;
      if (!in_range(i)) throw ValueError(fmt::format("{}: input %{} is not one of the {} values", where, i, n_values));
      if (!defined[static_cast<std::size_t>(i)]) {
        throw ValueError(fmt::format("{}: input %{} is not defined before this node (nodes must be in topological "
                                     "order: a cycle, or a node listed before the one it reads)",
                                     where, i));
      }
    }
    for (std::size_t a = 0; a < n.attrs.size(); ++a) {
      for (std::size_t b = 0; b < a; ++b) {
        if (n.attrs[a].first == n.attrs[b].first) {
          throw ValueError(fmt::format("{}: attribute {} appears twice", where, n.attrs[a].first));
        }
      }
    }
    if (const OpRule* rule = find_rule(n.op)) {
      const auto count = static_cast<int>(n.inputs.size());
      if (count < rule->min_inputs || count > rule->max_inputs) {
        throw ValueError(fmt::format("{}: {} takes {} inputs, the node has {}", where, n.op,
                                     rule->min_inputs == rule->max_inputs
                                         ? fmt::format("{}", rule->min_inputs)
                                         : fmt::format("{} to {}", rule->min_inputs, rule->max_inputs),
                                     count));
      }
      for (int i = 0; i < rule->min_inputs; ++i) {
        if (n.inputs[static_cast<std::size_t>(i)] < 0) throw ValueError(fmt::format("{}: input {} is missing", where, i));
      }
      for (const AttrSpec& spec : rule->attrs) {
        auto it = std::find_if(n.attrs.begin(), n.attrs.end(), [&](const auto& a) { return a.first == spec.name; });
        if (it == n.attrs.end()) throw ValueError(fmt::format("{}: attribute {} is missing", where, spec.name));
        if (!attr_has_type(it->second, spec.type)) {
          throw ValueError(fmt::format("{}: attribute {} must be of type {}", where, spec.name, attr_type_name(spec.type)));
        }
      }
    }
    defined[static_cast<std::size_t>(n.output)] = 1;
  }
  if (!defined[static_cast<std::size_t>(output)]) {
    throw ValueError(fmt::format("\"output\" is %{}, which no node computes", output));
  }
}

// ---- printing ------------------------------------------------------------------------------

namespace {

std::string attr_str(const autograd::Attr& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return fmt::format("\"{}\"", v);
        } else if constexpr (std::is_same_v<T, Shape>) {
          return shape_str(v);
        } else {
          return fmt::format("{}", v);
        }
      },
      a);
}

}  // namespace

std::string Graph::to_string() const {
  std::string out;
  if (input >= 0) {
    const Value& in = value(input);
    out += fmt::format("graph(%{}: {}{}) -> %{}\n", in.id, dtype_name(in.dtype), shape_str(in.shape), output);
  }
  auto ref = [this](std::int64_t id) -> std::string {
    if (id < 0) return "_";
    const Value& v = value(id);
    switch (v.kind) {
      case ValueKind::Parameter: return v.name;
      case ValueKind::Constant:
        if (v.data.defined() && v.data.numel() == 1) return fmt::format("{}", v.data.item<double>());
        return fmt::format("%{}:const{}", id, shape_str(v.shape));
      default: return fmt::format("%{}", id);
    }
  };
  for (const Node& n : nodes) {
    std::string args;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) args += (i ? ", " : "") + ref(n.inputs[i]);
    std::string attrs;
    for (std::size_t i = 0; i < n.attrs.size(); ++i) {
      attrs += fmt::format("{}{}={}", i ? ", " : " {", n.attrs[i].first, attr_str(n.attrs[i].second));
    }
    if (!attrs.empty()) attrs += "}";
    const Shape& from = !n.inputs.empty() && n.inputs[0] >= 0 ? value(n.inputs[0]).shape : Shape{};
    out += fmt::format("%{} = {}({}){}  {} -> {}\n", n.output, n.op, args, attrs, shape_str(from),
                       shape_str(value(n.output).shape));
  }
  return out;
}

}  // namespace microtorch::lower
