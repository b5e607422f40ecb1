// conv1d and conv2d: one 2-D core (a 1-D convolution is a 2-D one of height 1).
//
// Cross-correlation, as PyTorch: y[n, o, p, q] = b[o] + sum_{c, i, j} w[o, c, i, j]
//   x[n, g C_g + c, p sh - ph + i dh, q sw - pw + j dw] over the C_g = C_in / groups
// channels of o's group g = o / (C_out / groups), the input taken as 0 outside.
//
// General path (im2col + GEMM): for a chunk of samples and one group, col[(c, i, j), (n, p, q)]
// holds the input each tap reads (0 in the padding); then Y_g = W_g col, one GEMM
// [O_g, C_g KH KW] x [C_g KH KW, n P Q]. Backward: dW_g += dY_g col^T, dcol = W_g^T dY_g
// scattered back by col2im (adding where windows overlap), db = sum of dY over n, p, q.
// Pointwise path (1 x 1, stride 1, no padding): im2col is the identity, so one GEMM per sample
// and group reads x in place. Depthwise path (C_g = 1, groups > 1): each output channel reads
// one input channel; direct loops over the taps (conv_depthwise.cpp).
#include <algorithm>

#include "common.hpp"
#include "conv_kernels.hpp"
#include "gemm.hpp"
#include "window.hpp"

namespace microtorch {

namespace {

using detail::ConvGeom;
using detail::Scratch;

constexpr std::int64_t kMaxColElements = std::int64_t{1} << 22;  // 16 MiB of float32 per im2col chunk

// col[(c, i, j), s * P Q + p Q + q] for samples [n0, n0 + ns) of group `group`. With padding
// the block is zeroed once and only the taps that read the input are copied (many short rows:
// one memset beats a fill per row).
template <class T>
void im2col(const ConvGeom& g, const T* x, std::int64_t group, std::int64_t n0, std::int64_t ns, T* col) {
  const std::int64_t ohw = g.ohw(), cols = ns * ohw;
  if (g.ph > 0 || g.pw > 0 || g.ph_end > 0 || g.pw_end > 0) std::fill(col, col + g.taps() * cols, T(0));
  for (std::int64_t c = 0; c < g.cg; ++c) {
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const detail::Range rows = detail::valid_outputs(i * g.dh - g.ph, g.sh, g.h, g.oh);
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const detail::Range cs = detail::valid_outputs(j * g.dw - g.pw, g.sw, g.w, g.ow);
        T* row = col + ((c * g.kh + i) * g.kw + j) * cols;
        for (std::int64_t s = 0; s < ns; ++s) {
          const T* plane = x + ((n0 + s) * g.c + group * g.cg + c) * g.h * g.w;
          for (std::int64_t p = rows.begin; p < rows.end; ++p) {
            const T* src = plane + (p * g.sh - g.ph + i * g.dh) * g.w + (j * g.dw - g.pw);
            T* d = row + s * ohw + p * g.ow;
            if (g.sw == 1) {
              for (std::int64_t q = cs.begin; q < cs.end; ++q) d[q] = src[q];
            } else {
              for (std::int64_t q = cs.begin; q < cs.end; ++q) d[q] = src[q * g.sw];
            }
          }
        }
      }
    }
  }
}

// The adjoint of im2col: dx[... tap's input ...] += dcol[(c, i, j), (s, p, q)].
template <class T>
void col2im(const ConvGeom& g, const T* col, std::int64_t group, std::int64_t n0, std::int64_t ns, T* dx) {
  const std::int64_t ohw = g.ohw(), cols = ns * ohw;
  for (std::int64_t c = 0; c < g.cg; ++c) {
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const detail::Range rows = detail::valid_outputs(i * g.dh - g.ph, g.sh, g.h, g.oh);
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const detail::Range cs = detail::valid_outputs(j * g.dw - g.pw, g.sw, g.w, g.ow);
        const T* row = col + ((c * g.kh + i) * g.kw + j) * cols;
        for (std::int64_t s = 0; s < ns; ++s) {
          T* plane = dx + ((n0 + s) * g.c + group * g.cg + c) * g.h * g.w;
          for (std::int64_t p = rows.begin; p < rows.end; ++p) {
            T* d = plane + (p * g.sh - g.ph + i * g.dh) * g.w + (j * g.dw - g.pw);
            const T* src = row + s * ohw + p * g.ow;
            for (std::int64_t q = cs.begin; q < cs.end; ++q) d[q * g.sw] += src[q];
          }
        }
      }
    }
  }
}

