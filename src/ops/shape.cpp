// Shape ops: reshape/view/flatten/squeeze/unsqueeze (share memory), permute/transpose,
// expand, slice/narrow/select, index_select, cat/stack, split/chunk (copy).
//
// The copying kernels move whole rows of bytes over the (outer, n, inner) layout, so one
// kernel serves every dtype.
#include <algorithm>
#include <cstring>
#include <numeric>


#include "common.hpp"

namespace microtorch {

using detail::bytes_of;
using detail::split_at;

namespace {

Shape infer_shape(const Shape& requested, const Tensor& x, const char* op) {
  Shape shape = requested;
  std::ptrdiff_t infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw ShapeError(fmt::format("{}: only one size may be -1, got {}", op, shape_str(requested)));
      infer = static_cast<std::ptrdiff_t>(i);
      shape[i] = 1;  // counted as 1 below
    } else if (shape[i] < 0) {
      throw ShapeError(fmt::format("{}: invalid size {} in {}", op, shape[i], shape_str(requested)));
    }
  }
  const std::int64_t known = numel_of(shape, op);  // refuses sizes whose product overflows
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0) {
      throw ShapeError(fmt::format("{}: shape {} is invalid for input of shape {} ({} elements)", op,
                                   shape_str(requested), shape_str(x.shape()), x.numel()));
    }
    shape[static_cast<std::size_t>(infer)] = x.numel() / known;
  } else if (known != x.numel()) {
    throw ShapeError(fmt::format("{}: shape {} ({} elements) is invalid for input of shape {} ({} elements)", op,
                                 shape_str(requested), known, shape_str(x.shape()), x.numel()));
  }
  return shape;
}

// y = x seen with another shape (same storage) ;  dx = reshape(dy, x.shape)
Tensor reshape_as_view(const Tensor& x, const Shape& shape) {
  Tensor y(detail::make_impl(x.impl().storage, shape, x.dtype()));
  return autograd::record(y, "reshape", {x}, [from = x.shape()](const Tensor& g) { return TensorList{reshape(g, from)}; },
                          {{"shape", shape}});
}

// dst (of `shape`) = src (of src_shape, right-aligned, size-1 dims repeated), one row of
// the last dim at a time: a copied row, or one value repeated when that dim broadcasts.
template <class T>
void broadcast_copy(const T* src, T* dst, const Shape& src_shape, const Shape& shape) {
  const std::int64_t total = numel_of(shape);
  if (total == 0) return;
  if (numel_of(src_shape) == 1) {
    std::fill_n(dst, total, src[0]);
    return;
  }
  const std::size_t nd = shape.size(), lead = nd - src_shape.size();
  Shape strides(nd, 0);
  std::int64_t acc = 1;
  for (std::size_t i = src_shape.size(); i-- > 0;) {
    strides[i + lead] = src_shape[i] == 1 ? 0 : acc;
    acc *= src_shape[i];
  }
  const std::int64_t inner = shape.back();
  Shape idx(nd - 1, 0);
  for (std::int64_t r = 0, rows = total / inner; r < rows; ++r) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d + 1 < nd; ++d) off += idx[d] * strides[d];
    T* out = dst + r * inner;
    if (strides.back() != 0) {
      std::copy_n(src + off, inner, out);
    } else {
      std::fill_n(out, inner, src[off]);
    }
    for (std::size_t d = nd - 1; d-- > 0;) {  // odometer increment over the leading dims
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

template <class T>
void permute_copy(const T* src, T* dst, const Shape& out_shape, const Shape& src_strides) {
  const std::size_t nd = out_shape.size();
  const std::int64_t total = numel_of(out_shape);
  if (total == 0) return;
  if (nd == 0) {
    dst[0] = src[0];
    return;
  }
  const std::int64_t inner = out_shape[nd - 1], inner_stride = src_strides[nd - 1];
  Shape idx(nd, 0);
  for (std::int64_t done = 0; done < total; done += inner) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d + 1 < nd; ++d) off += idx[d] * src_strides[d];
    for (std::int64_t k = 0; k < inner; ++k) *dst++ = src[off + k * inner_stride];
    for (std::size_t d = nd - 1; d-- > 0;) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
}

