// Optimizers, gradient clipping and LR schedules: PyTorch 1.13's update rules as raw loops
// over the parameter data (see optim.hpp for the formulas).
#include "microtorch/nn/optim.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::optim {

namespace {

// Parameters of optimizers are float32 or float64; T is the C++ type.
template <class F>
void visit_param(const Tensor& p, F&& f) {
  if (p.dtype() == kFloat64) {
    f(TypeTag<double>{});
  } else {
    f(TypeTag<float>{});
  }
}

void require_finite_nonnegative(const char* op, const char* what, double value) {
  if (!(value >= 0.0) || !std::isfinite(value)) {
    throw ValueError(fmt::format("{}: invalid {} {}: it must be a finite number >= 0", op, what, value));
  }
}

void require_beta(const char* op, const char* what, double value) {
  if (!(value >= 0.0 && value < 1.0)) {
    throw ValueError(fmt::format("{}: invalid {} {}: it must be in [0, 1) (typical: beta1 = 0.9, beta2 = 0.999)", op,
                                 what, value));
  }
}

// A zero tensor like p (state buffers).
Tensor zeros_for(const Tensor& p) { return zeros(p.shape(), p.dtype()); }

}  // namespace

// ---- Optimizer -----------------------------------------------------------------------

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name) : params_(std::move(params)), lr_(lr) {
  if (std::isnan(lr)) {
    throw ValueError(fmt::format("{}: lr is required, e.g. {}(model->parameters(), {{.lr = 0.01}})", name, name));
  }
  require_finite_nonnegative(name, "learning rate", lr);
  if (params_.empty()) {
    throw ValueError(fmt::format("{}: got an empty parameter list; pass model->parameters() after the model has "
                                 "registered its parameters",
                                 name));
  }
  std::set<const TensorImpl*> seen;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.defined()) throw ValueError(fmt::format("{}: parameter {} is an undefined tensor", name, i));
    if (!p.is_floating_point()) {
      throw ValueError(fmt::format("{}: parameter {} has dtype {} (shape {}); only float32 and float64 tensors can "
                                   "be optimized",
                                   name, i, dtype_name(p.dtype()), shape_str(p.shape())));
    }
    if (!p.is_leaf()) {
      throw ValueError(fmt::format("{}: parameter {} (shape {}) is not a leaf: it was computed by {}; optimize the "
                                   "tensor it came from, or detach().requires_grad_() it",
                                   name, i, shape_str(p.shape()), p.grad_fn()->name()));
    }
    if (!seen.insert(p.impl_ptr().get()).second) {
      throw ValueError(fmt::format("{}: parameter {} (shape {}) appears twice in the parameter list; it would be "
                                   "updated twice per step",
                                   name, i, shape_str(p.shape())));
    }
  }
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
  require_finite_nonnegative(name().c_str(), "learning rate", lr);
  lr_ = lr;
}

namespace {

// The value of a 0-d entry, or a problem added to `problems`.
template <class T>
T scalar_entry(const NamedTensors& state, const std::string& key, Dtype kind, std::vector<std::string>& problems) {
  for (const auto& [k, t] : state) {
    if (k != key) continue;
    const bool kind_ok = kind == kInt64 ? t.dtype() == kInt64 : t.is_floating_point();
    if (!t.defined() || t.dim() != 0 || !kind_ok) {
      problems.push_back(fmt::format("{}: expected a 0-d {} tensor", key, kind == kInt64 ? "int64" : "floating"));
      return T{};
    }
    return static_cast<T>(t.item());
  }
  problems.push_back(fmt::format("{}: missing", key));
  return T{};
}

[[noreturn]] void refuse_state(const std::string& owner, const std::vector<std::string>& problems) {
  throw ValueError(fmt::format("{}: load_state_dict: the state does not fit ({} problem{}):\n  {}", owner,
                               problems.size(), problems.size() == 1 ? "" : "s", fmt::join(problems, "\n  ")));
}

}  // namespace

