// trace (graph.hpp): a forward pass recorded under autograd's TraceGuard, walked from the
// output into the graph IR; input-independent subgraphs folded into constants.
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "microtorch/lower/graph.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

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

}  // namespace microtorch::lower
