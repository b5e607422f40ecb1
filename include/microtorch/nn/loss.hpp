/// \file
/// Loss functions (PyTorch's torch.nn.functional names) and their module wrappers.
///
/// Functions, in namespace microtorch::nn::functional (alias it yourself:
/// `namespace F = microtorch::nn::functional;`):
///
///     cross_entropy(logits, target, {.weight, .ignore_index, .reduction, .label_smoothing})
///         logits [N, C] or [N, C, d1, ...] (or unbatched [C]), target int64 class indices
///         [N] or [N, d1, ...] (or 0-d). log_softmax over dim 1, then nll_loss.
///     nll_loss(log_probs, target, {.weight, .ignore_index, .reduction})
///     mse_loss(input, target, reduction)                      (input - target)^2
///     binary_cross_entropy_with_logits(logits, target, {.weight, .pos_weight, .reduction})
///     accuracy(logits, target)                                fraction of argmax(1) == target
///
/// Modules (nn::Module subclasses, called as loss(input, target)): CrossEntropyLoss,
/// NLLLoss, MSELoss, BCEWithLogitsLoss.
///
/// Every loss is composed from the public differentiable ops (log_softmax, index_select,
/// sum, ...), so autograd derives the gradients; float32 and float64 both work.
///
/// Semantics (those of PyTorch 1.13, checked against it in tests/test_loss.cpp):
///   - Reduction::Mean of cross_entropy / nll_loss divides by the number of non-ignored
///     targets, or by the sum of weight[target] over them when class weights are given;
///     Reduction::None returns one loss per target (0 where the target is ignore_index).
///   - label_smoothing eps:  (1 - eps) * nll + eps * mean_c(-w_c log p_c), the smoothing
///     term reduced like nll (ignored targets excluded, same denominator).
///   - binary_cross_entropy_with_logits is  max(x, 0) - x y + log(1 + exp(-|x|))  with
///     pos_weight p:  -(p y log s(x) + (1 - y) log(1 - s(x))), s = sigmoid. It is evaluated
///     through a fused, stable log_softmax over [0, x], so the gradient is
///     s(x)(p y + 1 - y) - p y everywhere, including at x = 0 (the max/abs form has a kink
///     there whose subgradient would be wrong, and zero logits are common at initialisation).
///
/// Deliberate differences from PyTorch, so that no silent mistake passes:
///   - When every target is ignored (or the weights of all kept targets sum to 0), a
///     Mean reduction returns 0 with a zero gradient instead of PyTorch's NaN (0/0).
///   - mse_loss and binary_cross_entropy_with_logits refuse input/target shapes that differ
///     (ShapeError) instead of broadcasting with a warning: [N, 1] against [N] would
///     silently become an [N, N] loss.
///   - Class-probability (float) targets of cross_entropy are not supported: they throw
///     DtypeError suggesting target.to(kInt64).
///
/// Errors: a target outside [0, C) (other than ignore_index) throws IndexError naming the
/// value and C; a batch-size or spatial-shape mismatch throws ShapeError with both shapes.
///
/// \code
///   namespace F = microtorch::nn::functional;
///   Tensor logits = model->forward(x);                       // [N, C]
///   Tensor loss = F::cross_entropy(logits, y, {.ignore_index = 0, .label_smoothing = 0.1});
///   loss.backward();
///   double acc = F::accuracy(logits, y);
/// \endcode
#pragma once

#include <cstdint>
#include <string>

#include "microtorch/nn/module.hpp"
#include "microtorch/tensor.hpp"

