// Indexing by a tensor of indices along one dim: gather, and the scatter-add that is its
// backward (shared with sort and topk, whose values are a gather).
#include <cstring>

#include "common.hpp"

namespace microtorch {

namespace detail {

namespace {

// Calls f(k, offset) for every element k of `index` (row-major), where offset is the flat
// position in a contiguous tensor of `shape` of the element that index[k] selects along
// `dim`: the same coordinates as k in every dim but `dim`, and index[k] there.
template <class F>
void for_each_selected(const Shape& shape, const Tensor& index, std::int64_t dim, F f) {
  const Shape& ishape = index.shape();
  const std::int64_t count = index.numel();
  if (count == 0) return;
  const Shape strides = contiguous_strides(shape);
  const std::size_t nd = ishape.size();
  const std::int64_t* pi = index.data<std::int64_t>();
  if (nd == 0) {  // a 0-d tensor: its one element, index 0
    f(0, 0);
    return;
  }
  Shape at(nd, 0);
  std::int64_t base = 0;  // sum over d != dim of at[d] * strides[d]
  const auto d_dim = static_cast<std::size_t>(dim);
  for (std::int64_t k = 0; k < count; ++k) {
    f(k, base + pi[k] * strides[d_dim]);
    for (std::size_t d = nd; d-- > 0;) {  // odometer over the index's shape
      if (d != d_dim) base += strides[d];
      if (++at[d] < ishape[d]) break;
      if (d != d_dim) base -= at[d] * strides[d];
      at[d] = 0;
    }
  }
}

}  // namespace

// dx = zeros(shape); dx[..., index[k], ...] += src[k]
Tensor scatter_add_along(const Shape& shape, std::int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor dx = zeros(shape, src.dtype());
  visit_floating(src.dtype(), "backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = src.data<T>();
    T* pd = dx.data<T>();
    for_each_selected(shape, index, dim, [&](std::int64_t k, std::int64_t off) { pd[off] += ps[k]; });
    return 0;
  });
  return dx;
}

}  // namespace detail

// y[i][j][k] = x[index[i][j][k]][j][k] (dim = 0; likewise for the others) ;
// dx = zeros with dy added back at the gathered positions
Tensor gather(const Tensor& x, std::int64_t dim_in, const Tensor& index) {
  if (index.dtype() != Dtype::Int64) {
    throw DtypeError(fmt::format("gather: index must be an int64 tensor, got {}; convert with .to(kInt64)",
                                 dtype_name(index.dtype())));
  }
  const std::int64_t dim = wrap_dim(dim_in, x.dim(), "gather");
  bool fits = index.dim() == x.dim();
  for (std::int64_t d = 0; fits && d < index.dim(); ++d) {
    fits = d == dim || index.size(d) <= (x.dim() == 0 ? 1 : x.size(d));
  }
  if (!fits) {
    throw ShapeError(fmt::format("gather: index {} must have as many dims as the input {} and be no larger than it in "
                                 "every dim but dim {}",
                                 shape_str(index.shape()), shape_str(x.shape()), dim));
  }
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  const std::int64_t* pi = index.data<std::int64_t>();
  for (std::int64_t k = 0; k < index.numel(); ++k) {
    if (pi[k] < 0 || pi[k] >= n) {
      throw IndexError(fmt::format("gather: index {} at position {} is out of range for dim {} of size {} (input "
                                   "shape {})",
                                   pi[k], k, dim, n, shape_str(x.shape())));
    }
  }
  Tensor y = Tensor::empty(index.shape(), x.dtype());
  const std::size_t esize = dtype_size(x.dtype());
  const char* px = detail::bytes_of(x);
  char* py = detail::bytes_of(y);
  detail::for_each_selected(x.shape(), index, dim, [&](std::int64_t k, std::int64_t off) {
    std::memcpy(py + static_cast<std::size_t>(k) * esize, px + static_cast<std::size_t>(off) * esize, esize);
  });
  return autograd::record(
      y, "gather", {x, index}, autograd::Saved{index},
      [shape = x.shape(), dim](const Tensor& g, const autograd::NeedsGrad&, const TensorList& saved) {
        return TensorList{detail::scatter_add_along(shape, dim, saved[0], g), Tensor()};  // none for the indices
      },
      {{"dim", dim}});
}

}  // namespace microtorch
