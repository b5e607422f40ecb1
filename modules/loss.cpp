// Losses composed from differentiable ops; autograd derives every gradient.
//
//   nll_loss:       loss_i = -w[t_i] * logp[i, t_i]      (picked with one index_select)
//   cross_entropy:  nll_loss(log_softmax(x, 1)) and, with label smoothing eps,
//                   (1 - eps) * nll + eps / C * sum_c(-w_c logp[i, c])
//   mse_loss:       (x - y)^2
//   bce_with_logits: -(p y log s(x) + (1 - y) log(1 - s(x))) with [log(1 - s), log s] =
//                   log_softmax([0, x]): stable for any |x| and smooth at x = 0.
#include "microtorch/nn/loss.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::nn {

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::None: return "none";
    case Reduction::Mean: return "mean";
    case Reduction::Sum: return "sum";
  }
  return "?";
}

namespace functional {
namespace {

// A 1-D int64 tensor holding `values`.
Tensor int64_vector(const std::vector<std::int64_t>& values) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, kInt64);
  std::copy(values.begin(), values.end(), t.data<std::int64_t>());
  return t;
}

// A 1-D tensor of `dtype` holding `values`.
Tensor float_vector(const std::vector<double>& values, Dtype dtype) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, kFloat64);
  std::copy(values.begin(), values.end(), t.data<double>());
  return t.to(dtype);
}

void require_floating(const char* op, const char* what, const Tensor& x) {
  if (!x.defined()) throw ValueError(fmt::format("{}: {} is an undefined tensor", op, what));
  if (!x.is_floating_point()) {
    throw DtypeError(fmt::format("{}: {} must be float32 or float64, got {} of shape {}; convert with .to(kFloat32)",
                                 op, what, dtype_name(x.dtype()), shape_str(x.shape())));
  }
}

// The layout of a class-index problem: input [N, C, d...] viewed as (N, C, S), S = prod(d).
struct ClassLayout {
  std::int64_t n = 0, c = 0, s = 1;
  Shape loss_shape;  // the target's shape: [N, d...]
};

// Checks input/target/weight of nll_loss and cross_entropy; input is already batched.
ClassLayout check_class_problem(const char* op, const char* input_name, const Tensor& input, const Tensor& target,
                                const Tensor& weight, std::int64_t ignore_index) {
  if (input.dim() < 2) {
    throw ShapeError(fmt::format("{}: {} must be [N, C] or [N, C, d1, ...] (or unbatched [C]), got shape {}", op,
                                 input_name, shape_str(input.shape())));
  }
  ClassLayout L;
  L.n = input.size(0);
  L.c = input.size(1);
  for (std::int64_t d = 2; d < input.dim(); ++d) L.s *= input.size(d);
  Shape expected = input.shape();
  expected.erase(expected.begin() + 1);
  L.loss_shape = expected;

  if (target.shape() != expected) {
    std::string hint;
    if (target.dim() == input.dim() && target.shape() == input.shape()) {
      hint = "; the target has the input's shape: pass class indices, e.g. target.argmax(1), not one-hot rows";
    } else if (target.dim() == input.dim() && target.size(1) == 1) {
      hint = "; drop the extra dim with target.squeeze(1)";
    } else if (target.dim() >= 1 && target.size(0) != L.n) {
      hint = fmt::format("; the batch sizes differ ({} vs {})", L.n, target.size(0));
    }
    throw ShapeError(fmt::format("{}: target of shape {} does not fit {} of shape {}: expected target shape {} (the "
                                 "input's shape without the class dim 1){}",
                                 op, shape_str(target.shape()), input_name, shape_str(input.shape()),
                                 shape_str(expected), hint));
  }
  if (weight.defined()) {
    require_floating(op, "weight", weight);
    if (weight.dim() != 1 || weight.size(0) != L.c) {
      throw ShapeError(fmt::format("{}: weight must hold one value per class, shape [{}], got {}", op, L.c,
                                   shape_str(weight.shape())));
    }
    if (weight.requires_grad() && is_grad_enabled()) {  // as PyTorch: class weights are constants
      throw AutogradError(fmt::format("{}: the class weight requires grad, but the loss is not differentiable with "
                                      "respect to it; pass weight.detach()",
                                      op));
    }
  }
  const std::int64_t* t = target.data<std::int64_t>();
  for (std::int64_t i = 0; i < target.numel(); ++i) {
    const std::int64_t v = t[i];
    if (v == ignore_index || (v >= 0 && v < L.c)) continue;
    std::string hint;
    if (v == L.c) hint = "; are the labels 1-based? subtract 1";
    if (v < 0) hint = fmt::format("; if {} marks padding, pass ignore_index = {}", v, v);
    throw IndexError(fmt::format("{}: target value {} at position {} is out of range for {} classes: expected 0 <= "
                                 "target < {} or target == ignore_index ({}){}",
                                 op, v, i, L.c, L.c, ignore_index, hint));
  }
  return L;
}

