// Anomaly mode and saved-tensor version checks (see autograd_checks.hpp).
#include "autograd_checks.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace microtorch {

namespace autograd::detail {
thread_local bool anomaly_enabled = false;
}  // namespace autograd::detail

namespace {
thread_local std::int64_t anomaly_counter = 0;  // ops recorded since anomaly mode was switched on
}

bool is_anomaly_enabled() { return autograd::detail::anomaly_enabled; }

void set_detect_anomaly(bool enabled) {
  if (enabled && !autograd::detail::anomaly_enabled) anomaly_counter = 0;
  autograd::detail::anomaly_enabled = enabled;
}

namespace autograd::detail {

namespace {

// ---- scanning for NaN and Inf ------------------------------------------------------------

struct Scan {
  std::int64_t nan = 0, inf = 0;            // counts
  std::int64_t first_nan = -1, first_inf = -1;
  double inf_value = 0.0;
  bool finite() const { return nan == 0 && inf == 0; }
};

Scan scan(const Tensor& t) {
  Scan s;
  if (!t.defined() || !t.is_floating_point()) return s;
  auto run = [&s](const auto* p, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(p[i]);
      if (std::isfinite(v)) continue;
      if (std::isnan(v)) {
        if (s.nan++ == 0) s.first_nan = i;
      } else if (s.inf++ == 0) {
        s.first_inf = i;
        s.inf_value = v;
      }
    }
  };
  if (t.dtype() == Dtype::Float32) {
    run(t.data<float>(), t.numel());
  } else {
    run(t.data<double>(), t.numel());
  }
  return s;
}

// Flat index -> "[i, j, k]" in the tensor's shape.
std::string index_str(const Shape& shape, std::int64_t flat) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const std::int64_t n = shape[d] > 0 ? shape[d] : 1;
    idx[d] = flat % n;
    flat /= n;
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

std::string what_str(const Scan& s, const Shape& shape) {
  if (s.nan > 0) {
    return fmt::format("NaN at {}{}", index_str(shape, s.first_nan),
                       s.nan + s.inf > 1 ? fmt::format(" ({} NaN, {} Inf in all)", s.nan, s.inf) : "");
  }
  return fmt::format("{}inf at {}{}", s.inf_value < 0 ? "-" : "", index_str(shape, s.first_inf),
                     s.inf > 1 ? fmt::format(" ({} Inf in all)", s.inf) : "");
}

// ---- where a tensor came from --------------------------------------------------------------

// "mul#2" for an op recorded in anomaly mode, "mul" for one recorded before it was on.
std::string node_label(const Node& n) {
  return n.anomaly_seq > 0 ? fmt::format("{}#{}", n.op, n.anomaly_seq) : n.op;
}

// The recorded ops that made a tensor, as an expression at most `depth` deep:
// "exp#3(mul#2(leaf [2, 3], leaf [3]))". Leaves and data tensors show their shape.
std::string origin(const Node* n, const Shape& shape, bool leaf_requires_grad, int depth) {
  if (n == nullptr) return fmt::format("{} {}", leaf_requires_grad ? "leaf" : "data", shape_str(shape));
  if (depth == 0) return node_label(*n) + "(...)";
  std::string args;
  for (const Edge& e : n->inputs) {
    if (!args.empty()) args += ", ";
    args += origin(e.node.get(), e.shape, e.requires_grad, depth - 1);
  }
  return fmt::format("{}({})", node_label(*n), args);
}

std::string origin_of(const Tensor& t, int depth) {
  if (!t.defined()) return "none";
  return origin(t.grad_fn().get(), t.shape(), t.requires_grad(), depth);
}

constexpr int kDepth = 4;

const char* kLegend =
    "(op#k is the k-th op recorded since anomaly mode was switched on; 'leaf' is a tensor that requires grad, "
    "'data' one that does not)";

bool non_finite_attr(const Attrs& attrs) {
  for (const auto& [_, v] : attrs) {
    if (const double* d = std::get_if<double>(&v); d != nullptr && !std::isfinite(*d)) return true;
  }
  return false;
}

std::string input_shapes(const TensorList& inputs) {
  std::string s;
  for (const auto& t : inputs) {
    if (!s.empty()) s += ", ";
    s += t.defined() ? fmt::format("{} {}", shape_str(t.shape()), dtype_name(t.dtype())) : "none";
  }
  return s;
}

}  // namespace

