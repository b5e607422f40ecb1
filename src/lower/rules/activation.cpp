// Rules: relu (mt_requant_* with its clamp), and tanh, sigmoid, gelu: a 256-entry table of
// the exact function for int8 inputs (mt_lut_*), interpolated tables for int16 inputs
// (mt_tanh_*, mt_sigmoid_*, mt_gelu_*); clamp (ReLU6, Hardtanh): the int8 table, or for int16
// inputs a requantization that saturates at the bounds; exp evaluates only (no kernel).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

void lower_relu(Lowering& L, const Node& n) {
  const View x = L.dense(n, L.act(n, n.inputs[0]));
  const Elem ye = L.out_elem(n);
  // The power-of-two scheme keeps the input's format (a plain max); real scales cover the
  // output's own range, [0, max].
  Format f = L.out_format(n, ye);
  if (L.options().scheme == Scheme::PowerOfTwo && ye == x.elem) f.scale = x.scale, f.zero = x.zero;
  const View y = L.like(n, x, ye, f);
  const Multiplier m = L.rq(x.scale / f.scale, fmt::format("%{} = relu", n.output));
  L.step(Lowering::kernel("requant", {x.elem, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape)), Arg::num(x.zero),
          Arg::num(m.m), Arg::num(m.s), Arg::num(f.zero), Arg::num(1)},
         numel_of(x.shape));
  L.set(n, y);
}

double gelu_of(double x, bool tanh_form) {
  if (tanh_form) return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

double function_of(const Node& n, double x) {
  if (n.op == "clamp") return std::clamp(x, node_attr<double>(n, "min"), node_attr<double>(n, "max"));
  if (n.op == "tanh") return std::tanh(x);
  if (n.op == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
  return gelu_of(x, node_attr<std::string>(n, "approximate") == "tanh");
}

// tanh, sigmoid, gelu. The output format covers the calibrated range (tanh and sigmoid stay
// within (-1, 1)).
void lower_function(Lowering& L, const Node& n) {
  const View x = L.dense(n, L.act(n, n.inputs[0]));
  const Elem ye = L.out_elem(n);
  const Format f = L.out_format(n, ye);
  const View y = L.like(n, x, ye, f);
  const std::int64_t count = numel_of(x.shape);
  if (x.elem == Elem::S8) {  // every int8 input: the correctly rounded output, from a table
    std::vector<std::int64_t> t;
    for (int q = -128; q < 128; ++q) {
      const double v = std::round(function_of(n, x.scale * (q - x.zero)) / f.scale) + f.zero;
      t.push_back(static_cast<std::int64_t>(
          std::clamp<double>(v, static_cast<double>(qmin(ye)), static_cast<double>(qmax(ye)))));
    }
    const std::int64_t tb = L.table(ye, std::move(t), TableRole::Lookup, fmt::format("lut_{}{}", n.op, n.output));
    L.step(Lowering::kernel("lut", {Elem::S8, ye}),
           {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(count), Arg::buf(tb)}, count);
    return L.set(n, y);
  }
  // int16: the table's argument |x| scale_x in Q20; the result f in Q20 (tanh), Q21
  // (sigmoid) or x Phi(x) in units of x 2^-16 (gelu), rescaled to y.
  const std::string what = fmt::format("%{} = {}", n.output, n.op);
  const Multiplier in = L.rq(std::ldexp(x.scale, 20), what);
  const double out_unit = n.op == "tanh" ? std::ldexp(1.0, -20) : n.op == "sigmoid" ? std::ldexp(1.0, -21) : std::ldexp(x.scale, -16);
  const Multiplier out = L.rq(out_unit / f.scale, what);
  L.step(Lowering::kernel(n.op, {x.elem, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(count), Arg::num(in.m), Arg::num(in.s),
          Arg::num(out.m), Arg::num(out.s), Arg::num(f.zero)},
         count);
  L.set(n, y);
}

// clamp(x, lo, hi): ReLU6 is clamp(0, 6), Hardtanh clamp(-1, 1). An int8 input takes the
// table of every input (lower_function), exact for any bounds. An int16 input takes one
// requantization whose saturation is the clamp: a symmetric output format whose top,
// qmax scale, is the calibrated top cut at hi (so that hi itself is the largest output when
// the calibration reaches it), and whose bottom is the relu flag's 0 (lo = 0) or -top
// (lo = -hi). That needs a real scale (not the power-of-two scheme's) and such bounds.
void lower_clamp(Lowering& L, const Node& n) {
  const double lo = node_attr<double>(n, "min"), hi = node_attr<double>(n, "max");
  const View x = L.dense(n, L.act(n, n.inputs[0]));
  if (x.elem == Elem::S8) return lower_function(L, n);
  if (L.options().scheme == Scheme::PowerOfTwo || !(lo == 0 || lo == -hi)) {
    L.fail(n, fmt::format("clamp(min={}, max={}) of an int16 tensor lowers for min 0 (ReLU6) or min = -max "
                          "(Hardtanh) with real scales (scheme affine or symmetric); give this layer int8 "
                          "activations (QuantOptions::precision, --precision) for any bounds",
                          lo, hi));
  }
  const Elem ye = L.out_elem(n);
  const Format c = L.out_format(n, ye);  // the calibrated range, widened
  const double top = std::min(std::max(-c.lo, c.hi), hi);
  Format f;
  f.scale = top > 0 ? top / static_cast<double>(qmax(ye)) : 1.0;
  f.lo = lo == 0 ? 0.0 : -top, f.hi = top;
  const View y = L.like(n, x, ye, f);
  const Multiplier m = L.rq(x.scale / f.scale, fmt::format("%{} = clamp", n.output));
  L.step(Lowering::kernel("requant", {x.elem, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape)), Arg::num(x.zero),
          Arg::num(m.m), Arg::num(m.s), Arg::num(0), Arg::num(lo == 0 ? 1 : 0)},
         numel_of(x.shape));
  L.set(n, y);
}

// ---- float32 ----

// relu, gelu, tanh, sigmoid, clamp in float (mt_<op>_f32 over the dense input), keeping the
// input (gelu, clamp) or the output (relu, tanh, sigmoid) for the backward.
void lower_unary_f32(Lowering& L, const Node& n) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const View y = L.out_act(n, Elem::F32, Format{});
  const std::int64_t count = numel_of(x.shape);
  std::vector<Arg> args = {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(count)};
  if (n.op == "gelu") args.push_back(Arg::num(node_attr<std::string>(n, "approximate") == "tanh" ? 1 : 0));
  if (n.op == "clamp") {
    args.push_back(Arg::real(node_attr<double>(n, "min")));
    args.push_back(Arg::real(node_attr<double>(n, "max")));
  }
  L.step(fmt::format("mt_{}_f32", n.op), std::move(args), count);
  if (L.keeps(n)) L.save(n, {n.op == "gelu" || n.op == "clamp" ? x : y});
  L.set(n, y);
}

void backward_unary_f32(Lowering& L, const Node& n) {
  auto dx = L.grad_out(n.inputs[0]);
  if (!dx) return;
  const View& kept = L.saved(n).views[0];
  const View& dy = L.grad(n.output);
  const int acc = L.acc_flags({&dx});
  const std::int64_t count = numel_of(dy.shape);
  std::vector<Arg> args = {Arg::buf(kept.buffer, kept.offset), Arg::buf(dy.buffer, dy.offset),
                           Arg::buf(dx->view.buffer, dx->view.offset), Arg::num(count)};
  if (n.op == "gelu") args.push_back(Arg::num(node_attr<std::string>(n, "approximate") == "tanh" ? 1 : 0));
  if (n.op == "clamp") {
    args.push_back(Arg::real(node_attr<double>(n, "min")));
    args.push_back(Arg::real(node_attr<double>(n, "max")));
  }
  args.push_back(Arg::num(acc));
  L.step(fmt::format("mt_{}_backward_f32", n.op), std::move(args), count);
}

OpRule unary(const char* op, const char* summary, Tensor (*f)(const Tensor&), void (*lower)(Lowering&, const Node&)) {
  OpRule r;
  r.op = op;
  r.summary = summary;
  r.evaluate = [f](const Node&, const std::vector<Tensor>& in) { return f(in[0]); };
  r.lower = lower;
  if (lower) r.lower_f32 = lower_unary_f32, r.backward_f32 = backward_unary_f32;
  return r;
}

}  // namespace

