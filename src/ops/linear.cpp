// linear: y = x W^T + b as one fused primitive: the output rows start as b and one GEMM
// (beta = 1, the transpose passed to BLAS) adds x W^T to them.
#include <algorithm>

#include "gemm.hpp"

namespace microtorch {

// y = x W^T + b ;  dx = dy W,  dW = dy^T x (the batch folds into one GEMM),  db = sum_rows dy
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.dim() != 2) {
    throw ShapeError(fmt::format("linear: weight must be [out_features, in_features], got {}",
                                 shape_str(weight.shape())));
  }
  const std::int64_t out_f = weight.size(0), in_f = weight.size(1);
  if (x.dim() == 0 || x.size(-1) != in_f) {
    throw ShapeError(fmt::format("linear: input {} must end in {} features to match weight {} ([out_features, "
                                 "in_features]); reshape the input or build the layer with in_features={}",
                                 shape_str(x.shape()), in_f, shape_str(weight.shape()),
                                 x.dim() == 0 ? 0 : x.size(-1)));
  }
  if (bias.defined() && bias.shape() != Shape{out_f}) {
    throw ShapeError(fmt::format("linear: bias {} must be [{}] for weight {}", shape_str(bias.shape()), out_f,
                                 shape_str(weight.shape())));
  }
  if (!x.is_floating_point() || !weight.is_floating_point()) {
    throw DtypeError(fmt::format("linear: expects floating tensors, got input {} and weight {}; convert with "
                                 ".to(kFloat32)",
                                 dtype_name(x.dtype()), dtype_name(weight.dtype())));
  }
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != weight.dtype())) {
    throw DtypeError(fmt::format("linear: input {} and parameters {} differ in dtype; convert the input with .to()",
                                 dtype_name(x.dtype()), dtype_name(weight.dtype())));
  }
  const Tensor x2 = x.detach().reshape({-1, in_f});
  const std::int64_t rows = x2.size(0);
  Tensor y2 = Tensor::empty({rows, out_f}, x.dtype());
  detail::visit_floating(y2.dtype(), "linear", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* py = y2.data<T>();
    T beta = 0;
    if (bias.defined() && rows > 0) {  // every row starts as b; the GEMM adds x W^T to it
      const T* pb = bias.data<T>();
      for (std::int64_t r = 0; r < rows; ++r) std::copy_n(pb, out_f, py + r * out_f);
      beta = 1;
    }
    if (rows > 0 && out_f > 0) {
      if (in_f == 0) {
        if (!bias.defined()) std::fill_n(py, rows * out_f, T(0));
      } else {
        detail::gemm(false, true, rows, out_f, in_f, T(1), x2.data<T>(), in_f, weight.data<T>(), in_f, beta, py,
                     out_f);
      }
    }
    return 0;
  });
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  Tensor y = y2.reshape(out_shape);
  TensorList inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return autograd::record(
      y, "linear", inputs, autograd::Saved{x2, weight},
      [x_shape = x.shape(), out_f, has_bias = bias.defined()](const Tensor& g, const autograd::NeedsGrad& needs,
                                                              const TensorList& s) {
        const Tensor &x2 = s[0], &w = s[1];
        const Tensor g2 = g.reshape({-1, out_f});
        TensorList grads{needs[0] ? detail::batched_gemm(g2, w, false, false).reshape(x_shape) : Tensor(),
                         needs[1] ? detail::batched_gemm(g2, x2, true, false) : Tensor()};
        if (has_bias) grads.push_back(needs[2] ? sum(g2, {0}) : Tensor());
        return grads;
      });
}

}  // namespace microtorch
