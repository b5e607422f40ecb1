#include "microtorch/shape.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "microtorch/error.hpp"

namespace microtorch {

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

namespace {

[[noreturn]] void too_large(const char* op, const std::string& what) {
  throw ShapeError(fmt::format("{}: {} exceeds the 2^60 elements a tensor may hold; use smaller sizes", op, what));
}

}  // namespace

std::int64_t numel_of(const Shape& s, const char* op) {
  // The product of the non-zero sizes must fit too (a 0 beside [2^40, 2^40] is refused), so
  // no shape derived from this one by dropping dims can overflow. Overflow is caught by the
  // compiler's checked multiply (no division on this path, which every tensor takes).
  std::int64_t nonzero = 1;
  bool zero = false;
  for (auto d : s) {
    if (d <= 0) {
      if (d < 0) {
        throw ShapeError(fmt::format("{}: shape {} has a negative size {}; sizes must be >= 0", op, shape_str(s), d));
      }
      zero = true;
      continue;
    }
    if (__builtin_mul_overflow(nonzero, d, &nonzero) || nonzero > kMaxNumel) {
      too_large(op, fmt::format("shape {}", shape_str(s)));
    }
  }
  return zero ? 0 : nonzero;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* op) {
  if (a > kMaxNumel - b) too_large(op, fmt::format("the size {} + {}", a, b));
  return a + b;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* op) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxNumel) too_large(op, fmt::format("the size {} * {}", a, b));
  return r;
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op) {
  if (ndim == 0 && (dim == 0 || dim == -1)) return 0;  // a 0-d tensor accepts dim 0 / -1, as in PyTorch
  if (dim < -ndim || dim >= ndim) {
    throw IndexError(fmt::format("{}: dim {} is out of range for a tensor with {} dims (valid: {} .. {})", op, dim,
                                 ndim, -ndim, ndim - 1));
  }
  return dim < 0 ? dim + ndim : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw ShapeError(fmt::format(
          "{}: shapes {} and {} cannot broadcast: dim {} (from the right: {}) has sizes {} and {}; sizes must be "
          "equal or 1 (use unsqueeze() or reshape() to add size-1 dims)",
          op, shape_str(a), shape_str(b), i, static_cast<std::int64_t>(i) - static_cast<std::int64_t>(n), da, db));
    }
    out[i] = da == 1 ? db : da;
  }
  numel_of(out, op);  // two valid shapes can broadcast to one too large ([2^40, 1] with [1, 2^40])
  return out;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

}  // namespace microtorch
