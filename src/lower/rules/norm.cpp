// Rules: layer_norm over the last dims (mt_layernorm_*), rms_norm (mt_rmsnorm_s16).
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rms_norm.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

// xhat from the integer statistics (scale-free: eps in units of x's integers squared), then
// y = xhat g + b with g = gamma / scale_y, b = beta / scale_y + zero_y folded per channel,
// each at the finest fixed-point scale that fits int32. An int8 output read only by linear
// layers gets a format per channel (gamma and beta differ by channel; the layers fold the
// scales into their weights), as in per-embedding-group quantization.
void lower_layer_norm(Lowering& L, const Node& n) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const std::int64_t cols = numel_of(node_attr<Shape>(n, "normalized_shape"));
  const Elem ye = L.out_elem(n);
  const std::string what = fmt::format("%{} = layer_norm", n.output);
  const bool per_channel = L.channel_formats(n) && cols == L.out_shape(n).back();
  Format f;
  std::vector<Format> ch(static_cast<std::size_t>(cols));
  if (per_channel) {
    const auto [lo, hi] = L.channel_range(n.output);
    const bool affine = L.options().scheme == Scheme::Affine;
    f.scale = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const auto k = static_cast<std::size_t>(j);
      ch[k] = L.part_range_format(lo[k], hi[k], ye, affine, fmt::format("{}, channel {}", what, j));
      f.scale = std::max(f.scale, ch[k].scale);
      f.lo = std::min(f.lo, ch[k].lo), f.hi = std::max(f.hi, ch[k].hi);  // the channels' ranges together
    }
  } else {
    f = L.out_format(n, ye);
    std::fill(ch.begin(), ch.end(), f);
  }
  auto param = [&](std::size_t k, double dflt) {
    std::vector<double> v(static_cast<std::size_t>(cols), dflt);
    if (n.inputs.size() > k && n.inputs[k] >= 0) {
      const Tensor t = L.data(n.inputs[k]).to(Dtype::Float64).contiguous();
      for (std::int64_t j = 0; j < cols; ++j) v[static_cast<std::size_t>(j)] = t.data<double>()[j];
    }
    return v;
  };
  const std::vector<double> gamma = param(1, 1.0), beta = param(2, 0.0);
  std::vector<double> gs(static_cast<std::size_t>(cols)), bs(static_cast<std::size_t>(cols));
  double gmax = 0, bmax = 0;
  for (std::size_t j = 0; j < gs.size(); ++j) {
    gs[j] = gamma[j] / ch[j].scale, bs[j] = beta[j] / ch[j].scale + (per_channel ? ch[j].zero : 0);
    gmax = std::max(gmax, std::abs(gs[j]));
    bmax = std::max(bmax, std::abs(bs[j]));
  }
  // g in Q(g_shift - 20) and b in Q(b_shift), each the largest shift that keeps it below 2^30
  // (and g_shift - 32 <= b_shift <= g_shift, as the kernel takes them)
  auto largest_shift = [](double m) { return m > 0 ? static_cast<int>(std::floor(std::log2(std::ldexp(1.0, 30) / m))) : 62; };
  const int b_room = largest_shift(bmax);
  const int g_shift = std::clamp(std::min(20 + largest_shift(gmax), b_room + 32), 0, 62);
  const int b_shift = std::clamp(std::min(b_room, g_shift), g_shift - 32, g_shift);
  std::vector<std::int64_t> g, b;
  for (std::size_t j = 0; j < gs.size(); ++j) {
    g.push_back(std::llround(std::ldexp(gs[j], g_shift - 20)));
    b.push_back(std::llround(std::ldexp(bs[j], b_shift)));
  }
  const std::string name = n.inputs.size() > 1 && n.inputs[1] >= 0 ? L.const_name(n.inputs[1]) : fmt::format("ln{}", n.output);
  const std::int64_t gb = L.table(Elem::S32, std::move(g), TableRole::Norm, "g_" + c_name(name));
  const std::int64_t bb = L.table(Elem::S32, std::move(b), TableRole::Norm, "b_" + c_name(name));
  // eps / scale_x^2 = eps_q 2^-eps_frac with eps_q holding about 24 significant bits
  const double eps = node_attr<double>(n, "eps") / (x.scale * x.scale);
  const int eps_frac = eps > 0 ? std::clamp(24 - static_cast<int>(std::ceil(std::log2(eps))), -30, 62) : 0;
  const auto eps_q = std::clamp<std::int64_t>(std::llround(std::ldexp(eps, eps_frac)), 0, UINT32_MAX);
  View y = L.out_act(n, ye, f);
  if (per_channel) {
    for (const Format& c : ch) y.segments.push_back(c.scale), y.segment_zeros.push_back(c.zero);
  }
  L.step(Lowering::kernel("layernorm", {x.elem, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape) / cols), Arg::num(cols),
          Arg::num(eps_q), Arg::num(eps_frac), Arg::buf(gb), Arg::num(g_shift), Arg::buf(bb), Arg::num(b_shift),
          Arg::num(per_channel ? 0 : f.zero)},
         numel_of(x.shape) * 2);
  L.set(n, y);
}