void check_target_dtype(const char* op, const Tensor& target) {
  if (!target.defined()) throw ValueError(fmt::format("{}: target is an undefined tensor", op));
  if (target.dtype() != kInt64) {
    throw DtypeError(fmt::format("{}: target must hold int64 class indices, got {} of shape {}; convert with "
                                 "target.to(kInt64){}",
                                 op, dtype_name(target.dtype()), shape_str(target.shape()),
                                 target.is_floating_point() ? " (class-probability targets are not supported)" : ""));
  }
}

// Divides a summed loss by the mean denominator; 0 / 0 is a zero loss with a zero gradient.
Tensor mean_of_sum(const Tensor& summed, double denominator) {
  return denominator != 0.0 ? summed / denominator : summed * 0.0;
}

// The nll term on batched log-probabilities [N, C, d...]. Writes the mean denominator
// (kept targets, or the sum of their weights) and the ignored mask (only if any).
Tensor nll_term(const Tensor& logp, const Tensor& target, const Tensor& weight, std::int64_t ignore_index,
                Reduction reduction, const ClassLayout& L, double& denominator, Tensor& ignored) {
  const std::int64_t m = target.numel();
  const std::int64_t* t = target.data<std::int64_t>();
  std::vector<double> w;
  if (weight.defined()) {
    const Tensor w64 = weight.detach().to(kFloat64);
    w.assign(w64.data<double>(), w64.data<double>() + L.c);
  }
  // Position i = (n, s) of the target; its log-probability sits at flat (n * C + t) * S + s.
  std::vector<std::int64_t> flat, where;
  std::vector<double> wk;
  flat.reserve(static_cast<std::size_t>(m));
  denominator = 0.0;
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    if (t[i] == ignore_index) continue;
    const std::int64_t n = i / L.s, s = i % L.s;
    flat.push_back((n * L.c + t[i]) * L.s + s);
    if (!w.empty()) wk.push_back(w[static_cast<std::size_t>(t[i])]);
    denominator += w.empty() ? 1.0 : w[static_cast<std::size_t>(t[i])];
    ++kept;
  }
  if (kept < m) {
    ignored = empty(target.shape(), kBool);
    bool* b = ignored.data<bool>();
    for (std::int64_t i = 0; i < m; ++i) b[i] = t[i] == ignore_index;
  }

  Tensor picked = index_select(reshape(logp, {-1}), 0, int64_vector(flat));  // [K]
  if (!w.empty()) picked = picked * float_vector(wk, logp.dtype());
  const Tensor nll = -picked;
  switch (reduction) {
    case Reduction::Sum: return sum(nll);
    case Reduction::Mean: return mean_of_sum(sum(nll), denominator);
    case Reduction::None: break;
  }
  if (kept == m) return reshape(nll, L.loss_shape);
  // Nothing kept: exact zeros that still depend on the input (zero gradient).
  if (kept == 0) return masked_fill(sum(logp, {1}), ignored, 0.0);
  // Scatter the K losses back to their positions; ignored positions read the appended 0.
  std::vector<std::int64_t> slot(static_cast<std::size_t>(m));
  for (std::int64_t i = 0, k = 0; i < m; ++i) slot[static_cast<std::size_t>(i)] = t[i] == ignore_index ? kept : k++;
  const Tensor padded = cat({nll, zeros({1}, logp.dtype())}, 0);
  return reshape(index_select(padded, 0, int64_vector(slot)), L.loss_shape);
}

