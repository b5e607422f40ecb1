#include "microtorch/autograd.hpp"

#include <cctype>
#include <unordered_map>

#include <fmt/format.h>

#include "microtorch/ops.hpp"
#include "autograd_checks.hpp"

namespace microtorch {

namespace {
thread_local bool grad_enabled = true;
}

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

namespace autograd {

namespace {
thread_local bool tracing = false;
}

bool is_tracing() { return tracing; }
TraceGuard::TraceGuard() : previous_(tracing) { tracing = true; }
TraceGuard::~TraceGuard() { tracing = previous_; }

std::string Node::name() const {
  std::string out;
  bool upper = true;
  for (char c : op) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out + "Backward";
}

Node::~Node() {
  std::vector<std::shared_ptr<Node>> orphans;
  auto take = [&orphans](Edge& e) {
    if (e.node) orphans.push_back(std::move(e.node));
    // A traced edge also holds the input tensor, which holds the same producer.
    if (e.value && e.value.use_count() == 1 && e.value->grad_fn) orphans.push_back(std::move(e.value->grad_fn));
    e.value.reset();
  };
  for (Edge& e : inputs) take(e);
  while (!orphans.empty()) {
    std::shared_ptr<Node> n = std::move(orphans.back());
    orphans.pop_back();
    if (n.use_count() != 1) continue;  // someone else still holds it
    for (Edge& e : n->inputs) take(e);
  }  // each n is destroyed here with no producers left to recurse into
}

const Attr* Node::attr(std::string_view key) const {
  for (const auto& [k, v] : attrs) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool needs_recording(const TensorList& inputs) {
  if (!is_grad_enabled()) return false;
  for (const auto& t : inputs) {
    if (t.requires_grad()) return true;
  }
  return false;
}

Tensor record_node(Tensor out, std::string_view op, const TensorList& inputs, const Saved& saved, BackwardFn backward,
                   Attrs attrs) {
  const bool grad = needs_recording(inputs);
  const std::int64_t anomaly_seq = detail::anomaly_enabled ? detail::check_forward(out, op, inputs, attrs) : 0;
  // Without a trace only floating outputs can carry gradients; a trace also records integer
  // results (token ids reshaped for an embedding, argmax) so the graph sees them.
  if (!(grad || tracing) || (!tracing && !out.is_floating_point())) return out;
  auto node = std::make_shared<Node>();
  node->op = std::string(op);
  node->attrs = std::move(attrs);
  node->backward = std::move(backward);
  node->shape = out.shape();
  node->dtype = out.dtype();
  node->output = out.impl_ptr();
  node->inputs.reserve(inputs.size());
  for (const auto& t : inputs) {
    Edge e;
    if (t.defined()) {
      e.shape = t.shape();
      e.dtype = t.dtype();
      e.requires_grad = t.requires_grad();
      if (t.grad_fn()) {
        e.node = t.grad_fn();
      } else if (t.requires_grad()) {
        e.leaf = t.impl_ptr();
      }
      if (tracing) e.value = t.impl_ptr();
    }
    node->inputs.push_back(std::move(e));
  }
  node->anomaly_seq = anomaly_seq;
  if (grad) detail::save(*node, saved, inputs, out);
  out.impl().grad_fn = std::move(node);
  out.impl().requires_grad = grad;  // a trace alone records, but does not ask for gradients
  return out;
}

// dL/dx for x broadcast to g's shape: sum over the dims broadcasting added or stretched.
Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const std::int64_t lead = grad.dim() - static_cast<std::int64_t>(shape.size());
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (shape[static_cast<std::size_t>(d - lead)] == 1 && grad.shape()[static_cast<std::size_t>(d)] != 1)) {
      dims.push_back(d);
    }
  }
  return reshape(sum(grad, dims, /*keepdim=*/true), shape);
}