// layer norm in float (mt_layernorm_f32); a training step keeps each row's mean and 1/std.
void lower_layer_norm_f32(Lowering& L, const Node& n) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const std::int64_t cols = numel_of(node_attr<Shape>(n, "normalized_shape"));
  const std::int64_t rows = numel_of(x.shape) / std::max<std::int64_t>(cols, 1);
  const View g = n.inputs.size() > 1 && n.inputs[1] >= 0 ? L.constant_f32(n, n.inputs[1]) : View{};
  const View b = n.inputs.size() > 2 && n.inputs[2] >= 0 ? L.constant_f32(n, n.inputs[2]) : View{};
  const View y = L.out_act(n, Elem::F32, Format{});
  View stats;
  if (L.keeps(n)) {
    stats = L.new_act({rows, 2}, Elem::F32, Format{}, -1, false);
    L.program().buffer(stats.buffer).origin = fmt::format("the mean and 1/std of the rows of %{}", n.output);
  }
  L.step("mt_layernorm_f32", {Arg::buf(x.buffer, x.offset), Arg::buf(g.buffer), Arg::buf(b.buffer), Arg::buf(y.buffer),
                              Arg::buf(stats.buffer), Arg::num(rows), Arg::num(cols),
                              Arg::real(node_attr<double>(n, "eps"))},
         2 * numel_of(x.shape));
  if (L.keeps(n)) L.save(n, {x, g, stats}, {rows, cols});
  L.set(n, y);
}

// dx = rstd (g dy - mean(g dy) - xhat mean(g dy xhat)); dg += sum dy xhat, db += sum dy
void backward_layer_norm_f32(Lowering& L, const Node& n) {
  const Lowering::Saved& s = L.saved(n);
  const View &x = s.views[0], &g = s.views[1], &stats = s.views[2], &dy = L.grad(n.output);
  auto dx = L.grad_out(n.inputs[0]);
  auto dg = n.inputs.size() > 1 && n.inputs[1] >= 0 ? L.grad_out(n.inputs[1]) : std::nullopt;
  auto db = n.inputs.size() > 2 && n.inputs[2] >= 0 ? L.grad_out(n.inputs[2]) : std::nullopt;
  const int acc = L.acc_flags({&dx}, {&dg, &db});
  L.step("mt_layernorm_backward_f32",
         {Arg::buf(x.buffer, x.offset), Arg::buf(g.buffer), Arg::buf(stats.buffer), Arg::buf(dy.buffer, dy.offset),
          buf_or_null(dx), buf_or_null(dg), buf_or_null(db), Arg::num(s.ints[0]), Arg::num(s.ints[1]), Arg::num(acc)},
         3 * numel_of(x.shape));
}