struct SliceSpec {
  std::int64_t dim, start, length, step;
};

// Copies rows [start, start + length * step) step `step` along dim (forward of slice), or
// adds them back into a zero tensor of the input's shape (its backward).
void copy_rows(const Tensor& src, Tensor& dst, const SliceSpec& sp, bool scatter_add) {
  const auto s = split_at(scatter_add ? dst.shape() : src.shape(), sp.dim);
  if (!scatter_add) {
    const std::size_t row = static_cast<std::size_t>(s.inner) * dtype_size(src.dtype());
    if (row == 0 || dst.numel() == 0) return;  // nothing to copy (and no data pointer to copy from)
    const char* ps = bytes_of(src);
    char* pd = bytes_of(dst);
    for (std::int64_t o = 0; o < s.outer; ++o) {
      for (std::int64_t j = 0; j < sp.length; ++j) {
        std::memcpy(pd + static_cast<std::size_t>(o * sp.length + j) * row,
                    ps + static_cast<std::size_t>(o * s.n + sp.start + j * sp.step) * row, row);
      }
    }
    return;
  }
  detail::visit_floating(dst.dtype(), "backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = src.data<T>();
    T* pd = dst.data<T>();
    for (std::int64_t o = 0; o < s.outer; ++o) {
      for (std::int64_t j = 0; j < sp.length; ++j) {
        T* d = pd + (o * s.n + sp.start + j * sp.step) * s.inner;
        const T* r = ps + (o * sp.length + j) * s.inner;
        for (std::int64_t i = 0; i < s.inner; ++i) d[i] += r[i];
      }
    }
    return 0;
  });
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) { return reshape_as_view(x, infer_shape(shape, x, "reshape")); }
Tensor view(const Tensor& x, const Shape& shape) { return reshape_as_view(x, infer_shape(shape, x, "view")); }

Tensor flatten(const Tensor& x, std::int64_t start_dim, std::int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  const std::int64_t s = wrap_dim(start_dim, x.dim(), "flatten"), e = wrap_dim(end_dim, x.dim(), "flatten");
  if (s > e) throw IndexError(fmt::format("flatten: start_dim {} comes after end_dim {}", start_dim, end_dim));
  Shape shape(x.shape().begin(), x.shape().begin() + s);
  shape.push_back(std::accumulate(x.shape().begin() + s, x.shape().begin() + e + 1, std::int64_t{1},
                                  std::multiplies<>()));
  shape.insert(shape.end(), x.shape().begin() + e + 1, x.shape().end());
  return reshape(x, shape);
}

Tensor unsqueeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  shape.insert(shape.begin() + d, 1);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x) {
  Shape shape;
  for (auto s : x.shape()) {
    if (s != 1) shape.push_back(s);
  }
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "squeeze");
  if (x.dim() == 0 || x.shape()[static_cast<std::size_t>(d)] != 1) return x;  // as PyTorch: no-op
  Shape shape = x.shape();
  shape.erase(shape.begin() + d);
  return reshape(x, shape);
}

