// Sorting along one dim: sort and topk. Each finds the order of every line (the indices, not
// differentiable), and the values are gather(x, dim, indices), whose backward scatters dy
// back to where each value came from.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "common.hpp"

namespace microtorch {

namespace {

// The ordering of sort and topk, as PyTorch's: NaN is larger than every number (first when
// descending, last when ascending); equal values keep their order (a stable sort).
template <class T>
bool before(T a, T b, bool descending) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return descending ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
  }
  return descending ? a > b : a < b;
}

// The indices [outer, k, inner] of the first k of every line of x along dim in the order of
// before(): a stable sort of each line's positions (k = n), or a partial sort with ties
// going to the lower position (k < n).
Tensor order_along(const Tensor& x, std::int64_t dim, std::int64_t k, bool descending) {
  const auto s = detail::split_at(x.dim() == 0 ? Shape{1} : x.shape(), dim);
  Shape shape = x.dim() == 0 ? Shape{} : x.shape();
  if (x.dim() > 0) shape[static_cast<std::size_t>(dim)] = k;
  Tensor indices = Tensor::empty(shape, Dtype::Int64);
  std::int64_t* pi = indices.data<std::int64_t>();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    std::vector<std::int64_t> line(static_cast<std::size_t>(s.n));
    for (std::int64_t o = 0; o < s.outer; ++o) {
      for (std::int64_t i = 0; i < s.inner; ++i) {
        const T* row = px + o * s.n * s.inner + i;
        std::iota(line.begin(), line.end(), std::int64_t{0});
        auto cmp = [&](std::int64_t a, std::int64_t b) {
          const T va = row[a * s.inner], vb = row[b * s.inner];
          if (before(va, vb, descending)) return true;
          if (before(vb, va, descending)) return false;
          return a < b;  // equal (or both NaN): the earlier position first
        };
        if (k == s.n) {
          std::sort(line.begin(), line.end(), cmp);  // a total order with the position: stable
        } else {
          std::partial_sort(line.begin(), line.begin() + k, line.end(), cmp);
        }
        for (std::int64_t j = 0; j < k; ++j) pi[(o * k + j) * s.inner + i] = line[static_cast<std::size_t>(j)];
      }
    }
  });
  return indices;
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, std::int64_t dim_in, bool descending) {
  const std::int64_t dim = wrap_dim(dim_in, x.dim(), "sort");
  const Tensor indices = order_along(x, dim, x.dim() == 0 ? 1 : x.size(dim), descending);
  return {gather(x, dim, indices), indices};
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t dim_in, bool largest, bool /*sorted*/) {
  const std::int64_t dim = wrap_dim(dim_in, x.dim(), "topk");
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  if (k < 0 || k > n) {
    throw ValueError(fmt::format("topk: k = {} is out of range for dim {} of size {} (shape {}); k must lie in [0, {}]",
                                 k, dim, n, shape_str(x.shape()), n));
  }
  const Tensor indices = order_along(x, dim, k, largest);
  return {gather(x, dim, indices), indices};
}

}  // namespace microtorch