NamedTensors Optimizer::state_dict() const {
  NamedTensors out{{"lr", scalar_tensor(lr_, kFloat64)}};
  for (std::size_t i = 0; i < params_.size(); ++i) {
    for (const auto& [name, t] : param_state(i)) out.emplace_back(fmt::format("state.{}.{}", i, name), t.clone());
  }
  return out;
}

void Optimizer::load_state_dict(const NamedTensors& state) {
  std::vector<std::string> problems;
  const double lr = scalar_entry<double>(state, "lr", kFloat64, problems);
  if (problems.empty() && !(lr >= 0.0 && std::isfinite(lr))) problems.push_back(fmt::format("lr: invalid value {}", lr));
  const auto names = state_names();
  std::vector<NamedTensors> buffers(params_.size());
  for (const auto& [key, t] : state) {
    if (key == "lr") continue;
    // "state.<i>.<name>"
    std::size_t i = 0, used = 0;
    const std::size_t dot = key.find('.', 6);
    bool parsed = key.rfind("state.", 0) == 0 && dot != std::string::npos;
    if (parsed) {
      try {
        i = std::stoul(key.substr(6, dot - 6), &used);
      } catch (const std::exception&) {
        parsed = false;
      }
      parsed = parsed && used == dot - 6;
    }
    const std::string name = parsed ? key.substr(dot + 1) : "";
    const auto spec = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == name; });
    if (!parsed || i >= params_.size() || spec == names.end()) {
      problems.push_back(fmt::format("{}: unexpected key ({} keeps {} for parameters 0 .. {})", key, this->name(),
                                     fmt::join([&] {
                                       std::vector<std::string> n;
                                       for (const auto& s : names) n.push_back("state.<i>." + s.first);
                                       return n;
                                     }(), ", "),
                                     params_.size() - 1));
      continue;
    }
    const Tensor& p = params_[i];
    const bool counter = spec->second;
    const Shape want_shape = counter ? Shape{} : p.shape();
    const Dtype want_dtype = counter ? kInt64 : p.dtype();
    if (!t.defined() || t.shape() != want_shape || t.dtype() != want_dtype) {
      problems.push_back(fmt::format("{}: expected {} {}, got {}", key, dtype_name(want_dtype), shape_str(want_shape),
                                     t.defined() ? fmt::format("{} {}", dtype_name(t.dtype()), shape_str(t.shape()))
                                                 : std::string("an undefined tensor")));
      continue;
    }
    if (counter && t.item<std::int64_t>() < 0) problems.push_back(fmt::format("{}: a negative count", key));
    buffers[i].emplace_back(name, t.clone());
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!buffers[i].empty() && buffers[i].size() != names.size()) {
      problems.push_back(fmt::format("state.{}: has {} of the {} buffers {} keeps for a parameter; all or none", i,
                                     buffers[i].size(), names.size(), this->name()));
    }
  }
  if (!problems.empty()) refuse_state(name(), problems);
  lr_ = lr;
  for (std::size_t i = 0; i < params_.size(); ++i) set_param_state(i, buffers[i]);
}

// ---- SGD -------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr, "SGD"), options_(options), buffers_(params_.size()) {
  require_finite_nonnegative("SGD", "momentum", options.momentum);
  require_finite_nonnegative("SGD", "weight_decay", options.weight_decay);
  if (!std::isfinite(options.dampening)) throw ValueError("SGD: dampening must be finite");
  if (options.nesterov && (options.momentum <= 0.0 || options.dampening != 0.0)) {
    throw ValueError(fmt::format("SGD: nesterov momentum requires a momentum > 0 and zero dampening (got momentum {}, "
                                 "dampening {}); e.g. {{.lr = 0.1, .momentum = 0.9, .nesterov = true}}",
                                 options.momentum, options.dampening));
  }
}

