// Rules: relu, tanh, sigmoid, gelu (mt_relu_*, mt_tanh_*, mt_sigmoid_*, mt_gelu_*); exp
// evaluates only (no kernel).
#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

void lower_relu(Lowering& L, const Node& n) {
  const View x = L.dense(n, L.act(n, n.inputs[0]));
  const View y = L.like(n, x, x.frac);  // relu keeps the format
  L.step("mt_relu_" + L.sfx(), {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape))});
  L.set(n, y);
}

// A table activation mt_<op>_*: x in its format, y in Q(fy).
void lower_table(Lowering& L, const Node& n, int fy) {
  const View x = L.dense(n, L.act(n, n.inputs[0]));
  const View y = L.like(n, x, fy);
  L.step(fmt::format("mt_{}_{}", n.op, L.sfx()),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape)), Arg::num(x.frac), Arg::num(fy)});
  L.set(n, y);
}

OpRule unary(const char* op, const char* summary, Tensor (*f)(const Tensor&), void (*lower)(Lowering&, const Node&)) {
  OpRule r;
  r.op = op;
  r.summary = summary;
  r.kernels = {std::string("mt_") + op};
  r.evaluate = [f](const Node&, const std::vector<Tensor>& in) { return f(in[0]); };
  r.lower = lower;
  return r;
}

}  // namespace

std::vector<OpRule> activation_rules() {
  // tanh and sigmoid map into (-1, 1): their outputs use the whole type, Q0.15 / Q0.7.
  auto bounded = [](Lowering& L, const Node& n) { lower_table(L, n, L.bits() - 1); };
  OpRule gelu;
  gelu.op = "gelu";
  gelu.summary = "gelu (exact or tanh)";
  gelu.attrs = {{"approximate", AttrSpec::Type::String}};
  gelu.kernels = {"mt_gelu"};
  gelu.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::gelu(in[0], node_attr<std::string>(n, "approximate"));
  };
  gelu.lower = [](Lowering& L, const Node& n) { lower_table(L, n, L.frac_of(n.output)); };
  OpRule exp = unary("exp", "exp", [](const Tensor& x) { return microtorch::exp(x); }, nullptr);
  exp.kernels.clear();
  return {
      exp,
      unary("relu", "relu", [](const Tensor& x) { return microtorch::relu(x); }, lower_relu),
      gelu,
      unary("tanh", "tanh", [](const Tensor& x) { return microtorch::tanh(x); }, bounded),
      unary("sigmoid", "sigmoid", [](const Tensor& x) { return microtorch::sigmoid(x); }, bounded),
  };
}

}  // namespace microtorch::lower