// Shared body of nll_loss and cross_entropy (label_smoothing only from the latter).
Tensor class_loss(const char* op, const char* input_name, const Tensor& logp_in, const Tensor& target_in,
                  const Tensor& weight, std::int64_t ignore_index, Reduction reduction, double label_smoothing) {
  // Unbatched [C] with a 0-d target: run as a batch of one.
  const bool unbatched = logp_in.dim() == 1;
  if (unbatched && target_in.dim() != 0) {
    throw ShapeError(fmt::format("{}: an unbatched {} of shape {} takes a 0-d target, got shape {}", op, input_name,
                                 shape_str(logp_in.shape()), shape_str(target_in.shape())));
  }
  const Tensor logp = unbatched ? unsqueeze(logp_in, 0) : logp_in;
  const Tensor target = unbatched ? reshape(target_in, {1}) : target_in;
  const ClassLayout L = check_class_problem(op, input_name, logp, target, weight, ignore_index);

  double denominator = 0.0;
  Tensor ignored;
  Tensor loss = nll_term(logp, target, weight, ignore_index, reduction, L, denominator, ignored);
  if (label_smoothing > 0.0) {
    // smooth_i = -sum_c w_c logp[i, c], zero where ignored, reduced like the nll term.
    Tensor smooth;
    if (weight.defined()) {
      Shape wshape(static_cast<std::size_t>(logp.dim()), 1);
      wshape[1] = L.c;
      smooth = -sum(logp * reshape(weight.detach().to(logp.dtype()), wshape), {1});
    } else {
      smooth = -sum(logp, {1});
    }
    if (ignored.defined()) smooth = masked_fill(smooth, ignored, 0.0);
    if (reduction == Reduction::Sum) smooth = sum(smooth);
    if (reduction == Reduction::Mean) smooth = mean_of_sum(sum(smooth), denominator);
    loss = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / static_cast<double>(L.c));
  }
  if (unbatched && reduction == Reduction::None) loss = reshape(loss, {});
  return loss;
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NLLLossOptions& options) {
  require_floating("nll_loss", "log_probs", log_probs);
  check_target_dtype("nll_loss", target);
  return class_loss("nll_loss", "log_probs", log_probs, target, options.weight, options.ignore_index,
                    options.reduction, 0.0);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  require_floating("cross_entropy", "logits", logits);
  check_target_dtype("cross_entropy", target);
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0)) {
    throw ValueError(fmt::format("cross_entropy: label_smoothing must be in [0, 1], got {}", options.label_smoothing));
  }
  if (logits.dim() == 0) {
    throw ShapeError("cross_entropy: logits must be [N, C] or [N, C, d1, ...] (or unbatched [C]), got a 0-d tensor");
  }
  const Tensor logp = log_softmax(logits, logits.dim() == 1 ? 0 : 1);
  return class_loss("cross_entropy", "logits", logp, target, options.weight, options.ignore_index, options.reduction,
                    options.label_smoothing);
}

namespace {

Tensor reduce(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::Mean: return mean(loss);
    case Reduction::Sum: return sum(loss);
    case Reduction::None: break;
  }
  return loss;
}

void require_same_shape(const char* op, const Tensor& input, const Tensor& target, const char* input_name) {
  if (input.shape() == target.shape()) return;
  std::string hint;
  if (numel_of(input.shape()) == numel_of(target.shape())) {
    hint = fmt::format("; reshape one of them, e.g. target.reshape({})", shape_str(input.shape()));
  }
  throw ShapeError(fmt::format("{}: target of shape {} differs from {} of shape {}; the shapes must be equal "
                               "(microtorch does not broadcast losses: [N, 1] against [N] would silently give [N, N]){}",
                               op, shape_str(target.shape()), input_name, shape_str(input.shape()), hint));
}

// True when `from` broadcasts to exactly `to` (right-aligned sizes equal or 1).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

