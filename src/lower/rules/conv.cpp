// Rules: conv1d and conv2d (mt_conv_<x>_<w>_<y>), and batch_norm, which lowers folded into
// the convolution or linear layer before it (Lowering::fold_norm); in float32 (training on
// the device) mt_conv_f32 and mt_batchnorm_f32, with their backward.
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"
#include "../runtime/mt_kernels.h"

namespace microtorch::lower {

namespace {

// A spatial attribute ([w] for conv1d, [h, w] for conv2d) as {h, w}; a 1-D op's h is `h1d`.
std::pair<std::int64_t, std::int64_t> hw(const Node& n, const char* key, int spatial, std::int64_t h1d = 1) {
  const Shape& s = node_attr<Shape>(n, key);
  if (static_cast<int>(s.size()) != spatial) throw ValueError(fmt::format("{}: {} must have {} sizes", n.op, key, spatial));
  return spatial == 1 ? std::pair<std::int64_t, std::int64_t>{h1d, s[0]} : std::pair<std::int64_t, std::int64_t>{s[0], s[1]};
}

// The padding of the float reference: sizes, or "same" where the ends differ (PyTorch's rule
// puts the odd zero after, which only "same" asks for).
ConvPadding float_padding(const Node& n, int spatial) {
  const Shape &p = node_attr<Shape>(n, "padding"), &e = node_attr<Shape>(n, "padding_end");
  if (p != e) return ConvPadding("same");
  return spatial == 1 ? ConvPadding(p[0]) : ConvPadding(p[0], p[1]);
}

// From the patch grams of a convolution with `taps` taps per group: per group, the patches'
// mean (`mean`, [groups, taps]) and their covariance sum_a (p - mean)(p - mean)^T ([groups,
// taps, taps]), which the weights' rounding with error feedback minimises the output error on
// (Lowering::weight_rows); what rounding leaves in the mean, (W - W_q) mean, the bias takes
// back (bias correction, Nagel et al. 2019): the output's error is then zero on average.
std::vector<double> centered_patches(const std::vector<double>& gram, std::size_t taps, std::vector<double>& mean) {
  const std::size_t m = taps + 1, groups = gram.size() / (m * m);
  std::vector<double> cov(groups * taps * taps);
  mean.assign(groups * taps, 0.0);
  for (std::size_t g = 0; g < groups; ++g) {
    const double* h = gram.data() + g * m * m;
    const double count = h[taps * m + taps];
    for (std::size_t i = 0; i < taps; ++i) mean[g * taps + i] = count > 0 ? h[i * m + taps] / count : 0.0;
    for (std::size_t i = 0; i < taps; ++i) {
      for (std::size_t j = 0; j < taps; ++j) {
        cov[(g * taps + i) * taps + j] = h[i * m + j] - count * mean[g * taps + i] * mean[g * taps + j];
      }
    }
  }
  return cov;
}

// The geometry table of n (MT_CONV_*) for an input of shape xs and a weight of shape ws,
// checked: the sizes must make one convolution.
std::vector<std::int64_t> conv_geometry(Lowering& L, const Node& n, int spatial, const Shape& xs, const Shape& ws) {
  const auto rank = static_cast<int>(xs.size());
  const bool batched = rank == spatial + 2;
  const std::int64_t N = batched ? xs[0] : 1, C = xs[static_cast<std::size_t>(batched)];
  const std::int64_t H = spatial == 2 ? xs[static_cast<std::size_t>(rank - 2)] : 1, W = xs.back();
  const std::int64_t O = ws[0], KH = spatial == 2 ? ws[2] : 1, KW = ws.back();
  const std::int64_t groups = node_attr<std::int64_t>(n, "groups");
  const auto [sh, sw] = hw(n, "stride", spatial);
  const auto [ph, pw] = hw(n, "padding", spatial, 0);
  const auto [dh, dw] = hw(n, "dilation", spatial);
  const auto [eh, ew] = hw(n, "padding_end", spatial, 0);
  const Shape& ys = L.out_shape(n);
  const std::int64_t OH = spatial == 2 ? ys[ys.size() - 2] : 1, OW = ys.back();
  // the windows the kernel walks: (size + padding - dilation (kernel - 1) - 1) / stride + 1
  if (C % groups != 0 || O % groups != 0 || ws[1] != C / groups ||
      OH != (H + ph + eh - dh * (KH - 1) - 1) / sh + 1 || OW != (W + pw + ew - dw * (KW - 1) - 1) / sw + 1) {
    L.fail(n, "the weight, groups, padding and output do not fit one convolution");
  }
  std::vector<std::int64_t> g(MT_CONV_FIELDS);
  g[MT_CONV_N] = N, g[MT_CONV_CG] = C / groups, g[MT_CONV_H] = H, g[MT_CONV_W] = W, g[MT_CONV_OG] = O / groups;
  g[MT_CONV_KH] = KH, g[MT_CONV_KW] = KW, g[MT_CONV_OH] = OH, g[MT_CONV_OW] = OW;
  g[MT_CONV_SH] = sh, g[MT_CONV_SW] = sw, g[MT_CONV_PH] = ph, g[MT_CONV_PW] = pw;
  g[MT_CONV_DH] = dh, g[MT_CONV_DW] = dw, g[MT_CONV_GROUPS] = groups;
  return g;
}

// Does convolution n pad its input?
bool pads(const Node& n) {
  for (const char* key : {"padding", "padding_end"}) {
    const Shape& p = node_attr<Shape>(n, key);
    if (std::any_of(p.begin(), p.end(), [](std::int64_t v) { return v != 0; })) return true;
  }
  return false;
}

// Formats per output channel for the value `top` writes (the layer's, its norm's or its relu's),
// when it may have them (Lowering::dim1_formats), else none: each channel c its calibrated
// range [lo_c, hi_c] (widened by the margin). When the value may carry zero points, no reader
// pads it and no relu is fused (a relu's channels share -128), each channel has its own
// affine format (the readers fold the zero points into their biases). Otherwise the channels
// share the zero point z of the format for the whole range (mt_pad_s8 pads with one; a
// symmetric one is 0): s_c = max(hi_c / (127 - z), -lo_c / (z + 128)), so that [lo_c, hi_c]
// fits int8, never coarser than the whole tensor's scale. The requantization is per output
// channel already (scale_x scale_w[o] / s_o); the reader folds s_c into its weights. A
// channel never seen non-zero takes the smallest scale.
std::vector<Format> channel_formats(Lowering& L, const Node& top, Elem ye, const Format& whole, bool relu) {
  if (!L.dim1_formats(top)) return {};
  const auto [lo, hi] = L.dim1_range(top.output);
  const std::vector<const Node*> readers = L.readers(top.output);
  const bool own_zeros = !relu && L.affine_out(top) &&
                         std::none_of(readers.begin(), readers.end(), [](const Node* r) { return pads(*r); });
  const double z = whole.zero;
  std::vector<Format> ch(lo.size());
  double smallest = 0;
  for (std::size_t c = 0; c < ch.size(); ++c) {
    const Format w = L.widened_format(lo[c], hi[c], ye, own_zeros, fmt::format("%{}, channel {}", top.output, c));
    if (own_zeros) {
      ch[c] = w;
      if (!(w.hi > w.lo)) ch[c].scale = 0, ch[c].zero = 0;
    } else {
      ch[c].lo = w.lo, ch[c].hi = w.hi, ch[c].zero = whole.zero;
      ch[c].scale = std::min(whole.scale, std::max(z < 127 ? w.hi / (127 - z) : 0.0, z > -128 ? -w.lo / (z + 128) : 0.0));
    }
    if (ch[c].scale > 0) smallest = smallest > 0 ? std::min(smallest, ch[c].scale) : ch[c].scale;
  }
  if (smallest == 0) return {};
  for (Format& f : ch) f.scale = f.scale > 0 ? f.scale : smallest;
  return ch;
}

// The geometry table in flash.
std::int64_t conv_table(Lowering& L, std::vector<std::int64_t> g, const std::string& wname) {
  return L.table(Elem::S32, std::move(g), TableRole::Parameters, "geom_" + c_name(wname),
                 {"MT_CONV_N", "MT_CONV_CG", "MT_CONV_H", "MT_CONV_W", "MT_CONV_OG", "MT_CONV_KH", "MT_CONV_KW",
                  "MT_CONV_OH", "MT_CONV_OW", "MT_CONV_SH", "MT_CONV_SW", "MT_CONV_PH", "MT_CONV_PW", "MT_CONV_DH",
                  "MT_CONV_DW", "MT_CONV_GROUPS"});
}

// x (packed, int8, zero point z) with its padding made explicit: a copy with a border of z
// (mt_pad_s8), the real 0 the float model pads with; g (the geometry table) becomes the padded
// input's, with no padding. x itself when the convolution has no padding. `zeros` holds each
// channel's z: one mt_pad_s8 for every plane when they are equal, else one per plane (an input
// with a zero point per channel, Lowering::input_channel_formats).
View pad_input(Lowering& L, const Node& n, int spatial, const View& x, const std::vector<std::int64_t>& zeros,
               std::vector<std::int64_t>& g) {
  const auto [eh, ew] = hw(n, "padding_end", spatial, 0);
  const std::int64_t ph = g[MT_CONV_PH], pw = g[MT_CONV_PW];
  if (ph == 0 && pw == 0 && eh == 0 && ew == 0) return x;
  const std::int64_t H = g[MT_CONV_H], W = g[MT_CONV_W];
  Shape shape = x.shape;
  shape.back() += pw + ew;
  if (spatial == 2) shape[shape.size() - 2] += ph + eh;
  // one call for every plane when the channels share a zero point, else one per plane, each
  // with its channel's (plane p of [N, C, H, W] is channel p % C)
  const std::int64_t planes = numel_of(x.shape) / (H * W), C = static_cast<std::int64_t>(zeros.size());
  const bool shared = std::all_of(zeros.begin(), zeros.end(), [&](std::int64_t z) { return z == zeros[0]; });
  const Buffer& xb = L.buf(x);
  const View y = L.new_act(shape, Elem::S8, Format{x.scale, x.zero, xb.lo, xb.hi}, -1, true);
  Buffer& yb = L.program().buffer(y.buffer);
  yb.origin = fmt::format("%{}'s input padded with its zero point", n.output);
  if (!shared && x.segments.size() == zeros.size()) {  // x's formats per channel (the graph input's), for the listings
    yb.channel_scales = x.segments;
    yb.channel_zero_points.assign(zeros.begin(), zeros.end());
    yb.origin += " per channel";
  }
  const std::int64_t PH = H + ph + eh, PW = W + pw + ew;
  for (std::int64_t p = 0; p < (shared ? 1 : planes); ++p) {
    L.step("mt_pad_s8", {Arg::buf(x.buffer, x.offset + p * H * W), Arg::buf(y.buffer, p * PH * PW),
                         Arg::num(shared ? planes : 1), Arg::num(H), Arg::num(W), Arg::num(ph), Arg::num(pw),
                         Arg::num(eh), Arg::num(ew), Arg::num(zeros[static_cast<std::size_t>(p % C)])});
  }
  g[MT_CONV_H] = PH, g[MT_CONV_W] = PW, g[MT_CONV_PH] = 0, g[MT_CONV_PW] = 0;
  return y;
}

// y = conv(x, W) + b: mt_conv_*. W [O, C / groups, (KH,) KW] and b constant, folded with a
// batch_norm after the layer (Lowering::fold_norm). As lower_linear: weights symmetric with a
// scale per output channel, rounded with error feedback from the patches' grams
// (accumulate_patch_gram), b in the accumulator's scale scale_x scale_w[o], per-channel
// multipliers scale_x scale_w[o] / scale_y[o], a fused relu clamping at the output's zero
// point. x is read in place (packed). An int8 x may carry a zero point z (x = scale_x (q - z)):
// sum_t w_q[o, t] (q_t - z) = sum_t w_q[o, t] q_t - z sum_t w_q[o, t], the last term folded
// into the bias (as lower_linear); the kernels pad with the integer 0, which is then not the
// real 0, so a padded convolution first copies x into a buffer with a border of z
// (pad_input) and runs with no padding on it.
// An int8 output read only by convolutions has a format per channel (channel_formats): the
// requantization is per output channel, and an output zero point z_o other than the one the
// kernel adds (0) goes into the bias as (z_o - 0) scale_y[o]. A reader of an input with scale
// s_c and zero point z_c per channel c, x_c = s_c (q_c - z_c), computes W[o, c, ...] x_c =
// (W[o, c, ...] s_c) (q_c - z_c): s_c folds into the weights before their quantization (scale_x
// is 1; the patches' grams are divided by the scales), and sum_t w_q[o, t] z_c(t) into the bias.
void lower_conv(Lowering& L, const Node& n, int spatial) {
  if (!L.is_const(n.inputs[1])) L.fail(n, "the weight must be a parameter or constant");
  const std::int64_t b_id = n.inputs.size() > 2 ? n.inputs[2] : -1;
  if (b_id >= 0 && !L.is_const(b_id)) L.fail(n, "the bias must be a parameter or constant");
  auto [w, bias] = L.fold_norm(n, L.data(n.inputs[1]), b_id >= 0 ? L.data(b_id) : Tensor());
  const std::string sfx = L.folded_norm(n) ? "_bn" : "";
  const std::string wname = L.const_name(n.inputs[1]) + sfx;
  View x = L.packed(n, L.act(n, n.inputs[0]));
  std::vector<std::int64_t> g = conv_geometry(L, n, spatial, x.shape, w.shape());
  const std::int64_t C = g[MT_CONV_CG] * g[MT_CONV_GROUPS];
  // the input's scale and zero point per channel (a format per channel: View::segment_dim 1)
  std::vector<double> xs(static_cast<std::size_t>(C), x.scale);
  std::vector<std::int64_t> xz(static_cast<std::size_t>(C), x.zero);
  const bool x_parts = !x.segments.empty();
  if (x_parts) {
    if (x.segment_dim != 1 || static_cast<std::int64_t>(x.segments.size()) != C) {
      L.fail(n, "the input's formats must be one per channel (dim 1 of a batched input)");
    }
    xs = x.segments;
    if (!x.segment_zeros.empty()) xz.assign(x.segment_zeros.begin(), x.segment_zeros.end());
  }
  if (std::any_of(xz.begin(), xz.end(), [](std::int64_t z) { return z != 0; })) x = pad_input(L, n, spatial, x, xz, g);
  const std::int64_t N = g[MT_CONV_N], O = g[MT_CONV_OG] * g[MT_CONV_GROUPS], OH = g[MT_CONV_OH], OW = g[MT_CONV_OW];
  const std::int64_t taps = g[MT_CONV_CG] * g[MT_CONV_KH] * g[MT_CONV_KW], groups = g[MT_CONV_GROUPS];
  const std::int64_t spots = g[MT_CONV_KH] * g[MT_CONV_KW];
  // the input channel that tap t of output channel o's weight row reads
  auto channel = [&](std::int64_t o, std::int64_t t) {
    return static_cast<std::size_t>(o / g[MT_CONV_OG] * g[MT_CONV_CG] + t / spots);
  };
  double x_scale = x.scale;
  if (x_parts) {  // W[o, c, ...] s_c, read at scale 1
    w = w.to(Dtype::Float64).contiguous().clone();
    for (std::int64_t o = 0; o < O; ++o) {
      for (std::int64_t t = 0; t < taps; ++t) w.data<double>()[o * taps + t] *= xs[channel(o, t)];
    }
    x_scale = 1.0;
  }
  const Elem we = L.weight_elem(n);
  if (x.elem == Elem::S8 && we == Elem::S8 && taps > 131071) {
    L.fail(n, fmt::format("{} taps per output are too many for the int32 accumulator of int8 (at most 131071); use "
                          "int16 weights for this layer",
                          taps));
  }
  const Node* relu = L.fused_relu(n);
  const Node* norm = L.folded_norm(n);
  const Node& top = relu ? *relu : norm ? *norm : n;  // the node whose output the layer writes
  Elem ye = L.out_elem(n);
  if (relu && elem_bytes(L.out_elem(*relu)) > elem_bytes(ye)) ye = L.out_elem(*relu);
  // power-of-two scales: the relu keeps its input's format (lower_relu), the layer's
  Format f = L.out_format(relu && L.options().scheme != Scheme::PowerOfTwo ? *relu : norm ? *norm : n, ye);
  const std::vector<Format> ch = channel_formats(L, top, ye, f, relu != nullptr);
  const bool own_zeros = std::any_of(ch.begin(), ch.end(), [&](const Format& c) { return c.zero != ch[0].zero; });
  if (!ch.empty()) {  // the largest scale; the zero point the kernel adds: the channels' one, or 0
    f.scale = std::max_element(ch.begin(), ch.end(), [](const Format& a, const Format& b) { return a.scale < b.scale; })->scale;
    f.zero = own_zeros ? 0 : ch[0].zero;
  }
  // the output's scale and zero point per channel
  auto y_scale = [&](std::int64_t o) { return ch.empty() ? f.scale : ch[static_cast<std::size_t>(o)].scale; };
  auto y_zero = [&](std::int64_t o) { return ch.empty() ? f.zero : ch[static_cast<std::size_t>(o)].zero; };
  const Elem be = x.elem == Elem::S8 ? Elem::S32 : Elem::S64;
  const Tensor b64 = bias.defined() ? bias.to(Dtype::Float64).contiguous() : Tensor();
  // an int32 bias must hold b / (scale_x scale_w): a tiny scale_x then costs the weights
  // resolution rather than the bias saturating (as lower_linear)
  std::vector<double> min_scale;
  // and the zero point's term z sum_t w_q[o, t]
  if (be == Elem::S32 && b64.defined()) {
    std::int64_t zmax = 0;
    for (const std::int64_t z : xz) zmax = std::max<std::int64_t>(zmax, std::abs(z));
    const double room = 2147483646.0 - static_cast<double>(zmax) * static_cast<double>(taps * qmax(we));
    for (std::int64_t o = 0; o < O; ++o) min_scale.push_back(std::abs(b64.data<double>()[o]) / (x_scale * room));
  }
  const std::vector<double>* gram = L.patch_gram(n.output);
  std::vector<double> cov, mean;
  if (L.options().rounding == WeightRounding::ErrorFeedback && gram &&
      gram->size() == static_cast<std::size_t>(groups * (taps + 1) * (taps + 1))) {
    cov = centered_patches(*gram, static_cast<std::size_t>(taps), mean);
    // weights scaled by s_c read x_c / s_c: the patches' mean and covariance divided by the scales
    for (std::int64_t gi = 0; gi < groups && x_parts; ++gi) {
      auto s = [&](std::int64_t t) { return xs[channel(gi * g[MT_CONV_OG], t)]; };
      for (std::int64_t i = 0; i < taps; ++i) {
        mean[static_cast<std::size_t>(gi * taps + i)] /= s(i);
        for (std::int64_t j = 0; j < taps; ++j) cov[static_cast<std::size_t>((gi * taps + i) * taps + j)] /= s(i) * s(j);
      }
    }
  }
  const std::int64_t wb = L.weight_rows(w, we, wname, min_scale, cov.empty() ? nullptr : &cov);
  const Buffer wbuf = L.program().buffer(wb);  // a copy: the tables added below may move the buffers
  std::int64_t bb = -1;
  const bool x_zeros = std::any_of(xz.begin(), xz.end(), [](std::int64_t z) { return z != 0; });
  if (b64.defined() || x_zeros || own_zeros) {
    const Tensor wf = w.to(Dtype::Float64).contiguous();
    std::vector<std::int64_t> b_q;
    for (std::int64_t o = 0; o < O; ++o) {
      double b = b64.defined() ? b64.data<double>()[o] : 0.0;
      for (std::int64_t t = 0; !mean.empty() && t < taps; ++t) {  // bias correction: - (W_q - W) mean
        const auto k = static_cast<std::size_t>(o * taps + t);
        b -= (static_cast<double>(wbuf.data[k]) * row_scale(wbuf, o) - wf.data<double>()[k]) *
             mean[static_cast<std::size_t>(o / (O / groups) * taps + t)];
      }
      // the output's own zero point z_o where the kernel adds f.zero: (z_o - f.zero) scale_y[o] more
      b += static_cast<double>(y_zero(o) - f.zero) * y_scale(o);
      std::int64_t zsum = 0;  // sum_t w_q[o, t] z[c(t)]
      for (std::int64_t t = 0; t < taps; ++t) zsum += wbuf.data[static_cast<std::size_t>(o * taps + t)] * xz[channel(o, t)];
      b_q.push_back(std::llround(b / (x_scale * row_scale(wbuf, o))) - zsum);
    }
    bb = L.table(be, std::move(b_q), TableRole::Bias,
                 "b_" + c_name(b_id >= 0 ? L.const_name(b_id) + sfx : wname + (b64.defined() ? "" : "_zero")));
  }
  View y = L.out_act(top, ye, f);
  for (const Format& c : ch) y.segments.push_back(c.scale), y.segment_zeros.push_back(c.zero);
  y.segment_dim = ch.empty() ? -1 : 1;
  const bool per_channel = !wbuf.channel_scales.empty() || !ch.empty();
  std::vector<std::int64_t> rq;
  for (std::int64_t o = 0; o < (per_channel ? O : 1); ++o) {
    const Multiplier m = L.rq(x_scale * row_scale(wbuf, o) / y_scale(o), fmt::format("%{} = {}", n.output, n.op));
    rq.push_back(m.m), rq.push_back(m.s);
  }
  const std::int64_t rqb = L.table(Elem::S32, std::move(rq), TableRole::Requantization, "rq_" + c_name(wname));
  const std::int64_t gb = conv_table(L, std::move(g), wname);
  // int8 x int8: eight im2col columns of scratch for the Armv7E-M variant (mt_kernels.h)
  const std::int64_t col = x.elem == Elem::S8 && we == Elem::S8
                               ? L.new_act({8 * ((taps + 3) / 4 * 4)}, Elem::S16, Format{}, -1, false).buffer
                               : -1;
  L.step(Lowering::kernel("conv", {x.elem, we, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(wb), Arg::buf(bb), Arg::buf(y.buffer), Arg::buf(gb), Arg::buf(rqb),
          Arg::num(per_channel ? 1 : 0), Arg::num(f.zero), Arg::num(relu ? f.zero : qmin(ye)), Arg::buf(col)},
         N * O * OH * OW * taps);
  L.set(top, y);
}

// The most taps per group a convolution's patch gram is gathered for: the matrix grows as
// taps^2 (2049^2 doubles: 33 MB) and its factorisation as taps^3.
constexpr std::int64_t kMaxGramTaps = 2048;

// Calibration's patch grams (OpRule::patch_gram): for each output position and group g, the
// patch p the group's weight rows read, p[(c, kh, kw)] = x[g C/groups + c, oh sh - ph + kh dh,
// ow sw - pw + kw dw] (0 in the padding), extended by a 1, a = (p, 1), added as a a^T into
// block g of `gram` ([groups, taps + 1, taps + 1]): the last column holds the sums of the
// patches and, last, their count (centered_patches). A layer of more than kMaxGramTaps taps
// per group gets none (its weights round to nearest).
void accumulate_patch_gram(const Node& n, const Tensor& x_in, const Tensor& w, std::vector<double>& gram, int spatial) {
  const Tensor x = x_in.to(Dtype::Float64).contiguous();
  const int rank = x.dim();
  const std::int64_t C = x.size(rank - spatial - 1), H = spatial == 2 ? x.size(rank - 2) : 1, W = x.size(rank - 1);
  const std::int64_t N = x.numel() / (C * H * W), groups = node_attr<std::int64_t>(n, "groups");
  const std::int64_t KH = spatial == 2 ? w.size(2) : 1, KW = w.size(w.dim() - 1), CG = C / groups;
  const auto [sh, sw] = hw(n, "stride", spatial);
  const auto [ph, pw] = hw(n, "padding", spatial, 0);
  const auto [dh, dw] = hw(n, "dilation", spatial);
  const auto [eh, ew] = hw(n, "padding_end", spatial, 0);
  const std::int64_t OH = (H + ph + eh - dh * (KH - 1) - 1) / sh + 1, OW = (W + pw + ew - dw * (KW - 1) - 1) / sw + 1;
  if (CG * KH * KW > kMaxGramTaps) return;
  const auto taps = static_cast<std::size_t>(CG * KH * KW), m = taps + 1;
  gram.resize(static_cast<std::size_t>(groups) * m * m, 0.0);
  const double* px = x.data<double>();
  std::vector<double> p(m, 1.0);
  for (std::int64_t b = 0; b < N; ++b) {
    for (std::int64_t g = 0; g < groups; ++g) {
      double* h = gram.data() + static_cast<std::size_t>(g) * m * m;
      for (std::int64_t oh = 0; oh < OH; ++oh) {
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          std::size_t t = 0;
          for (std::int64_t c = 0; c < CG; ++c) {
            const double* plane = px + ((b * C + g * CG + c) * H) * W;
            for (std::int64_t kh = 0; kh < KH; ++kh) {
              const std::int64_t ih = oh * sh - ph + kh * dh;
              for (std::int64_t kw = 0; kw < KW; ++kw, ++t) {
                const std::int64_t iw = ow * sw - pw + kw * dw;
                p[t] = ih >= 0 && ih < H && iw >= 0 && iw < W ? plane[ih * W + iw] : 0.0;
              }
            }
          }
          for (std::size_t i = 0; i < m; ++i) {
            for (std::size_t j = 0; j <= i; ++j) h[i * m + j] += p[i] * p[j];
          }
        }
      }
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = i + 1; j < m; ++j) h[i * m + j] = h[j * m + i];
      }
    }
  }
}

