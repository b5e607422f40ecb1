// Scans along one dim: cumsum (prefix sums).
#include "common.hpp"

namespace microtorch {

namespace {

// out[j] = sum_{i <= j} in[i] along the dim (reverse: sum_{i >= j}), over the (outer, n,
// inner) layout, accumulating in T.
template <class T, class S>
void prefix_sums(const S* in, T* out, const detail::DimSplit& s, bool reverse) {
  for (std::int64_t o = 0; o < s.outer; ++o) {
    const S* src = in + o * s.n * s.inner;
    T* dst = out + o * s.n * s.inner;
    for (std::int64_t i = 0; i < s.inner; ++i) {
      T acc = 0;
      for (std::int64_t j = 0; j < s.n; ++j) {
        const std::int64_t at = (reverse ? s.n - 1 - j : j) * s.inner + i;
        acc += static_cast<T>(src[at]);
        dst[at] = acc;
      }
    }
  }
}

}  // namespace

// y_j = sum_{i <= j} x_i ;  dx_i = sum_{j >= i} dy_j (the prefix sums of dy taken backwards)
Tensor cumsum(const Tensor& x, std::int64_t dim_in) {
  const std::int64_t dim = wrap_dim(dim_in, x.dim(), "cumsum");
  const auto s = detail::split_at(x.dim() == 0 ? Shape{1} : x.shape(), dim);
  const Dtype out_dtype = x.is_floating_point() ? x.dtype() : Dtype::Int64;  // bool and int64 sum as int64
  Tensor y = Tensor::empty(x.shape(), out_dtype);
  visit_dtype(x.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    visit_dtype(out_dtype, [&](auto out_tag) {
      using T = typename decltype(out_tag)::type;
      if constexpr (!std::is_same_v<T, bool>) prefix_sums(x.data<S>(), y.data<T>(), s, false);
    });
  });
  return autograd::record(
      y, "cumsum", {x},
      [s](const Tensor& g) {
        Tensor dx = Tensor::empty(g.shape(), g.dtype());
        detail::visit_floating(g.dtype(), "cumsum", [&](auto tag) {
          using T = typename decltype(tag)::type;
          prefix_sums(g.data<T>(), dx.data<T>(), s, true);
          return 0;
        });
        return TensorList{dx};
      },
      {{"dim", dim}});
}

}  // namespace microtorch