// Samples per im2col chunk: as many as keep col within kMaxColElements (at least one).
std::int64_t chunk_samples(const ConvGeom& g) {
  const std::int64_t per_sample = std::max<std::int64_t>(g.taps() * g.ohw(), 1);
  return std::clamp<std::int64_t>(kMaxColElements / per_sample, 1, std::max<std::int64_t>(g.n, 1));
}

template <class T>
void conv_forward_gemm(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  const std::int64_t ohw = g.ohw(), taps = g.taps(), chunk = chunk_samples(g);
  Scratch<T> col(taps * chunk * ohw), out(g.og * chunk * ohw);
  for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const std::int64_t ns = std::min(chunk, g.n - n0), cols = ns * ohw;
    for (std::int64_t group = 0; group < g.groups; ++group) {
      im2col(g, x, group, n0, ns, col.data());
      detail::gemm(false, false, g.og, cols, taps, T(1), w + group * g.og * taps, taps, col.data(), cols, T(0),
                   out.data(), cols);
      for (std::int64_t oc = 0; oc < g.og; ++oc) {  // [O_g, (s, p, q)] -> y[s, group O_g + oc, (p, q)] + b
        const std::int64_t channel = group * g.og + oc;
        const T bias = b ? b[channel] : T(0);
        for (std::int64_t s = 0; s < ns; ++s) {
          const T* src = out.data() + oc * cols + s * ohw;
          T* dst = y + ((n0 + s) * g.o + channel) * ohw;
          for (std::int64_t k = 0; k < ohw; ++k) dst[k] = src[k] + bias;
        }
      }
    }
  }
}

template <class T>
void conv_backward_gemm(const ConvGeom& g, const T* x, const T* w, const T* gy, T* dx, T* dw) {
  const std::int64_t ohw = g.ohw(), taps = g.taps(), chunk = chunk_samples(g);
  Scratch<T> col(taps * chunk * ohw), gyg(g.og * chunk * ohw);
  for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const std::int64_t ns = std::min(chunk, g.n - n0), cols = ns * ohw;
    for (std::int64_t group = 0; group < g.groups; ++group) {
      for (std::int64_t oc = 0; oc < g.og; ++oc) {  // dY_g [O_g, (s, p, q)]
        for (std::int64_t s = 0; s < ns; ++s) {
          const T* src = gy + ((n0 + s) * g.o + group * g.og + oc) * ohw;
          std::copy(src, src + ohw, gyg.data() + oc * cols + s * ohw);
        }
      }
      if (dw) {  // dW_g += dY_g col^T
        im2col(g, x, group, n0, ns, col.data());
        detail::gemm(false, true, g.og, taps, cols, T(1), gyg.data(), cols, col.data(), cols, T(1),
                     dw + group * g.og * taps, taps);
      }
      if (dx) {  // dcol = W_g^T dY_g, then col2im
        detail::gemm(true, false, taps, cols, g.og, T(1), w + group * g.og * taps, taps, gyg.data(), cols, T(0),
                     col.data(), cols);
        col2im(g, col.data(), group, n0, ns, dx);
      }
    }
  }
}

// A 1 x 1 kernel with stride 1 and no padding: im2col would copy x unchanged, so each sample's
// channels are the GEMM's operand in place: y_n,g [O_g, HW] = W_g [O_g, C_g] x_n,g [C_g, HW] (+ b).
bool is_pointwise(const ConvGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && g.ph_end == 0 && g.pw_end == 0;
}

template <class T>
void conv_forward_pointwise(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  const std::int64_t hw = g.ohw();
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t group = 0; group < g.groups; ++group) {
      T* yg = y + (n * g.o + group * g.og) * hw;
      if (b) {
        for (std::int64_t oc = 0; oc < g.og; ++oc) std::fill(yg + oc * hw, yg + (oc + 1) * hw, b[group * g.og + oc]);
      }
      detail::gemm(false, false, g.og, hw, g.cg, T(1), w + group * g.og * g.cg, g.cg,
                   x + (n * g.c + group * g.cg) * hw, hw, b ? T(1) : T(0), yg, hw);
    }
  }
}