// ---- float32 ----

// y = conv(x, W) + b in float (mt_conv_f32): the integer rule's geometry, x packed.
void lower_conv_f32(Lowering& L, const Node& n, int spatial) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const View w = L.constant_f32(n, n.inputs[1]);
  const View b = n.inputs.size() > 2 && n.inputs[2] >= 0 ? L.constant_f32(n, n.inputs[2]) : View{};
  std::vector<std::int64_t> g = conv_geometry(L, n, spatial, x.shape, w.shape);
  const std::int64_t macs = g[MT_CONV_N] * g[MT_CONV_OG] * g[MT_CONV_GROUPS] * g[MT_CONV_OH] * g[MT_CONV_OW] *
                            g[MT_CONV_CG] * g[MT_CONV_KH] * g[MT_CONV_KW];
  const std::int64_t gb = conv_table(L, std::move(g), L.const_name(n.inputs[1]));
  const View y = L.out_act(n, Elem::F32, Format{});
  L.step("mt_conv_f32", {Arg::buf(x.buffer, x.offset), Arg::buf(w.buffer), Arg::buf(b.buffer), Arg::buf(y.buffer),
                         Arg::buf(gb)},
         macs);
  if (L.keeps(n)) L.save(n, {x, w, b}, {gb, macs});
  L.set(n, y);
}

