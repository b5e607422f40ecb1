// lower::evaluate — the float reference for a traced graph: every node re-executed with the
// library's own ops and its recorded attributes. Calibration and the accuracy checks of the
// fixed-point program both measure against it.
#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "microtorch/lower/graph.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

template <class T>
const T& attr(const Node& n, const char* key) {
  for (const auto& [k, v] : n.attrs) {
    if (k == key) {
      if (const T* p = std::get_if<T>(&v)) return *p;
      throw ValueError(fmt::format("evaluate: attribute {} of {} has an unexpected type", key, n.op));
    }
  }
  throw ValueError(fmt::format("evaluate: {} has no attribute {}", n.op, key));
}

std::vector<std::int64_t> dims_of(const Node& n) {
  const Shape& d = attr<Shape>(n, "dims");
  return {d.begin(), d.end()};
}

}  // namespace

Tensor evaluate_node(const Node& n, const std::vector<Tensor>& in) {
  const std::string& op = n.op;
  auto arg = [&](std::size_t i) -> const Tensor& {
    static const Tensor none;
    return i < in.size() ? in[i] : none;
  };
  if (op == "linear") return linear(arg(0), arg(1), arg(2));
  if (op == "matmul") return matmul(arg(0), arg(1));
  if (op == "add") return arg(0) + arg(1);
  if (op == "sub") return arg(0) - arg(1);
  if (op == "mul") return arg(0) * arg(1);
  if (op == "div") return arg(0) / arg(1);
  if (op == "neg") return neg(arg(0));
  if (op == "relu") return relu(arg(0));
  if (op == "tanh") return tanh(arg(0));
  if (op == "sigmoid") return sigmoid(arg(0));
  if (op == "exp") return exp(arg(0));
  if (op == "gelu") return gelu(arg(0), attr<std::string>(n, "approximate"));
  if (op == "softmax") return softmax(arg(0), attr<std::int64_t>(n, "dim"));
  if (op == "log_softmax") return log_softmax(arg(0), attr<std::int64_t>(n, "dim"));
  if (op == "reshape") return reshape(arg(0), attr<Shape>(n, "shape"));
  if (op == "permute") return permute(arg(0), attr<Shape>(n, "dims"));
  if (op == "expand") return expand(arg(0), attr<Shape>(n, "shape"));
  if (op == "clone") return arg(0).clone();
  if (op == "slice") {
    return slice(arg(0), attr<std::int64_t>(n, "dim"), attr<std::int64_t>(n, "start"), attr<std::int64_t>(n, "end"),
                 attr<std::int64_t>(n, "step"));
  }
  if (op == "cat") return cat(in, attr<std::int64_t>(n, "dim"));
  if (op == "index_select") return index_select(arg(0), attr<std::int64_t>(n, "dim"), arg(1));
  if (op == "mean") return mean(arg(0), dims_of(n), attr<bool>(n, "keepdim"));
  if (op == "sum") return sum(arg(0), dims_of(n), attr<bool>(n, "keepdim"));
  if (op == "argmax") return argmax(arg(0), attr<std::int64_t>(n, "dim"), attr<bool>(n, "keepdim"));
  if (op == "layer_norm") {
    return layer_norm(arg(0), attr<Shape>(n, "normalized_shape"), arg(1), arg(2), attr<double>(n, "eps"));
  }
  if (op == "scaled_dot_product_attention") {
    const Mask mask = arg(3).defined() ? Mask::additive(arg(3)) : Mask();
    return std::get<0>(scaled_dot_product_attention(arg(0), arg(1), arg(2), mask, 0.0, attr<bool>(n, "is_causal"),
                                                    attr<double>(n, "scale")));
  }
  throw ValueError(fmt::format("evaluate: no float implementation for op \"{}\"", op));
}

std::vector<Tensor> evaluate(const Graph& graph, const Tensor& input) {
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
    if (y.shape() != graph.value(n.output).shape) {
      throw ShapeError(fmt::format("evaluate: %{} = {} gave shape {}, the graph says {}", n.output, n.op,
                                   shape_str(y.shape()), shape_str(graph.value(n.output).shape)));
    }
    env[static_cast<std::size_t>(n.output)] = std::move(y);
  }
  return env;
}

}  // namespace microtorch::lower
