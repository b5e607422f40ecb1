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

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "microtorch/tensor.hpp"

namespace microtorch {

/// The tensor as PyTorch prints it (see format.hpp); "tensor(undefined)" for an undefined one.
std::string to_string(const Tensor& t);
/// Writes to_string(t) to os.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

namespace detail {

/// `text` laid out by a {fmt} format spec for strings, e.g. ">8" or "*^20.3" (format.cpp).
std::string format_text(std::string_view text, std::string_view spec);

/// What the formatters below share: parse() keeps the format spec, which must be one for
/// strings ([[fill]align][width][.precision][s]; a width or precision in a nested `{}` is not
/// supported), and write() lays the text out by it in the library, so a program that prints
/// tensors compiles none of fmt's layout code itself (only fmt/core.h).
struct TextFormatter {
  /// Checks and keeps the spec; fmt::format_error for anything but a string's spec.
  constexpr auto parse(fmt::format_parse_context& ctx) -> decltype(ctx.begin()) {
    auto it = ctx.begin();
    const auto end = ctx.end();
    const auto is_align = [](char c) { return c == '<' || c == '>' || c == '^'; };
    if (it != end && it + 1 != end && is_align(it[1]) && *it != '{' && *it != '}') {
      it += 2;  // fill and align
    } else if (it != end && is_align(*it)) {
      ++it;
    }
    while (it != end && *it >= '0' && *it <= '9') ++it;  // width
    if (it != end && *it == '.') {
      ++it;
      while (it != end && *it >= '0' && *it <= '9') ++it;  // precision
    }
    if (it != end && *it == 's') ++it;
    if (it != end && *it != '}') {
      ctx.on_error("microtorch prints tensors, shapes and dtypes as text: the format spec must be a string's, "
                   "[[fill]align][width][.precision]");
    }
    spec_ = std::string_view(ctx.begin(), static_cast<std::size_t>(it - ctx.begin()));
    return it;
  }

  /// Writes `text`, laid out by the spec.
  template <class FormatContext>
  auto write(std::string_view text, FormatContext& ctx) const -> decltype(ctx.out()) {
    auto out = ctx.out();
    if (spec_.empty()) {
      for (const char c : text) *out++ = c;
    } else {
      for (const char c : format_text(text, spec_)) *out++ = c;
    }
    return out;
  }

 private:
  std::string_view spec_;
};

}  // namespace detail

}  // namespace microtorch

/// {fmt}, the formatting library microtorch prints with; microtorch adds formatters for
/// Tensor, Shape and Dtype to it.
namespace fmt {

/// `fmt::format("{}", t)` gives to_string(t); string format specs apply (`{:>60}`).
template <>
struct formatter<microtorch::Tensor> : microtorch::detail::TextFormatter {
  /// Formats to_string(t) as a string.
  template <class FormatContext>
  auto format(const microtorch::Tensor& t, FormatContext& ctx) const {
    return write(microtorch::to_string(t), ctx);
  }
};

/// `fmt::format("{}", t.shape())` gives shape_str(): "[2, 3]" ("[]" for a 0-d tensor), the
/// list PyTorch prints for a size; string format specs apply (`{:>8}`). Shape is
/// `std::vector<std::int64_t>`, so this is the formatter of every such vector; fmt/ranges.h
/// would print them the same way.
template <>
struct formatter<microtorch::Shape> : microtorch::detail::TextFormatter {
  /// Formats shape_str(s) as a string.
  template <class FormatContext>
  auto format(const microtorch::Shape& s, FormatContext& ctx) const {
    return write(microtorch::shape_str(s), ctx);
  }
};

/// `fmt::format("{}", kFloat32)` gives dtype_name(): "float32"; string format specs apply.
template <>
struct formatter<microtorch::Dtype> : microtorch::detail::TextFormatter {
  /// Formats dtype_name(d) as a string.
  template <class FormatContext>
  auto format(microtorch::Dtype d, FormatContext& ctx) const {
    return write(microtorch::dtype_name(d), ctx);
  }
};

}  // namespace fmt