// y = x with dims reordered (a contiguous copy) ;  dx = permute(dy, inverse(dims))
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims_in) {
  if (static_cast<std::int64_t>(dims_in.size()) != x.dim()) {
    throw ShapeError(fmt::format("permute: {} dims given for a tensor of shape {}; give each of its {} dims once",
                                 dims_in.size(), shape_str(x.shape()), x.dim()));
  }
  std::vector<std::int64_t> dims(dims_in.size());
  std::vector<bool> seen(dims_in.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    dims[i] = wrap_dim(dims_in[i], x.dim(), "permute");
    if (seen[static_cast<std::size_t>(dims[i])]) {
      throw IndexError(fmt::format("permute: dim {} repeats in {}", dims[i], shape_str(Shape(dims_in))));
    }
    seen[static_cast<std::size_t>(dims[i])] = true;
  }
  const Shape in_strides = contiguous_strides(x.shape());
  Shape out_shape(dims.size()), strides(dims.size());
  std::vector<std::int64_t> inverse(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<std::size_t>(dims[i]);
    out_shape[i] = x.shape()[d];
    strides[i] = in_strides[d];
    inverse[d] = static_cast<std::int64_t>(i);
  }
  Tensor y = Tensor::empty(out_shape, x.dtype());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    permute_copy(x.data<T>(), y.data<T>(), out_shape, strides);
  });
  return autograd::record(y, "permute", {x}, [inverse](const Tensor& g) { return TensorList{permute(g, inverse)}; },
                          {{"dims", Shape(dims.begin(), dims.end())}});
}

Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1) {
  if (x.dim() == 0) return x;
  std::vector<std::int64_t> dims(static_cast<std::size_t>(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[static_cast<std::size_t>(wrap_dim(dim0, x.dim(), "transpose"))],
            dims[static_cast<std::size_t>(wrap_dim(dim1, x.dim(), "transpose"))]);
  return permute(x, dims);
}

// y = x broadcast to `shape` (copied) ;  dx = sum_to(dy, x.shape), done by the engine
Tensor expand(const Tensor& x, const Shape& shape_in) {
  if (shape_in.size() < x.shape().size()) {
    throw ShapeError(fmt::format("expand: target {} has fewer dims than the input {}", shape_str(shape_in),
                                 shape_str(x.shape())));
  }
  Shape shape = shape_in;
  const std::size_t lead = shape.size() - x.shape().size();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::int64_t have = i < lead ? 1 : x.shape()[i - lead];
    if (shape[i] == -1) {
      if (i < lead) throw ShapeError(fmt::format("expand: -1 is not allowed for the new leading dim {}", i));
      shape[i] = have;
    } else if (shape[i] != have && have != 1) {
      throw ShapeError(fmt::format("expand: cannot expand {} to {}: dim {} has size {} (only size-1 dims expand)",
                                   shape_str(x.shape()), shape_str(shape_in), i, have));
    }
  }
  if (shape == x.shape()) return x;
  numel_of(shape, "expand");
  Tensor y = Tensor::empty(shape, x.dtype());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcast_copy(x.data<T>(), y.data<T>(), x.shape(), shape);
  });
  return autograd::record(y, "expand", {x}, [](const Tensor& g) { return TensorList{g}; }, {{"shape", shape}});
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) { return expand(x, shape); }

// y = x[start:end:step] along dim ;  dx = zeros with dy added at the selected rows
Tensor slice(const Tensor& x, std::int64_t dim_in, std::int64_t start, std::int64_t end, std::int64_t step) {
  if (x.dim() == 0) throw ShapeError("slice: a 0-d tensor has no dims to slice");
  if (step <= 0) throw ValueError(fmt::format("slice: step must be positive, got {}", step));
  const std::int64_t dim = wrap_dim(dim_in, x.dim(), "slice");
  const std::int64_t n = x.size(dim);
  auto clampi = [n](std::int64_t i) { return std::clamp(i < 0 ? i + n : i, std::int64_t{0}, n); };
  start = clampi(start);
  end = std::max(clampi(end), start);
  const SliceSpec sp{dim, start, end == start ? 0 : 1 + (end - start - 1) / step, step};  // ceil, no overflow
  Shape shape = x.shape();
  shape[static_cast<std::size_t>(dim)] = sp.length;
  Tensor y = Tensor::empty(shape, x.dtype());
  copy_rows(x, y, sp, false);
  return autograd::record(
      y, "slice", {x},
      [sp, from = x.shape()](const Tensor& g) {
        Tensor dx = zeros(from, g.dtype());
        copy_rows(g, dx, sp, true);
        return TensorList{dx};
      },
      {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}

Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "narrow");
  const std::int64_t n = x.size(d);
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start > n || length > n - start) {
    throw IndexError(fmt::format("narrow: start {} and length {} do not fit dim {} of size {} (shape {})", start,
                                 length, d, n, shape_str(x.shape())));
  }
  return slice(x, d, start, start + length);
}

Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "select");
  const std::int64_t n = x.size(d);
  if (index < -n || index >= n) {
    throw IndexError(fmt::format("select: index {} is out of range for dim {} of size {} (shape {})", index, d, n,
                                 shape_str(x.shape())));
  }
  if (index < 0) index += n;
  Shape shape = x.shape();
  shape.erase(shape.begin() + d);
  return reshape(slice(x, d, index, index + 1), shape);
}