// rms_norm in int16 (mt_rmsnorm_s16: the gains folded into per-channel multipliers); an int8
// input is widened first (exactly), an int8 output requantized from an int16 one covering its
// range.
void lower_rms_norm(Lowering& L, const Node& n) {
  const View x = L.as_elem(n, L.packed(n, L.act(n, n.inputs[0])), Elem::S16);
  const std::int64_t cols = numel_of(node_attr<Shape>(n, "normalized_shape"));
  const Elem ye = L.out_elem(n);
  const Format f = L.out_format(n, ye);
  Format f16 = f;
  if (ye != Elem::S16) {  // the int16 result covers the int8 format's range
    f16.zero = 0;
    f16.scale = std::max(std::abs(f.lo), std::abs(f.hi)) / 32767.0;
    if (!(f16.scale > 0)) f16.scale = f.scale;
  }
  std::vector<double> gains(static_cast<std::size_t>(cols), 1.0);
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    const Tensor g = L.data(n.inputs[1]).to(Dtype::Float64).contiguous();
    for (std::int64_t j = 0; j < cols; ++j) gains[static_cast<std::size_t>(j)] = g.data<double>()[j];
  }
  RmsNormConstants k = rms_norm_constants(gains, node_attr<double>(n, "eps"), x.scale, f16.scale);
  const std::string name = n.inputs.size() > 1 && n.inputs[1] >= 0 ? L.const_name(n.inputs[1]) : fmt::format("rms{}", n.output);
  const std::int64_t rq = L.table(Elem::S32, std::move(k.rq), TableRole::Norm, "g_" + c_name(name));
  const View y16 = ye == Elem::S16 ? L.out_act(n, ye, f) : L.new_act(x.shape, Elem::S16, f16, -1);
  L.step("mt_rmsnorm_s16",
         {Arg::buf(x.buffer, x.offset), Arg::buf(y16.buffer), Arg::num(numel_of(x.shape) / cols), Arg::num(cols),
          Arg::num(k.eps_q), Arg::num(k.eps_shift), Arg::buf(rq)},
         numel_of(x.shape) * 2);
  if (ye == Elem::S16) return L.set(n, y16);
  View y = L.out_act(n, ye, f);
  const Multiplier m = L.rq(f16.scale / f.scale, fmt::format("%{} = rms_norm", n.output));
  L.step(Lowering::kernel("requant", {Elem::S16, ye}),
         {Arg::buf(y16.buffer), Arg::buf(y.buffer), Arg::num(numel_of(x.shape)), Arg::num(0), Arg::num(m.m), Arg::num(m.s),
          Arg::num(f.zero), Arg::num(0)},
         0);
  L.set(n, y);
}

}  // namespace

RmsNormConstants rms_norm_constants(const std::vector<double>& gains, double eps, double sx, double sy) {
  RmsNormConstants k;
  const auto n = static_cast<double>(gains.size());
  for (const double g : gains) {
    const Multiplier mu = multiplier(16.0 * std::sqrt(n) * g / sy);
    k.rq.push_back(mu.m), k.rq.push_back(mu.s);
  }
  // 2^8 n eps / sx^2 (capped at 2^61: v stays within 64 bits) as eps_q 2^eps_shift
  double e = std::min(std::ldexp(n * eps / (sx * sx), 8), std::ldexp(1.0, 61));
  while (e >= 4294967295.0) e /= 2, ++k.eps_shift;
  k.eps_q = static_cast<std::int64_t>(std::round(e));
  return k;
}

std::vector<OpRule> norm_rules() {
  OpRule layer_norm;
  layer_norm.op = "layer_norm";
  layer_norm.summary = "layer_norm (last dims)";
  layer_norm.min_inputs = 1, layer_norm.max_inputs = 3;
  layer_norm.attrs = {{"normalized_shape", AttrSpec::Type::Shape}, {"eps", AttrSpec::Type::Float}};
  layer_norm.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::layer_norm(in[0], node_attr<Shape>(n, "normalized_shape"), in.size() > 1 ? in[1] : Tensor(),
                                  in.size() > 2 ? in[2] : Tensor(), node_attr<double>(n, "eps"));
  };
  layer_norm.lower = lower_layer_norm;
  layer_norm.lower_f32 = lower_layer_norm_f32;
  layer_norm.backward_f32 = backward_layer_norm_f32;

  OpRule rms;
  rms.op = "rms_norm";
  rms.summary = "rms_norm (last dims, int16)";
  rms.min_inputs = 1, rms.max_inputs = 2;
  rms.attrs = {{"normalized_shape", AttrSpec::Type::Shape}, {"eps", AttrSpec::Type::Float}};
  rms.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::rms_norm(in[0], node_attr<Shape>(n, "normalized_shape"), in.size() > 1 ? in[1] : Tensor(),
                                node_attr<double>(n, "eps"));
  };
  rms.lower = lower_rms_norm;

  return {layer_norm, rms};
}

}  // namespace microtorch::lower
