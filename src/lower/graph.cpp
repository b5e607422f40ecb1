// Tracing a forward pass into the graph IR, printing it, and (de)serialising it.
#include "microtorch/lower/graph.hpp"

#include <cmath>
#include <filesystem>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "microtorch/io.hpp"
#include "microtorch/ops.hpp"
#include "rules.hpp"

namespace microtorch::lower {

using json = nlohmann::json;

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

namespace {

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

// ---- trace -------------------------------------------------------------------------------

Graph trace(const std::function<Tensor(const Tensor&)>& fn, const Tensor& example, const nn::NamedTensors& names) {
  const Tensor x = example.detach().clone();
  Tensor y;
  {
    autograd::TraceGuard trace_guard;
    NoGradGuard no_grad;  // the trace records anyway; nothing here should ask for gradients
    y = fn(x);
  }
  if (!y.defined()) throw ValueError("trace: the function returned an undefined tensor");

  std::unordered_map<const TensorImpl*, std::string> param_name;
  for (const auto& [n, t] : names) {
    if (t.defined()) param_name.emplace(t.impl_ptr().get(), n);
  }

  Graph g;
  auto add_value = [&g](ValueKind kind, const Shape& shape, Dtype dtype, std::string name, Tensor data) {
    Value v;
    v.id = static_cast<std::int64_t>(g.values.size());
    v.kind = kind;
    v.shape = shape;
    v.dtype = dtype;
    v.name = std::move(name);
    v.data = std::move(data);
    g.values.push_back(std::move(v));
    return g.values.back().id;
  };
  g.input = add_value(ValueKind::Input, x.shape(), x.dtype(), "", Tensor());

  if (!y.grad_fn()) {
    if (y.is_same(x)) {
      g.output = g.input;
      return g;
    }
    throw ValueError(fmt::format(
        "trace: the output (shape {}, {}) was not produced by a recorded op on the input; was it computed "
        "outside microtorch's ops (e.g. from raw data pointers) or from a detached tensor?",
        shape_str(y.shape()), dtype_name(y.dtype())));
  }

  // Topological order by an iterative post-order walk; `live` = depends on the input or a
  // parameter. Anything else is folded into a constant where it is consumed.
  using autograd::Edge;
  std::vector<autograd::Node*> order;
  std::unordered_map<const autograd::Node*, bool> live;
  {
    std::vector<std::pair<autograd::Node*, std::size_t>> stack{{y.grad_fn().get(), 0}};
    std::unordered_set<const autograd::Node*> seen{y.grad_fn().get()};
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->inputs.size()) {
        const Edge& e = n->inputs[next++];
        if (e.node && seen.insert(e.node.get()).second) stack.emplace_back(e.node.get(), 0);
        continue;
      }
      bool l = false;
      for (const Edge& e : n->inputs) {
        if (e.node) {
          l = l || live.at(e.node.get());
        } else if (e.value) {
          l = l || e.value.get() == x.impl_ptr().get() || param_name.count(e.value.get()) != 0;
        }
      }
      live[n] = l;
      order.push_back(n);
      stack.pop_back();
    }
  }
  if (!live.at(y.grad_fn().get())) {
    throw ValueError("trace: the output does not depend on the input or on any parameter");
  }

