// The graph IR as JSON plus its tensors (graph.hpp): to_json, from_json, save and load.
#include <cmath>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "microtorch/io.hpp"
#include "microtorch/lower/graph.hpp"
#include "value_shape.hpp"

namespace microtorch::lower {

using json = nlohmann::json;

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
