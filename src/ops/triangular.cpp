// tril and triu: the lower and upper triangles of the last two dims, the rest set to 0.
#include <algorithm>
#include <cstring>

#include "common.hpp"

namespace microtorch {

namespace {

// y = x where (j - i <= diagonal) for tril, (j - i >= diagonal) for triu, 0 elsewhere, in
// every [rows, cols] matrix of the last two dims ;  dx = the same triangle of dy
Tensor triangle(const Tensor& x, std::int64_t diagonal, bool lower) {
  const char* op = lower ? "tril" : "triu";
  if (x.dim() < 2) {
    throw ShapeError(fmt::format("{}: expects a tensor with at least 2 dims (the last two are the matrix), got {}", op,
                                 shape_str(x.shape())));
  }
  const std::int64_t rows = x.size(-2), cols = x.size(-1);
  const std::int64_t count = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  const std::int64_t d = std::clamp(diagonal, -rows - 1, cols + 1);  // the same triangle; i + d cannot overflow
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const std::size_t esize = dtype_size(x.dtype());
  const char* px = detail::bytes_of(x);
  char* py = detail::bytes_of(y);
  for (std::int64_t m = 0; m < count; ++m) {
    for (std::int64_t i = 0; i < rows; ++i) {
      // the kept columns of row i: [0, i + diagonal] (tril) or [i + diagonal, cols) (triu)
      const std::int64_t edge = std::clamp(i + d + (lower ? 1 : 0), std::int64_t{0}, cols);
      const std::int64_t keep_begin = lower ? 0 : edge, keep_end = lower ? edge : cols;
      const std::size_t row = static_cast<std::size_t>((m * rows + i) * cols) * esize;
      std::memset(py + row, 0, static_cast<std::size_t>(cols) * esize);  // 0, 0.0 and false are all-zero bytes
      std::memcpy(py + row + static_cast<std::size_t>(keep_begin) * esize,
                  px + row + static_cast<std::size_t>(keep_begin) * esize,
                  static_cast<std::size_t>(keep_end - keep_begin) * esize);
    }
  }
  return autograd::record(
      y, op, {x}, [diagonal, lower](const Tensor& g) { return TensorList{triangle(g, diagonal, lower)}; },
      {{"diagonal", diagonal}});
}

}  // namespace

Tensor tril(const Tensor& x, std::int64_t diagonal) { return triangle(x, diagonal, true); }
Tensor triu(const Tensor& x, std::int64_t diagonal) { return triangle(x, diagonal, false); }

}  // namespace microtorch