  std::unordered_map<const TensorImpl*, std::int64_t> leaf_id{{x.impl_ptr().get(), g.input}};
  std::unordered_map<const autograd::Node*, std::int64_t> node_id;
  auto edge_value = [&](const Edge& e, const autograd::Node& consumer) -> std::int64_t {
    if (e.node && live.at(e.node.get())) return node_id.at(e.node.get());
    if (e.node) {  // an input-independent subgraph: fold it
      if (auto it = node_id.find(e.node.get()); it != node_id.end()) return it->second;
      if (!e.value) {
        throw ValueError(fmt::format("trace: {} has an input recorded without its value; was the TraceGuard active?",
                                     consumer.op));
      }
      const auto id = add_value(ValueKind::Constant, e.shape, e.dtype, "", Tensor(e.value).detach().clone());
      node_id.emplace(e.node.get(), id);
      return id;
    }
    if (!e.value) return -1;  // an absent optional input
    if (auto it = leaf_id.find(e.value.get()); it != leaf_id.end()) return it->second;
    const Tensor t(e.value);
    std::int64_t id;
    if (auto it = param_name.find(e.value.get()); it != param_name.end()) {
      id = add_value(ValueKind::Parameter, t.shape(), t.dtype(), it->second, t.detach().clone());
    } else {
      id = add_value(ValueKind::Constant, t.shape(), t.dtype(), "", t.detach().clone());
    }
    leaf_id.emplace(e.value.get(), id);
    return id;
  };
  for (autograd::Node* n : order) {
    if (!live.at(n)) continue;
    Node node;
    node.op = n->op;
    node.attrs = n->attrs;
    for (const Edge& e : n->inputs) node.inputs.push_back(edge_value(e, *n));
    node.output = add_value(ValueKind::OpOutput, n->shape, n->dtype, "", Tensor());
    node_id.emplace(n, node.output);
    g.nodes.push_back(std::move(node));
  }
  g.output = node_id.at(y.grad_fn().get());
  g.validate();
  return g;
}

Graph trace(nn::Module& model, const Tensor& example) {
  for (const auto& [path, m] : model.named_modules()) {
    if (m->is_training()) {
      throw ValueError(fmt::format(
          "trace: {} ({}) is in training mode; call model.eval() before tracing (in training mode dropout and "
          "other training-only behaviour would be baked into the graph)",
          path.empty() ? "the model" : "module " + path, m->type_name()));
    }
  }
  // What the state dict holds is named in the graph (a parameter); anything else the forward
  // uses, non-persistent buffers included, is a constant and folds where it can.
  return trace([&model](const Tensor& in) { return model.forward(in); }, example, model.state_dict());
}

Graph trace(nn::Module& model, const Shape& input_shape, Dtype dtype) {
  return trace(model, zeros(input_shape, dtype));
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

// ---- JSON ----------------------------------------------------------------------------------

namespace {

constexpr const char* kFormat = "microtorch.graph";
constexpr int kVersion = 1;

std::string data_key(const Value& v) { return v.kind == ValueKind::Parameter ? v.name : fmt::format("const.{}", v.id); }

json double_json(double d) {
  if (std::isfinite(d)) return d;
  return std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");  // JSON has no inf/nan
}
double json_double(const json& j) {
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    throw ValueError(fmt::format("\"{}\" is not a number", s));
  }
  return j.get<double>();
}

// An integer of the JSON (never a float or a bool converted, never an unsigned beyond int64).
std::int64_t json_int(const json& j, const std::string& what) {
  if (j.is_number_integer() && !(j.is_number_unsigned() && j.get<std::uint64_t>() > INT64_MAX)) {
    return j.get<std::int64_t>();
  }
  throw ValueError(fmt::format("{} must be an integer that fits int64, got {}", what, j.dump()));
}

Shape json_shape(const json& j, const std::string& what) {
  if (!j.is_array()) throw ValueError(fmt::format("{} must be an array of integers, got {}", what, j.dump()));
  Shape s;
  for (const json& d : j) s.push_back(json_int(d, what));
  return s;
}

std::string json_string(const json& j, const std::string& what) {
  if (!j.is_string()) throw ValueError(fmt::format("{} must be a string, got {}", what, j.dump()));
  return j.get<std::string>();
}

json attr_json(const std::string& name, const autograd::Attr& a) {
  json j{{"name", name}};
  std::visit(
      [&j](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>) {
          j["type"] = "int", j["value"] = v;
        } else if constexpr (std::is_same_v<T, double>) {
          j["type"] = "float", j["value"] = double_json(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          j["type"] = "bool", j["value"] = v;
        } else if constexpr (std::is_same_v<T, std::string>) {
          j["type"] = "string", j["value"] = v;
        } else {
          j["type"] = "shape", j["value"] = v;
        }
      },
      a);
  return j;
}

autograd::Attr json_attr(const json& j, const std::string& what) {
  const auto type = json_string(j.at("type"), what + " type");
  const json& v = j.at("value");
  if (type == "int") return json_int(v, what);
  if (type == "float") {
    if (!v.is_number() && !v.is_string()) throw ValueError(fmt::format("{} must be a number, got {}", what, v.dump()));
    return json_double(v);
  }
  if (type == "bool") {
    if (!v.is_boolean()) throw ValueError(fmt::format("{} must be true or false, got {}", what, v.dump()));
    return v.get<bool>();
  }
  if (type == "string") return json_string(v, what);
  if (type == "shape") return json_shape(v, what);
  throw ValueError(fmt::format("{} has the unknown type \"{}\" (int, float, bool, string or shape)", what, type));
}

Dtype parse_dtype(const std::string& s) {
  for (Dtype d : {Dtype::Float32, Dtype::Float64, Dtype::Int64, Dtype::Bool}) {
    if (dtype_name(d) == s) return d;
  }
  throw ValueError(fmt::format("unknown dtype \"{}\"", s));
}

ValueKind parse_kind(const std::string& s) {
  for (ValueKind k : {ValueKind::Input, ValueKind::Parameter, ValueKind::Constant, ValueKind::OpOutput}) {
    if (kind_name(k) == s) return k;
  }
  throw ValueError(fmt::format("unknown value kind \"{}\"", s));
}

}  // namespace