// y = x[..., index, ...] along dim ;  dx = zeros with dy rows added back at `index`
Tensor index_select(const Tensor& x, std::int64_t dim_in, const Tensor& index) {
  if (index.dtype() != Dtype::Int64 || index.dim() > 1) {
    throw DtypeError(fmt::format("index_select: index must be a 1-D int64 tensor, got {} of shape {}",
                                 dtype_name(index.dtype()), shape_str(index.shape())));
  }
  const std::int64_t dim = wrap_dim(dim_in, x.dim(), "index_select");
  const auto s = split_at(x.shape(), dim);
  const std::int64_t* idx = index.data<std::int64_t>();
  const std::int64_t count = index.numel();
  if (x.dim() == 0 && count != 1) {  // the result keeps x's shape []: one value (PyTorch's rule)
    throw IndexError(fmt::format("index_select: the index into a 0-d tensor must hold one value, got {} (index "
                                 "shape {}); reshape the input to 1-D first to select several",
                                 count, shape_str(index.shape())));
  }
  for (std::int64_t j = 0; j < count; ++j) {
    if (idx[j] < 0 || idx[j] >= s.n) {
      throw IndexError(fmt::format("index_select: index {} at position {} is out of range for dim {} of size {} "
                                   "(shape {})",
                                   idx[j], j, dim, s.n, shape_str(x.shape())));
    }
  }
  Shape shape = x.shape();
  if (x.dim() > 0) shape[static_cast<std::size_t>(dim)] = count;
  Tensor y = Tensor::empty(shape, x.dtype());
  const std::size_t row = static_cast<std::size_t>(s.inner) * dtype_size(x.dtype());
  const char* px = bytes_of(x);
  char* py = bytes_of(y);
  for (std::int64_t o = 0; row > 0 && o < s.outer; ++o) {  // empty rows: no data pointer to copy from
    for (std::int64_t j = 0; j < count; ++j) {
      std::memcpy(py + static_cast<std::size_t>(o * count + j) * row,
                  px + static_cast<std::size_t>(o * s.n + idx[j]) * row, row);
    }
  }
  return autograd::record(
      y, "index_select", {x, index}, autograd::Saved{index},
      [from = x.shape(), s](const Tensor& g, const autograd::NeedsGrad&, const TensorList& saved) {
        const Tensor& index = saved[0];
        Tensor dx = zeros(from, g.dtype());
        detail::visit_floating(g.dtype(), "backward", [&](auto tag) {
          using T = typename decltype(tag)::type;
          const std::int64_t* id = index.data<std::int64_t>();
          const std::int64_t cnt = index.numel();
          const T* pg = g.data<T>();
          T* pd = dx.data<T>();
          for (std::int64_t o = 0; o < s.outer; ++o) {
            for (std::int64_t j = 0; j < cnt; ++j) {
              T* d = pd + (o * s.n + id[j]) * s.inner;
              const T* r = pg + (o * cnt + j) * s.inner;
              for (std::int64_t i = 0; i < s.inner; ++i) d[i] += r[i];
            }
          }
          return 0;
        });
        return TensorList{dx, Tensor()};  // no gradient for the indices
      },
      {{"dim", dim}});
}