std::int64_t check_forward(const Tensor& out, std::string_view op, const TensorList& inputs, const Attrs& attrs) {
  const std::int64_t seq = ++anomaly_counter;
  const Scan so = scan(out);
  if (so.finite()) return seq;
  bool input_nan = false, input_inf = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Scan si = scan(inputs[i]);
    input_nan = input_nan || si.nan > 0;
    input_inf = input_inf || si.inf > 0;
    // The first op to use a NaN that came from outside the ops anomaly mode watched (copies
    // such as the dtype conversion inside tensor({...}) only pass it on).
    if (si.nan > 0 && so.nan > 0 && op != "to" && op != "clone") {
      throw AnomalyError(fmt::format(
          "anomaly: input {} of {}#{} already holds {} (shape {}); it was made by {}, so the NaN comes from the data, "
          "a parameter, or ops run before anomaly mode was switched on. Check the inputs with has_nonfinite(x) {}",
          i, op, seq, what_str(si, inputs[i].shape()), shape_str(inputs[i].shape()), origin_of(inputs[i], kDepth),
          kLegend));
    }
  }
  const bool made_nan = so.nan > 0 && !input_nan;
  // An infinity is expected where an input already had one (scores + a -inf mask) or the op
  // was asked to write one (masked_fill(x, m, -inf)).
  const bool made_inf = so.inf > 0 && !input_inf && !non_finite_attr(attrs);
  if (!made_nan && !made_inf) return seq;
  std::string args;
  for (const auto& t : inputs) {
    if (!args.empty()) args += ", ";
    args += origin_of(t, kDepth - 1);
  }
  throw AnomalyError(fmt::format(
      "anomaly: {}#{} produced {} in its forward output (shape {}) from finite inputs of shapes {}; the output was "
      "being computed as {}#{}({}) {}",
      op, seq, what_str(so, out.shape()), shape_str(out.shape()), input_shapes(inputs), op, seq, args, kLegend));
}

void check_seed(const Tensor& gradient) {
  const Scan s = scan(gradient);
  if (!s.finite()) {
    throw AnomalyError(fmt::format("anomaly: the gradient passed to backward() (shape {}) holds {}",
                                   shape_str(gradient.shape()), what_str(s, gradient.shape())));
  }
}

void check_backward(const Node& n, const Tensor& grad_output, const TensorList& input_grads) {
  for (std::size_t i = 0; i < input_grads.size() && i < n.inputs.size(); ++i) {
    const Scan s = scan(input_grads[i]);
    if (s.finite()) continue;
    const Scan sg = scan(grad_output);
    std::string shapes;
    for (const Edge& e : n.inputs) {
      if (!shapes.empty()) shapes += ", ";
      shapes += fmt::format("{} {}", shape_str(e.shape), dtype_name(e.dtype));
    }
    throw AnomalyError(fmt::format(
        "anomaly: {} ({}) produced {} in the gradient of input {} (shape {}); inputs {}, output {}, the gradient it "
        "received {}. The forward made this tensor as {} {}",
        n.name(), n.anomaly_seq > 0 ? fmt::format("op #{} of the forward", n.anomaly_seq) : "recorded before anomaly mode was on",
        what_str(s, input_grads[i].shape()), i, shape_str(input_grads[i].shape()), shapes, shape_str(n.shape),
        sg.finite() ? std::string("was finite") : "already held " + what_str(sg, grad_output.shape()),
        origin(&n, n.shape, true, kDepth), kLegend));
  }
}

// ---- saved tensors and their versions ----------------------------------------------------

void save(Node& n, const Saved& saved, const TensorList& inputs, const Tensor& out) {
  n.saved.reserve(saved.tensors.size());
  for (const Tensor& t : saved.tensors) {
    SavedTensor s;
    if (t.defined()) {
      s.version = t.version();
      // An input itself is kept as it is: its node came before this one, so holding it makes
      // no cycle. Anything else (the output, a tensor the op made) is kept detached, since
      // it may point back at this node (node -> tensor -> grad_fn -> node would never free).
      for (std::size_t i = 0; i < inputs.size() && !s.tensor.defined(); ++i) {
        if (t.is_same(inputs[i])) s.tensor = t, s.role = static_cast<int>(i);
      }
      if (!s.tensor.defined()) {
        s.tensor = t.detach();
        if (t.shares_storage(out)) s.role = SavedTensor::kOutput;
        for (std::size_t i = 0; i < inputs.size() && s.role == SavedTensor::kOther; ++i) {
          if (t.shares_storage(inputs[i])) s.role = static_cast<int>(i);
        }
      }
    }
    n.saved.push_back(std::move(s));
  }
}

TensorList unpack_saved(const Node& n) {
  TensorList out;
  out.reserve(n.saved.size());
  for (const SavedTensor& s : n.saved) {
    if (s.tensor.defined() && s.tensor.version() != s.version) {
      const std::string which =
          s.role == SavedTensor::kOutput ? std::string("its output")
          : s.role >= 0                  ? fmt::format("its input {}", s.role)
                                         : std::string("a tensor it made and saved (such as the indices max(x, dim) "
                                                       "returns or the attention weights)");
      throw AutogradError(fmt::format(
          "backward: {} needs {} (shape {}, {}), which has been modified by an in-place operation since the forward "
          "(version {}, expected {}). Was an optimizer step, add_(), copy_() or fill_() run between forward and "
          "backward, or a returned tensor edited? Run backward before updating, recompute the forward after it, or "
          "edit a clone()",
          n.name(), which, shape_str(s.tensor.shape()), dtype_name(s.tensor.dtype()), s.tensor.version(), s.version));
    }
    out.push_back(s.tensor);
  }
  return out;
}

}  // namespace autograd::detail
}  // namespace microtorch
