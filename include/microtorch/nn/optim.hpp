/// \file
/// Optimizers, gradient clipping and learning-rate schedules (torch.optim's names and
/// PyTorch 1.13's exact update rules).
///
///     SGD(params, {.lr, .momentum, .dampening, .weight_decay, .nesterov, .maximize})
///         g = grad + wd * p;  b = g (first step) or momentum * b + (1 - dampening) * g;
///         g = nesterov ? g + momentum * b : b  (when momentum != 0);  p -= lr * g
///     Adam(params, {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay, .amsgrad})
///         g = grad + wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2  (v_max = max(v_max, v))
///         p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
///     AdamW(params, {... .weight_decay = 1e-2})
///         p *= 1 - lr * wd (decoupled decay), then Adam's update with the raw gradient
///     clip_grad_norm_(params, max_norm, norm_type = 2)
///         total = || (||g_1||, ||g_2||, ...) ||;  g *= max_norm / (total + 1e-6) when that is < 1;
///         returns total (before clipping). norm_type may be infinity().
///     StepLR(opt, step_size, gamma = 0.1):  lr = base_lr * gamma^(floor(t / step_size))
///     CosineWithWarmup(opt, warmup_steps, total_steps, min_lr = 0):
///         t < warmup:  lr = base_lr * t / warmup                  (linear from 0)
///         else:        lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * min(1, (t - warmup) / (total - warmup)))) / 2
///
/// Resuming: optimizers and schedulers have state_dict() / load_state_dict() (named tensors,
/// so save_npz writes them next to the model's checkpoint); with the default generator's
/// state (random.hpp) a resumed run continues bit for bit as if it had never stopped.
///
/// Updates run under a NoGradGuard as raw loops over the parameter data (float32 or
/// float64, in the parameter's precision); parameters whose grad is undefined are skipped
/// (their state, including Adam's step count, does not advance). The gradients themselves
/// are never modified by step(). State is per parameter, created at the first step.
///
/// A scheduler sets the optimizer's lr when constructed (step 0) and at every step():
/// call optimizer.step() then scheduler.step() once per iteration (PyTorch's order).
///
/// Invalid hyperparameters throw ValueError: a missing or negative lr, betas outside
/// [0, 1), negative eps / momentum / weight_decay, nesterov without momentum (or with
/// dampening), an empty or duplicated parameter list, a non-leaf or integer parameter.
///
/// \code
///   using namespace microtorch;
///   namespace F = nn::functional;
///   auto model = std::make_shared<Mlp>();
///   optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.01});
///   optim::CosineWithWarmup schedule(opt, /*warmup_steps=*/100, /*total_steps=*/2000);
///   for (int step = 0; step < 2000; ++step) {
///     opt.zero_grad();
///     Tensor loss = F::cross_entropy(model->forward(x), y);
///     loss.backward();
///     optim::clip_grad_norm_(model->parameters(), 1.0);
///     opt.step();
///     schedule.step();
///   }
/// \endcode
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "microtorch/tensor.hpp"

/// Optimizers and learning-rate schedules (torch.optim).
namespace microtorch::optim {

/// The base of every optimizer: holds the parameters (handles sharing the model's data)
/// and the learning rate.
class Optimizer {
 public:
  /// Virtual: optimizers may be held through a pointer to the base.
  virtual ~Optimizer() = default;
  ///@{
  /// Not copyable: the per-parameter state belongs to one optimizer (save it with state_dict).
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  ///@}

  /// Forgets every parameter's gradient (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();
  /// Applies one update to every parameter that has a gradient.
  virtual void step() = 0;
  /// "SGD", "Adam", "AdamW".
  virtual std::string name() const = 0;

  /// The current learning rate.
  double lr() const { return lr_; }
  /// Sets the learning rate (schedulers call this); negative values throw ValueError.
  void set_lr(double lr);
  /// The parameters, in the order given to the constructor.
  const std::vector<Tensor>& params() const { return params_; }

  /// Everything an exact resume needs (PyTorch's optimizer.state_dict(), flattened into
  /// named tensors for save_npz): "lr" (0-d float64), and for each parameter i that has been
  /// stepped its buffers "state.<i>.<name>" (SGD with momentum: momentum_buffer; Adam and
  /// AdamW: step (0-d int64), exp_avg, exp_avg_sq, and max_exp_avg_sq with amsgrad). The
  /// tensors are copies.
  NamedTensors state_dict() const;
  /// Restores a state_dict() into an optimizer of the same kind and options over parameters
  /// of the same shapes and dtypes, in the same order. Every key, shape and dtype is checked
  /// before anything changes (ValueError lists every problem); a parameter's buffers come
  /// all together or not at all.
  void load_state_dict(const NamedTensors& state);