void require_broadcasts_to(const char* op, const char* what, const Tensor& t, const Shape& shape) {
  if (!broadcasts_to(t.shape(), shape)) {
    throw ShapeError(fmt::format("{}: {} of shape {} must broadcast to the loss shape {}", op, what,
                                 shape_str(t.shape()), shape_str(shape)));
  }
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  require_floating("mse_loss", "input", input);
  require_floating("mse_loss", "target", target);
  require_same_shape("mse_loss", input, target, "input");
  const Tensor diff = input - target;
  return reduce(diff * diff, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const BCEWithLogitsOptions& options) {
  const char* op = "binary_cross_entropy_with_logits";
  require_floating(op, "logits", logits);
  if (!target.defined()) throw ValueError(fmt::format("{}: target is an undefined tensor", op));
  if (!target.is_floating_point()) {
    throw DtypeError(fmt::format("{}: target must hold floats in [0, 1], got {} of shape {}; convert with "
                                 "target.to({})",
                                 op, dtype_name(target.dtype()), shape_str(target.shape()),
                                 logits.dtype() == kFloat64 ? "kFloat64" : "kFloat32"));
  }
  require_same_shape(op, logits, target, "logits");
  // [log(1 - s(x)), log s(x)] = log_softmax([0, x]): one fused, stable primitive.
  const Tensor both = log_softmax(stack({zeros_like(logits.detach()), logits}, -1), -1);
  const Tensor log_sig = select(both, -1, 1), log_one_minus_sig = select(both, -1, 0);
  Tensor positive = target * log_sig;
  if (options.pos_weight.defined()) {
    require_floating(op, "pos_weight", options.pos_weight);
    require_broadcasts_to(op, "pos_weight", options.pos_weight, logits.shape());
    positive = positive * options.pos_weight;
  }
  Tensor loss = -(positive + (1.0 - target) * log_one_minus_sig);
  if (options.weight.defined()) {
    require_floating(op, "weight", options.weight);
    require_broadcasts_to(op, "weight", options.weight, logits.shape());
    loss = loss * options.weight;
  }
  return reduce(loss, options.reduction);
}

double accuracy(const Tensor& logits, const Tensor& target) {
  if (!logits.defined() || logits.dim() == 0) {
    throw ShapeError("accuracy: logits must be [N, C] or [N, C, d1, ...] (or unbatched [C])");
  }
  check_target_dtype("accuracy", target);
  const Tensor predicted = argmax(logits.detach(), logits.dim() == 1 ? 0 : 1);
  if (predicted.shape() != target.shape()) {
    throw ShapeError(fmt::format("accuracy: target of shape {} does not fit logits of shape {}: expected target shape "
                                 "{} (the logits' shape without the class dim 1)",
                                 shape_str(target.shape()), shape_str(logits.shape()), shape_str(predicted.shape())));
  }
  if (target.numel() == 0) throw ValueError("accuracy: no targets to score (the batch is empty)");
  const std::int64_t* p = predicted.data<std::int64_t>();
  const std::int64_t* t = target.data<std::int64_t>();
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < target.numel(); ++i) correct += p[i] == t[i];
  return static_cast<double>(correct) / static_cast<double>(target.numel());
}

}  // namespace functional

// ---- modules ---------------------------------------------------------------------------

namespace {
std::string weight_repr(const Tensor& w, const char* name) {
  return w.defined() ? fmt::format(", {}={}", name, shape_str(w.shape())) : "";
}
}  // namespace

CrossEntropyLoss::CrossEntropyLoss(functional::CrossEntropyOptions options) : options_(std::move(options)) {
  if (options_.weight.defined()) options_.weight = register_buffer("weight", options_.weight);
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& target) {
  return functional::cross_entropy(logits, target, options_);
}

std::string CrossEntropyLoss::extra_repr() const {
  return fmt::format("reduction={}, ignore_index={}, label_smoothing={}{}", reduction_name(options_.reduction),
                     options_.ignore_index, options_.label_smoothing, weight_repr(options_.weight, "weight"));
}

NLLLoss::NLLLoss(functional::NLLLossOptions options) : options_(std::move(options)) {
  if (options_.weight.defined()) options_.weight = register_buffer("weight", options_.weight);
}

Tensor NLLLoss::forward(const Tensor& log_probs, const Tensor& target) {
  return functional::nll_loss(log_probs, target, options_);
}

std::string NLLLoss::extra_repr() const {
  return fmt::format("reduction={}, ignore_index={}{}", reduction_name(options_.reduction), options_.ignore_index,
                     weight_repr(options_.weight, "weight"));
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return functional::mse_loss(input, target, reduction_);
}

std::string MSELoss::extra_repr() const { return fmt::format("reduction={}", reduction_name(reduction_)); }

BCEWithLogitsLoss::BCEWithLogitsLoss(functional::BCEWithLogitsOptions options) : options_(std::move(options)) {
  if (options_.weight.defined()) options_.weight = register_buffer("weight", options_.weight);
  if (options_.pos_weight.defined()) options_.pos_weight = register_buffer("pos_weight", options_.pos_weight);
}

Tensor BCEWithLogitsLoss::forward(const Tensor& logits, const Tensor& target) {
  return functional::binary_cross_entropy_with_logits(logits, target, options_);
}

std::string BCEWithLogitsLoss::extra_repr() const {
  return fmt::format("reduction={}{}{}", reduction_name(options_.reduction), weight_repr(options_.weight, "weight"),
                     weight_repr(options_.pos_weight, "pos_weight"));
}

}  // namespace microtorch::nn