void SGD::step() {
  NoGradGuard no_grad;
  const SGDOptions& o = options_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const bool first = !buffers_[i].defined();
    if (o.momentum != 0.0 && first) buffers_[i] = zeros_for(p);
    visit_param(p, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* w = p.data<T>();
      const T* gp = g.data<T>();
      T* buf = o.momentum != 0.0 ? buffers_[i].data<T>() : nullptr;
      const T wd = static_cast<T>(o.weight_decay), mom = static_cast<T>(o.momentum);
      const T keep = static_cast<T>(1.0 - o.dampening), lr = static_cast<T>(lr_);
      const std::int64_t n = p.numel();
      for (std::int64_t k = 0; k < n; ++k) {
        T d = o.maximize ? -gp[k] : gp[k];
        if (o.weight_decay != 0.0) d += wd * w[k];
        if (buf) {
          buf[k] = first ? d : buf[k] * mom + keep * d;  // b = m b + (1 - dampening) d
          d = o.nesterov ? d + mom * buf[k] : buf[k];
        }
        w[k] -= lr * d;
      }
    });
    p.bump_version();  // written through data(): a graph that saved p must not backprop any more
  }
}

std::vector<std::pair<std::string, bool>> SGD::state_names() const {
  if (options_.momentum == 0.0) return {};
  return {{"momentum_buffer", false}};
}

NamedTensors SGD::param_state(std::size_t i) const {
  if (!buffers_[i].defined()) return {};
  return {{"momentum_buffer", buffers_[i]}};
}

void SGD::set_param_state(std::size_t i, const NamedTensors& buffers) {
  buffers_[i] = buffers.empty() ? Tensor() : buffers[0].second;
}

// ---- Adam / AdamW ----------------------------------------------------------------------

namespace {

struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled;
};

void check_adam(const char* op, double beta1, double beta2, double eps, double weight_decay) {
  require_beta(op, "beta1", beta1);
  require_beta(op, "beta2", beta2);
  require_finite_nonnegative(op, "eps", eps);
  require_finite_nonnegative(op, "weight_decay", weight_decay);
}

// One Adam/AdamW update of every parameter that has a gradient (torch 1.13's
// _single_tensor_adam / _single_tensor_adamw).
void adam_step(const std::vector<Tensor>& params, std::vector<AdamParamState>& state, const AdamHyper& h) {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    AdamParamState& s = state[i];
    if (s.step == 0) {
      s.exp_avg = zeros_for(p);
      s.exp_avg_sq = zeros_for(p);
      if (h.amsgrad) s.max_exp_avg_sq = zeros_for(p);
    }
    ++s.step;
    const double bias_correction1 = 1.0 - std::pow(h.beta1, static_cast<double>(s.step));
    const double bias_correction2 = 1.0 - std::pow(h.beta2, static_cast<double>(s.step));
    const double step_size = h.lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    visit_param(p, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* w = p.data<T>();
      const T* gp = g.data<T>();
      T* m = s.exp_avg.data<T>();
      T* v = s.exp_avg_sq.data<T>();
      T* vmax = h.amsgrad ? s.max_exp_avg_sq.data<T>() : nullptr;
      const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2);
      const T one_minus_b1 = static_cast<T>(1.0 - h.beta1), one_minus_b2 = static_cast<T>(1.0 - h.beta2);
      const T eps = static_cast<T>(h.eps), wd = static_cast<T>(h.weight_decay);
      const T decay = static_cast<T>(1.0 - h.lr * h.weight_decay);
      const T bc2 = static_cast<T>(bias_correction2_sqrt), neg_step = static_cast<T>(-step_size);
      const std::int64_t n = p.numel();
      for (std::int64_t k = 0; k < n; ++k) {
        T d = h.maximize ? -gp[k] : gp[k];
        if (h.decoupled) {
          w[k] *= decay;  // AdamW: p *= 1 - lr * wd
        } else if (h.weight_decay != 0.0) {
          d += wd * w[k];  // Adam: L2 penalty folded into the gradient
        }
        m[k] = m[k] * b1 + d * one_minus_b1;
        v[k] = v[k] * b2 + one_minus_b2 * d * d;
        T second = v[k];
        if (vmax) second = vmax[k] = std::max(vmax[k], v[k]);
        const T denom = std::sqrt(second) / bc2 + eps;
        w[k] += neg_step * (m[k] / denom);
      }
    });
    p.bump_version();
  }
}