 protected:
  /// Validates the parameter list (non-empty, floating leaves, no duplicates) and lr.
  Optimizer(std::vector<Tensor> params, double lr, const char* name);

  /// The names of the buffers this optimizer keeps per parameter, each with whether it is a
  /// 0-d int64 counter (else a tensor of the parameter's shape and dtype).
  virtual std::vector<std::pair<std::string, bool>> state_names() const = 0;
  /// Parameter i's buffers by name, all of state_names() or none (not stepped yet).
  virtual NamedTensors param_state(std::size_t i) const = 0;
  /// Replaces parameter i's buffers (checked by load_state_dict; empty: not stepped yet).
  virtual void set_param_state(std::size_t i, const NamedTensors& buffers) = 0;

  std::vector<Tensor> params_;  ///< the parameters (handles sharing the model's data)
  double lr_;                   ///< the current learning rate
};

/// Options of SGD. The lr has no default, as in torch.optim.SGD: leaving it unset throws ValueError.
struct SGDOptions {
  double lr = std::numeric_limits<double>::quiet_NaN();  ///< the learning rate (required)
  double momentum = 0.0;      ///< momentum factor (0: plain SGD)
  double dampening = 0.0;     ///< dampening of the momentum's gradient term
  double weight_decay = 0.0;  ///< L2 penalty added to the gradient: g + wd * p
  bool nesterov = false;      ///< Nesterov momentum (needs momentum > 0 and no dampening)
  bool maximize = false;      ///< maximise the objective (step along +grad)
};

/// Stochastic gradient descent with optional momentum, dampening, weight decay and
/// Nesterov momentum, as torch.optim.SGD (update rule at the top of optim.hpp).
class SGD : public Optimizer {
 public:
  /// An optimizer over params (e.g. model->parameters()); invalid options throw ValueError.
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  std::string name() const override { return "SGD"; }
  /// The options given to the constructor (the live lr is lr()).
  const SGDOptions& options() const { return options_; }
  /// The momentum buffer of parameter i (undefined before its first step or without momentum).
  const Tensor& momentum_buffer(std::size_t i) const { return buffers_.at(i); }

 protected:
  std::vector<std::pair<std::string, bool>> state_names() const override;
  NamedTensors param_state(std::size_t i) const override;
  void set_param_state(std::size_t i, const NamedTensors& buffers) override;

 private:
  SGDOptions options_;
  std::vector<Tensor> buffers_;
};

/// Options of Adam, with torch.optim.Adam's defaults (betas split into beta1 and beta2).
struct AdamOptions {
  double lr = 1e-3;           ///< the learning rate
  double beta1 = 0.9;         ///< decay of the first-moment average m, in [0, 1)
  double beta2 = 0.999;       ///< decay of the second-moment average v, in [0, 1)
  double eps = 1e-8;          ///< added to the denominator
  double weight_decay = 0.0;  ///< L2 penalty added to the gradient: g + wd * p
  bool amsgrad = false;       ///< use the running maximum of v (AMSGrad)
  bool maximize = false;      ///< maximise the objective
};

/// AdamOptions with AdamW's default decay.
struct AdamWOptions {
  double lr = 1e-3;            ///< the learning rate
  double beta1 = 0.9;          ///< decay of the first-moment average m, in [0, 1)
  double beta2 = 0.999;        ///< decay of the second-moment average v, in [0, 1)
  double eps = 1e-8;           ///< added to the denominator
  double weight_decay = 1e-2;  ///< decoupled decay: p *= 1 - lr * wd before the update
  bool amsgrad = false;        ///< use the running maximum of v (AMSGrad)
  bool maximize = false;       ///< maximise the objective
};

/// Per-parameter state of Adam and AdamW (as torch's optimizer.state[p]).
struct AdamParamState {
  std::int64_t step = 0;  ///< updates applied to this parameter
  Tensor exp_avg;         ///< m, the first-moment average (undefined before the first step)
  Tensor exp_avg_sq;      ///< v, the second-moment average
  Tensor max_exp_avg_sq;  ///< the running maximum of v (amsgrad only; undefined otherwise)
};

/// Adam (Kingma and Ba), as torch.optim.Adam (update rule at the top of optim.hpp).
class Adam : public Optimizer {
 public:
  /// An optimizer over params; invalid options throw ValueError.
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  void step() override;
  std::string name() const override { return "Adam"; }
  /// The options given to the constructor (the live lr is lr()).
  const AdamOptions& options() const { return options_; }
  /// The state of parameter i (std::out_of_range when i is not a parameter index).
  const AdamParamState& state(std::size_t i) const { return state_.at(i); }

