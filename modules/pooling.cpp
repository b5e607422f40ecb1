#include <fmt/format.h>

#include "microtorch/nn/pooling.hpp"

namespace microtorch::nn {

namespace {

std::string sizes_repr(const Sizes2d& s) { return fmt::format("({}, {})", s.h, s.w); }

}  // namespace

Tensor MaxPool1d::forward(const Tensor& x) { return max_pool1d(x, kernel_size, options.stride, options.padding); }

std::string MaxPool1d::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}", kernel_size,
                     options.stride == 0 ? kernel_size : options.stride, options.padding);
}

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel_size, options.stride, options.padding); }

std::string MaxPool2d::extra_repr() const {
  const bool same = options.stride.h == 0 && options.stride.w == 0;
  return fmt::format("kernel_size={}, stride={}, padding={}", sizes_repr(kernel_size),
                     sizes_repr(same ? kernel_size : options.stride), sizes_repr(options.padding));
}

Tensor AvgPool1d::forward(const Tensor& x) {
  return avg_pool1d(x, kernel_size, options.stride, options.padding, options.count_include_pad);
}

std::string AvgPool1d::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}, count_include_pad={}", kernel_size,
                     options.stride == 0 ? kernel_size : options.stride, options.padding, options.count_include_pad);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size, options.stride, options.padding, options.count_include_pad);
}

std::string AvgPool2d::extra_repr() const {
  const bool same = options.stride.h == 0 && options.stride.w == 0;
  return fmt::format("kernel_size={}, stride={}, padding={}, count_include_pad={}", sizes_repr(kernel_size),
                     sizes_repr(same ? kernel_size : options.stride), sizes_repr(options.padding),
                     options.count_include_pad);
}

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + sizes_repr(output_size); }

std::string Flatten::extra_repr() const { return fmt::format("start_dim={}, end_dim={}", start_dim, end_dim); }

}  // namespace microtorch::nn
