/// \file
/// Batch normalisation layers: BatchNorm1d and BatchNorm2d with torch.nn's options and
/// state-dict keys (weight, bias, running_mean, running_var, num_batches_tracked).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "microtorch/nn/module.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::nn {

/// Constructor options of BatchNorm1d and BatchNorm2d (torch.nn.BatchNorm*d's keyword arguments).
struct BatchNormOptions {
  double eps = 1e-5;                    ///< added to the variance before the square root
  std::optional<double> momentum = 0.1;  ///< of the running statistics; nullopt: their cumulative average
  bool affine = true;                   ///< learn `weight` (1) and `bias` (0) per channel
  bool track_running_stats = true;      ///< keep running statistics (else the batch's are used in eval too)
  Dtype dtype = Dtype::Float32;         ///< of the parameters and running statistics
};

/// What BatchNorm1d and BatchNorm2d share (PyTorch's _BatchNorm): the parameters, the buffers
/// and the forward; the two differ only in the input ranks they accept.
///
/// In training, each channel is normalised with the batch's mean and biased variance, and
/// (with track_running_stats) num_batches_tracked grows by one and running_mean/running_var
/// move towards the batch's mean and unbiased variance by `momentum` (or by
/// 1 / num_batches_tracked when momentum is nullopt). In eval() the running statistics are
/// used. See microtorch::batch_norm.
class BatchNorm : public Module {
 public:
  /// num_features channels (positive: ValueError otherwise).
  BatchNorm(std::int64_t num_features, BatchNormOptions options);
  /// batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  /// Running statistics back to mean 0, variance 1, num_batches_tracked 0.
  void reset_running_stats();

  Tensor weight;               ///< [C], initially 1 ("weight"); undefined without affine
  Tensor bias;                 ///< [C], initially 0 ("bias"); undefined without affine
  Tensor running_mean;         ///< [C] buffer, initially 0 ("running_mean"); undefined without track_running_stats
  Tensor running_var;          ///< [C] buffer, initially 1 ("running_var")
  Tensor num_batches_tracked;  ///< 0-d int64 buffer: training batches seen ("num_batches_tracked")
  std::int64_t num_features;   ///< C, the channels (dim 1 of the input)
  BatchNormOptions options;    ///< as given to the constructor

 protected:
  /// Throws ShapeError naming the layer unless x has a rank this layer takes.
  virtual void check_input(const Tensor& x) const = 0;
};

/// Batch normalisation of [N, C] or [N, C, L] (torch.nn.BatchNorm1d).
class BatchNorm1d : public BatchNorm {
 public:
  /// num_features = C.
  explicit BatchNorm1d(std::int64_t num_features, BatchNormOptions options = {}) : BatchNorm(num_features, options) {}

 protected:
  /// ShapeError unless x is [N, C] or [N, C, L].
  void check_input(const Tensor& x) const override;
};

/// Batch normalisation of [N, C, H, W] (torch.nn.BatchNorm2d).
class BatchNorm2d : public BatchNorm {
 public:
  /// num_features = C.
  explicit BatchNorm2d(std::int64_t num_features, BatchNormOptions options = {}) : BatchNorm(num_features, options) {}

 protected:
  /// ShapeError unless x is [N, C, H, W].
  void check_input(const Tensor& x) const override;
};

}  // namespace microtorch::nn
