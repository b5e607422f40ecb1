// layer_norm and rms_norm as fused primitives over rows of n = prod(normalized_shape) elements.
#include <cmath>
#include <limits>

#include "common.hpp"
#include "simd.hpp"

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

// x must end with normalized_shape; the parameters given (weight, bias) have that shape and x's dtype.
void check_norm_inputs(const char* op, const Tensor& x, const Shape& normalized_shape,
                       std::initializer_list<const Tensor*> params) {
  const auto k = static_cast<std::int64_t>(normalized_shape.size());
  const bool fits = k > 0 && k <= x.dim() && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape;
  if (!fits) {
    throw ShapeError(fmt::format("{}: input {} must end with normalized_shape {}", op, shape_str(x.shape()),
                                 shape_str(normalized_shape)));
  }
  for (const Tensor* p : params) {
    if (p->defined() && p->shape() != normalized_shape) {
      throw ShapeError(fmt::format("{}: {} must have normalized_shape {}, got {}", op,
                                   params.size() > 1 ? "weight and bias" : "weight", shape_str(normalized_shape),
                                   shape_str(p->shape())));
    }
    if (p->defined() && p->dtype() != x.dtype()) {
      throw DtypeError(fmt::format("{}: input {} and parameters {} differ in dtype", op, dtype_name(x.dtype()),
                                   dtype_name(p->dtype())));
    }
  }
}

// ---- rms_norm: float32 rows in the vectors of simd.hpp, float64 rows in plain loops -----

using detail::simd::kLanes;
using detail::simd::load;
using detail::simd::store;
using detail::simd::Vec;

[[gnu::always_inline]] inline float lanes_sum(Vec v) {
  float s = 0;
  for (int l = 0; l < kLanes; ++l) s += v[l];
  return s;
}

// Per row: rstd = 1 / sqrt(mean(x^2) + eps), y = x rstd w (w may be null).
MICROTORCH_CLONES void rms_norm_rows(const float* x, const float* w, float* y, float* rstd, std::int64_t rows,
                                     std::int64_t n, double eps) {
  const std::int64_t nv = n - n % kLanes;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    Vec acc{};
    for (std::int64_t i = 0; i < nv; i += kLanes) {
      const Vec v = load(xr + i);
      acc += v * v;
    }
    double ms = lanes_sum(acc);
    for (std::int64_t i = nv; i < n; ++i) ms += static_cast<double>(xr[i]) * xr[i];
    const float rs = static_cast<float>(1.0 / std::sqrt(ms / static_cast<double>(n) + eps));
    rstd[r] = rs;
    for (std::int64_t i = 0; i < nv; i += kLanes) store(yr + i, load(xr + i) * rs * (w ? load(w + i) : Vec{} + 1.0f));
    for (std::int64_t i = nv; i < n; ++i) yr[i] = xr[i] * rs * (w ? w[i] : 1.0f);
  }
}

// xhat = x rstd, dxhat = dy w:
//   dx = rstd (dxhat - xhat mean(dxhat xhat)),  dw = sum_rows dy xhat
MICROTORCH_CLONES void rms_norm_backward_rows(const float* x, const float* w, const float* rstd, const float* g,
                                              float* dx, float* dw, std::int64_t rows, std::int64_t n) {
  const std::int64_t nv = n - n % kLanes;
  const Vec ones = Vec{} + 1.0f;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const float* gr = g + r * n;
    const float rs = rstd[r];
    Vec acc{};
    for (std::int64_t i = 0; i < nv; i += kLanes) {
      const Vec xhat = load(xr + i) * rs, gv = load(gr + i);
      acc += gv * (w ? load(w + i) : ones) * xhat;
      if (dw) store(dw + i, load(dw + i) + gv * xhat);
    }
    double dot = lanes_sum(acc);  // sum dxhat xhat
    for (std::int64_t i = nv; i < n; ++i) {
      const float xhat = xr[i] * rs;
      dot += static_cast<double>(gr[i] * (w ? w[i] : 1.0f)) * xhat;
      if (dw) dw[i] += gr[i] * xhat;
    }
    if (!dx) continue;
    const float c = static_cast<float>(dot / static_cast<double>(n)) * rs;
    float* dxr = dx + r * n;
    for (std::int64_t i = 0; i < nv; i += kLanes) {
      store(dxr + i, rs * (load(gr + i) * (w ? load(w + i) : ones) - load(xr + i) * c));
    }
    for (std::int64_t i = nv; i < n; ++i) dxr[i] = rs * (gr[i] * (w ? w[i] : 1.0f) - xr[i] * c);
  }
}