// dx (the transposed convolution of dy), dW (dy against x's windows), db (dy's sums per
// channel): mt_conv_backward_f32.
void backward_conv_f32(Lowering& L, const Node& n) {
  const Lowering::Saved& s = L.saved(n);
  const View &x = s.views[0], &w = s.views[1], &b = s.views[2], &dy = L.grad(n.output);
  auto dx = L.grad_out(n.inputs[0]);
  auto dw = L.grad_out(n.inputs[1]);
  auto db = b.buffer >= 0 ? L.grad_out(n.inputs[2]) : std::nullopt;
  const int acc = L.acc_flags({&dx}, {&dw, &db});
  L.step("mt_conv_backward_f32",
         {Arg::buf(x.buffer, x.offset), Arg::buf(w.buffer), Arg::buf(dy.buffer, dy.offset), buf_or_null(dx),
          buf_or_null(dw), buf_or_null(db), Arg::buf(s.ints[0]), Arg::num(acc)},
         s.ints[1] * ((dx ? 1 : 0) + (dw ? 1 : 0)));
}

// The running statistics of batch_norm n as float arrays: the mean and 1 / sqrt(var + eps)
// (in double, rounded once).
std::pair<View, View> batch_norm_stats(Lowering& L, const Node& n, std::int64_t channels) {
  if (n.inputs.size() < 3 || n.inputs[1] < 0 || n.inputs[2] < 0) {
    L.fail(n, "batch_norm lowers in float32 only with its running statistics (track_running_stats)");
  }
  for (std::size_t k = 1; k < 3; ++k) {
    if (L.needs_grad(n.inputs[k]) || !L.is_const(n.inputs[k])) {
      L.fail(n, "a batch_norm's running statistics are frozen on the device (a step never updates them); train its "
                "weight and bias instead");
    }
  }
  const Tensor mean = L.data(n.inputs[1]).to(Dtype::Float64).contiguous();
  const Tensor var = L.data(n.inputs[2]).to(Dtype::Float64).contiguous();
  if (mean.numel() != channels || var.numel() != channels) {
    L.fail(n, fmt::format("its statistics must have {} channels (dim 1 of the input)", channels));
  }
  const double eps = node_attr<double>(n, "eps");
  Tensor rstd = empty({channels}, Dtype::Float64);
  for (std::int64_t k = 0; k < channels; ++k) rstd.data<double>()[k] = 1.0 / std::sqrt(var.data<double>()[k] + eps);
  const std::string name = L.const_name(n.inputs[1]);
  return {L.tensor_f32(mean, "bn_mean_" + c_name(name)), L.tensor_f32(rstd, "bn_rstd_" + c_name(name))};
}