std::vector<std::pair<std::string, bool>> adam_state_names(bool amsgrad) {
  std::vector<std::pair<std::string, bool>> names{{"step", true}, {"exp_avg", false}, {"exp_avg_sq", false}};
  if (amsgrad) names.emplace_back("max_exp_avg_sq", false);
  return names;
}

NamedTensors adam_param_state(const AdamParamState& s) {
  if (s.step == 0) return {};
  NamedTensors out{{"step", scalar_tensor(static_cast<double>(s.step), kInt64)},
                   {"exp_avg", s.exp_avg},
                   {"exp_avg_sq", s.exp_avg_sq}};
  if (s.max_exp_avg_sq.defined()) out.emplace_back("max_exp_avg_sq", s.max_exp_avg_sq);
  return out;
}

// buffers: all of adam_state_names() (checked by Optimizer::load_state_dict) or none.
AdamParamState adam_state_from(const NamedTensors& buffers) {
  AdamParamState s;
  for (const auto& [name, t] : buffers) {
    if (name == "step") s.step = t.item<std::int64_t>();
    if (name == "exp_avg") s.exp_avg = t;
    if (name == "exp_avg_sq") s.exp_avg_sq = t;
    if (name == "max_exp_avg_sq") s.max_exp_avg_sq = t;
  }
  return s;
}

}  // namespace

std::vector<std::pair<std::string, bool>> Adam::state_names() const { return adam_state_names(options_.amsgrad); }
NamedTensors Adam::param_state(std::size_t i) const { return adam_param_state(state_[i]); }
void Adam::set_param_state(std::size_t i, const NamedTensors& buffers) { state_[i] = adam_state_from(buffers); }
std::vector<std::pair<std::string, bool>> AdamW::state_names() const { return adam_state_names(options_.amsgrad); }
NamedTensors AdamW::param_state(std::size_t i) const { return adam_param_state(state_[i]); }
void AdamW::set_param_state(std::size_t i, const NamedTensors& buffers) { state_[i] = adam_state_from(buffers); }

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Optimizer(std::move(params), options.lr, "Adam"), options_(options), state_(params_.size()) {
  check_adam("Adam", options.beta1, options.beta2, options.eps, options.weight_decay);
}

void Adam::step() {
  const AdamOptions& o = options_;
  adam_step(params_, state_, {lr_, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize, false});
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Optimizer(std::move(params), options.lr, "AdamW"), options_(options), state_(params_.size()) {
  check_adam("AdamW", options.beta1, options.beta2, options.eps, options.weight_decay);
}

void AdamW::step() {
  const AdamWOptions& o = options_;
  adam_step(params_, state_, {lr_, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize, true});
}

// ---- clip_grad_norm_ -------------------------------------------------------------------

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  if (!(norm_type > 0.0)) {
    throw ValueError(fmt::format("clip_grad_norm_: norm_type must be > 0 (2 for the Euclidean norm, infinity() for "
                                 "the max), got {}",
                                 norm_type));
  }
  if (std::isnan(max_norm) || max_norm < 0.0) {
    throw ValueError(fmt::format("clip_grad_norm_: max_norm must be >= 0, got {}", max_norm));
  }
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  const bool inf_norm = std::isinf(norm_type);
  // total = (sum over every element of |g|^p)^(1/p), accumulated in double.
  double acc = 0.0;
  for (const Tensor& g : grads) {
    visit_param(g, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* d = g.data<T>();
      for (std::int64_t k = 0; k < g.numel(); ++k) {
        const double a = std::fabs(static_cast<double>(d[k]));
        if (inf_norm) {
          acc = (std::isnan(a) || std::isnan(acc)) ? std::nan("") : std::max(acc, a);
        } else if (norm_type == 2.0) {
          acc += a * a;
        } else if (norm_type == 1.0) {
          acc += a;
        } else {
          acc += std::pow(a, norm_type);
        }
      }
    });
  }
  const double total = inf_norm ? acc : norm_type == 2.0 ? std::sqrt(acc) : norm_type == 1.0 ? acc
                                                           : std::pow(acc, 1.0 / norm_type);
  if (error_if_nonfinite && !std::isfinite(total)) {
    throw ValueError(fmt::format("clip_grad_norm_: the total norm of order {} of the gradients is {}; the loss or a "
                                 "gradient has diverged (lower the lr, check the data for NaN)",
                                 norm_type, total));
  }
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0 || std::isnan(coef)) {
    NoGradGuard no_grad;
    for (const Tensor& g : grads) {
      visit_param(g, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* d = g.data<T>();
        const T c = static_cast<T>(coef);
        for (std::int64_t k = 0; k < g.numel(); ++k) d[k] *= c;
      });
      g.bump_version();
    }
  }
  return total;
}

