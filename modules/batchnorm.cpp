#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/nn/batchnorm.hpp"

namespace microtorch::nn {

BatchNorm::BatchNorm(std::int64_t features, BatchNormOptions opts) : num_features(features), options(opts) {
  if (features <= 0) throw ValueError(fmt::format("{}: num_features must be positive, got {}", type_name(), features));
  if (options.affine) {
    weight = register_parameter("weight", ones({features}, options.dtype));
    bias = register_parameter("bias", zeros({features}, options.dtype));
  }
  if (options.track_running_stats) {  // PyTorch's order: running_mean, running_var, num_batches_tracked
    running_mean = register_buffer("running_mean", zeros({features}, options.dtype));
    running_var = register_buffer("running_var", ones({features}, options.dtype));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, Dtype::Int64));
  }
}

void BatchNorm::reset_running_stats() {
  if (!options.track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.fill_(0.0);
  running_var.fill_(1.0);
  num_batches_tracked.fill_(0.0);
}

// torch.nn.modules.batchnorm._BatchNorm.forward: a training batch counts, and the running
// statistics move by the momentum or, without one, by the cumulative average's factor
// 1 / num_batches_tracked. The count is raised only once batch_norm has accepted the input,
// so a refused batch leaves the layer as it was.
Tensor BatchNorm::forward(const Tensor& x) {
  check_input(x);
  const bool counts = is_training() && options.track_running_stats;
  std::int64_t* seen = counts ? num_batches_tracked.data<std::int64_t>() : nullptr;
  const double factor = options.momentum ? *options.momentum : counts ? 1.0 / static_cast<double>(*seen + 1) : 0.0;
  Tensor y = batch_norm(x, running_mean, running_var, weight, bias, is_training() || !options.track_running_stats,
                        factor, options.eps);
  if (counts) {
    *seen += 1;
    num_batches_tracked.bump_version();
  }
  return y;
}

std::string BatchNorm::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features, options.eps,
                     options.momentum ? fmt::format("{}", *options.momentum) : std::string("None"), options.affine,
                     options.track_running_stats);
}

void BatchNorm1d::check_input(const Tensor& x) const {
  if (x.dim() != 2 && x.dim() != 3) {
    throw ShapeError(fmt::format("BatchNorm1d: input {} must be [N, C] or [N, C, L] (got {} dims); use "
                                 "BatchNorm2d for [N, C, H, W]",
                                 shape_str(x.shape()), x.dim()));
  }
}

void BatchNorm2d::check_input(const Tensor& x) const {
  if (x.dim() != 4) {
    throw ShapeError(fmt::format("BatchNorm2d: input {} must be [N, C, H, W] (got {} dims); use BatchNorm1d for "
                                 "[N, C] or [N, C, L]",
                                 shape_str(x.shape()), x.dim()));
  }
}

}  // namespace microtorch::nn
