// Rules: mean, sum (over a run of consecutive dims) and argmax (mt_sum_*, mt_argmax_*).
#include <algorithm>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

std::vector<std::int64_t> dims_of(const Node& n) {
  const Shape& d = node_attr<Shape>(n, "dims");
  return {d.begin(), d.end()};
}

// The reduced dims of x as [outer, count, inner].
struct Split {
  std::int64_t outer, count, inner;
};
Split split_of(const Lowering& L, const Node& n, const View& x) {
  std::vector<std::int64_t> dims;
  for (auto d : dims_of(n)) dims.push_back(d < 0 ? d + static_cast<std::int64_t>(x.shape.size()) : d);
  std::sort(dims.begin(), dims.end());
  for (std::size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] != dims[i - 1] + 1) L.fail(n, "only a run of consecutive dims can be reduced");
  }
  if (dims.empty()) L.fail(n, "no dims to reduce");
  const auto lo = static_cast<std::ptrdiff_t>(dims.front()), hi = static_cast<std::ptrdiff_t>(dims.back()) + 1;
  return {numel_of(Shape(x.shape.begin(), x.shape.begin() + lo)),
          numel_of(Shape(x.shape.begin() + lo, x.shape.begin() + hi)), numel_of(Shape(x.shape.begin() + hi, x.shape.end()))};
}

// y[o, i] = c sum_k x[o, k, i] in float (c = 1 / count for a mean): mt_sum_f32.
void lower_reduce_f32(Lowering& L, const Node& n, bool mean) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const Split sp = split_of(L, n, x);
  const double c = mean ? 1.0 / static_cast<double>(std::max<std::int64_t>(sp.count, 1)) : 1.0;
  const View y = L.out_act(n, Elem::F32, Format{});
  L.step("mt_sum_f32", {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(sp.outer), Arg::num(sp.count),
                        Arg::num(sp.inner), Arg::real(c)},
         sp.outer * sp.count * sp.inner);
  if (L.keeps(n)) L.save(n, {}, {sp.outer, sp.count, sp.inner});
  L.set(n, y);
}

void backward_reduce_f32(Lowering& L, const Node& n, bool mean) {
  auto dx = L.grad_out(n.inputs[0]);
  if (!dx) return;
  const std::vector<std::int64_t>& sp = L.saved(n).ints;
  const double c = mean ? 1.0 / static_cast<double>(std::max<std::int64_t>(sp[1], 1)) : 1.0;
  const View& dy = L.grad(n.output);
  const int acc = L.acc_flags({&dx});
  L.step("mt_sum_backward_f32", {Arg::buf(dy.buffer, dy.offset), Arg::buf(dx->view.buffer, dx->view.offset),
                                 Arg::num(sp[0]), Arg::num(sp[1]), Arg::num(sp[2]), Arg::real(c), Arg::num(acc)},
         sp[0] * sp[1] * sp[2]);
}

// mean / sum over consecutive dims: [outer, n, inner] -> [outer, inner]
void lower_reduce(Lowering& L, const Node& n, bool mean) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const auto [outer, count, inner] = split_of(L, n, x);
  const Elem ye = L.out_elem(n);
  const Format f = L.out_format(n, ye);
  const View y = L.out_act(n, ye, f);
  // a mean is the sum requantized by scale_x / (count scale_y)
  const double ratio = x.scale / f.scale / (mean ? static_cast<double>(std::max<std::int64_t>(count, 1)) : 1.0);
  const Multiplier m = L.rq(ratio, fmt::format("%{} = {}", n.output, n.op));
  L.step(Lowering::kernel("sum", {x.elem, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(outer), Arg::num(count), Arg::num(inner),
          Arg::num(x.zero), Arg::num(m.m), Arg::num(m.s), Arg::num(f.zero)},
         outer * count * inner);
  L.set(n, y);
}

void lower_argmax(Lowering& L, const Node& n) {
  const View x = L.packed(n, L.act(n, n.inputs[0]));
  const std::int64_t cols = L.last_dim(n, node_attr<std::int64_t>(n, "dim"), x.shape);
  const View y = L.new_act(L.out_shape(n), Elem::S32, Format{}, n.output, false);
  L.step(Lowering::kernel("argmax", {x.elem}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape) / cols), Arg::num(cols)});
  L.set(n, y);
}

OpRule reduction(const char* op, bool mean) {
  OpRule r;
  r.op = op;
  r.summary = std::string(op) + " (over consecutive dims)";
  r.attrs = {{"dims", AttrSpec::Type::Shape}, {"keepdim", AttrSpec::Type::Bool}};
  r.evaluate = [mean](const Node& n, const std::vector<Tensor>& in) {
    return mean ? microtorch::mean(in[0], dims_of(n), node_attr<bool>(n, "keepdim"))
                : microtorch::sum(in[0], dims_of(n), node_attr<bool>(n, "keepdim"));
  };
  r.lower = [mean](Lowering& L, const Node& n) { lower_reduce(L, n, mean); };
  r.lower_f32 = [mean](Lowering& L, const Node& n) { lower_reduce_f32(L, n, mean); };
  r.backward_f32 = [mean](Lowering& L, const Node& n) { backward_reduce_f32(L, n, mean); };
  return r;
}

}  // namespace

std::vector<OpRule> reduce_rules() {
  OpRule argmax;
  argmax.op = "argmax";
  argmax.summary = "argmax (last dim)";
  argmax.attrs = {{"dim", AttrSpec::Type::Int}, {"keepdim", AttrSpec::Type::Bool}};
  argmax.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::argmax(in[0], node_attr<std::int64_t>(n, "dim"), node_attr<bool>(n, "keepdim"));
  };
  argmax.lower = lower_argmax;
  argmax.lower_f32 = [](Lowering& L, const Node& n) {
    const View x = L.packed(n, L.act(n, n.inputs[0]));
    const std::int64_t cols = L.last_dim(n, node_attr<std::int64_t>(n, "dim"), x.shape);
    const View y = L.new_act(L.out_shape(n), Elem::S32, Format{}, n.output, false);
    L.step("mt_argmax_f32", {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape) / cols),
                             Arg::num(cols)});
    L.set(n, y);
  };
  return {reduction("mean", true), reduction("sum", false), argmax};
}

}  // namespace microtorch::lower