// batch_norm in eval in float (mt_batchnorm_f32): the channels at dim 1 of [N, C, ...].
void lower_batch_norm_f32(Lowering& L, const Node& n) {
  if (node_attr<bool>(n, "training")) {
    L.fail(n, "batch_norm was recorded in training mode (batch statistics); call model.eval() before tracing");
  }
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  if (x.shape.size() < 2) L.fail(n, "the input must be [N, C, ...]");
  const std::int64_t N = x.shape[0], C = x.shape[1], inner = numel_of(x.shape) / std::max<std::int64_t>(N * C, 1);
  const auto [mean, rstd] = batch_norm_stats(L, n, C);
  const View g = n.inputs.size() > 3 && n.inputs[3] >= 0 ? L.constant_f32(n, n.inputs[3]) : View{};
  const View b = n.inputs.size() > 4 && n.inputs[4] >= 0 ? L.constant_f32(n, n.inputs[4]) : View{};
  const View y = L.out_act(n, Elem::F32, Format{});
  L.step("mt_batchnorm_f32", {Arg::buf(x.buffer, x.offset), Arg::buf(mean.buffer), Arg::buf(rstd.buffer),
                              Arg::buf(g.buffer), Arg::buf(b.buffer), Arg::buf(y.buffer), Arg::num(N), Arg::num(C),
                              Arg::num(inner)},
         2 * numel_of(x.shape));
  if (L.keeps(n)) L.save(n, {x, mean, rstd, g}, {N, C, inner});
  L.set(n, y);
}

