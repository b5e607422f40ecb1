#include <cmath>

#include <fmt/format.h>

#include "microtorch/nn/conv.hpp"
#include "microtorch/random.hpp"

namespace microtorch::nn {

namespace {

// The constructor checks of torch.nn.Conv*d: sizes, groups, and the padding word.
void check_conv(const char* layer, std::int64_t in, std::int64_t out, std::int64_t kernel_numel, bool strided,
                std::int64_t groups, const ConvPadding& padding) {
  if (in <= 0 || out <= 0 || kernel_numel <= 0) {
    throw ValueError(fmt::format("{}: in_channels, out_channels and kernel_size must be positive, got {}, {} and a "
                                 "kernel of {} taps",
                                 layer, in, out, kernel_numel));
  }
  if (groups <= 0 || in % groups != 0 || out % groups != 0) {
    throw ValueError(fmt::format("{}: groups={} must be positive and divide in_channels={} and out_channels={}; "
                                 "depthwise is groups=in_channels",
                                 layer, groups, in, out));
  }
  if (!padding.mode.empty() && padding.mode != "same" && padding.mode != "valid") {
    throw ValueError(fmt::format("{}: padding must be \"same\", \"valid\" or sizes, got \"{}\"", layer, padding.mode));
  }
  if (padding.mode == "same" && strided) {
    throw ValueError(fmt::format("{}: padding=\"same\" needs stride 1 (PyTorch's rule); give the padding as numbers "
                                 "for a strided convolution",
                                 layer));
  }
}

// PyTorch's reset_parameters: W ~ kaiming_uniform(a = sqrt 5) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = weight.size(1) * the kernel's taps.
void reset_conv(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double fan_in = static_cast<double>(weight.numel() / weight.size(0));
    const double bound = 1.0 / std::sqrt(fan_in);
    init::uniform_(bias, -bound, bound);
  }
}

std::string padding_repr(const ConvPadding& p) {
  if (!p.mode.empty()) return "'" + p.mode + "'";
  return p.sizes.size() == 1 ? std::to_string(p.sizes[0]) : shape_str(p.sizes);
}

std::string sizes_repr(const Sizes2d& s) { return fmt::format("({}, {})", s.h, s.w); }

}  // namespace

Conv1d::Conv1d(std::int64_t in, std::int64_t out, std::int64_t kernel, Conv1dOptions opts)
    : in_channels(in), out_channels(out), kernel_size(kernel), options(std::move(opts)) {
  check_conv("Conv1d", in, out, kernel, options.stride != 1, options.groups, options.padding);
  weight = register_parameter("weight", empty({out, in / options.groups, kernel}, options.dtype));
  if (options.bias) bias = register_parameter("bias", empty({out}, options.dtype));
  reset_parameters();
}

void Conv1d::reset_parameters() { reset_conv(weight, bias); }

Tensor Conv1d::forward(const Tensor& x) {
  return conv1d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

std::string Conv1d::extra_repr() const {
  return fmt::format("{}, {}, kernel_size={}, stride={}, padding={}, dilation={}, groups={}, bias={}", in_channels,
                     out_channels, kernel_size, options.stride, padding_repr(options.padding), options.dilation,
                     options.groups, bias.defined());
}

Conv2d::Conv2d(std::int64_t in, std::int64_t out, Sizes2d kernel, Conv2dOptions opts)
    : in_channels(in), out_channels(out), kernel_size(kernel), options(std::move(opts)) {
  const std::int64_t taps = kernel.h > 0 && kernel.w > 0 ? kernel.h * kernel.w : 0;
  check_conv("Conv2d", in, out, taps, options.stride.h != 1 || options.stride.w != 1, options.groups,
             options.padding);
  if (options.padding.mode.empty() && options.padding.sizes.size() > 2) {
    throw ValueError(fmt::format("Conv2d: padding {} needs one or two sizes", shape_str(options.padding.sizes)));
  }
  weight = register_parameter("weight", empty({out, in / options.groups, kernel.h, kernel.w}, options.dtype));
  if (options.bias) bias = register_parameter("bias", empty({out}, options.dtype));
  reset_parameters();
}

void Conv2d::reset_parameters() { reset_conv(weight, bias); }

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

std::string Conv2d::extra_repr() const {
  return fmt::format("{}, {}, kernel_size={}, stride={}, padding={}, dilation={}, groups={}, bias={}", in_channels,
                     out_channels, sizes_repr(kernel_size), sizes_repr(options.stride), padding_repr(options.padding),
                     sizes_repr(options.dilation), options.groups, bias.defined());
}

}  // namespace microtorch::nn
