// Reductions: sum, mean, var, logsumexp, max/min (values and indices), argmax/argmin.
#include <algorithm>
#include <cmath>
#include <limits>

#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include "microtorch/xtensor.hpp"

#include "common.hpp"

namespace microtorch {

using detail::expand_reduced;
using detail::reduced_shape;
using detail::reduction_dims;

namespace {

std::vector<std::size_t> axes_of(const std::vector<std::int64_t>& dims) { return {dims.begin(), dims.end()}; }

/// Evaluates reducer(A, axes) for a tensor converted to `d` and gives it the reduced shape.
template <class Reducer>
Tensor reduce_map(const Tensor& x, Dtype d, const std::vector<std::int64_t>& dims, bool keepdim, Reducer reducer) {
  // No elements: xtensor's reducers would walk a null data pointer (undefined behaviour).
  // The result is empty too, or the sum of nothing; mean, max and the like refuse empty
  // reductions before they get here.
  if (x.numel() == 0) return zeros(reduced_shape(x.shape(), dims, keepdim), d);
  const Tensor xc = x.dtype() == d ? x : x.detach().to(d);
  Tensor y = detail::visit_numeric(d, "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dims.empty()) return Tensor::from_array(xc.template array<T>());  // 0-d input: nothing to reduce
    return Tensor::from_array(reducer(xc.template array<T>(), axes_of(dims)));
  });
  return reshape(y, reduced_shape(x.shape(), dims, keepdim));
}

// The sum of n contiguous values, a two-level cascade: each block of kBlock values in
// kLanes partial sums (independent, so the compiler vectorizes the loop without
// reassociating anything; each adds 256 values) folded pairwise, the blocks' sums added in
// double. Error: about 256 roundings of T instead of n (a sequential float sum of 10^6
// values of 0.1 is off by 1%, this one by 2e-6), and no chain of dependent adds; PyTorch's
// cascade sum keeps partial sums for the same two reasons.
template <class T>
T sum_contiguous(const T* x, std::int64_t n) {
  constexpr int kLanes = 16;
  constexpr std::int64_t kBlock = 4096;
  double total = 0;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const T* xb = x + b;
    const std::int64_t m = std::min(kBlock, n - b);
    T acc[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[l] += xb[i + l];
    }
    for (int w = kLanes / 2; w >= 1; w /= 2) {
      for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
    }
    T s = acc[0];
    for (; i < m; ++i) s += xb[i];
    total += static_cast<double>(s);
  }
  return static_cast<T>(total);
}

// Sum over a contiguous block of dims of a floating tensor, seen as (outer, n, inner):
// out[o, i] = sum_k x[o, k, i]. With inner > 1 accumulated row by row, so that the inner
// loop runs over contiguous memory (xtensor's reducer walks such axes element by element);
// with inner = 1 (trailing dims, a full sum) each out[o] is sum_contiguous of n values.
// Returns an undefined tensor when the layout does not fit (the caller uses xtensor).
Tensor sum_block(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim, double divisor) {
  if (!x.is_floating_point() || dims.empty()) return Tensor();
  for (std::size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] != dims[i - 1] + 1) return Tensor();
  }
  std::int64_t outer = 1, n = 1, inner = 1;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    const auto size = x.shape()[static_cast<std::size_t>(d)];
    (d < dims.front() ? outer : d > dims.back() ? inner : n) *= size;
  }
  Tensor y = Tensor::empty(reduced_shape(x.shape(), dims, keepdim), x.dtype());
  detail::visit_floating(x.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (std::int64_t o = 0; o < outer; ++o) {
      T* out = py + o * inner;
      const T* rows = px + o * n * inner;
      if (inner == 1) {
        out[0] = sum_contiguous(rows, n);
      } else {
        if (n == 0) std::fill_n(out, inner, T(0));
        else std::copy_n(rows, inner, out);
        for (std::int64_t k = 1; k < n; ++k) {
          const T* row = rows + k * inner;
          for (std::int64_t i = 0; i < inner; ++i) out[i] += row[i];
        }
      }
      if (divisor != 1.0) {
        for (std::int64_t i = 0; i < inner; ++i) out[i] /= static_cast<T>(divisor);
      }
    }
    return 0;
  });
  return y;
}

std::int64_t count_of(const Shape& shape, const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (auto d : dims) n *= shape[static_cast<std::size_t>(d)];
  return n;
}