// y = [x0 | x1 | ...] along dim ;  dx_i = the slice of dy that x_i filled
Tensor cat(const TensorList& tensors, std::int64_t dim_in) {
  if (tensors.empty()) throw ValueError("cat: expects a non-empty list of tensors");
  const Tensor& first = tensors[0];
  if (first.dim() == 0) throw ShapeError("cat: 0-d tensors cannot be concatenated; use stack()");
  const std::int64_t dim = wrap_dim(dim_in, first.dim(), "cat");
  Dtype d = first.dtype();
  std::int64_t total = 0;  // checked: many large pieces could add up past int64
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool ok = t.dim() == first.dim();
    for (std::int64_t k = 0; ok && k < t.dim(); ++k) ok = k == dim || t.size(k) == first.size(k);
    if (!ok) {
      throw ShapeError(fmt::format("cat: tensor {} has shape {} but tensor 0 has shape {}; all sizes except dim {} "
                                   "must match",
                                   i, shape_str(t.shape()), shape_str(first.shape()), dim));
    }
    total = checked_add(total, t.size(dim), "cat");
    d = promote_types(d, t.dtype());
  }
  Shape shape = first.shape();
  shape[static_cast<std::size_t>(dim)] = total;
  Tensor y = Tensor::empty(shape, d);
  const auto s = split_at(shape, dim);
  const std::size_t esize = dtype_size(d);
  std::int64_t offset = 0;
  std::vector<std::int64_t> sizes;
  for (const Tensor& t_in : tensors) {
    const Tensor t = t_in.dtype() == d ? t_in : t_in.detach().to(d);
    const std::int64_t n = t.size(dim);
    const std::size_t block = static_cast<std::size_t>(n * s.inner) * esize;
    const char* pt = bytes_of(t);
    char* py = bytes_of(y);
    for (std::int64_t o = 0; block > 0 && o < s.outer; ++o) {  // empty pieces have no data pointer to copy from
      std::memcpy(py + static_cast<std::size_t>((o * s.n + offset) * s.inner) * esize, pt + static_cast<std::size_t>(o) * block,
                  block);
    }
    offset += n;
    sizes.push_back(n);
  }
  return autograd::record(
      y, "cat", tensors, [sizes, dim](const Tensor& g) { return split(g, sizes, dim); }, {{"dim", dim}});
}

Tensor stack(const TensorList& tensors, std::int64_t dim) {
  if (tensors.empty()) throw ValueError("stack: expects a non-empty list of tensors");
  const std::int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  TensorList expanded;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != tensors[0].shape()) {
      throw ShapeError(fmt::format("stack: tensor {} has shape {} but tensor 0 has shape {}; all must be equal", i,
                                   shape_str(tensors[i].shape()), shape_str(tensors[0].shape())));
    }
    expanded.push_back(unsqueeze(tensors[i], d));
  }
  return cat(expanded, d);
}

TensorList split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "split");
  const bool negative = std::any_of(sizes.begin(), sizes.end(), [](auto s) { return s < 0; });
  std::int64_t total = 0;
  for (auto s : sizes) total = negative ? 0 : checked_add(total, s, "split");
  if (negative || total != x.size(d)) {
    throw ShapeError(fmt::format("split: sizes {} must be >= 0 and add up to {} (dim {} of shape {})",
                                 shape_str(Shape(sizes)), x.size(d), d, shape_str(x.shape())));
  }
  TensorList out;
  std::int64_t start = 0;
  for (auto s : sizes) {
    out.push_back(narrow(x, d, start, s));
    start += s;
  }
  return out;
}

TensorList split(const Tensor& x, std::int64_t split_size, std::int64_t dim) {
  if (split_size <= 0) throw ValueError(fmt::format("split: split_size must be positive, got {}", split_size));
  const std::int64_t n = x.size(dim);
  std::vector<std::int64_t> sizes;
  for (std::int64_t start = 0; start < n; start += split_size) sizes.push_back(std::min(split_size, n - start));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, dim);
}

TensorList chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim) {
  if (chunks <= 0) throw ValueError(fmt::format("chunk: chunks must be positive, got {}", chunks));
  const std::int64_t n = x.size(dim);
  return split(x, std::max<std::int64_t>(1, n / chunks + (n % chunks != 0)), dim);  // ceil(n / chunks)
}

}  // namespace microtorch