// dW_g += dY_n,g x_n,g^T and dx_n,g = W_g^T dY_n,g, per sample.
template <class T>
void conv_backward_pointwise(const ConvGeom& g, const T* x, const T* w, const T* gy, T* dx, T* dw) {
  const std::int64_t hw = g.ohw();
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t group = 0; group < g.groups; ++group) {
      const T* gyg = gy + (n * g.o + group * g.og) * hw;
      const std::int64_t in_offset = (n * g.c + group * g.cg) * hw;
      if (dw) {
        detail::gemm(false, true, g.og, g.cg, hw, T(1), gyg, hw, x + in_offset, hw, T(1), dw + group * g.og * g.cg,
                     g.cg);
      }
      if (dx) {
        detail::gemm(true, false, g.cg, hw, g.og, T(1), w + group * g.og * g.cg, g.cg, gyg, hw, T(0), dx + in_offset,
                     hw);
      }
    }
  }
}

// db[o] = sum of dy[n, o, :] over n, each row in kParts partial sums (vector lanes).
template <class T>
void bias_grad(const ConvGeom& g, const T* gy, T* db) {
  constexpr std::int64_t kParts = 16;
  const std::int64_t ohw = g.ohw(), whole = ohw - ohw % kParts;
  for (std::int64_t o = 0; o < g.o; ++o) {
    T part[kParts] = {};
    T rest = 0;
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* r = gy + (n * g.o + o) * ohw;
      for (std::int64_t k = 0; k < whole; k += kParts) {
        for (std::int64_t l = 0; l < kParts; ++l) part[l] += r[k + l];
      }
      for (std::int64_t k = whole; k < ohw; ++k) rest += r[k];
    }
    for (std::int64_t l = 0; l < kParts; ++l) rest += part[l];
    db[o] = rest;
  }
}

// The convolution's arguments checked against PyTorch's rules; x and weight have 2 + spatial
// dims (1-D ones widened to height 1 by the caller, `spatial` says which the user gave).
struct ConvArgs {
  const char* op;
  int spatial;
  Shape x_shape, w_shape;  // as the user gave them (for messages)
};

std::string sizes_str(const Shape& s) { return s.size() == 1 ? std::to_string(s[0]) : shape_str(s); }