 protected:
  std::vector<std::pair<std::string, bool>> state_names() const override;
  NamedTensors param_state(std::size_t i) const override;
  void set_param_state(std::size_t i, const NamedTensors& buffers) override;

 private:
  AdamOptions options_;
  std::vector<AdamParamState> state_;
};

/// Adam with decoupled weight decay (Loshchilov and Hutter), as torch.optim.AdamW.
class AdamW : public Optimizer {
 public:
  /// An optimizer over params; invalid options throw ValueError.
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  void step() override;
  std::string name() const override { return "AdamW"; }
  /// The options given to the constructor (the live lr is lr()).
  const AdamWOptions& options() const { return options_; }
  /// The state of parameter i (std::out_of_range when i is not a parameter index).
  const AdamParamState& state(std::size_t i) const { return state_.at(i); }

 protected:
  std::vector<std::pair<std::string, bool>> state_names() const override;
  NamedTensors param_state(std::size_t i) const override;
  void set_param_state(std::size_t i, const NamedTensors& buffers) override;

 private:
  AdamWOptions options_;
  std::vector<AdamParamState> state_;
};

/// Rescales the gradients so that their joint norm is at most max_norm; returns the norm
/// before clipping (0 when no parameter has a gradient). error_if_nonfinite throws
/// ValueError when the norm is NaN or infinite (otherwise the gradients become NaN, as in
/// PyTorch). max_norm < 0 or norm_type <= 0 throw ValueError.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// The base of the learning-rate schedules: the lr at step t is a function of t and of
/// the optimizer's lr when the scheduler was built (base_lr).
class LRScheduler {
 public:
  /// Virtual: schedules may be held through a pointer to the base.
  virtual ~LRScheduler() = default;
  /// Advances one step and sets the optimizer's lr.
  void step();
  /// The lr for the current step (what the optimizer now uses).
  double get_lr() const { return lr_at(step_); }
  /// How many times step() has been called.
  std::int64_t last_step() const { return step_; }
  /// The optimizer's lr when the scheduler was built: the peak of the schedule.
  double base_lr() const { return base_lr_; }
  /// The lr at step t, without changing anything.
  virtual double lr_at(std::int64_t t) const = 0;
  /// "last_step" (0-d int64) and "base_lr" (0-d float64): what a resumed run needs.
  NamedTensors state_dict() const;
  /// Restores them (checked first) and sets the optimizer's lr for that step.
  void load_state_dict(const NamedTensors& state);

 protected:
  /// Drives `optimizer`, which must outlive the scheduler; base_lr is its current lr.
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}
  /// Sets the optimizer's lr for step 0; derived constructors call it last.
  void start() { optimizer_.set_lr(lr_at(0)); }

 private:
  Optimizer& optimizer_;
  double base_lr_;
  std::int64_t step_ = 0;
};

/// Decays the lr by gamma every step_size steps: lr = base_lr * gamma^(floor(t / step_size))
/// (torch.optim.lr_scheduler.StepLR).
class StepLR : public LRScheduler {
 public:
  /// step_size >= 1 and a finite gamma >= 0 (ValueError otherwise); sets the lr for step 0.
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);
  double lr_at(std::int64_t t) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// Linear warmup from 0 to base_lr over warmup_steps, then a half cosine down to min_lr at
/// total_steps; min_lr afterwards (the schedule of Hugging Face's
/// get_cosine_schedule_with_warmup, with a floor).
class CosineWithWarmup : public LRScheduler {
 public:
  /// Needs 0 <= warmup_steps <= total_steps, total_steps >= 1 and min_lr <= base_lr
  /// (ValueError otherwise); sets the lr for step 0.
  CosineWithWarmup(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t total_steps, double min_lr = 0.0);
  double lr_at(std::int64_t t) const override;

 private:
  std::int64_t warmup_steps_, total_steps_;
  double min_lr_;
};

}  // namespace microtorch::optim