// Per row: rstd = 1 / sqrt(mean(x^2) + eps), y = x rstd w.
void rms_norm_rows(const double* x, const double* w, double* y, double* rstd, std::int64_t rows, std::int64_t n,
                   double eps) {
  using T = double;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    double ms = 0;
    for (std::int64_t i = 0; i < n; ++i) ms += static_cast<double>(xr[i]) * xr[i];
    const T rs = static_cast<T>(1.0 / std::sqrt(ms / static_cast<double>(n) + eps));
    rstd[r] = rs;
    if (w) {
      for (std::int64_t i = 0; i < n; ++i) yr[i] = xr[i] * rs * w[i];
    } else {
      for (std::int64_t i = 0; i < n; ++i) yr[i] = xr[i] * rs;
    }
  }
}

void rms_norm_backward_rows(const double* x, const double* w, const double* rstd, const double* g, double* dx,
                            double* dw, std::int64_t rows, std::int64_t n) {
  using T = double;
  const double inv_n = 1.0 / static_cast<double>(n);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    const T* gr = g + r * n;
    const T rs = rstd[r];
    double dot = 0;  // sum dxhat xhat
    for (std::int64_t i = 0; i < n; ++i) {
      const T xhat = xr[i] * rs;
      const T dxhat = w ? gr[i] * w[i] : gr[i];
      dot += static_cast<double>(dxhat) * xhat;
      if (dw) dw[i] += gr[i] * xhat;
    }
    if (!dx) continue;
    const T c = static_cast<T>(dot * inv_n);
    T* dxr = dx + r * n;
    for (std::int64_t i = 0; i < n; ++i) {
      const T dxhat = w ? gr[i] * w[i] : gr[i];
      dxr[i] = rs * (dxhat - xr[i] * rs * c);
    }
  }
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  check_norm_inputs("layer_norm", x, normalized_shape, {&weight, &bias});
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

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps_in) {
  check_norm_inputs("rms_norm", x, normalized_shape, {&weight});
  detail::visit_floating(x.dtype(), "rms_norm", [](auto) { return 0; });
  // PyTorch's default eps: the machine epsilon of the input's dtype
  const double eps = eps_in ? *eps_in
                            : x.dtype() == Dtype::Float64 ? std::numeric_limits<double>::epsilon()
                                                          : std::numeric_limits<float>::epsilon();
  if (!(eps >= 0)) throw ValueError(fmt::format("rms_norm: eps must be >= 0, got {}", eps));
  const std::int64_t n = numel_of(normalized_shape), rows = x.numel() / std::max<std::int64_t>(n, 1);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor rstd = Tensor::empty({rows}, x.dtype());
  detail::visit_floating(x.dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rms_norm_rows(x.data<T>(), ptr_or_null<T>(weight), y.data<T>(), rstd.data<T>(), rows, n, eps);
    return 0;
  });
  TensorList inputs{x};
  if (weight.defined()) inputs.push_back(weight);
  return autograd::record(
      y, "rms_norm", inputs, autograd::Saved{x, weight, rstd},
      [rows, n](const Tensor& g, const autograd::NeedsGrad& needs, const TensorList& s) {
        const Tensor &x = s[0], &w = s[1], &rstd = s[2];
        Tensor dx = needs[0] ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
        Tensor dw = w.defined() && needs[1] ? zeros(w.shape(), x.dtype()) : Tensor();
        detail::visit_floating(x.dtype(), "rms_norm", [&](auto tag) {
          using T = typename decltype(tag)::type;
          auto out = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
          rms_norm_backward_rows(x.data<T>(), ptr_or_null<T>(w), rstd.data<T>(), g.data<T>(), out(dx), out(dw), rows, n);
          return 0;
        });
        TensorList grads{dx};
        if (w.defined()) grads.push_back(dw);
        return grads;
      },
      {{"normalized_shape", normalized_shape}, {"eps", eps}});
}

}  // namespace microtorch
