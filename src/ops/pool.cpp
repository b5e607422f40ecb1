// Pooling over the last one or two dims: max, average and adaptive average, one 2-D core
// each (a 1-D pool is a 2-D one of height 1), over planes = the product of the leading dims.
//
//   max:      y[p, q] = max of x over the window at (p sh - ph, q sw - pw) of kh x kw inside
//             the input; dx[argmax] += dy (the first maximum, NaN winning, as PyTorch).
//   average:  y[p, q] = sum of the window inside the input / divisor, divisor = kh kw with
//             count_include_pad (padding counts as zeros), else the elements inside;
//             dx[window] += dy / divisor.
//   adaptive: output i of n spans [floor(i L / n), ceil((i + 1) L / n)) along each dim.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common.hpp"
#include "window.hpp"

namespace microtorch {

namespace {

struct PoolGeom {
  std::int64_t planes = 1, h = 1, w = 1;
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  std::int64_t oh = 1, ow = 1;
};

// The planes and spatial sizes of x for an op over `spatial` trailing dims: [N, C, ...] or
// unbatched [C, ...].
PoolGeom pool_planes(const char* op, const Tensor& x, int spatial) {
  if (x.dim() != spatial + 1 && x.dim() != spatial + 2) {
    throw ShapeError(fmt::format("{}: input {} must be {}", op, shape_str(x.shape()),
                                 spatial == 1 ? "[N, C, L] or unbatched [C, L]"
                                              : "[N, C, H, W] or unbatched [C, H, W]"));
  }
  if (!x.is_floating_point()) {
    throw DtypeError(fmt::format("{}: expects a floating tensor (float32 or float64), got {}; convert with "
                                 ".to(kFloat32)",
                                 op, dtype_name(x.dtype())));
  }
  PoolGeom g;
  g.w = x.size(-1);
  g.h = spatial == 2 ? x.size(-2) : 1;
  g.planes = numel_of(Shape(x.shape().begin(), x.shape().end() - spatial));
  return g;
}

std::string sizes_str(int spatial, std::int64_t h, std::int64_t w) {
  return spatial == 1 ? std::to_string(w) : fmt::format("[{}, {}]", h, w);
}

// Kernel, stride (0: the kernel's) and padding checked as PyTorch does; fills the window and
// the output size.
void pool_window(const char* op, const Tensor& x, int spatial, PoolGeom& g, Sizes2d kernel, Sizes2d stride,
                 Sizes2d padding) {
  if (stride.h == 0 && stride.w == 0) stride = kernel;
  if (spatial == 1) kernel.h = 1, stride.h = 1, padding.h = 0;
  if (kernel.h <= 0 || kernel.w <= 0) {
    throw ValueError(fmt::format("{}: kernel_size must be positive, got {}", op, sizes_str(spatial, kernel.h, kernel.w)));
  }
  if (stride.h <= 0 || stride.w <= 0) {
    throw ValueError(fmt::format("{}: stride must be positive (or 0 for the kernel size), got {}", op,
                                 sizes_str(spatial, stride.h, stride.w)));
  }
  if (padding.h < 0 || padding.w < 0 || padding.h > kernel.h / 2 || padding.w > kernel.w / 2) {
    throw ValueError(fmt::format("{}: padding {} must be >= 0 and at most half the kernel size {} (PyTorch's "
                                 "rule); use a larger kernel or less padding",
                                 op, sizes_str(spatial, padding.h, padding.w), sizes_str(spatial, kernel.h, kernel.w)));
  }
  g.kh = kernel.h, g.kw = kernel.w, g.sh = stride.h, g.sw = stride.w, g.ph = padding.h, g.pw = padding.w;
  if (g.h + 2 * g.ph < g.kh || g.w + 2 * g.pw < g.kw) {
    throw ShapeError(fmt::format("{}: kernel {} is larger than the padded input {} (input {}, padding {}); use a "
                                 "smaller kernel or pad more",
                                 op, sizes_str(spatial, g.kh, g.kw),
                                 sizes_str(spatial, g.h + 2 * g.ph, g.w + 2 * g.pw), shape_str(x.shape()),
                                 sizes_str(spatial, g.ph, g.pw)));
  }
  g.oh = detail::window_outputs(g.h, g.ph, g.ph, g.kh, g.sh);
  g.ow = detail::window_outputs(g.w, g.pw, g.pw, g.kw, g.sw);
}

Shape pooled_shape(const Tensor& x, int spatial, const PoolGeom& g) {
  Shape s(x.shape().begin(), x.shape().end() - spatial);
  if (spatial == 2) s.push_back(g.oh);
  s.push_back(g.ow);
  return s;
}

Shape spatial_attr(int spatial, std::int64_t h, std::int64_t w) { return spatial == 1 ? Shape{w} : Shape{h, w}; }

// The window of output (p, q) clipped to the input: rows [h0, h1), columns [w0, w1).
struct Window {
  std::int64_t h0, h1, w0, w1;
};
Window window_at(const PoolGeom& g, std::int64_t p, std::int64_t q) {
  const std::int64_t hs = p * g.sh - g.ph, ws = q * g.sw - g.pw;
  return {std::max<std::int64_t>(hs, 0), std::min(hs + g.kh, g.h), std::max<std::int64_t>(ws, 0),
          std::min(ws + g.kw, g.w)};
}

Tensor max_pool(const char* op, int spatial, const Tensor& x, Sizes2d kernel, Sizes2d stride, Sizes2d padding) {
  PoolGeom g = pool_planes(op, x, spatial);
  pool_window(op, x, spatial, g, kernel, stride, padding);
  const Shape out_shape = pooled_shape(x, spatial, g);
  Tensor y = Tensor::empty(out_shape, x.dtype());
  Tensor index = Tensor::empty(out_shape, Dtype::Int64);  // within the plane: h W + w
  detail::visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::int64_t* pi = index.data<std::int64_t>();
    for (std::int64_t plane = 0; plane < g.planes; ++plane) {
      const T* xp = px + plane * g.h * g.w;
      for (std::int64_t p = 0; p < g.oh; ++p) {
        for (std::int64_t q = 0; q < g.ow; ++q) {
          const Window win = window_at(g, p, q);
          std::int64_t best_at = win.h0 * g.w + win.w0;
          T best = -std::numeric_limits<T>::infinity();
          for (std::int64_t i = win.h0; i < win.h1; ++i) {
            for (std::int64_t j = win.w0; j < win.w1; ++j) {
              const T v = xp[i * g.w + j];
              if (v > best || std::isnan(v)) best = v, best_at = i * g.w + j;
            }
          }
          const std::int64_t k = (plane * g.oh + p) * g.ow + q;
          py[k] = best;
          pi[k] = best_at;
        }
      }
    }
    return 0;
  });
  return autograd::record(
      y, op, {x}, autograd::Saved{index},
      [g, op, x_shape = x.shape()](const Tensor& gy, const autograd::NeedsGrad&, const TensorList& s) {
        Tensor dx = zeros(x_shape, gy.dtype());
        detail::visit_floating(gy.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* pg = gy.data<T>();
          const std::int64_t* pi = s[0].data<std::int64_t>();
          T* pdx = dx.data<T>();
          const std::int64_t per_plane = g.oh * g.ow;
          for (std::int64_t plane = 0; plane < g.planes; ++plane) {
            T* d = pdx + plane * g.h * g.w;
            for (std::int64_t k = plane * per_plane; k < (plane + 1) * per_plane; ++k) d[pi[k]] += pg[k];
          }
          return 0;
        });
        return TensorList{dx};
      },
      {{"kernel_size", spatial_attr(spatial, g.kh, g.kw)},
       {"stride", spatial_attr(spatial, g.sh, g.sw)},
       {"padding", spatial_attr(spatial, g.ph, g.pw)},
       {"ceil_mode", false}});
}

