// Internal: the checks the autograd engine runs besides its bookkeeping — anomaly mode
// (NaN/Inf in a forward output or a backward gradient) and saved-tensor versions (an
// in-place write between forward and backward). Kept out of autograd.cpp so the engine's
// hot path stays a few lines.
#pragma once

#include <string_view>

#include "microtorch/autograd.hpp"

namespace microtorch::autograd::detail {

/// The flag behind is_anomaly_enabled(), readable inline by the engine.
extern thread_local bool anomaly_enabled;

/// Anomaly mode, forward: throws AnomalyError when `out` holds NaN or Inf that `op` created
/// (its inputs were finite). Returns the op's sequence number for Node::anomaly_seq.
std::int64_t check_forward(const Tensor& out, std::string_view op, const TensorList& inputs, const Attrs& attrs);

/// Anomaly mode, backward: throws AnomalyError when a gradient `n` produced holds NaN or Inf.
void check_backward(const Node& n, const Tensor& grad_output, const TensorList& input_grads);

/// Anomaly mode: throws when the gradient handed to backward() is not finite.
void check_seed(const Tensor& gradient);

/// Notes the versions of the tensors n's backward reads (its inputs and output; none for
/// ops such as add or reshape whose backward reads no values).
void note_versions(Node& n, const TensorList& inputs, const Tensor& out);

/// Throws AutogradError when a tensor n's backward reads was modified in place since.
void check_versions(const Node& n);

}  // namespace microtorch::autograd::detail
