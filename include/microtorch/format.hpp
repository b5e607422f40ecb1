/// \file
/// Printing tensors the way PyTorch does, with {fmt} or an ostream; shapes and dtypes too.
///
/// \code
///   fmt::print("{}\n", t);
///   // tensor([[ 0.1000, -1.2000],
///   //         [ 3.0000,  4.5000]], shape=[2, 2], grad_fn=<MatmulBackward>)
///   fmt::print("{} {}\n", t.shape(), t.dtype());   // [2, 2] float32
/// \endcode
///
/// One number format serves the whole tensor (integral, fixed with 4 decimals, or
/// scientific), columns are right-aligned, and tensors of more than 1000 elements are
/// summarised with "..." (the first and last 3 entries of each dim). The trailer gives the
/// shape (from 2 dims up), the dtype when the values do not tell it (float64), and the
/// `grad_fn` or `requires_grad=True`.
#pragma once

#include <ostream>
#include <string>

#include <fmt/format.h>

#include "microtorch/tensor.hpp"

namespace microtorch {

/// The tensor as PyTorch prints it (see format.hpp); "tensor(undefined)" for an undefined one.
std::string to_string(const Tensor& t);
/// Writes to_string(t) to os.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace microtorch

/// {fmt}, the formatting library microtorch prints with; microtorch adds formatters for
/// Tensor, Shape and Dtype to it.
namespace fmt {

/// `fmt::format("{}", t)` gives to_string(t); string format specs apply (`{:>60}`).
template <>
struct formatter<microtorch::Tensor> : formatter<std::string_view> {
  /// Formats to_string(t) as a string.
  template <class FormatContext>
  auto format(const microtorch::Tensor& t, FormatContext& ctx) const {
    return formatter<std::string_view>::format(microtorch::to_string(t), ctx);
  }
};

/// `fmt::format("{}", t.shape())` gives shape_str(): "[2, 3]" ("[]" for a 0-d tensor), the
/// list PyTorch prints for a size; string format specs apply (`{:>8}`). Shape is
/// `std::vector<std::int64_t>`, so this is the formatter of every such vector; fmt/ranges.h
/// would print them the same way.
template <>
struct formatter<microtorch::Shape> : formatter<std::string_view> {
  /// Formats shape_str(s) as a string.
  template <class FormatContext>
  auto format(const microtorch::Shape& s, FormatContext& ctx) const {
    return formatter<std::string_view>::format(microtorch::shape_str(s), ctx);
  }
};

/// `fmt::format("{}", kFloat32)` gives dtype_name(): "float32".
template <>
struct formatter<microtorch::Dtype> : formatter<std::string_view> {
  /// Formats dtype_name(d) as a string.
  template <class FormatContext>
  auto format(microtorch::Dtype d, FormatContext& ctx) const {
    return formatter<std::string_view>::format(microtorch::dtype_name(d), ctx);
  }
};

}  // namespace fmt