// y = the mean of x over each output's window, window(p, q) its rows and columns and
// divisor(win) what the sum divides by; dx: each output's gradient / divisor spread over its
// window. avg_pool's windows and adaptive_avg_pool's differ only in those two functions.
template <class WindowOf, class Divisor>
Tensor window_mean(const char* op, int spatial, const Tensor& x, const PoolGeom& g, WindowOf window, Divisor divisor,
                   autograd::Attrs attrs) {
  Tensor y = Tensor::empty(pooled_shape(x, spatial, g), x.dtype());
  detail::visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (std::int64_t plane = 0; plane < g.planes; ++plane) {
      const T* xp = px + plane * g.h * g.w;
      for (std::int64_t p = 0; p < g.oh; ++p) {
        for (std::int64_t q = 0; q < g.ow; ++q) {
          const Window win = window(p, q);
          T acc = 0;
          for (std::int64_t i = win.h0; i < win.h1; ++i) {
            for (std::int64_t j = win.w0; j < win.w1; ++j) acc += xp[i * g.w + j];
          }
          py[(plane * g.oh + p) * g.ow + q] = acc / static_cast<T>(divisor(win));
        }
      }
    }
    return 0;
  });
  return autograd::record(
      y, op, {x},
      [g, op, window, divisor, x_shape = x.shape()](const Tensor& gy) {
        Tensor dx = zeros(x_shape, gy.dtype());
        detail::visit_floating(gy.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* pg = gy.data<T>();
          T* pdx = dx.data<T>();
          for (std::int64_t plane = 0; plane < g.planes; ++plane) {
            T* d = pdx + plane * g.h * g.w;
            for (std::int64_t p = 0; p < g.oh; ++p) {
              for (std::int64_t q = 0; q < g.ow; ++q) {
                const Window win = window(p, q);
                const T share = pg[(plane * g.oh + p) * g.ow + q] / static_cast<T>(divisor(win));
                for (std::int64_t i = win.h0; i < win.h1; ++i) {
                  for (std::int64_t j = win.w0; j < win.w1; ++j) d[i * g.w + j] += share;
                }
              }
            }
          }
          return 0;
        });
        return TensorList{dx};
      },
      std::move(attrs));
}

