// Rules: add, sub, mul, div, neg (mt_add_*, mt_add_bcast_*, mt_mul_*, mt_scale_*, mt_div_rows_*).
#include <cmath>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

// Number of elements b repeats over when it broadcasts to `out` as a trailing block (its
// shape without leading 1s is a suffix of out); -1 when it does not.
std::int64_t suffix_block(const Shape& b, const Shape& out) {
  std::size_t lead = 0;
  while (lead < b.size() && b[lead] == 1) ++lead;
  const std::size_t k = b.size() - lead;
  if (k > out.size() ||
      !std::equal(b.begin() + static_cast<std::ptrdiff_t>(lead), b.end(), out.end() - static_cast<std::ptrdiff_t>(k))) {
    return -1;
  }
  return numel_of(Shape(b.begin() + static_cast<std::ptrdiff_t>(lead), b.end()));
}

// The second operand of a broadcasting binary op: a packed buffer and the block it repeats.
struct Operand {
  std::int64_t buffer, offset, block;
  int frac;
};

Operand operand(Lowering& L, const Node& n, std::int64_t id, const Shape& out, bool negate = false) {
  if (L.is_const(id)) {
    Tensor c = L.data(id);
    if (negate) c = neg(c);
    std::int64_t block = suffix_block(c.shape(), out);
    if (block < 0) {
      c = microtorch::expand(c, out).clone();
      block = numel_of(out);
    }
    const int fc = L.format(Lowering::absmax(c), L.bits(), L.const_name(id));
    return {L.weight(c.reshape({-1}), L.act_elem(), fc, L.const_name(id), L.const_name(id)), 0, block, fc};
  }
  if (negate) L.fail(n, "subtracting an activation is not supported; add a negated (scaled by -1) tensor instead");
  const View& v = L.act(n, id);
  const std::int64_t block = suffix_block(v.shape, out);
  if (block < 0) {
    L.fail(n, fmt::format("operand {} of shape {} does not broadcast as a trailing block of {}", L.ref(id),
                          shape_str(v.shape), shape_str(out)));
  }
  const View p = L.packed(n, v);
  return {p.buffer, p.offset, block, p.frac};
}

// The full-size operand of a binary op (the one with the output's shape).
std::size_t full_operand(const Lowering& L, const Node& n) {
  for (std::size_t i = 0; i < 2; ++i) {
    const auto id = n.inputs[i];
    if (!L.is_const(id) && L.has_view(id) && L.act(n, id).shape == L.out_shape(n)) return i;
  }
  L.fail(n, "neither operand is an activation of the output's shape (broadcasting both sides is not supported)");
}

void lower_add(Lowering& L, const Node& n, bool subtract) {
  const Shape& out = L.out_shape(n);
  const std::size_t i = full_operand(L, n);
  if (subtract && i == 1) L.fail(n, "constant - activation is not supported; write -(x - c) or scale by -1");
  const View a = L.packed(n, L.act(n, n.inputs[i]));
  const Operand b = operand(L, n, n.inputs[1 - i], out, subtract);
  const int fy = L.frac_of(n.output);
  const View y = L.out_act(n, fy);
  const std::int64_t count = numel_of(out);
  if (b.block == count) {
    L.step("mt_add_" + L.sfx(), {Arg::buf(a.buffer, a.offset), Arg::num(a.frac), Arg::buf(b.buffer, b.offset),
                                 Arg::num(b.frac), Arg::buf(y.buffer), Arg::num(fy), Arg::num(count)});
  } else {
    L.step("mt_add_bcast_" + L.sfx(),
           {Arg::buf(a.buffer, a.offset), Arg::num(a.frac), Arg::buf(b.buffer, b.offset), Arg::num(b.frac),
            Arg::num(b.block), Arg::buf(y.buffer), Arg::num(fy), Arg::num(count)});
  }
  L.set(n, y);
}

// y = x * c for a scalar constant c: mt_scale_* with c as a 16-bit Q constant.
void lower_scale(Lowering& L, const Node& n, const View& xv, double c) {
  const View x = L.dense(n, xv);
  const int fm = choose_frac(std::abs(c), 16);
  const int fy = L.frac_of(n.output);
  const View y = L.like(n, x, fy);
  L.step("mt_scale_" + L.sfx(), {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape)),
                                 Arg::num(quantize_value(c, fm, 16)), Arg::num(x.frac + fm - fy)},
         numel_of(x.shape));
  L.set(n, y);
}