ConvGeom conv_geometry(const ConvArgs& a, const Tensor& x4, const Tensor& w4, const Tensor& bias, Shape stride,
                       const ConvPadding& padding, Shape dilation, std::int64_t groups) {
  const char* op = a.op;
  const auto dims = static_cast<std::size_t>(a.spatial);
  auto check_positive = [&](const char* what, const Shape& v) {
    for (auto s : v) {
      if (s <= 0) throw ValueError(fmt::format("{}: {} must be positive, got {}", op, what, sizes_str(v)));
    }
  };
  check_positive("stride", stride);
  check_positive("dilation", dilation);
  if (groups <= 0) throw ValueError(fmt::format("{}: groups must be positive, got {}", op, groups));
  ConvGeom g;
  g.n = x4.size(0), g.c = x4.size(1), g.h = x4.size(2), g.w = x4.size(3);
  g.o = w4.size(0), g.kh = w4.size(2), g.kw = w4.size(3);
  g.groups = groups;
  if (g.o % groups != 0) {
    throw ShapeError(fmt::format("{}: weight {} has {} output channels, which groups={} does not divide; the "
                                 "weight is [C_out, C_in / groups, kernel...] with C_out a multiple of groups",
                                 op, shape_str(a.w_shape), g.o, groups));
  }
  if (g.c != w4.size(1) * groups) {
    throw ShapeError(fmt::format("{}: input {} has {} channels, but weight {} with groups={} expects {} "
                                 "(C_in / groups = weight.size(1) = {}); the input is [N, C_in, ...] and the "
                                 "weight [C_out, C_in / groups, kernel...]",
                                 op, shape_str(a.x_shape), g.c, shape_str(a.w_shape), groups,
                                 w4.size(1) * groups, w4.size(1)));
  }
  for (auto k : {g.kh, g.kw}) {
    if (k <= 0) throw ShapeError(fmt::format("{}: weight {} has an empty kernel", op, shape_str(a.w_shape)));
  }
  g.cg = g.c / groups, g.og = g.o / groups;
  if (bias.defined() && bias.shape() != Shape{g.o}) {
    throw ShapeError(fmt::format("{}: bias {} must be [{}], one value per output channel of weight {}", op,
                                 shape_str(bias.shape()), g.o, shape_str(a.w_shape)));
  }
  if (dims == 1) stride.insert(stride.begin(), 1), dilation.insert(dilation.begin(), 1);
  g.sh = stride[0], g.sw = stride[1], g.dh = dilation[0], g.dw = dilation[1];
  const Shape kernel{g.kh, g.kw};
  Shape begin(2, 0), end(2, 0);
  if (padding.mode == "same") {
    if (g.sh != 1 || g.sw != 1) {
      throw ValueError(fmt::format("{}: padding=\"same\" needs stride 1, got stride {} (PyTorch's rule); give the "
                                   "padding as numbers for a strided convolution",
                                   op, sizes_str(Shape(stride.end() - a.spatial, stride.end()))));
    }
    for (std::size_t d = 0; d < 2; ++d) {  // total = dilation (kernel - 1), the odd one after
      const std::int64_t total = (d == 0 ? g.dh : g.dw) * (kernel[d] - 1);
      begin[d] = total / 2, end[d] = total - total / 2;
    }
  } else if (padding.mode == "valid") {
    // no padding
  } else if (!padding.mode.empty()) {
    throw ValueError(fmt::format("{}: padding must be \"same\", \"valid\" or sizes, got \"{}\"", op, padding.mode));
  } else {
    Shape p = padding.sizes;
    if (p.size() == 1) p.assign(dims, p[0]);
    if (p.size() != dims) {
      throw ValueError(fmt::format("{}: padding {} has {} sizes for {} spatial dims", op, shape_str(padding.sizes),
                                   padding.sizes.size(), dims));
    }
    for (auto v : p) {
      if (v < 0) throw ValueError(fmt::format("{}: padding must be >= 0, got {}", op, sizes_str(padding.sizes)));
    }
    if (dims == 1) p.insert(p.begin(), 0);
    begin = end = p;
  }
  g.ph = begin[0], g.pw = begin[1], g.ph_end = end[0], g.pw_end = end[1];
  const Shape in{g.h, g.w};
  for (std::size_t d = 2 - dims; d < 2; ++d) {
    const std::int64_t dil = d == 0 ? g.dh : g.dw, span = dil * (kernel[d] - 1) + 1;
    const std::int64_t padded = in[d] + begin[d] + end[d];
    if (span > padded) {
      const char* axis = dims == 1 ? "length" : (d == 0 ? "height" : "width");
      throw ShapeError(fmt::format("{}: the kernel spans {} (dilation {} x (kernel {} - 1) + 1) along the {}, more "
                                   "than the padded input's {} (input {} + padding {} + {}), input {}, weight {}; "
                                   "pad the input, or use a smaller kernel or dilation",
                                   op, span, dil, kernel[d], axis, padded, in[d], begin[d], end[d],
                                   shape_str(a.x_shape), shape_str(a.w_shape)));
    }
  }
  g.oh = detail::window_outputs(g.h, g.ph, g.ph_end, g.dh * (g.kh - 1) + 1, g.sh);
  g.ow = detail::window_outputs(g.w, g.pw, g.pw_end, g.dw * (g.kw - 1) + 1, g.sw);
  return g;
}