Tensor avg_pool(const char* op, int spatial, const Tensor& x, Sizes2d kernel, Sizes2d stride, Sizes2d padding,
                bool count_include_pad) {
  PoolGeom g = pool_planes(op, x, spatial);
  pool_window(op, x, spatial, g, kernel, stride, padding);
  // With ceil_mode false every window lies inside the padded input: kh kw elements.
  auto divisor = [g, count_include_pad](const Window& win) {
    return count_include_pad ? g.kh * g.kw : (win.h1 - win.h0) * (win.w1 - win.w0);
  };
  return window_mean(op, spatial, x, g, [g](std::int64_t p, std::int64_t q) { return window_at(g, p, q); },
                     divisor,
                     {{"kernel_size", spatial_attr(spatial, g.kh, g.kw)},
                      {"stride", spatial_attr(spatial, g.sh, g.sw)},
                      {"padding", spatial_attr(spatial, g.ph, g.pw)},
                      {"ceil_mode", false},
                      {"count_include_pad", count_include_pad}});
}

// Output i of n along a dim of `size`: [floor(i size / n), ceil((i + 1) size / n)).
std::int64_t adaptive_begin(std::int64_t i, std::int64_t n, std::int64_t size) { return (i * size) / n; }
std::int64_t adaptive_end(std::int64_t i, std::int64_t n, std::int64_t size) { return ((i + 1) * size + n - 1) / n; }

Tensor adaptive_avg_pool(const char* op, int spatial, const Tensor& x, Sizes2d output_size) {
  PoolGeom g = pool_planes(op, x, spatial);
  if (spatial == 1) output_size.h = 1;
  if (output_size.h <= 0 || output_size.w <= 0) {
    throw ValueError(fmt::format("{}: output_size must be positive, got {}", op,
                                 sizes_str(spatial, output_size.h, output_size.w)));
  }
  if (g.h == 0 || g.w == 0) {
    throw ShapeError(fmt::format("{}: input {} has an empty spatial dim; there is nothing to average", op,
                                 shape_str(x.shape())));
  }
  g.oh = output_size.h, g.ow = output_size.w;
  auto window = [g](std::int64_t p, std::int64_t q) {
    return Window{adaptive_begin(p, g.oh, g.h), adaptive_end(p, g.oh, g.h), adaptive_begin(q, g.ow, g.w),
                  adaptive_end(q, g.ow, g.w)};
  };
  auto area = [](const Window& win) { return (win.h1 - win.h0) * (win.w1 - win.w0); };
  return window_mean(op, spatial, x, g, window, area, {{"output_size", spatial_attr(spatial, g.oh, g.ow)}});
}

}  // namespace

Tensor max_pool1d(const Tensor& x, std::int64_t kernel_size, std::int64_t stride, std::int64_t padding) {
  return max_pool("max_pool1d", 1, x, kernel_size, stride, padding);
}

Tensor max_pool2d(const Tensor& x, Sizes2d kernel_size, Sizes2d stride, Sizes2d padding) {
  return max_pool("max_pool2d", 2, x, kernel_size, stride, padding);
}

Tensor avg_pool1d(const Tensor& x, std::int64_t kernel_size, std::int64_t stride, std::int64_t padding,
                  bool count_include_pad) {
  return avg_pool("avg_pool1d", 1, x, kernel_size, stride, padding, count_include_pad);
}

Tensor avg_pool2d(const Tensor& x, Sizes2d kernel_size, Sizes2d stride, Sizes2d padding, bool count_include_pad) {
  return avg_pool("avg_pool2d", 2, x, kernel_size, stride, padding, count_include_pad);
}

Tensor adaptive_avg_pool1d(const Tensor& x, std::int64_t output_size) {
  return adaptive_avg_pool("adaptive_avg_pool1d", 1, x, output_size);
}

Tensor adaptive_avg_pool2d(const Tensor& x, Sizes2d output_size) {
  return adaptive_avg_pool("adaptive_avg_pool2d", 2, x, output_size);
}

}  // namespace microtorch
