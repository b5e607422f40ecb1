// microtorch/format.hpp — printing tensors the way PyTorch does.
//
//   fmt::print("{}\n", t);
//   tensor([[ 0.1000, -1.2000],
//           [ 3.0000,  4.5000]], shape=[2, 2], grad_fn=<MatmulBackward>)
// Large tensors are summarised with "..." (the first and last 3 entries of each dim).
#pragma once

#include <ostream>
#include <string>

#include <fmt/format.h>

#include "microtorch/tensor.hpp"

namespace microtorch {

std::string to_string(const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace microtorch

template <>
struct fmt::formatter<microtorch::Tensor> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const microtorch::Tensor& t, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(microtorch::to_string(t), ctx);
  }
};

template <>
struct fmt::formatter<microtorch::Dtype> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(microtorch::Dtype d, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(microtorch::dtype_name(d), ctx);
  }
};