json Graph::to_json() const {
  json j{{"format", kFormat}, {"version", kVersion}, {"input", input}, {"output", output}};
  json vs = json::array();
  for (const Value& v : values) {
    json jv{{"id", v.id}, {"kind", kind_name(v.kind)}, {"shape", v.shape}, {"dtype", dtype_name(v.dtype)}};
    if (!v.name.empty()) jv["name"] = v.name;
    if (v.data.defined()) jv["data"] = data_key(v);
    vs.push_back(std::move(jv));
  }
  json ns = json::array();
  for (const Node& n : nodes) {
    json attrs = json::array();
    for (const auto& [k, a] : n.attrs) attrs.push_back(attr_json(k, a));
    ns.push_back({{"op", n.op}, {"inputs", n.inputs}, {"output", n.output}, {"attrs", std::move(attrs)}});
  }
  j["values"] = std::move(vs);
  j["nodes"] = std::move(ns);
  return j;
}

std::vector<std::pair<std::string, Tensor>> Graph::weights() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Value& v : values) {
    if (v.data.defined()) out.emplace_back(data_key(v), v.data);
  }
  return out;
}

Graph Graph::from_json(const json& j, const std::vector<std::pair<std::string, Tensor>>& weights,
                       const std::string& source) {
  std::unordered_map<std::string, const Tensor*> by_key;
  for (const auto& [k, t] : weights) by_key.emplace(k, &t);
  Graph g;
  try {
    if (!j.is_object() || !j.contains("format") || j.at("format") != kFormat) {
      throw ValueError(fmt::format("not a microtorch graph (expected \"format\": \"{}\")", kFormat));
    }
    if (json_int(j.at("version"), "\"version\"") != kVersion) {
      throw ValueError(fmt::format("unsupported version {} (this build reads {})", j.at("version").dump(), kVersion));
    }
    for (const json& jv : j.at("values")) {
      Value v;
      const std::string what = fmt::format("value at position {}", g.values.size());
      v.id = json_int(jv.at("id"), what + " \"id\"");
      if (v.id != static_cast<std::int64_t>(g.values.size())) {
        throw ValueError(fmt::format("value ids must be 0, 1, 2, ... in order; found {} at position {}", v.id,
                                     g.values.size()));
      }
      v.kind = parse_kind(json_string(jv.at("kind"), what + " \"kind\""));
      v.shape = json_shape(jv.at("shape"), fmt::format("the shape of value %{}", v.id));
      check_value_shape(v.id, v.shape);
      v.dtype = parse_dtype(json_string(jv.at("dtype"), what + " \"dtype\""));
      if (jv.contains("name")) v.name = json_string(jv.at("name"), what + " \"name\"");
      if (jv.contains("data")) {
        const auto key = json_string(jv.at("data"), what + " \"data\"");
        auto it = by_key.find(key);
        if (it == by_key.end()) throw IoError(fmt::format("{}: weight \"{}\" (value %{}) is missing", source, key, v.id));
        const Tensor& t = *it->second;
        if (t.shape() != v.shape || t.dtype() != v.dtype) {
          throw IoError(fmt::format("{}: weight \"{}\" (value %{}) is {}{} but the graph expects {}{}", source, key,
                                    v.id, dtype_name(t.dtype()), shape_str(t.shape()), dtype_name(v.dtype),
                                    shape_str(v.shape)));
        }
        v.data = t;
      }
      g.values.push_back(std::move(v));
    }
    g.input = json_int(j.at("input"), "\"input\"");
    g.output = json_int(j.at("output"), "\"output\"");
    for (const json& jn : j.at("nodes")) {
      Node n;
      const std::string what = fmt::format("node {}", g.nodes.size());
      n.op = json_string(jn.at("op"), what + " \"op\"");
      if (!jn.at("inputs").is_array()) throw ValueError(fmt::format("{} ({}): \"inputs\" must be an array", what, n.op));
      for (const json& ji : jn.at("inputs")) n.inputs.push_back(json_int(ji, fmt::format("an input of {} ({})", what, n.op)));
      n.output = json_int(jn.at("output"), fmt::format("the output of {} ({})", what, n.op));
      if (!jn.at("attrs").is_array()) throw ValueError(fmt::format("{} ({}): \"attrs\" must be an array", what, n.op));
      for (const json& ja : jn.at("attrs")) {
        const auto name = json_string(ja.at("name"), fmt::format("an attribute name of {} ({})", what, n.op));
        n.attrs.emplace_back(name, json_attr(ja, fmt::format("attribute {} of {} ({})", name, what, n.op)));
      }
      g.nodes.push_back(std::move(n));
    }
    g.validate();
  } catch (const IoError&) {
    throw;
  } catch (const json::exception& e) {
    throw IoError(fmt::format("{}: malformed graph JSON: {}", source, e.what()));
  } catch (const Error& e) {
    throw IoError(fmt::format("{}: malformed graph JSON: {}", source, e.what()));
  }
  return g;
}