// NaN wins every comparison, so extrema propagate NaN as PyTorch's do.
template <class T>
bool beats(T v, T best, bool is_max) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return !std::isnan(best);
    if (std::isnan(best)) return false;
  }
  return is_max ? v > best : v < best;
}

Tensor isfinite_mask(const Tensor& m) {
  return detail::visit_floating(m.dtype(), "isfinite", [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor out = Tensor::empty(m.shape(), Dtype::Bool);
    const T* p = m.data<T>();
    bool* q = out.data<bool>();
    for (std::int64_t i = 0, n = m.numel(); i < n; ++i) q[i] = std::isfinite(p[i]);
    return out;
  });
}

void require_nonempty(const Tensor& x, const char* op) {
  if (x.numel() == 0) {
    throw ValueError(fmt::format("{}: the tensor of shape {} is empty, so it has no extremum", op, shape_str(x.shape())));
  }
}

}  // namespace

// y = sum over dims ;  dx = broadcast(dy)
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims_in, bool keepdim) {
  const auto dims = reduction_dims(dims_in, x.dim(), "sum");
  const Dtype d = x.is_floating_point() ? x.dtype() : Dtype::Int64;
  Tensor y = sum_block(x, dims, keepdim, 1.0);
  if (!y.defined()) {
    y = reduce_map(x.detach(), d, dims, keepdim, [](auto&& A, auto&& axes) {
      return xt::sum(A, axes, xt::evaluation_strategy::immediate);
    });
  }
  return autograd::record(
      y, "sum", {x}, [shape = x.shape(), dims, keepdim](const Tensor& g) {
        return TensorList{expand_reduced(g, shape, dims, keepdim)};
      },
      {{"dims", Shape(dims.begin(), dims.end())}, {"keepdim", keepdim}});
}

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

// y = sum over dims / n ;  dx = broadcast(dy) / n
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims_in, bool keepdim) {
  const auto dims = reduction_dims(dims_in, x.dim(), "mean");
  const std::int64_t n = count_of(x.shape(), dims);
  if (n == 0) {
    throw ValueError(fmt::format("mean: no elements to average over dims of shape {}", shape_str(x.shape())));
  }
  const Dtype d = x.is_floating_point() ? x.dtype() : Dtype::Float32;
  Tensor y = sum_block(x, dims, keepdim, static_cast<double>(n));
  if (!y.defined()) {
    y = reduce_map(x.detach(), d, dims, keepdim, [n](auto&& A, auto&& axes) {
      using T = typename std::decay_t<decltype(A)>::value_type;
      return xt::sum(A, axes, xt::evaluation_strategy::immediate) / static_cast<T>(n);
    });
  }
  return autograd::record(
      y, "mean", {x}, [shape = x.shape(), dims, keepdim, n](const Tensor& g) {
        return TensorList{expand_reduced(g / static_cast<double>(n), shape, dims, keepdim)};
      },
      {{"dims", Shape(dims.begin(), dims.end())}, {"keepdim", keepdim}});
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

// var = sum((x - mean)^2) / (n - 1 if unbiased else n); composed, so autograd derives
// dx = 2 (x - mean) dy / (n - 1).
Tensor var(const Tensor& x, const std::vector<std::int64_t>& dims_in, bool unbiased, bool keepdim) {
  const auto dims = reduction_dims(dims_in, x.dim(), "var");
  const std::int64_t n = count_of(x.shape(), dims);
  const std::int64_t denom = unbiased ? n - 1 : n;
  if (denom <= 0) {
    throw ValueError(fmt::format("var: {} element(s) along the reduced dims of shape {} {}; pass unbiased=false or "
                                 "reduce over more elements",
                                 n, shape_str(x.shape()), unbiased ? "cannot give an unbiased variance" : "is empty"));
  }
  const Tensor centred = x - mean(x, dims, /*keepdim=*/true);
  return sum(centred * centred, dims, keepdim) / static_cast<double>(denom);
}

// logsumexp = m + log(sum(exp(x - m))), m = max over dims (a constant: the result does not
// depend on it, so it carries no gradient); rows of -inf give -inf, not NaN.
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& dims_in, bool keepdim) {
  const auto dims = reduction_dims(dims_in, x.dim(), "logsumexp");
  detail::visit_floating(x.dtype(), "logsumexp", [](auto) { return 0; });
  require_nonempty(x, "logsumexp");
  Tensor m = reduce_map(x.detach(), x.dtype(), dims, /*keepdim=*/true, [](auto&& A, auto&& axes) {
    return xt::amax(A, axes, xt::evaluation_strategy::immediate);
  });
  m = where(isfinite_mask(m), m, zeros({}, m.dtype()));
  Tensor out = log(sum(exp(x - m), dims, /*keepdim=*/true)) + m;
  return keepdim ? out : reshape(out, reduced_shape(x.shape(), dims, false));
}

