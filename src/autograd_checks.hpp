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

/// Keeps `saved` on n (detached), each with its memory's version now and whether it is one
/// of the inputs or the output.
void save(Node& n, const Saved& saved, const TensorList& inputs, const Tensor& out);

/// The saved tensors, for n's backward; throws AutogradError naming n and the tensor when one
/// was modified in place since it was saved.
TensorList unpack_saved(const Node& n);

}  // namespace microtorch::autograd::detail
