#include "common.hpp"

#include <algorithm>
#include <cmath>

namespace microtorch::detail {

Dtype scalar_dtype(const Tensor& t, double value) {
  if (t.is_floating_point()) return t.dtype();
  if (std::nearbyint(value) == value && std::isfinite(value)) return Dtype::Int64;
  return Dtype::Float32;
}

Tensor scalar_like(const Tensor& t, double value) { return scalar_tensor(value, scalar_dtype(t, value)); }

char* bytes_of(const Tensor& t) {
  return visit_dtype(t.dtype(), [&](auto tag) { return reinterpret_cast<char*>(t.data<typename decltype(tag)::type>()); });
}

DimSplit split_at(const Shape& shape, std::int64_t dim) {
  DimSplit s;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(shape.size()); ++d) {
    const auto size = shape[static_cast<std::size_t>(d)];
    if (d < dim) s.outer *= size;
    else if (d == dim) s.n = size;
    else s.inner *= size;
  }
  return s;
}

std::vector<std::int64_t> reduction_dims(const std::vector<std::int64_t>& dims, std::int64_t ndim, const char* op) {
  std::vector<std::int64_t> out;
  if (dims.empty()) {
    for (std::int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (auto d : dims) out.push_back(wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw IndexError(fmt::format("{}: dim {} appears more than once in the reduced dims", op,
                                 *std::adjacent_find(out.begin(), out.end())));
  }
  if (ndim == 0) out.clear();
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<std::int64_t>& dims, bool keepdim) {
  Shape out;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(shape.size()); ++d) {
    const bool reduced = std::binary_search(dims.begin(), dims.end(), d);
    if (!reduced) out.push_back(shape[static_cast<std::size_t>(d)]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor expand_reduced(const Tensor& g, const Shape& shape, const std::vector<std::int64_t>& dims, bool keepdim) {
  Tensor k = keepdim ? g : reshape(g, reduced_shape(shape, dims, /*keepdim=*/true));
  return expand(k, shape);
}

}  // namespace microtorch::detail
