// Internal: the sliding-window arithmetic shared by convolution and pooling.
#pragma once

#include <algorithm>
#include <cstdint>

namespace microtorch::detail {

/// Output positions o in [begin, end) whose input index o * stride + offset lies in
/// [0, size): with offset = k * dilation - padding for kernel tap k, these are the outputs
/// that tap reads from the input rather than from the padding.
struct Range {
  std::int64_t begin = 0, end = 0;
};
inline Range valid_outputs(std::int64_t offset, std::int64_t stride, std::int64_t size, std::int64_t outputs) {
  // o * stride + offset >= 0  <=>  o >= ceil(-offset / stride);  <= size - 1  <=>  o <= floor((size - 1 - offset) / stride)
  auto floor_div = [](std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  const std::int64_t lo = -floor_div(offset, stride);  // ceil(-offset / stride)
  const std::int64_t hi = floor_div(size - 1 - offset, stride) + 1;
  Range r{std::clamp<std::int64_t>(lo, 0, outputs), std::clamp<std::int64_t>(hi, 0, outputs)};
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

/// The number of outputs of a window of `span` (dilation (kernel - 1) + 1) sliding by
/// stride over size + padding_begin + padding_end elements: floor((padded - span) / stride) + 1,
/// or 0 when the window does not fit.
inline std::int64_t window_outputs(std::int64_t size, std::int64_t padding_begin, std::int64_t padding_end,
                                   std::int64_t span, std::int64_t stride) {
  const std::int64_t padded = size + padding_begin + padding_end;
  return padded < span ? 0 : (padded - span) / stride + 1;
}

}  // namespace microtorch::detail