Tensor conv_nd(const ConvArgs& a, const Tensor& x, const Tensor& weight, const Tensor& bias, const Shape& stride,
               const ConvPadding& padding, const Shape& dilation, std::int64_t groups) {
  const char* op = a.op;
  const std::int64_t sp = a.spatial;
  const char* layout = sp == 1 ? "[N, C_in, L] or unbatched [C_in, L]" : "[N, C_in, H, W] or unbatched [C_in, H, W]";
  if (x.dim() != sp + 1 && x.dim() != sp + 2) {
    throw ShapeError(fmt::format("{}: input {} must be {}", op, shape_str(x.shape()), layout));
  }
  if (weight.dim() != sp + 2) {
    throw ShapeError(fmt::format("{}: weight {} must be [C_out, C_in / groups, {}]", op, shape_str(weight.shape()),
                                 sp == 1 ? "K" : "KH, KW"));
  }
  if (!x.is_floating_point() || !weight.is_floating_point()) {
    throw DtypeError(fmt::format("{}: expects floating tensors, got input {} and weight {}; convert with .to(kFloat32)",
                                 op, dtype_name(x.dtype()), dtype_name(weight.dtype())));
  }
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != weight.dtype())) {
    throw DtypeError(fmt::format("{}: input {} and parameters {} differ in dtype; convert the input with .to()", op,
                                 dtype_name(x.dtype()), dtype_name(weight.dtype())));
  }
  const bool batched = x.dim() == sp + 2;
  Shape xs = x.shape(), ws = weight.shape();
  if (!batched) xs.insert(xs.begin(), 1);
  if (sp == 1) xs.insert(xs.begin() + 2, 1), ws.insert(ws.begin() + 2, 1);
  const Tensor x4 = x.detach().reshape(xs), w4 = weight.detach().reshape(ws);
  const ConvGeom g = conv_geometry(a, x4, w4, bias, stride, padding, dilation, groups);

  Tensor y4 = Tensor::empty({g.n, g.o, g.oh, g.ow}, x.dtype());
  detail::visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* b = bias.defined() ? bias.data<T>() : nullptr;
    if (y4.numel() == 0) return 0;
    if (g.cg == 1 && g.groups > 1) {
      detail::depthwise_forward(g, x4.data<T>(), w4.data<T>(), b, y4.data<T>());
    } else if (is_pointwise(g)) {
      conv_forward_pointwise(g, x4.data<T>(), w4.data<T>(), b, y4.data<T>());
    } else {
      conv_forward_gemm(g, x4.data<T>(), w4.data<T>(), b, y4.data<T>());
    }
    return 0;
  });
  Shape ys = batched ? Shape{g.n, g.o} : Shape{g.o};
  if (sp == 2) ys.push_back(g.oh);
  ys.push_back(g.ow);
  Tensor y = y4.reshape(ys);

  const auto spatial = [&](std::int64_t hv, std::int64_t wv) { return sp == 1 ? Shape{wv} : Shape{hv, wv}; };
  autograd::Attrs attrs{{"stride", spatial(g.sh, g.sw)},
                        {"padding", spatial(g.ph, g.pw)},
                        {"padding_end", spatial(g.ph_end, g.pw_end)},
                        {"dilation", spatial(g.dh, g.dw)},
                        {"groups", groups}};
  return autograd::record(
      y, op, {x, weight, bias}, autograd::Saved{x, weight},
      [g, op, has_bias = bias.defined()](const Tensor& gy, const autograd::NeedsGrad& needs, const TensorList& s) {
        const Tensor &x = s[0], &w = s[1];
        Tensor dx = needs[0] ? zeros(x.shape(), x.dtype()) : Tensor();
        Tensor dw = needs[1] ? zeros(w.shape(), w.dtype()) : Tensor();
        Tensor db;
        detail::visit_floating(x.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          T* pdx = dx.defined() ? dx.data<T>() : nullptr;
          T* pdw = dw.defined() ? dw.data<T>() : nullptr;
          const T* pg = gy.data<T>();
          if (pdx || pdw) {
            if (g.cg == 1 && g.groups > 1) {
              detail::depthwise_backward(g, x.data<T>(), w.data<T>(), pg, pdx, pdw);
            } else if (is_pointwise(g)) {
              conv_backward_pointwise(g, x.data<T>(), w.data<T>(), pg, pdx, pdw);
            } else {
              conv_backward_gemm(g, x.data<T>(), w.data<T>(), pg, pdx, pdw);
            }
          }
          return 0;
        });
        if (has_bias && needs[2]) {  // db[o] = sum over n, p, q of dy
          db = Tensor::empty({g.o}, w.dtype());
          detail::visit_floating(x.dtype(), op, [&](auto tag) {
            using T = typename decltype(tag)::type;
            bias_grad(g, gy.data<T>(), db.data<T>());
            return 0;
          });
        }
        return TensorList{dx, dw, db};
      },
      std::move(attrs));
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::int64_t stride,
              const ConvPadding& padding, std::int64_t dilation, std::int64_t groups) {
  return conv_nd({"conv1d", 1, x.shape(), weight.shape()}, x, weight, bias, {stride}, padding, {dilation}, groups);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Sizes2d stride, const ConvPadding& padding,
              Sizes2d dilation, std::int64_t groups) {
  return conv_nd({"conv2d", 2, x.shape(), weight.shape()}, x, weight, bias, {stride.h, stride.w}, padding,
                 {dilation.h, dilation.w}, groups);
}

}  // namespace microtorch