namespace microtorch::nn {

/// How a loss combines the per-element losses: None keeps them, Mean averages (see the
/// weighted / ignore_index rule above), Sum adds them up.
enum class Reduction {
  None,  ///< one loss per element (per target), unreduced
  Mean,  ///< the (weighted) mean, the default
  Sum    ///< the sum
};

/// "none", "mean", "sum" (PyTorch's strings).
const char* reduction_name(Reduction r);

namespace functional {

using nn::Reduction;

/// Options of cross_entropy, in PyTorch's argument order (designated initialisers must
/// follow it): weight, ignore_index, reduction, label_smoothing.
struct CrossEntropyOptions {
  Tensor weight = {};                     ///< optional [C] class weights (a rescaling, not probabilities)
  std::int64_t ignore_index = -100;       ///< targets equal to this contribute nothing
  Reduction reduction = Reduction::Mean;  ///< how the per-target losses combine
  double label_smoothing = 0.0;           ///< in [0, 1] (ValueError otherwise)
};

/// Options of nll_loss: weight, ignore_index, reduction.
struct NLLLossOptions {
  Tensor weight = {};                     ///< optional [C] class weights
  std::int64_t ignore_index = -100;       ///< targets equal to this contribute nothing
  Reduction reduction = Reduction::Mean;  ///< how the per-target losses combine
};

/// Options of binary_cross_entropy_with_logits: weight (broadcast to the loss),
/// pos_weight (broadcast along the last dim: one weight per class), reduction.
struct BCEWithLogitsOptions {
  Tensor weight = {};                     ///< optional weight of each element's loss
  Tensor pos_weight = {};                 ///< optional weight of the positive term, per class (last dim)
  Reduction reduction = Reduction::Mean;  ///< how the per-element losses combine
};

/// Cross entropy between logits [N, C, d...] and int64 targets [N, d...] (see the top of
/// this file for the exact semantics).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {});

/// Negative log-likelihood of log-probabilities [N, C, d...] at int64 targets [N, d...]:
/// loss_i = -weight[t_i] * log_probs[i, t_i].
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NLLLossOptions& options = {});

/// Mean (or summed, or per-element) squared error; input and target must have one shape.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// Binary cross entropy on logits, stable for any |x|; target holds floats in [0, 1] of
/// the logits' shape.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const BCEWithLogitsOptions& options = {});

/// Fraction of positions where argmax over dim 1 of logits [N, C, d...] equals the int64
/// target [N, d...] (or [C] with a 0-d target). Ignores nothing; not differentiable.
double accuracy(const Tensor& logits, const Tensor& target);

}  // namespace functional

/// Module form of cross_entropy; `weight` becomes a buffer (state-dict key "weight").
class CrossEntropyLoss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  /// The loss with fixed options (see functional::CrossEntropyOptions).
  explicit CrossEntropyLoss(functional::CrossEntropyOptions options = {});
  /// functional::cross_entropy(logits, target, options()).
  Tensor forward(const Tensor& logits, const Tensor& target);
  /// forward(logits, target): `Tensor loss = criterion(logits, y);`.
  Tensor operator()(const Tensor& logits, const Tensor& target) { return forward(logits, target); }
  std::string extra_repr() const override;
  /// The options given to the constructor (weight is the registered buffer).
  const functional::CrossEntropyOptions& options() const { return options_; }

 private:
  functional::CrossEntropyOptions options_;
};

/// Module form of nll_loss; `weight` becomes a buffer.
class NLLLoss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  /// The loss with fixed options (see functional::NLLLossOptions).
  explicit NLLLoss(functional::NLLLossOptions options = {});
  /// functional::nll_loss(log_probs, target, options).
  Tensor forward(const Tensor& log_probs, const Tensor& target);
  /// forward(log_probs, target).
  Tensor operator()(const Tensor& log_probs, const Tensor& target) { return forward(log_probs, target); }
  std::string extra_repr() const override;

 private:
  functional::NLLLossOptions options_;
};

/// Module form of mse_loss.
class MSELoss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  /// The loss with a fixed reduction.
  explicit MSELoss(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}
  /// functional::mse_loss(input, target, reduction).
  Tensor forward(const Tensor& input, const Tensor& target);
  /// forward(input, target).
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  std::string extra_repr() const override;

 private:
  Reduction reduction_;
};

/// Module form of binary_cross_entropy_with_logits; weight and pos_weight become buffers.
class BCEWithLogitsLoss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  /// The loss with fixed options (see functional::BCEWithLogitsOptions).
  explicit BCEWithLogitsLoss(functional::BCEWithLogitsOptions options = {});
  /// functional::binary_cross_entropy_with_logits(logits, target, options).
  Tensor forward(const Tensor& logits, const Tensor& target);
  /// forward(logits, target).
  Tensor operator()(const Tensor& logits, const Tensor& target) { return forward(logits, target); }
  std::string extra_repr() const override;

 private:
  functional::BCEWithLogitsOptions options_;
};

}  // namespace microtorch::nn
