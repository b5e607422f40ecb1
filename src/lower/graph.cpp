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
  return g;
}

Graph trace(nn::Module& model, const Tensor& example) {
  nn::NamedTensors names = model.named_parameters();
  for (auto& b : model.named_buffers()) names.push_back(std::move(b));
  return trace([&model](const Tensor& in) { return model.forward(in); }, example, names);
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

autograd::Attr json_attr(const json& j) {
  const auto type = j.at("type").get<std::string>();
  const json& v = j.at("value");
  if (type == "int") return v.get<std::int64_t>();
  if (type == "float") return json_double(v);
  if (type == "bool") return v.get<bool>();
  if (type == "string") return v.get<std::string>();
  if (type == "shape") return v.get<Shape>();
  throw ValueError(fmt::format("unknown attribute type \"{}\"", type));
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
    if (!j.is_object() || j.value("format", "") != kFormat) {
      throw ValueError(fmt::format("not a microtorch graph (expected \"format\": \"{}\")", kFormat));
    }
    if (j.at("version").get<int>() != kVersion) {
      throw ValueError(fmt::format("unsupported version {} (this build reads {})", j.at("version").dump(), kVersion));
    }
    for (const json& jv : j.at("values")) {
      Value v;
      v.id = jv.at("id").get<std::int64_t>();
      if (v.id != static_cast<std::int64_t>(g.values.size())) {
        throw ValueError(fmt::format("value ids must be 0, 1, 2, ... in order; found {} at position {}", v.id,
                                     g.values.size()));
      }
      v.kind = parse_kind(jv.at("kind").get<std::string>());
      v.shape = jv.at("shape").get<Shape>();
      v.dtype = parse_dtype(jv.at("dtype").get<std::string>());
      v.name = jv.value("name", "");
      if (jv.contains("data")) {
        const auto key = jv.at("data").get<std::string>();
        auto it = by_key.find(key);
        if (it == by_key.end()) throw IoError(fmt::format("{}: weight \"{}\" (value %{}) is missing", source, key, v.id));
        const Tensor& t = *it->second;
        if (t.shape() != v.shape || t.dtype() != v.dtype) {
          throw IoError(fmt::format("{}: weight \"{}\" (value %{}) is {}{} but the graph expects {}{}", source, key,
                                    v.id, dtype_name(t.dtype()), shape_str(t.shape()), dtype_name(v.dtype),
                                    shape_str(v.shape)));
        }
        v.data = t;
      } else if (v.kind == ValueKind::Parameter || v.kind == ValueKind::Constant) {
        throw ValueError(fmt::format("value %{} is a {} without \"data\"", v.id, kind_name(v.kind)));
      }
      g.values.push_back(std::move(v));
    }
    const auto n_values = static_cast<std::int64_t>(g.values.size());
    auto check_id = [n_values](std::int64_t id, const char* what) {
      if (id < -1 || id >= n_values) throw ValueError(fmt::format("{} refers to value %{} of {}", what, id, n_values));
      return id;
    };
    g.input = check_id(j.at("input").get<std::int64_t>(), "\"input\"");
    g.output = check_id(j.at("output").get<std::int64_t>(), "\"output\"");
    for (const json& jn : j.at("nodes")) {
      Node n;
      n.op = jn.at("op").get<std::string>();
      for (const json& ji : jn.at("inputs")) n.inputs.push_back(check_id(ji.get<std::int64_t>(), n.op.c_str()));
      n.output = check_id(jn.at("output").get<std::int64_t>(), n.op.c_str());
      for (const json& ja : jn.at("attrs")) n.attrs.emplace_back(ja.at("name").get<std::string>(), json_attr(ja));
      g.nodes.push_back(std::move(n));
    }
  } catch (const IoError&) {
    throw;
  } catch (const json::exception& e) {
    throw IoError(fmt::format("{}: malformed graph JSON: {}", source, e.what()));
  } catch (const Error& e) {
    throw IoError(fmt::format("{}: malformed graph JSON: {}", source, e.what()));
  }
  return g;
}

void save(const Graph& graph, const std::string& prefix) {
  const std::string json_path = prefix + ".json", npz_path = prefix + ".npz";
  const std::filesystem::path dir = std::filesystem::path(prefix).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("save: cannot create the directory {}: {}", dir.string(), ec.message()));
  save_npz(graph.weights(), npz_path);
  write_file(json_path, graph.to_json().dump(1) + "\n", "save");
}

Graph load(const std::string& prefix) {
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
