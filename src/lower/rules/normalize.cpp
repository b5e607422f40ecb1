// Rules: softmax and layer_norm over the last dim (mt_softmax_*, mt_layernorm_*);
// log_softmax evaluates only (no kernel).
#include <algorithm>
#include <cmath>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

void lower_softmax(Lowering& L, const Node& n) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const std::int64_t cols = L.last_dim(n, node_attr<std::int64_t>(n, "dim"), x.shape);
  if (cols > 65535) L.fail(n, "softmax rows are limited to 65535 elements");
  const View y = L.out_act(n, L.bits() - 1);  // probabilities in Q0.15 / Q0.7
  L.step("mt_softmax_" + L.sfx(), {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer),
                                   Arg::num(numel_of(x.shape) / cols), Arg::num(cols), Arg::num(x.frac)});
  L.set(n, y);
}

void lower_layer_norm(Lowering& L, const Node& n) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const std::int64_t cols = numel_of(node_attr<Shape>(n, "normalized_shape"));
  const double eps = node_attr<double>(n, "eps");
  std::int64_t gamma = -1, beta = -1;
  int fg = 0, fb = 0;
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) gamma = L.weight(n.inputs[1], L.bits()), fg = L.program().buffer(gamma).frac;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) beta = L.weight(n.inputs[2], L.bits()), fb = L.program().buffer(beta).frac;
  // eps = eps_q * 2^-eps_frac with eps_q holding about 24 significant bits
  const int eps_frac = eps > 0 ? std::clamp(24 - static_cast<int>(std::ceil(std::log2(eps))), 0, 62) : 0;
  const auto eps_q = static_cast<std::int64_t>(std::llround(std::ldexp(eps, eps_frac)));
  const int fy = L.frac_of(n.output);
  const View y = L.out_act(n, fy);
  L.step("mt_layernorm_" + L.sfx(),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape) / cols), Arg::num(cols),
          Arg::num(x.frac), Arg::buf(gamma), Arg::num(fg), Arg::buf(beta), Arg::num(fb), Arg::num(eps_q),
          Arg::num(eps_frac), Arg::num(fy)},
         numel_of(x.shape) * 2);
  L.set(n, y);
}

}  // namespace

std::vector<OpRule> normalize_rules() {
  OpRule softmax;
  softmax.op = "softmax";
  softmax.summary = "softmax (last dim)";
  softmax.attrs = {{"dim", AttrSpec::Type::Int}};
  softmax.kernels = {"mt_softmax"};
  softmax.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::softmax(in[0], node_attr<std::int64_t>(n, "dim"));
  };
  softmax.lower = lower_softmax;

  OpRule layer_norm;
  layer_norm.op = "layer_norm";
  layer_norm.summary = "layer_norm (last dims)";
  layer_norm.min_inputs = 1, layer_norm.max_inputs = 3;
  layer_norm.attrs = {{"normalized_shape", AttrSpec::Type::Shape}, {"eps", AttrSpec::Type::Float}};
  layer_norm.kernels = {"mt_layernorm"};
  layer_norm.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::layer_norm(in[0], node_attr<Shape>(n, "normalized_shape"), in.size() > 1 ? in[1] : Tensor(),
                                  in.size() > 2 ? in[2] : Tensor(), node_attr<double>(n, "eps"));
  };
  layer_norm.lower = lower_layer_norm;
  OpRule log_softmax;  // evaluates only (no kernel)
  log_softmax.op = "log_softmax";
  log_softmax.attrs = softmax.attrs;
  log_softmax.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::log_softmax(in[0], node_attr<std::int64_t>(n, "dim"));
  };
  return {softmax, layer_norm, log_softmax};
}

}  // namespace microtorch::lower