// dx = g rstd dy (the statistics are constants); dg += sum dy xhat, db += sum dy.
void backward_batch_norm_f32(Lowering& L, const Node& n) {
  const Lowering::Saved& s = L.saved(n);
  const View &x = s.views[0], &mean = s.views[1], &rstd = s.views[2], &g = s.views[3], &dy = L.grad(n.output);
  auto dx = L.grad_out(n.inputs[0]);
  auto dg = n.inputs.size() > 3 && n.inputs[3] >= 0 ? L.grad_out(n.inputs[3]) : std::nullopt;
  auto db = n.inputs.size() > 4 && n.inputs[4] >= 0 ? L.grad_out(n.inputs[4]) : std::nullopt;
  const int acc = L.acc_flags({&dx}, {&dg, &db});
  L.step("mt_batchnorm_backward_f32",
         {Arg::buf(x.buffer, x.offset), Arg::buf(mean.buffer), Arg::buf(rstd.buffer), Arg::buf(g.buffer),
          Arg::buf(dy.buffer, dy.offset), buf_or_null(dx), buf_or_null(dg), buf_or_null(db), Arg::num(s.ints[0]),
          Arg::num(s.ints[1]), Arg::num(s.ints[2]), Arg::num(acc)},
         3 * numel_of(x.shape));
}

