// softmax and log_softmax: fused, numerically stable primitives along one dim (the row
// kernels are in softmax_kernels.hpp).
#include "softmax_kernels.hpp"

namespace microtorch {

namespace {

Tensor softmax_impl(const Tensor& x_in, std::int64_t dim_in, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  const Tensor x = x_in.is_floating_point() ? x_in : x_in.detach().to(Dtype::Float32);
  const std::int64_t dim = wrap_dim(dim_in, x.dim(), op);
  const auto s = detail::split_at(x.shape(), dim);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  detail::visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::softmax_rows(x.data<T>(), y.data<T>(), s, log);
    return 0;
  });
  return autograd::record(
      y, op, {x}, autograd::Saved{y},
      [s, log, op](const Tensor& g, const autograd::NeedsGrad&, const TensorList& saved) {
        const Tensor& y = saved[0];
        Tensor dx = Tensor::empty(g.shape(), g.dtype());
        detail::visit_floating(g.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          detail::softmax_backward_rows(y.data<T>(), g.data<T>(), dx.data<T>(), s, log);
          return 0;
        });
        return TensorList{dx};
      },
      {{"dim", dim}});
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) { return softmax_impl(x, dim, false); }
Tensor log_softmax(const Tensor& x, std::int64_t dim) { return softmax_impl(x, dim, true); }

}  // namespace microtorch