void lower_mul(Lowering& L, const Node& n) {
  for (std::size_t i = 0; i < 2; ++i) {
    if (L.scalar_const(n.inputs[1 - i]) && !L.is_const(n.inputs[i])) {
      return lower_scale(L, n, L.act(n, n.inputs[i]), L.data(n.inputs[1 - i]).item<double>());
    }
  }
  const Shape& out = L.out_shape(n);
  const std::size_t i = full_operand(L, n);
  const View a = L.packed(n, L.act(n, n.inputs[i]));
  const Operand b = operand(L, n, n.inputs[1 - i], out);
  const int fy = L.frac_of(n.output);
  const View y = L.out_act(n, fy);
  L.step("mt_mul_" + L.sfx(), {Arg::buf(a.buffer, a.offset), Arg::buf(b.buffer, b.offset), Arg::num(b.block),
                               Arg::buf(y.buffer), Arg::num(numel_of(out)), Arg::num(a.frac + b.frac - fy)},
         numel_of(out));
  L.set(n, y);
}

void lower_div(Lowering& L, const Node& n) {
  const std::int64_t a_id = n.inputs[0], d_id = n.inputs[1];
  if (L.scalar_const(d_id)) {
    const double d = L.data(d_id).item<double>();
    if (d == 0) L.fail(n, "division by the constant 0");
    return lower_scale(L, n, L.act(n, a_id), 1.0 / d);
  }
  const View& a = L.act(n, a_id);
  const Shape& out = L.out_shape(n);
  const View& d = L.act(n, d_id);
  Shape rows_shape = out;
  if (!rows_shape.empty()) rows_shape.back() = 1;
  if (a.shape != out || d.shape != rows_shape) {
    L.fail(n, "division lowers for x [.., n] / d [.., 1] (one divisor per row) or by a scalar constant");
  }
  const View pa = L.packed(n, a), pd = L.packed(n, d);
  const int fy = L.frac_of(n.output);
  const View y = L.out_act(n, fy);
  const std::int64_t cols = out.empty() ? 1 : out.back();
  L.step("mt_div_rows_" + L.sfx(),
         {Arg::buf(pa.buffer, pa.offset), Arg::num(pa.frac), Arg::buf(pd.buffer, pd.offset), Arg::num(pd.frac),
          Arg::buf(y.buffer), Arg::num(fy), Arg::num(numel_of(out) / cols), Arg::num(cols)});
  L.set(n, y);
}

OpRule binary(const char* op, const char* summary, std::vector<std::string> kernels,
              Tensor (*f)(const Tensor&, const Tensor&), void (*lower)(Lowering&, const Node&)) {
  OpRule r;
  r.op = op;
  r.summary = summary;
  r.min_inputs = r.max_inputs = 2;
  r.kernels = std::move(kernels);
  r.evaluate = [f](const Node&, const std::vector<Tensor>& in) { return f(in[0], in[1]); };
  r.lower = lower;
  return r;
}

}  // namespace

std::vector<OpRule> elementwise_rules() {
  OpRule neg;
  neg.op = "neg";
  neg.summary = "neg";
  neg.kernels = {"mt_scale"};
  neg.evaluate = [](const Node&, const std::vector<Tensor>& in) { return microtorch::neg(in[0]); };
  neg.lower = [](Lowering& L, const Node& n) { lower_scale(L, n, L.act(n, n.inputs[0]), -1.0); };
  return {
      binary("add", "add (activations, or a constant broadcast over trailing dims)", {"mt_add", "mt_add_bcast"},
             [](const Tensor& a, const Tensor& b) { return a + b; },
             [](Lowering& L, const Node& n) { lower_add(L, n, false); }),
      binary("sub", "sub (activation - activation or constant)", {"mt_add", "mt_add_bcast"},
             [](const Tensor& a, const Tensor& b) { return a - b; },
             [](Lowering& L, const Node& n) { lower_add(L, n, true); }),
      binary("mul", "mul (by an activation or a constant)", {"mt_mul", "mt_scale"},
             [](const Tensor& a, const Tensor& b) { return a * b; }, lower_mul),
      binary("div", "div (by a constant or a per-row activation)", {"mt_div_rows", "mt_scale"},
             [](const Tensor& a, const Tensor& b) { return a / b; }, lower_div),
      neg,
  };
}

}  // namespace microtorch::lower
