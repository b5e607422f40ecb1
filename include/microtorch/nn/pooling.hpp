/// \file
/// Pooling layers and Flatten, with torch.nn's names and arguments: MaxPool1d/2d,
/// AvgPool1d/2d, AdaptiveAvgPool1d/2d. None has parameters or buffers.
#pragma once

#include <cstdint>
#include <string>

#include "microtorch/nn/module.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::nn {

/// Options of MaxPool1d (ceil_mode is PyTorch's default, false).
struct MaxPool1dOptions {
  std::int64_t stride = 0;   ///< step of the window; 0 = kernel_size (PyTorch's stride=None)
  std::int64_t padding = 0;  ///< implicit -inf on both ends, at most kernel_size / 2
};

/// The maximum over sliding windows along L (torch.nn.MaxPool1d); see microtorch::max_pool1d.
class MaxPool1d : public Module {
 public:
  /// Windows of kernel_size; sizes are checked by forward (ValueError).
  explicit MaxPool1d(std::int64_t kernel_size, MaxPool1dOptions options = {})
      : kernel_size(kernel_size), options(options) {}
  /// max_pool1d(x, kernel_size, stride, padding).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t kernel_size;  ///< the window's length
  MaxPool1dOptions options;  ///< as given to the constructor
};

/// Options of MaxPool2d: one number for both dims or {h, w}.
struct MaxPool2dOptions {
  Sizes2d stride = 0;   ///< step of the window; 0 = kernel_size
  Sizes2d padding = 0;  ///< implicit -inf on both sides, at most half the kernel
};

/// The maximum over sliding H x W windows (torch.nn.MaxPool2d); see microtorch::max_pool2d.
class MaxPool2d : public Module {
 public:
  /// Windows of kernel_size; sizes are checked by forward (ValueError).
  explicit MaxPool2d(Sizes2d kernel_size, MaxPool2dOptions options = {}) : kernel_size(kernel_size), options(options) {}
  /// max_pool2d(x, kernel_size, stride, padding).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Sizes2d kernel_size;       ///< the window's size
  MaxPool2dOptions options;  ///< as given to the constructor
};

/// Options of AvgPool1d (ceil_mode false, as PyTorch's default).
struct AvgPool1dOptions {
  std::int64_t stride = 0;        ///< step of the window; 0 = kernel_size
  std::int64_t padding = 0;       ///< zeros on both ends, at most kernel_size / 2
  bool count_include_pad = true;  ///< the padding's zeros count in the mean (PyTorch's default)
};

/// The mean over sliding windows along L (torch.nn.AvgPool1d); see microtorch::avg_pool1d.
class AvgPool1d : public Module {
 public:
  /// Windows of kernel_size; sizes are checked by forward (ValueError).
  explicit AvgPool1d(std::int64_t kernel_size, AvgPool1dOptions options = {})
      : kernel_size(kernel_size), options(options) {}
  /// avg_pool1d(x, kernel_size, stride, padding, count_include_pad).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t kernel_size;  ///< the window's length
  AvgPool1dOptions options;  ///< as given to the constructor
};

/// Options of AvgPool2d: one number for both dims or {h, w}.
struct AvgPool2dOptions {
  Sizes2d stride = 0;             ///< step of the window; 0 = kernel_size
  Sizes2d padding = 0;            ///< zeros on both sides, at most half the kernel
  bool count_include_pad = true;  ///< the padding's zeros count in the mean (PyTorch's default)
};

/// The mean over sliding H x W windows (torch.nn.AvgPool2d); see microtorch::avg_pool2d.
class AvgPool2d : public Module {
 public:
  /// Windows of kernel_size; sizes are checked by forward (ValueError).
  explicit AvgPool2d(Sizes2d kernel_size, AvgPool2dOptions options = {}) : kernel_size(kernel_size), options(options) {}
  /// avg_pool2d(x, kernel_size, stride, padding, count_include_pad).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Sizes2d kernel_size;       ///< the window's size
  AvgPool2dOptions options;  ///< as given to the constructor
};

/// The mean over output_size windows covering L (torch.nn.AdaptiveAvgPool1d): 1 gives a
/// global average pool.
class AdaptiveAvgPool1d : public Module {
 public:
  /// output_size must be positive (checked by forward, ValueError).
  explicit AdaptiveAvgPool1d(std::int64_t output_size) : output_size(output_size) {}
  /// adaptive_avg_pool1d(x, output_size).
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool1d(x, output_size); }
  std::string extra_repr() const override { return "output_size=" + std::to_string(output_size); }
  std::int64_t output_size;  ///< the output's length
};

/// The mean over an output_size grid of windows covering H x W (torch.nn.AdaptiveAvgPool2d):
/// 1 gives a global average pool.
class AdaptiveAvgPool2d : public Module {
 public:
  /// output_size (one number or {h, w}) must be positive (checked by forward, ValueError).
  explicit AdaptiveAvgPool2d(Sizes2d output_size) : output_size(output_size) {}
  /// adaptive_avg_pool2d(x, output_size).
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, output_size); }
  std::string extra_repr() const override;
  Sizes2d output_size;  ///< the output's height and width
};

/// Merges dims start_dim..end_dim into one (torch.nn.Flatten): [N, C, H, W] -> [N, C H W]
/// by default, the step from a convolution's features to a Linear layer.
class Flatten : public Module {
 public:
  /// The first and last dims to merge (negative counts from the end).
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  /// flatten(x, start_dim, end_dim).
  Tensor forward(const Tensor& x) override { return flatten(x, start_dim, end_dim); }
  std::string extra_repr() const override;
  std::int64_t start_dim;  ///< the first dim merged
  std::int64_t end_dim;    ///< the last dim merged
};

}  // namespace microtorch::nn