namespace {

// "out/mlp", "out/mlp.json" and "out/mlp.npz" all name out/mlp.json + out/mlp.npz.
std::string graph_prefix(const std::string& path) {
  for (const std::string ext : {".json", ".npz"}) {
    if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) {
      return path.substr(0, path.size() - ext.size());
    }
  }
  return path;
}

}  // namespace

void save(const Graph& graph, const std::string& path) {
  const std::string prefix = graph_prefix(path);
  const std::string json_path = prefix + ".json", npz_path = prefix + ".npz";
  const std::filesystem::path dir = std::filesystem::path(prefix).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("save: cannot create the directory {}: {}", dir.string(), ec.message()));
  save_npz(graph.weights(), npz_path);
  write_file(json_path, graph.to_json().dump(1) + "\n", "save");
}

Graph load(const std::string& path) {
  const std::string prefix = graph_prefix(path);
  const std::string json_path = prefix + ".json", npz_path = prefix + ".npz";
  const std::string text = read_file(json_path, "load");  // regular files only; IoError names the file
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw IoError(fmt::format("load: {} is not valid JSON: {}", json_path, e.what()));
  }
  return Graph::from_json(j, load_npz(npz_path), json_path + " (weights " + npz_path + ")");
}

}  // namespace microtorch::lower