namespace {

// Values and indices of the extremum along one dim: one pass with raw pointers over the
// (outer, n, inner) layout. dx scatters dy to the index of each extremum.
std::tuple<Tensor, Tensor> extremum_along(const Tensor& x, std::int64_t dim_in, bool keepdim, bool is_max) {
  const char* op = is_max ? "max" : "min";
  const std::int64_t dim = wrap_dim(dim_in, x.dim(), op);
  require_nonempty(x, op);
  const auto s = detail::split_at(x.shape(), dim);
  const std::vector<std::int64_t> dims = x.dim() == 0 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{dim};
  const Shape out_shape = reduced_shape(x.shape(), dims, keepdim);
  Tensor indices = Tensor::empty(out_shape, Dtype::Int64);
  Tensor values = Tensor::empty(out_shape, x.dtype());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* pv = values.data<T>();
    std::int64_t* pi = indices.data<std::int64_t>();
    for (std::int64_t o = 0; o < s.outer; ++o) {
      for (std::int64_t i = 0; i < s.inner; ++i) {
        const T* row = px + o * s.n * s.inner + i;
        std::int64_t best = 0;
        for (std::int64_t k = 1; k < s.n; ++k) {
          if (beats(row[k * s.inner], row[best * s.inner], is_max)) best = k;
        }
        pv[o * s.inner + i] = row[best * s.inner];
        pi[o * s.inner + i] = best;
      }
    }
  });
  values = autograd::record(
      values, is_max ? "max_dim" : "min_dim", {x}, autograd::Saved{indices},
      [shape = x.shape(), s](const Tensor& g, const autograd::NeedsGrad&, const TensorList& saved) {
        const Tensor& indices = saved[0];
        Tensor dx = zeros(shape, g.dtype());
        detail::visit_floating(g.dtype(), "backward", [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* pg = g.data<T>();
          const std::int64_t* pi = indices.data<std::int64_t>();
          T* pd = dx.data<T>();
          for (std::int64_t o = 0; o < s.outer; ++o) {
            for (std::int64_t i = 0; i < s.inner; ++i) {
              pd[(o * s.n + pi[o * s.inner + i]) * s.inner + i] += pg[o * s.inner + i];
            }
          }
          return 0;
        });
        return TensorList{dx};
      },
      {{"dim", dim}, {"keepdim", keepdim}});
  return {values, indices};
}

// The extremum of all elements; dx = dy * [x == y] / count, shared evenly between ties.
Tensor extremum_all(const Tensor& x, bool is_max) {
  const char* op = is_max ? "max" : "min";
  require_nonempty(x, op);
  Tensor flat = reshape(x.detach(), {x.numel()});
  Tensor y = reshape(std::get<0>(extremum_along(flat, 0, false, is_max)), {});
  return autograd::record(y, is_max ? "max" : "min", {x}, autograd::Saved{x, y},
                          [](const Tensor& g, const autograd::NeedsGrad&, const TensorList& s) {
    const Tensor &x = s[0], &y = s[1];
    Tensor hit = eq(x, y).to(g.dtype());
    return TensorList{hit * (g / sum(hit))};
  });
}

}  // namespace

Tensor max(const Tensor& x) { return extremum_all(x, true); }
Tensor min(const Tensor& x) { return extremum_all(x, false); }
std::tuple<Tensor, Tensor> max(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extremum_along(x, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extremum_along(x, dim, keepdim, false);
}

Tensor argmax(const Tensor& x) { return argmax(reshape(x, {x.numel()}), 0, false); }
// Not differentiable; recorded only while a trace runs, so a lowered classifier can end in it.
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) {
  Tensor idx = std::get<1>(extremum_along(x.detach(), dim, keepdim, true));
  return autograd::record(idx, "argmax", {x}, [](const Tensor&) { return TensorList{Tensor()}; },
                          {{"dim", wrap_dim(dim, x.dim(), "argmax")}, {"keepdim", keepdim}});
}
Tensor argmin(const Tensor& x, std::int64_t dim, bool keepdim) {
  return std::get<1>(extremum_along(x.detach(), dim, keepdim, false));
}

}  // namespace microtorch
