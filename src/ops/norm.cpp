// The norm family: layer_norm, rms_norm and batch_norm, each one fused primitive.
//
// layer_norm and rms_norm over rows of n = prod(normalized_shape) elements: see their kernels
// below.
//
// batch_norm over channel dim 1 of x [N, C, S...] (S = the product of
// the spatial dims, 1 for [N, C]); each channel's n = N S values normalised together.
//
//   mean = sum x / n,  var = sum (x - mean)^2 / n (biased),  rstd = 1 / sqrt(var + eps)
//   y = (x - mean) rstd w + b = xhat w + b
//   running: r_mean = (1 - m) r_mean + m mean,  r_var = (1 - m) r_var + m var n / (n - 1)
// Backward with batch statistics (mean and rstd depend on x), dxhat = dy w:
//   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dw = sum dy xhat,  db = sum dy
// and with running statistics (constants): dx = dy w rstd.
#include <cmath>
#include <limits>
#include <vector>

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

struct BnGeom {
  std::int64_t n = 1, c = 1, s = 1;  // batch, channels, spatial size
};

// Per channel: the batch mean and biased variance, accumulated in double.
template <class T>
void batch_statistics(const BnGeom& g, const T* x, double* mean, double* var) {
  const double count = static_cast<double>(g.n * g.s);
  for (std::int64_t c = 0; c < g.c; ++c) {
    double sum = 0;
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* p = x + (n * g.c + c) * g.s;
      for (std::int64_t k = 0; k < g.s; ++k) sum += p[k];
    }
    const double mu = sum / count;
    double sq = 0;
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* p = x + (n * g.c + c) * g.s;
      for (std::int64_t k = 0; k < g.s; ++k) sq += (p[k] - mu) * (p[k] - mu);
    }
    mean[c] = mu;
    var[c] = sq / count;
  }
}

// y = (x - mean) rstd w + b, per channel.
template <class T>
void batch_norm_channels(const BnGeom& g, const T* x, const T* mean, const T* rstd, const T* w, const T* b, T* y) {
  for (std::int64_t c = 0; c < g.c; ++c) {
    const T scale = rstd[c] * (w ? w[c] : T(1));
    const T shift = (b ? b[c] : T(0)) - mean[c] * scale;
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* p = x + (n * g.c + c) * g.s;
      T* q = y + (n * g.c + c) * g.s;
      for (std::int64_t k = 0; k < g.s; ++k) q[k] = p[k] * scale + shift;
    }
  }
}