// ---- LR schedules ----------------------------------------------------------------------

void LRScheduler::step() {
  ++step_;
  optimizer_.set_lr(lr_at(step_));
}

NamedTensors LRScheduler::state_dict() const {
  return {{"last_step", scalar_tensor(static_cast<double>(step_), kInt64)}, {"base_lr", scalar_tensor(base_lr_, kFloat64)}};
}

void LRScheduler::load_state_dict(const NamedTensors& state) {
  std::vector<std::string> problems;
  const auto step = scalar_entry<std::int64_t>(state, "last_step", kInt64, problems);
  const double base = scalar_entry<double>(state, "base_lr", kFloat64, problems);
  if (problems.empty() && step < 0) problems.push_back(fmt::format("last_step: a negative step {}", step));
  if (problems.empty() && !(base >= 0.0 && std::isfinite(base))) {
    problems.push_back(fmt::format("base_lr: invalid value {}", base));
  }
  for (const auto& [key, _] : state) {
    if (key != "last_step" && key != "base_lr") problems.push_back(fmt::format("{}: unexpected key", key));
  }
  if (!problems.empty()) refuse_state("LRScheduler", problems);
  step_ = step;
  base_lr_ = base;
  optimizer_.set_lr(lr_at(step_));
}

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) throw ValueError(fmt::format("StepLR: step_size must be >= 1, got {}", step_size));
  require_finite_nonnegative("StepLR", "gamma", gamma);
  start();
}

double StepLR::lr_at(std::int64_t t) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(t / step_size_));
}

CosineWithWarmup::CosineWithWarmup(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t total_steps,
                                   double min_lr)
    : LRScheduler(optimizer), warmup_steps_(warmup_steps), total_steps_(total_steps), min_lr_(min_lr) {
  if (warmup_steps < 0 || total_steps <= 0 || warmup_steps > total_steps) {
    throw ValueError(fmt::format("CosineWithWarmup: need 0 <= warmup_steps <= total_steps and total_steps >= 1, got "
                                 "warmup_steps {}, total_steps {}",
                                 warmup_steps, total_steps));
  }
  require_finite_nonnegative("CosineWithWarmup", "min_lr", min_lr);
  if (min_lr > base_lr()) {
    throw ValueError(fmt::format("CosineWithWarmup: min_lr {} exceeds the optimizer's lr {}; set the peak lr on the "
                                 "optimizer",
                                 min_lr, base_lr()));
  }
  start();
}

double CosineWithWarmup::lr_at(std::int64_t t) const {
  if (t < warmup_steps_) return base_lr() * static_cast<double>(t) / static_cast<double>(warmup_steps_);
  const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps_ - warmup_steps_));
  const double progress = std::min(1.0, static_cast<double>(t - warmup_steps_) / span);
  const double pi = std::acos(-1.0);
  return min_lr_ + (base_lr() - min_lr_) * 0.5 * (1.0 + std::cos(pi * progress));
}

}  // namespace microtorch::optim