std::vector<OpRule> activation_rules() {
  OpRule gelu;
  gelu.op = "gelu";
  gelu.summary = "gelu (exact or tanh)";
  gelu.attrs = {{"approximate", AttrSpec::Type::String}};
  gelu.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::gelu(in[0], node_attr<std::string>(n, "approximate"));
  };
  gelu.lower = lower_function;
  gelu.lower_f32 = lower_unary_f32;
  gelu.backward_f32 = backward_unary_f32;
  OpRule clamp;
  clamp.op = "clamp";
  clamp.summary = "clamp (ReLU6, Hardtanh; at int16 with min 0 or min = -max)";
  clamp.attrs = {{"min", AttrSpec::Type::Float}, {"max", AttrSpec::Type::Float}};
  clamp.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::clamp(in[0], node_attr<double>(n, "min"), node_attr<double>(n, "max"));
  };
  clamp.lower = lower_clamp;
  clamp.lower_f32 = lower_unary_f32;
  clamp.backward_f32 = backward_unary_f32;
  OpRule relu = unary("relu", "relu", [](const Tensor& x) { return microtorch::relu(x); }, lower_relu);
  relu.fuses_into_layer = true;  // the layer's requantization clamps at the output's zero point
  return {
      unary("exp", "exp", [](const Tensor& x) { return microtorch::exp(x); }, nullptr),
      relu,
      gelu,
      clamp,
      unary("tanh", "tanh", [](const Tensor& x) { return microtorch::tanh(x); }, lower_function),
      unary("sigmoid", "sigmoid", [](const Tensor& x) { return microtorch::sigmoid(x); }, lower_function),
  };
}

}  // namespace microtorch::lower