template <class T>
void batch_norm_backward_channels(const BnGeom& g, bool batch_stats, const T* x, const T* w, const T* mean, const T* rstd,
                        const T* gy, T* dx, T* dw, T* db) {
  const double inv_count = 1.0 / static_cast<double>(g.n * g.s);
  for (std::int64_t c = 0; c < g.c; ++c) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* p = x + (n * g.c + c) * g.s;
      const T* d = gy + (n * g.c + c) * g.s;
      for (std::int64_t k = 0; k < g.s; ++k) {
        sum_dy += d[k];
        sum_dy_xhat += d[k] * (p[k] - mean[c]);
      }
    }
    sum_dy_xhat *= rstd[c];
    if (dw) dw[c] = static_cast<T>(sum_dy_xhat);
    if (db) db[c] = static_cast<T>(sum_dy);
    if (!dx) continue;
    const double wc = w ? w[c] : 1.0;
    // dxhat = dy w, so mean(dxhat) = w sum_dy / n and mean(dxhat xhat) = w sum_dy_xhat / n.
    const double mean_dxhat = batch_stats ? wc * sum_dy * inv_count : 0.0;
    const double mean_dxhat_xhat = batch_stats ? wc * sum_dy_xhat * inv_count : 0.0;
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* p = x + (n * g.c + c) * g.s;
      const T* d = gy + (n * g.c + c) * g.s;
      T* q = dx + (n * g.c + c) * g.s;
      for (std::int64_t k = 0; k < g.s; ++k) {
        const double xhat = (p[k] - mean[c]) * rstd[c];
        q[k] = static_cast<T>(rstd[c] * (d[k] * wc - mean_dxhat - xhat * mean_dxhat_xhat));
      }
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

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  if (x.dim() < 2) {
    throw ShapeError(fmt::format("batch_norm: input {} must be [N, C] or [N, C, *] (channels at dim 1); for one "
                                 "sample add a batch dim with unsqueeze(0)",
                                 shape_str(x.shape())));
  }
  BnGeom g;
  g.n = x.size(0), g.c = x.size(1);
  g.s = numel_of(Shape(x.shape().begin() + 2, x.shape().end()));
  const char* names[] = {"running_mean", "running_var", "weight", "bias"};
  const Tensor* params[] = {&running_mean, &running_var, &weight, &bias};
  for (int i = 0; i < 4; ++i) {
    const Tensor& p = *params[i];
    if (!p.defined()) continue;
    if (p.shape() != Shape{g.c}) {
      throw ShapeError(fmt::format("batch_norm: {} {} must be [{}], one value per channel of input {} (dim 1); "
                                   "build the layer with num_features={}",
                                   names[i], shape_str(p.shape()), g.c, shape_str(x.shape()), g.c));
    }
    if (p.dtype() != x.dtype()) {
      throw DtypeError(fmt::format("batch_norm: input {} and {} {} differ in dtype; convert the input with .to()",
                                   dtype_name(x.dtype()), names[i], dtype_name(p.dtype())));
    }
  }
  if (running_mean.defined() != running_var.defined()) {
    throw ValueError("batch_norm: running_mean and running_var must be given together");
  }
  if (!(eps > 0)) throw ValueError(fmt::format("batch_norm: eps must be positive, got {}", eps));
  const bool batch_stats = training || !running_mean.defined();  // as PyTorch, without running statistics
  if (batch_stats && g.n * g.s <= 1 && x.numel() > 0) {
    throw ValueError(fmt::format("batch_norm: training needs more than one value per channel, got input {}; use a "
                                 "batch of at least 2, or eval() to use the running statistics",
                                 shape_str(x.shape())));
  }
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({g.c}, x.dtype()), rstd = Tensor::empty({g.c}, x.dtype());
  detail::visit_floating(x.dtype(), "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* pm = mean.data<T>();
    T* pr = rstd.data<T>();
    if (batch_stats) {
      std::vector<double> mu(static_cast<std::size_t>(g.c)), var(static_cast<std::size_t>(g.c));
      batch_statistics(g, x.data<T>(), mu.data(), var.data());
      const double count = static_cast<double>(g.n * g.s);
      for (std::int64_t c = 0; c < g.c; ++c) {
        pm[c] = static_cast<T>(mu[c]);
        pr[c] = static_cast<T>(1.0 / std::sqrt(var[c] + eps));
      }
      if (training && running_mean.defined() && x.numel() > 0) {  // in place, never recorded
        T* rm = running_mean.data<T>();
        T* rv = running_var.data<T>();
        for (std::int64_t c = 0; c < g.c; ++c) {
          rm[c] = static_cast<T>((1 - momentum) * rm[c] + momentum * mu[c]);
          rv[c] = static_cast<T>((1 - momentum) * rv[c] + momentum * var[c] * count / (count - 1));
        }
        running_mean.bump_version();
        running_var.bump_version();
      }
    } else {
      const T* rm = running_mean.data<T>();
      const T* rv = running_var.data<T>();
      for (std::int64_t c = 0; c < g.c; ++c) {
        pm[c] = rm[c];
        pr[c] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(rv[c]) + eps));
      }
    }
    batch_norm_channels(g, x.data<T>(), pm, pr, ptr_or_null<T>(weight), ptr_or_null<T>(bias), y.data<T>());
    return 0;
  });
  return autograd::record(
      y, "batch_norm", {x, running_mean, running_var, weight, bias}, autograd::Saved{x, weight, mean, rstd},
      [g, batch_stats, has_bias = bias.defined()](const Tensor& gy, const autograd::NeedsGrad& needs,
                                                  const TensorList& s) {
        const Tensor &x = s[0], &w = s[1], &mean = s[2], &rstd = s[3];
        Tensor dx = needs[0] ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
        Tensor dw = w.defined() && needs[3] ? Tensor::empty({g.c}, x.dtype()) : Tensor();
        Tensor db = has_bias && needs[4] ? Tensor::empty({g.c}, x.dtype()) : Tensor();
        detail::visit_floating(x.dtype(), "batch_norm", [&](auto tag) {
          using T = typename decltype(tag)::type;
          auto out = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
          batch_norm_backward_channels(g, batch_stats, x.data<T>(), ptr_or_null<T>(w), mean.data<T>(), rstd.data<T>(),
                             gy.data<T>(), out(dx), out(dw), out(db));
          return 0;
        });
        return TensorList{dx, Tensor(), Tensor(), dw, db};
      },
      {{"training", batch_stats}, {"momentum", momentum}, {"eps", eps}});
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
