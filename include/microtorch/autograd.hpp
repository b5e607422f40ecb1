// microtorch/autograd.hpp — the reverse-mode tape: nodes, the engine, grad mode, gradcheck.
//
// Every differentiable op computes its result, then calls record(): the output gets a
// Node holding the op's name, attributes, its input edges and the backward closure that
// belongs to the op. Tensor::backward() walks those nodes in reverse topological order
// (iteratively, so a 10,000-op chain is fine), sums the gradient flowing into each
// input, and un-broadcasts it to the input's shape with sum_to(). The same records are
// what a tracing pass reads: the graph is the IR.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "microtorch/tensor.hpp"

namespace microtorch {

/// Is the tape recording? On by default; off inside a NoGradGuard.
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

/// RAII: no graph is recorded while it lives (inference, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// Anomaly mode (PyTorch's torch.autograd.set_detect_anomaly), per thread, off by default.
/// While on, every op checks its floating output and every backward step checks the
/// gradients it produced; the first NaN or Inf that an op *creates* (its inputs were
/// finite) throws AnomalyError naming the op, its input and output shapes, the element,
/// and the chain of recorded ops that made its inputs, e.g.
///   anomaly: LogBackward (op #3 of the forward) produced NaN in the gradient of input 0 ...
/// Infinities are not anomalies in ops told to write them (masked_fill(x, m, -inf)) or
/// when an input already holds one (scores + an additive -inf mask). Costs one check of a
/// thread-local flag per op when off; a pass over each output and gradient when on.
bool is_anomaly_enabled();
void set_detect_anomaly(bool enabled);

/// RAII: anomaly mode on (or off) while it lives.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true) : previous_(is_anomaly_enabled()) { set_detect_anomaly(enabled); }
  ~DetectAnomalyGuard() { set_detect_anomaly(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

namespace autograd {

/// An attribute of a recorded op (a dim, a scale, a shape, ...).
using Attr = std::variant<std::int64_t, double, bool, std::string, Shape>;
using Attrs = std::vector<std::pair<std::string, Attr>>;
/// needs[i] is true when input i wants a gradient; backward may skip the others.
using NeedsGrad = std::vector<bool>;
/// Maps the gradient of the output to one gradient per input (undefined = none). A
/// returned gradient may have the broadcast shape: the engine reduces it with sum_to().
using BackwardFn = std::function<TensorList(const Tensor& grad_output, const NeedsGrad& needs)>;

/// Where the gradient of one input goes: the node that produced it, or the leaf itself.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<TensorImpl> leaf;
  Shape shape;
  Dtype dtype = Dtype::Float32;
  bool requires_grad = false;
  /// Only while a trace is active (see TraceGuard): the input tensor itself, so the tracer
  /// can read constants (a scalar in `x * 0.5`, an attention mask) and fold subgraphs that
  /// do not depend on the traced input. Empty in normal autograd.
  std::shared_ptr<TensorImpl> value;
  /// The input's memory and its version when the op ran (see Storage::version); set only
  /// for ops whose backward reads its inputs' values. Backward refuses to run when the
  /// memory is still alive and has been written in place since.
  std::weak_ptr<Storage> storage;
  std::uint64_t version = 0;
};

/// One recorded op.
class Node {
 public:
  std::string op;           // "matmul", "softmax", ...
  Attrs attrs;              // {"dim", -1}, ...
  std::vector<Edge> inputs;
  BackwardFn backward;      // empty once the graph has been freed
  Shape shape;              // of the output
  Dtype dtype = Dtype::Float32;
  std::weak_ptr<TensorImpl> output;  // for retain_grad(); weak, so no cycle
  std::weak_ptr<Storage> output_storage;  // with output_version: as Edge::storage, for the output
  std::uint64_t output_version = 0;
  std::int64_t anomaly_seq = 0;  // 1, 2, ... for ops recorded in anomaly mode, else 0

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// Frees the chain of producers iteratively: dropping a 100,000-op graph cannot
  /// overflow the stack through nested shared_ptr destructors.
  ~Node();

  /// PyTorch-style display name: "matmul" -> "MatmulBackward".
  std::string name() const;
  /// The attribute `key`, or nullptr.
  const Attr* attr(std::string_view key) const;
};

/// Is a trace active on this thread (see TraceGuard)?
bool is_tracing();

/// RAII: while it lives, record_node records every op on this thread (also integer results),
/// even when no input requires grad or grad mode is off, and keeps each input tensor in its Edge
/// (Edge::value). The lowering pass (microtorch/lower/graph.hpp) runs a forward under it
/// and reads the records. Outputs only require grad when they would without the trace, so
/// backward behaves as usual.
class TraceGuard {
 public:
  TraceGuard();
  ~TraceGuard();
  TraceGuard(const TraceGuard&) = delete;
  TraceGuard& operator=(const TraceGuard&) = delete;

 private:
  bool previous_;
};

/// Records `op` on `out` when grad mode is on and an input requires grad (or a trace is
/// active); returns `out`.
/// `backward` is called as backward(grad_output, needs) or backward(grad_output).
Tensor record_node(Tensor out, std::string_view op, const TensorList& inputs, BackwardFn backward,
                   Attrs attrs);

template <class F>
Tensor record(Tensor out, std::string_view op, const TensorList& inputs, F&& backward, Attrs attrs = {}) {
  if constexpr (std::is_invocable_v<F, const Tensor&, const NeedsGrad&>) {
    return record_node(std::move(out), op, inputs, BackwardFn(std::forward<F>(backward)), std::move(attrs));
  } else {
    return record_node(std::move(out), op, inputs,
                       BackwardFn([f = std::forward<F>(backward)](const Tensor& g, const NeedsGrad&) { return f(g); }),
                       std::move(attrs));
  }
}

/// True when an op on these inputs would be recorded.
bool needs_recording(const TensorList& inputs);

/// Sums a broadcast gradient back to `shape` (the one un-broadcasting helper):
/// leading extra dims are summed away, dims that were 1 are summed with keepdim.
Tensor sum_to(const Tensor& grad, const Shape& shape);

/// Runs backward from `root` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace autograd

/// Compares the analytic Jacobian of fn (from backward) with central finite differences,
/// (f(x + eps) - f(x - eps)) / 2 eps, for every input that requires grad. Inputs must be
/// float64. Returns true, or throws AutogradError listing the elements that differ by more
/// than atol + rtol * |numerical|.
bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs, double eps = 1e-6,
               double atol = 1e-5, double rtol = 1e-3);

}  // namespace microtorch
