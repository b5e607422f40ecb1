// Rules: relu (mt_requant_* with its clamp), and tanh, sigmoid, gelu: a 256-entry table of
// the exact function for int8 inputs (mt_lut_*), interpolated tables for int16 inputs
// (mt_tanh_*, mt_sigmoid_*, mt_gelu_*); exp evaluates only (no kernel).
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
    const std::int64_t tb = L.table(ye, std::move(t), fmt::format("lut_{}{}", n.op, n.output));
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

OpRule unary(const char* op, const char* summary, std::vector<std::string> kernels, Tensor (*f)(const Tensor&),
             void (*lower)(Lowering&, const Node&)) {
  OpRule r;
  r.op = op;
  r.summary = summary;
  r.kernels = std::move(kernels);
  r.evaluate = [f](const Node&, const std::vector<Tensor>& in) { return f(in[0]); };
  r.lower = lower;
  return r;
}

}  // namespace

std::vector<OpRule> activation_rules() {
  OpRule gelu;
  gelu.op = "gelu";
  gelu.summary = "gelu (exact or tanh)";
  gelu.attrs = {{"approximate", AttrSpec::Type::String}};
  gelu.kernels = {"mt_lut", "mt_gelu"};
  gelu.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::gelu(in[0], node_attr<std::string>(n, "approximate"));
  };
  gelu.lower = lower_function;
  return {
      unary("exp", "exp", {}, [](const Tensor& x) { return microtorch::exp(x); }, nullptr),
      unary("relu", "relu", {"mt_requant"}, [](const Tensor& x) { return microtorch::relu(x); }, lower_relu),
      gelu,
      unary("tanh", "tanh", {"mt_lut", "mt_tanh"}, [](const Tensor& x) { return microtorch::tanh(x); }, lower_function),
      unary("sigmoid", "sigmoid", {"mt_lut", "mt_sigmoid"}, [](const Tensor& x) { return microtorch::sigmoid(x); },
            lower_function),
  };
}

}  // namespace microtorch::lower
