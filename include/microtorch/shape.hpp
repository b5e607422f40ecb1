// microtorch/shape.hpp — shapes, dims and the NumPy/PyTorch broadcasting rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace microtorch {

/// Sizes of a tensor, outermost first (PyTorch's `sizes()`); int64 so `{n, -1}` works.
using Shape = std::vector<std::int64_t>;

/// "[2, 3, 4]".
std::string shape_str(const Shape& s);

/// Number of elements (1 for a 0-d tensor).
std::int64_t numel_of(const Shape& s);

/// Wraps a possibly negative dim into [0, ndim); throws IndexError naming `op` otherwise.
/// For ops that insert a dim (unsqueeze, stack) pass ndim + 1.
std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op);

/// Broadcasts two shapes: align on the right; sizes must match or one of them be 1.
///   [3, 1, 5] and [4, 5] -> [3, 4, 5]
/// Throws ShapeError naming `op` and both shapes when they cannot broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Row-major strides, in elements.
Shape contiguous_strides(const Shape& s);

}  // namespace microtorch
