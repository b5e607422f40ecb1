// Strided views of lowered buffers: the index arithmetic behind copy-free reshape, permute,
// slice and expand, and the layout questions kernels ask (is it packed? evenly spaced rows?
// does it cover a range exactly once? do two views share an element?).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "microtorch/lower/program.hpp"
#include "microtorch/shape.hpp"

namespace microtorch::lower {

using Strides = std::vector<std::int64_t>;

/// Row-major strides of a packed tensor of `shape`, in elements.
Strides packed_strides(const Shape& shape);

/// An activation as the lowering sees it: element (i0, i1, ...) is
/// buffer[offset + sum_k i_k * strides[k]], of the buffer's type `elem`, standing for
/// scale * (q - zero). The number format belongs to the view, not the buffer: attention may
/// write its output, in another format, over the bytes of its query.
struct View {
  std::int64_t buffer = -1;
  std::int64_t offset = 0;
  Shape shape;
  Strides strides;
  Elem elem = Elem::S16;
  double scale = 1.0;
  std::int32_t zero = 0;
  /// A packed tensor of parts with their own scales (q | k | v of an attention projection,
  /// head by head; a LayerNorm's channels; a convolution's output channels): dim
  /// `segment_dim` (-1: the last) in segments.size() equal groups, group g at segments[g] with
  /// zero point segment_zeros[g] (none: 0; `scale` is the largest). Empty: one format. Only
  /// rules with OpRule::reads_parts read parts of the last dim, and only rules with
  /// OpRule::reads_channel_formats those of dim 1.
  std::vector<double> segments;
  std::vector<std::int32_t> segment_zeros;
  std::int64_t segment_dim = -1;
};

/// Are the elements laid out row-major without gaps (size-1 dims may have any stride)?
bool is_packed(const View& v);

/// Strides for viewing `v` as `shape` without moving data, if they exist: each group of old
/// dims that merges into a group of new dims must be contiguous within itself.
std::optional<Strides> reshaped_strides(const View& v, const Shape& shape);

/// Does the view cover a contiguous range of its buffer exactly once, in any order (a
/// permuted packed tensor)? Elementwise kernels can then run over that range directly.
bool is_dense(const View& v);

/// The view's leading dims merged into one run of evenly spaced rows of the last dim:
/// the row stride, when there is one (a kernel that reads rows at a stride can then read
/// the view in place).
std::optional<std::int64_t> row_stride(const View& v);

/// Do two views of the same buffer share an element? (`size` = the buffer's elements.)
bool overlaps(const View& a, const View& b, std::int64_t size);

}  // namespace microtorch::lower
