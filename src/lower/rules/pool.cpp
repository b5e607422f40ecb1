// Rules: max_pool1d/2d (mt_max_pool_*), avg_pool1d/2d and adaptive_avg_pool1d/2d
// (mt_avg_pool_*). The output keeps the input's type and format: a maximum or a mean of
// values in one format is in that format (the mean rounded once). In float32 (training on
// the device): mt_max_pool_f32, mt_avg_pool_f32 and their backward.
#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"
#include "../runtime/mt_kernels.h"

namespace microtorch::lower {

namespace {

enum class Pool { Max, Avg, Adaptive };

// A spatial attribute ([w] or [h, w]) as {h, w}; a 1-D op's h is `h1d`.
std::pair<std::int64_t, std::int64_t> hw(const Node& n, const char* key, int spatial, std::int64_t h1d = 1) {
  const Shape& s = node_attr<Shape>(n, key);
  if (static_cast<int>(s.size()) != spatial) throw ValueError(fmt::format("{}: {} must have {} sizes", n.op, key, spatial));
  return spatial == 1 ? std::pair<std::int64_t, std::int64_t>{h1d, s[0]} : std::pair<std::int64_t, std::int64_t>{s[0], s[1]};
}

// The geometry table of pooling n (MT_POOL_*) over x of shape xs, in flash.
std::int64_t pool_table(Lowering& L, const Node& n, int spatial, Pool kind, const Shape& xs) {
  const Shape& ys = L.out_shape(n);
  std::vector<std::int64_t> g(MT_POOL_FIELDS, 0);
  g[MT_POOL_PLANES] = numel_of(Shape(xs.begin(), xs.end() - spatial));
  g[MT_POOL_H] = spatial == 2 ? xs[xs.size() - 2] : 1, g[MT_POOL_W] = xs.back();
  g[MT_POOL_OH] = spatial == 2 ? ys[ys.size() - 2] : 1, g[MT_POOL_OW] = ys.back();
  std::int64_t area = g[MT_POOL_H] * g[MT_POOL_W];  // a bound on a window's elements
  if (kind == Pool::Adaptive) {
    g[MT_POOL_MODE] = 2;
  } else {
    std::tie(g[MT_POOL_KH], g[MT_POOL_KW]) = hw(n, "kernel_size", spatial);
    std::tie(g[MT_POOL_SH], g[MT_POOL_SW]) = hw(n, "stride", spatial);
    std::tie(g[MT_POOL_PH], g[MT_POOL_PW]) = hw(n, "padding", spatial, 0);
    if (node_attr<bool>(n, "ceil_mode")) L.fail(n, "ceil_mode does not lower; use ceil_mode false");
    g[MT_POOL_MODE] = kind == Pool::Avg && !node_attr<bool>(n, "count_include_pad") ? 1 : 0;
    area = g[MT_POOL_KH] * g[MT_POOL_KW];
  }
  if (kind != Pool::Max && area > 65535) {
    L.fail(n, fmt::format("windows of up to {} elements are more than the kernel's 65535; pool in two steps", area));
  }
  return L.table(Elem::S32, std::move(g), TableRole::Parameters, fmt::format("pool_{}", n.output),
                 {"MT_POOL_PLANES", "MT_POOL_H", "MT_POOL_W", "MT_POOL_OH", "MT_POOL_OW", "MT_POOL_KH", "MT_POOL_KW",
                  "MT_POOL_SH", "MT_POOL_SW", "MT_POOL_PH", "MT_POOL_PW", "MT_POOL_MODE"});
}

void lower_pool(Lowering& L, const Node& n, int spatial, Pool kind) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const std::int64_t gb = pool_table(L, n, spatial, kind, x.shape);
  const Format f{x.scale, x.zero, L.buf(x).lo, L.buf(x).hi};  // the input's
  const View y = L.out_act(n, x.elem, f);
  const std::string sfx = Lowering::elem_sfx(x.elem);
  std::vector<Arg> args{Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::buf(gb)};
  if (kind != Pool::Max) args.push_back(Arg::num(x.zero));
  L.step((kind == Pool::Max ? "mt_max_pool_" : "mt_avg_pool_") + sfx, std::move(args));
  L.set(n, y);
}

// ---- float32 ----

// A maximum (mt_max_pool_f32, keeping each window's argmax for the backward) or a mean
// (mt_avg_pool_f32) in float, with the integer rule's table.
void lower_pool_f32(Lowering& L, const Node& n, int spatial, Pool kind) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const std::int64_t gb = pool_table(L, n, spatial, kind, x.shape);
  const View y = L.out_act(n, Elem::F32, Format{});
  if (kind == Pool::Max) {
    View idx;
    if (L.keeps(n)) {
      idx = L.new_act(y.shape, Elem::S32, Format{}, -1, false);
      L.program().buffer(idx.buffer).origin = fmt::format("the argmax of each window of %{}", n.output);
    }
    L.step("mt_max_pool_f32", {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::buf(idx.buffer), Arg::buf(gb)});
    if (L.keeps(n)) L.save(n, {idx}, {gb});
  } else {
    L.step("mt_avg_pool_f32", {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::buf(gb)});
    if (L.keeps(n)) L.save(n, {}, {gb});
  }
  L.set(n, y);
}

