// Rules: softmax over the last dim (mt_softmax_*); log_softmax evaluates only (no kernel).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

// Probabilities in Q0.15 (int16), Q0.7 (int8), or scale 1/256 with zero point -128 (affine
// int8: all 256 levels for [0, 1)).
void lower_softmax(Lowering& L, const Node& n) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const std::int64_t cols = L.last_dim(n, node_attr<std::int64_t>(n, "dim"), x.shape);
  if (cols > 65535) L.fail(n, "softmax rows are limited to 65535 elements");
  const Elem ye = L.out_elem(n);
  const bool affine = L.options().scheme == Scheme::Affine && ye == Elem::S8 && L.affine_ok(n.output);
  const int out_bits = ye == Elem::S16 ? 15 : affine ? 8 : 7;
  Format f;
  f.scale = std::ldexp(1.0, -out_bits), f.zero = affine ? -128 : 0, f.lo = 0, f.hi = 1;
  const View y = L.out_act(n, ye, f);
  // z = (max - x) scale_x log2(e) in Q16
  const Multiplier in = L.rq(std::ldexp(x.scale / std::log(2.0), 16), fmt::format("%{} = softmax", n.output));
  L.step(Lowering::kernel("softmax", {x.elem, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape) / cols), Arg::num(cols),
          Arg::num(in.m), Arg::num(in.s), Arg::num(out_bits), Arg::num(f.zero)},
         numel_of(x.shape));
  L.set(n, y);
}

// softmax over the last dim in float (mt_softmax_f32), keeping its output for the backward.
void lower_softmax_f32(Lowering& L, const Node& n) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const std::int64_t cols = L.last_dim(n, node_attr<std::int64_t>(n, "dim"), x.shape);
  const View y = L.out_act(n, Elem::F32, Format{});
  L.step("mt_softmax_f32", {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape) / cols),
                            Arg::num(cols)},
         numel_of(x.shape));
  if (L.keeps(n)) L.save(n, {y}, {cols});
  L.set(n, y);
}

// dx = y (dy - sum_j dy_j y_j), row by row (mt_softmax_backward_f32)
void backward_softmax_f32(Lowering& L, const Node& n) {
  auto dx = L.grad_out(n.inputs[0]);
  if (!dx) return;
  const Lowering::Saved& s = L.saved(n);
  const View &y = s.views[0], &dy = L.grad(n.output);
  const std::int64_t cols = s.ints[0];
  const int acc = L.acc_flags({&dx});
  L.step("mt_softmax_backward_f32", {Arg::buf(y.buffer, y.offset), Arg::buf(dy.buffer, dy.offset),
                                     Arg::buf(dx->view.buffer, dx->view.offset), Arg::num(numel_of(y.shape) / cols),
                                     Arg::num(cols), Arg::num(acc)},
         2 * numel_of(y.shape));
}

}  // namespace

std::vector<OpRule> softmax_rules() {
  OpRule softmax;
  softmax.op = "softmax";
  softmax.summary = "softmax (last dim)";
  softmax.attrs = {{"dim", AttrSpec::Type::Int}};
  softmax.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::softmax(in[0], node_attr<std::int64_t>(n, "dim"));
  };
  softmax.lower = lower_softmax;
  softmax.lower_f32 = lower_softmax_f32;
  softmax.backward_f32 = backward_softmax_f32;

  OpRule log_softmax;  // evaluates only (no kernel)
  log_softmax.op = "log_softmax";
  log_softmax.attrs = softmax.attrs;
  log_softmax.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::log_softmax(in[0], node_attr<std::int64_t>(n, "dim"));
  };
  return {softmax, log_softmax};
}

}  // namespace microtorch::lower
