// layer_norm as one fused primitive over rows of n = prod(normalized_shape) elements.
#include <cmath>

#include "common.hpp"

namespace microtorch {

namespace {

// Per row: mu = mean(x), rstd = 1 / sqrt(mean((x - mu)^2) + eps), y = (x - mu) rstd w + b.
template <class T>
void layer_norm_rows(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, std::int64_t rows, std::int64_t n,
                     double eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    double mu = 0;
    for (std::int64_t i = 0; i < n; ++i) mu += xr[i];
    mu /= static_cast<double>(n);
    double var = 0;
    for (std::int64_t i = 0; i < n; ++i) var += (xr[i] - mu) * (xr[i] - mu);
    var /= static_cast<double>(n);
    const double rs = 1.0 / std::sqrt(var + eps);
    mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(rs);
    for (std::int64_t i = 0; i < n; ++i) {
      const T xhat = static_cast<T>((xr[i] - mu) * rs);
      yr[i] = xhat * (w ? w[i] : T(1)) + (b ? b[i] : T(0));
    }
  }
}

// xhat = (x - mu) rstd, dxhat = dy w:
//   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dw = sum_rows dy xhat,  db = sum_rows dy
template <class T>
void layer_norm_backward_rows(const T* x, const T* w, const T* mean, const T* rstd, const T* g, T* dx, T* dw, T* db,
                              std::int64_t rows, std::int64_t n) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    const T* gr = g + r * n;
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double xhat = (xr[i] - mean[r]) * rstd[r];
      const double dxhat = gr[i] * (w ? w[i] : T(1));
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
      if (dw) dw[i] += static_cast<T>(gr[i] * xhat);
      if (db) db[i] += gr[i];
    }
    if (!dx) continue;
    const double inv_n = 1.0 / static_cast<double>(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const double xhat = (xr[i] - mean[r]) * rstd[r];
      const double dxhat = gr[i] * (w ? w[i] : T(1));
      dx[r * n + i] = static_cast<T>(rstd[r] * (dxhat - sum_dxhat * inv_n - xhat * sum_dxhat_xhat * inv_n));
    }
  }
}

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  const auto k = static_cast<std::int64_t>(normalized_shape.size());
  const bool fits = k > 0 && k <= x.dim() && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape;
  if (!fits) {
    throw ShapeError(fmt::format("layer_norm: input {} must end with normalized_shape {}", shape_str(x.shape()),
                                 shape_str(normalized_shape)));
  }
  for (const Tensor* p : {&weight, &bias}) {
    if (p->defined() && p->shape() != normalized_shape) {
      throw ShapeError(fmt::format("layer_norm: weight and bias must have normalized_shape {}, got {}",
                                   shape_str(normalized_shape), shape_str(p->shape())));
    }
    if (p->defined() && p->dtype() != x.dtype()) {
      throw DtypeError(fmt::format("layer_norm: input {} and parameters {} differ in dtype", dtype_name(x.dtype()),
                                   dtype_name(p->dtype())));
    }
  }
  if (!(eps > 0)) throw ValueError(fmt::format("layer_norm: eps must be positive, got {}", eps));
  const std::int64_t n = numel_of(normalized_shape), rows = x.numel() / std::max<std::int64_t>(n, 1);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({rows}, x.dtype()), rstd = Tensor::empty({rows}, x.dtype());
  detail::visit_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    layer_norm_rows(x.data<T>(), ptr_or_null<T>(weight), ptr_or_null<T>(bias), y.data<T>(), mean.data<T>(),
                    rstd.data<T>(), rows, n, eps);
    return 0;
  });
  TensorList inputs{x};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  return autograd::record(
      y, "layer_norm", inputs, autograd::Saved{x, weight, mean, rstd},
      [has_bias = bias.defined(), rows, n, normalized_shape](const Tensor& g, const autograd::NeedsGrad& needs,
                                                             const TensorList& s) {
        const Tensor &x = s[0], &w = s[1], &mean = s[2], &rstd = s[3];
        const bool has_w = w.defined();
        Tensor dx = needs[0] ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
        Tensor dw = has_w && needs[1] ? zeros(w.shape(), x.dtype()) : Tensor();
        const std::size_t bias_index = has_w ? 2 : 1;
        Tensor db = has_bias && needs[bias_index] ? zeros(normalized_shape, x.dtype()) : Tensor();
        detail::visit_floating(x.dtype(), "layer_norm", [&](auto tag) {
          using T = typename decltype(tag)::type;
          auto out = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
          layer_norm_backward_rows(x.data<T>(), ptr_or_null<T>(w), mean.data<T>(), rstd.data<T>(), g.data<T>(),
                                   out(dx), out(dw), out(db), rows, n);
          return 0;
        });
        TensorList grads{dx};
        if (has_w) grads.push_back(dw);
        if (has_bias) grads.push_back(db);
        return grads;
      },
      {{"normalized_shape", normalized_shape}, {"eps", eps}});
}

}  // namespace microtorch