// dx: each window's gradient to its argmax (a maximum), or spread over the window's d
// elements (a mean): mt_max_pool_backward_f32, mt_avg_pool_backward_f32.
void backward_pool_f32(Lowering& L, const Node& n, Pool kind) {
  const Lowering::Saved& s = L.saved(n);
  const View& dy = L.grad(n.output);
  auto dx = L.grad_out(n.inputs[0]);
  if (!dx) return;
  const int acc = L.acc_flags({&dx});
  const Arg out = Arg::buf(dx->view.buffer, dx->view.offset);
  if (kind == Pool::Max) {
    L.step("mt_max_pool_backward_f32", {Arg::buf(s.views[0].buffer), Arg::buf(dy.buffer, dy.offset), out,
                                        Arg::buf(s.ints[0]), Arg::num(acc)});
  } else {
    L.step("mt_avg_pool_backward_f32", {Arg::buf(dy.buffer, dy.offset), out, Arg::buf(s.ints[0]), Arg::num(acc)});
  }
}

OpRule pool_rule(int spatial, Pool kind) {
  OpRule r;
  const std::string d = spatial == 1 ? "1d" : "2d";
  r.op = (kind == Pool::Max ? "max_pool" : kind == Pool::Avg ? "avg_pool" : "adaptive_avg_pool") + d;
  r.summary = r.op;
  r.passes_view = true;  // the output has the input's format: a zero point only when its readers take one
  if (kind == Pool::Adaptive) {
    r.attrs = {{"output_size", AttrSpec::Type::Shape}};
  } else {
    r.attrs = {{"kernel_size", AttrSpec::Type::Shape}, {"stride", AttrSpec::Type::Shape},
               {"padding", AttrSpec::Type::Shape}, {"ceil_mode", AttrSpec::Type::Bool}};
    if (kind == Pool::Avg) r.attrs.push_back({"count_include_pad", AttrSpec::Type::Bool});
  }
  r.evaluate = [spatial, kind](const Node& n, const std::vector<Tensor>& in) {
    if (kind == Pool::Adaptive) {
      const auto [oh, ow] = hw(n, "output_size", spatial);
      return spatial == 1 ? adaptive_avg_pool1d(in[0], ow) : adaptive_avg_pool2d(in[0], Sizes2d(oh, ow));
    }
    const auto [kh, kw] = hw(n, "kernel_size", spatial);
    const auto [sh, sw] = hw(n, "stride", spatial);
    const auto [ph, pw] = hw(n, "padding", spatial, 0);
    if (kind == Pool::Max) {
      return spatial == 1 ? max_pool1d(in[0], kw, sw, pw) : max_pool2d(in[0], Sizes2d(kh, kw), Sizes2d(sh, sw), Sizes2d(ph, pw));
    }
    const bool cip = node_attr<bool>(n, "count_include_pad");
    return spatial == 1 ? avg_pool1d(in[0], kw, sw, pw, cip)
                        : avg_pool2d(in[0], Sizes2d(kh, kw), Sizes2d(sh, sw), Sizes2d(ph, pw), cip);
  };
  r.lower = [spatial, kind](Lowering& L, const Node& n) { lower_pool(L, n, spatial, kind); };
  r.lower_f32 = [spatial, kind](Lowering& L, const Node& n) { lower_pool_f32(L, n, spatial, kind); };
  r.backward_f32 = [kind](Lowering& L, const Node& n) { backward_pool_f32(L, n, kind); };
  return r;
}

}  // namespace

std::vector<OpRule> pool_rules() {
  std::vector<OpRule> rules;
  for (const Pool kind : {Pool::Max, Pool::Avg, Pool::Adaptive}) {
    for (const int spatial : {1, 2}) rules.push_back(pool_rule(spatial, kind));
  }
  return rules;
}

}  // namespace microtorch::lower
