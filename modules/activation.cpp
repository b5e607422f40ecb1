#include <fmt/format.h>

#include "microtorch/nn/layers.hpp"

namespace microtorch::nn {

// as Python prints floats: "-1.0", "0.5"
std::string Hardtanh::extra_repr() const {
  auto py = [](double v) {
    std::string s = fmt::format("{}", v);
    return s.find_first_of(".einf") == std::string::npos ? s + ".0" : s;
  };
  return "min_val=" + py(min_val) + ", max_val=" + py(max_val);
}

// mean over kept positions: sum(x * keep) / max(count(keep), 1); an all-padding row gives 0.
Tensor MeanPool::forward(const Tensor& x, const Tensor& keep) {
  if (keep.dtype() != Dtype::Bool || keep.dim() != 2 || x.dim() < 2 || keep.size(0) != x.size(0) ||
      keep.size(1) != x.size(dim)) {
    throw ShapeError(fmt::format("MeanPool: keep must be a bool [N, L] mask matching x {} along dims 0 and {}, got {} {}",
                                 shape_str(x.shape()), dim, dtype_name(keep.dtype()), shape_str(keep.shape())));
  }
  Shape s = keep.shape();
  while (static_cast<std::int64_t>(s.size()) < x.dim()) s.push_back(1);
  const Tensor w = keep.to(x.dtype()).reshape(s);
  const Tensor count = clamp_min(sum(w, {dim}), 1.0);
  return sum(x * w, {dim}) / count;
}

}  // namespace microtorch::nn