OpRule conv_rule(int spatial) {
  OpRule r;
  r.op = spatial == 1 ? "conv1d" : "conv2d";
  r.summary = r.op + " (constant weight and bias; any stride, padding, dilation, groups)";
  r.min_inputs = 2, r.max_inputs = 3;
  r.attrs = {{"stride", AttrSpec::Type::Shape},
             {"padding", AttrSpec::Type::Shape},
             {"padding_end", AttrSpec::Type::Shape},
             {"dilation", AttrSpec::Type::Shape},
             {"groups", AttrSpec::Type::Int}};
  r.weight_input = 1;
  r.fuses_activation = r.reads_channel_formats = true;
  r.folds_norm_rank = spatial + 2;  // batched: [N, O, ...]
  r.evaluate = [spatial](const Node& n, const std::vector<Tensor>& in) {
    const Tensor b = in.size() > 2 ? in[2] : Tensor();
    const auto [sh, sw] = hw(n, "stride", spatial);
    const auto [dh, dw] = hw(n, "dilation", spatial);
    const std::int64_t groups = node_attr<std::int64_t>(n, "groups");
    if (spatial == 1) return microtorch::conv1d(in[0], in[1], b, sw, float_padding(n, 1), dw, groups);
    return microtorch::conv2d(in[0], in[1], b, Sizes2d(sh, sw), float_padding(n, 2), Sizes2d(dh, dw), groups);
  };
  r.patch_gram = [spatial](const Node& n, const Tensor& x, const Tensor& w, std::vector<double>& gram) {
    accumulate_patch_gram(n, x, w, gram, spatial);
  };
  r.lower = [spatial](Lowering& L, const Node& n) { lower_conv(L, n, spatial); };
  r.lower_f32 = [spatial](Lowering& L, const Node& n) { lower_conv_f32(L, n, spatial); };
  r.backward_f32 = backward_conv_f32;
  return r;
}

}  // namespace

