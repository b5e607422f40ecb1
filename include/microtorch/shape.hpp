/// \file
/// Shapes, dims and the NumPy/PyTorch broadcasting rule, with the size checks every op uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace microtorch {

/// Sizes of a tensor, outermost first (PyTorch's `sizes()`); int64 so `{n, -1}` works.
using Shape = std::vector<std::int64_t>;

/// The shape as text, "[2, 3, 4]" ("[]" for a 0-d tensor), as error messages print it.
std::string shape_str(const Shape& s);

/// The most elements a tensor may hold: 2^60, so that the byte count of every dtype, every
/// stride and every offset fits in int64 with room to spare.
constexpr std::int64_t kMaxNumel = std::int64_t{1} << 60;

/// Number of elements (1 for a 0-d tensor). Every size is checked: a negative size, or sizes
/// whose product exceeds kMaxNumel, throw ShapeError naming `op` and the shape. Sizes of 0
/// do not hide the others: [0, 2^40, 2^40] is refused too, because reducing away its 0
/// would leave a shape that overflows.
std::int64_t numel_of(const Shape& s, const char* op = "shape");

///@{
/// a + b and a * b for sizes, throwing ShapeError naming `op` when the result would exceed
/// kMaxNumel (inputs must be >= 0).
std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* op);
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* op);
///@}

/// Wraps a possibly negative dim into [0, ndim) (-1 is the last dim); throws IndexError
/// naming `op` and the valid range otherwise. A 0-d tensor accepts 0 and -1, as in PyTorch.
/// For ops that insert a dim (unsqueeze, stack) pass ndim + 1.
std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op);

/// Broadcasts two shapes: align on the right; sizes must match or one of them be 1, and
/// missing leading dims count as 1: [3, 1, 5] and [4, 5] give [3, 4, 5].
/// Throws ShapeError naming `op`, both shapes and the dim that differs when they cannot
/// broadcast, or when the result would hold more than kMaxNumel elements.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Row-major (C-order) strides of a contiguous tensor of shape s, in elements:
/// [2, 3, 4] gives [12, 4, 1].
Shape contiguous_strides(const Shape& s);

}  // namespace microtorch