namespace {

// Adds g into a leaf's .grad. A gradient another tensor may still hold is copied first,
// so that in-place updates of one .grad (clipping, zeroing) never reach another.
void accumulate_leaf(TensorImpl& leaf, Tensor g) {
  if (!leaf.grad) {
    const bool exclusive = g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1;
    leaf.grad = exclusive ? g.impl_ptr() : g.clone().impl_ptr();
  } else {
    Tensor(leaf.grad).add_(g);
  }
}

Tensor fit_gradient(Tensor g, const Edge& e, const Node& node) {
  if (g.dtype() != e.dtype) g = g.to(e.dtype);
  if (g.shape() != e.shape) g = sum_to(g, e.shape);
  if (g.shape() != e.shape) {
    throw AutogradError(fmt::format("{}: backward produced a gradient of shape {} for an input of shape {}",
                                    node.name(), shape_str(g.shape()), shape_str(e.shape)));
  }
  return g;
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  if (!root.requires_grad()) {
    throw AutogradError(fmt::format(
        "backward: the tensor (shape {}) does not require grad and has no grad_fn; did you forget "
        "requires_grad_() on the parameters, or compute it inside a NoGradGuard?",
        shape_str(root.shape())));
  }
  Tensor g = gradient;
  if (!g.defined()) {
    if (root.numel() != 1) {
      throw AutogradError(fmt::format(
          "backward: a gradient can be created implicitly only for one-element outputs, this one has shape {}; "
          "reduce it first (loss.sum() or loss.mean()) or pass backward(gradient) with that shape",
          shape_str(root.shape())));
    }
    g = ones(root.shape(), root.dtype());
  } else if (g.shape() != root.shape()) {
    throw ShapeError(fmt::format("backward: gradient of shape {} given for an output of shape {}; they must match",
                                 shape_str(g.shape()), shape_str(root.shape())));
  }
  NoGradGuard no_grad;
  g = g.to(root.dtype());
  if (detail::anomaly_enabled) detail::check_seed(g);
  if (root.is_leaf()) {
    accumulate_leaf(root.impl(), g);
    return;
  }

  // Pass 1: every node reachable from the root, and how many of its consumers are in the graph.
  Node* const start = root.grad_fn().get();
  std::vector<std::shared_ptr<Node>> nodes{root.grad_fn()};
  std::unordered_map<Node*, std::int64_t> pending{{start, 0}};
  std::vector<Node*> stack{start};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->inputs) {
      if (!e.node) continue;
      auto [it, inserted] = pending.try_emplace(e.node.get(), 0);
      ++it->second;
      if (inserted) {
        nodes.push_back(e.node);
        stack.push_back(e.node.get());
      }
    }
  }

  // Pass 2 (Kahn's algorithm): a node runs once all its consumers have sent their gradient.
  std::unordered_map<Node*, Tensor> grads{{start, g}};
  std::vector<Node*> ready{start};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    if (!n->backward) {
      throw AutogradError(fmt::format(
          "backward: trying to backward through the graph a second time ({} was already freed); pass "
          "retain_graph=true to the first backward() if you need to call it twice",
          n->name()));
    }
    Tensor gn;
    if (auto it = grads.find(n); it != grads.end()) {
      gn = std::move(it->second);
      grads.erase(it);
    }
    if (gn.defined()) {
      if (auto out = n->output.lock(); out && out->retains_grad) {
        if (out->grad) {
          Tensor(out->grad).add_(gn);
        } else {
          out->grad = gn.clone().impl_ptr();
        }
      }
      NeedsGrad needs(n->inputs.size());
      for (std::size_t i = 0; i < needs.size(); ++i) needs[i] = n->inputs[i].requires_grad;
      TensorList input_grads = n->backward(gn, needs, detail::unpack_saved(*n));
      if (detail::anomaly_enabled) detail::check_backward(*n, gn, input_grads);
      if (input_grads.size() != n->inputs.size()) {
        throw AutogradError(fmt::format("{}: backward returned {} gradients for {} inputs", n->name(),
                                        input_grads.size(), n->inputs.size()));
      }
      for (std::size_t i = 0; i < input_grads.size(); ++i) {
        const Edge& e = n->inputs[i];
        if (!e.requires_grad || !input_grads[i].defined()) continue;
        Tensor gi = fit_gradient(std::move(input_grads[i]), e, *n);
        if (e.node) {
          Tensor& slot = grads[e.node.get()];
          slot = slot.defined() ? add(slot, gi) : gi;
        } else if (e.leaf) {
          accumulate_leaf(*e.leaf, std::move(gi));
        }
      }
    }
    for (const Edge& e : n->inputs) {
      if (e.node && --pending[e.node.get()] == 0) ready.push_back(e.node.get());
    }
    if (!retain_graph) {  // frees the saved tensors and whatever the closure held
      n->backward = nullptr;
      n->saved.clear();
    }
  }
  if (!retain_graph) {
    for (auto& n : nodes) n->inputs.clear();  // unlink, so the nodes die with their outputs
  }
}

}  // namespace autograd
}  // namespace microtorch
