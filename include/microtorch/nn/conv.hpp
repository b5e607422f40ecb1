/// \file
/// Convolution layers: Conv1d and Conv2d with torch.nn's constructor arguments, options and
/// state-dict keys ("weight", "bias").
#pragma once

#include <cstdint>
#include <string>

#include "microtorch/nn/module.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::nn {

/// Constructor options of Conv1d (torch.nn.Conv1d's keyword arguments, in its order).
struct Conv1dOptions {
  std::int64_t stride = 1;       ///< step of the kernel along L
  ConvPadding padding = 0;       ///< zeros on both ends, or "same" (stride 1 only) or "valid"
  std::int64_t dilation = 1;     ///< spacing of the kernel's taps
  std::int64_t groups = 1;       ///< independent channel groups (in_channels: depthwise)
  bool bias = true;              ///< learn an additive bias per output channel
  Dtype dtype = Dtype::Float32;  ///< of the parameters: float32 or float64
};

/// A 1-D convolution (torch.nn.Conv1d): [N, C_in, L] (or unbatched [C_in, L]) ->
/// [N, C_out, L_out], see microtorch::conv1d. weight [out_channels, in_channels / groups,
/// kernel_size], bias [out_channels]; PyTorch's init: both ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
/// with fan_in = in_channels / groups * kernel_size (kaiming_uniform with a = sqrt 5).
class Conv1d : public Module {
 public:
  /// Channels and kernel size must be positive and the channels divisible by groups; a
  /// padding word other than "same"/"valid", or "same" with stride > 1, throws ValueError.
  Conv1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, Conv1dOptions options = {});
  /// conv1d(x, weight, bias, stride, padding, dilation, groups).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  /// Draws fresh weights (and bias) from the initial distributions above.
  void reset_parameters();

  Tensor weight;  ///< [out_channels, in_channels / groups, kernel_size] ("weight")
  Tensor bias;    ///< [out_channels] ("bias"); undefined when options.bias is false
  ///@{
  /// The sizes given to the constructor.
  std::int64_t in_channels, out_channels, kernel_size;
  ///@}
  Conv1dOptions options;  ///< as given to the constructor
};

/// Constructor options of Conv2d (torch.nn.Conv2d's keyword arguments, in its order); sizes
/// are one number for both dims or {h, w}.
struct Conv2dOptions {
  Sizes2d stride = 1;            ///< step of the kernel along H and W
  ConvPadding padding = 0;       ///< zeros on both sides of each dim, or "same" (stride 1 only) or "valid"
  Sizes2d dilation = 1;          ///< spacing of the kernel's taps
  std::int64_t groups = 1;       ///< independent channel groups (in_channels: depthwise)
  bool bias = true;              ///< learn an additive bias per output channel
  Dtype dtype = Dtype::Float32;  ///< of the parameters: float32 or float64
};

/// A 2-D convolution (torch.nn.Conv2d): [N, C_in, H, W] (or unbatched [C_in, H, W]) ->
/// [N, C_out, H_out, W_out], see microtorch::conv2d. weight [out_channels, in_channels /
/// groups, KH, KW], bias [out_channels]; initialised as Conv1d's with fan_in = in_channels /
/// groups * KH * KW.
class Conv2d : public Module {
 public:
  /// The same rules as Conv1d's constructor.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Sizes2d kernel_size, Conv2dOptions options = {});
  /// conv2d(x, weight, bias, stride, padding, dilation, groups).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  /// Draws fresh weights (and bias) from the initial distributions above.
  void reset_parameters();

  Tensor weight;  ///< [out_channels, in_channels / groups, KH, KW] ("weight")
  Tensor bias;    ///< [out_channels] ("bias"); undefined when options.bias is false
  ///@{
  /// The sizes given to the constructor.
  std::int64_t in_channels, out_channels;
  Sizes2d kernel_size;
  ///@}
  Conv2dOptions options;  ///< as given to the constructor
};

}  // namespace microtorch::nn