std::vector<OpRule> conv_rules() {
  OpRule bn;
  bn.op = "batch_norm";
  bn.summary = "batch_norm (in eval, right after a conv1d, conv2d or linear layer: folded into it)";
  bn.min_inputs = 1, bn.max_inputs = 5;
  bn.attrs = {{"training", AttrSpec::Type::Bool}, {"momentum", AttrSpec::Type::Float}, {"eps", AttrSpec::Type::Float}};
  bn.folds_into_weights = true;
  bn.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    const auto at = [&](std::size_t k) { return k < in.size() ? in[k] : Tensor(); };
    // batch statistics (recorded in training) without touching the running ones
    const bool batch = node_attr<bool>(n, "training");
    return microtorch::batch_norm(in[0], batch ? Tensor() : at(1), batch ? Tensor() : at(2), at(3), at(4), false,
                                  node_attr<double>(n, "momentum"), node_attr<double>(n, "eps"));
  };
  // reached only when the norm did not fold (Lowering::folded_norm)
  bn.lower = [](Lowering& L, const Node& n) {
    if (node_attr<bool>(n, "training")) {
      L.fail(n, "batch_norm was recorded in training mode (batch statistics); call model.eval() before tracing");
    }
    L.fail(n, "batch_norm lowers only folded into the conv1d, conv2d or linear layer right before it (constant "
              "weights, its output read by the norm alone, channels at dim 1 of a batched output); put the norm "
              "right after such a layer, or replace it by a layer_norm");
  };
  bn.lower_f32 = lower_batch_norm_f32;
  bn.backward_f32 = backward_batch_norm_f32;
  return {conv_rule(1), conv_rule(2), bn};
}

}  // namespace microtorch::lower
