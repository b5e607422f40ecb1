// Rules: add, sub, mul, div, neg (mt_add_<a>_<b>_<y>, mt_mul_*, mt_requant_*, mt_div_rows_*).
#include <cmath>
#include <optional>

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

// The second operand of a broadcasting binary op: a packed view and the block it repeats.
// A constant is quantized alone (symmetric) in `elem`; an activation keeps its type, or is
// converted to `elem` when `same_type`.
std::pair<View, std::int64_t> operand(Lowering& L, const Node& n, std::int64_t id, const Shape& out, Elem elem,
                                      bool same_type) {
  if (L.is_const(id)) {
    Tensor c = L.data(id);
    std::int64_t block = suffix_block(c.shape(), out);
    if (block < 0) {
      c = microtorch::expand(c, out).clone();
      block = numel_of(out);
    }
    c = c.reshape({-1});
    const Format f = L.const_format(c, elem, L.const_name(id));
    const std::int64_t wb = L.weight(c, elem, f, L.const_name(id));
    return {View{wb, 0, c.shape(), packed_strides(c.shape()), elem, f.scale, f.zero, {}, {}}, block};
  }
  const View& v = L.act(n, id);
  const std::int64_t block = suffix_block(v.shape, out);
  if (block < 0) {
    L.fail(n, fmt::format("operand {} of shape {} does not broadcast as a trailing block of {}", L.ref(id),
                          shape_str(v.shape), shape_str(out)));
  }
  return {L.packed(n, same_type ? L.as_elem(n, v, elem) : v), block};
}

// The full-size operand of a binary op (the one with the output's shape).
std::size_t full_operand(const Lowering& L, const Node& n) {
  for (std::size_t i = 0; i < 2; ++i) {
    const auto id = n.inputs[i];
    if (!L.is_const(id) && L.has_view(id) && L.act(n, id).shape == L.out_shape(n)) return i;
  }
  L.fail(n, "neither operand is an activation of the output's shape (broadcasting both sides is not supported)");
}

// y = a + b (or a - b, b - a): y_zero + round((a ma + b mb + c) 2^-shift) with ma, mb the
// ratios scale_a / scale_y and +-scale_b / scale_y at the largest shift that keeps them
// below the kernel's bound, c the folded zero points.
void lower_add(Lowering& L, const Node& n, bool subtract) {
  const Shape& out = L.out_shape(n);
  const std::size_t i = full_operand(L, n);
  const Elem ye = L.out_elem(n);
  const View a = L.packed(n, L.act(n, n.inputs[i]));
  const auto [b, block] = operand(L, n, n.inputs[1 - i], out, ye, false);
  const Format f = L.out_format(n, ye);
  const View y = L.out_act(n, ye, f);
  // a - b: b negated; b - a (a constant minus the full activation): a negated
  const double ra = (subtract && i == 1 ? -1.0 : 1.0) * a.scale / f.scale;
  const double rb = (subtract && i == 0 ? -1.0 : 1.0) * b.scale / f.scale;
  // the kernel's bound (int32 arithmetic for two int8 operands), and c = -(z_a ma + z_b mb)
  // must fit int32
  double bound = a.elem == Elem::S8 && b.elem == Elem::S8 ? std::ldexp(1.0, 21) : std::ldexp(1.0, 30);
  if (a.zero != 0 || b.zero != 0) bound = std::min(bound, std::floor(2147483647.0 / (std::abs(a.zero) + std::abs(b.zero))));
  const double big = std::max(std::abs(ra), std::abs(rb));
  const int shift = std::clamp(static_cast<int>(std::floor(std::log2(bound / big))), -31, 62);
  auto mult = [shift, bound](double r) {
    const double m = std::round(std::ldexp(r, shift));
    return static_cast<std::int64_t>(std::clamp(m, -bound, bound));
  };
  const std::int64_t ma = mult(ra), mb = mult(rb);
  const std::int64_t c = -(a.zero * ma + b.zero * mb);
  const std::int64_t count = numel_of(out);
  L.step(Lowering::kernel("add", {a.elem, b.elem, ye}),
         {Arg::buf(a.buffer, a.offset), Arg::buf(b.buffer, b.offset), Arg::num(block), Arg::buf(y.buffer),
          Arg::num(count), Arg::num(ma), Arg::num(mb), Arg::num(c), Arg::num(shift), Arg::num(f.zero)},
         count);
  L.set(n, y);
}

// y = x * c for a scalar constant c: one requantization (mt_requant_*).
void lower_scale(Lowering& L, const Node& n, const View& xv, double c) {
  const View x = L.dense(n, xv);
  const Elem ye = L.out_elem(n);
  const Format f = L.out_format(n, ye);
  const View y = L.like(n, x, ye, f);
  const Multiplier m = L.rq(c * x.scale / f.scale, fmt::format("%{} = {}", n.output, n.op));
  L.step(Lowering::kernel("requant", {x.elem, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape)), Arg::num(x.zero),
          Arg::num(m.m), Arg::num(m.s), Arg::num(f.zero), Arg::num(0)},
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
  const Elem T = L.out_elem(n);
  const View a = L.packed(n, L.as_elem(n, L.act(n, n.inputs[i]), T));
  const auto [b, block] = operand(L, n, n.inputs[1 - i], out, T, true);
  const Format f = L.out_format(n, T);
  const View y = L.out_act(n, T, f);
  const Multiplier m = L.rq(a.scale * b.scale / f.scale, fmt::format("%{} = mul", n.output));
  L.step(Lowering::kernel("mul", {T}),
         {Arg::buf(a.buffer, a.offset), Arg::buf(b.buffer, b.offset), Arg::num(block), Arg::buf(y.buffer),
          Arg::num(numel_of(out)), Arg::num(a.zero), Arg::num(b.zero), Arg::num(m.m), Arg::num(m.s), Arg::num(f.zero)},
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
  const Shape& out = L.out_shape(n);
  Shape rows_shape = out;
  if (!rows_shape.empty()) rows_shape.back() = 1;
  if (L.is_const(d_id) || L.act(n, a_id).shape != out || L.act(n, d_id).shape != rows_shape) {
    L.fail(n, "division lowers for x [.., n] / d [.., 1] (one divisor per row) or by a scalar constant");
  }
  const Elem T = L.out_elem(n);
  const View x = L.packed(n, L.as_elem(n, L.act(n, a_id), T)), d = L.packed(n, L.as_elem(n, L.act(n, d_id), T));
  const Format f = L.out_format(n, T);
  const View y = L.out_act(n, T, f);
  const std::int64_t cols = out.empty() ? 1 : out.back();
  const Multiplier m = L.rq(x.scale / (d.scale * f.scale), fmt::format("%{} = div", n.output));
  L.step(Lowering::kernel("div_rows", {T}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(d.buffer, d.offset), Arg::buf(y.buffer), Arg::num(numel_of(out) / cols),
          Arg::num(cols), Arg::num(m.m), Arg::num(m.s)},
         numel_of(out));
  L.set(n, y);
}

// ---- float32 ----

// The other operand of a float binary op: a packed view and the trailing block it repeats
// over `out`; a constant that does not broadcast as a trailing block is expanded (it then
// takes no gradient).
std::pair<View, std::int64_t> operand_f32(Lowering& L, const Node& n, std::int64_t id, const Shape& out) {
  if (L.is_const(id)) {
    const std::int64_t block = suffix_block(L.data(id).shape(), out);
    if (block >= 0) {
      View v = L.constant_f32(n, id);
      return {v, block};
    }
    if (L.needs_grad(id)) L.fail(n, "a trained parameter must broadcast as a trailing block of the output");
    return {L.tensor_f32(microtorch::expand(L.data(id), out).clone(), L.const_name(id)), numel_of(out)};
  }
  const View& v = L.act(n, id);
  const std::int64_t block = suffix_block(v.shape, out);
  if (block < 0) {
    L.fail(n, fmt::format("operand {} of shape {} does not broadcast as a trailing block of {}", L.ref(id),
                          shape_str(v.shape), shape_str(out)));
  }
  return {L.packed(n, v), block};
}

// y = ca a + cb b (add, sub; a the operand of the output's shape): mt_add_f32.
void lower_add_f32(Lowering& L, const Node& n, bool subtract) {
  const Shape& out = L.out_shape(n);
  const std::size_t i = full_operand(L, n);
  const View a = L.packed(n, L.act(n, n.inputs[i]));
  const auto [b, nb] = operand_f32(L, n, n.inputs[1 - i], out);
  const double ca = subtract && i == 1 ? -1.0 : 1.0, cb = subtract && i == 0 ? -1.0 : 1.0;
  const View y = L.out_act(n, Elem::F32, Format{});
  const std::int64_t count = numel_of(out);
  L.step("mt_add_f32", {Arg::buf(a.buffer, a.offset), Arg::buf(b.buffer, b.offset), Arg::buf(y.buffer), Arg::num(count),
                        Arg::num(nb), Arg::real(ca), Arg::real(cb)},
         count);
  if (L.keeps(n)) L.save(n, {}, {static_cast<std::int64_t>(i), nb});
  L.set(n, y);
}

// da = ca dy, db = cb (dy summed over b's repeats): mt_add_backward_f32.
void backward_add_f32(Lowering& L, const Node& n, bool subtract) {
  const Lowering::Saved& s = L.saved(n);
  const auto i = static_cast<std::size_t>(s.ints[0]);
  const std::int64_t nb = s.ints[1];
  auto da = L.grad_out(n.inputs[i]);
  auto db = L.grad_out(n.inputs[1 - i]);
  const int acc = L.acc_flags({&da, &db});
  const View& dy = L.grad(n.output);
  const double ca = subtract && i == 1 ? -1.0 : 1.0, cb = subtract && i == 0 ? -1.0 : 1.0;
  L.step("mt_add_backward_f32", {Arg::buf(dy.buffer, dy.offset), buf_or_null(da), buf_or_null(db),
                                 Arg::num(numel_of(dy.shape)), Arg::num(nb), Arg::real(ca), Arg::real(cb), Arg::num(acc)});
}

// y = c x for a scalar constant c (neg, mul or div by a constant): mt_add_f32 with no b.
void lower_scale_f32(Lowering& L, const Node& n, std::int64_t x_id, double c) {
  const View x = L.packed(n, L.act(n, x_id));
  const View y = L.out_act(n, Elem::F32, Format{});
  const std::int64_t count = numel_of(x.shape);
  L.step("mt_add_f32", {Arg::buf(x.buffer, x.offset), Arg::buf(-1), Arg::buf(y.buffer), Arg::num(count), Arg::num(count),
                        Arg::real(c), Arg::real(0.0)},
         count);
  if (L.keeps(n)) L.save(n, {}, {x_id});
  L.set(n, y);
}

void backward_scale_f32(Lowering& L, const Node& n, double c) {
  auto dx = L.grad_out(L.saved(n).ints[0]);
  if (!dx) return;
  const View& dy = L.grad(n.output);
  const int acc = L.acc_flags({&dx});
  L.step("mt_add_backward_f32", {Arg::buf(dy.buffer, dy.offset), buf_or_null(dx), Arg::buf(-1),
                                 Arg::num(numel_of(dy.shape)), Arg::num(numel_of(dy.shape)), Arg::real(c),
                                 Arg::real(0.0), Arg::num(acc)});
}

// The scalar of a mul or div by a constant, if it is one.
std::optional<std::pair<std::int64_t, double>> scalar_factor(Lowering& L, const Node& n) {
  if (n.op == "div") {
    if (!L.scalar_const(n.inputs[1])) return std::nullopt;
    const double d = L.data(n.inputs[1]).item<double>();
    if (d == 0) L.fail(n, "division by the constant 0");
    return std::pair{n.inputs[0], 1.0 / d};
  }
  for (std::size_t i = 0; i < 2; ++i) {
    if (L.scalar_const(n.inputs[1 - i]) && !L.is_const(n.inputs[i]) && !L.needs_grad(n.inputs[1 - i])) {
      return std::pair{n.inputs[i], L.data(n.inputs[1 - i]).item<double>()};
    }
  }
  return std::nullopt;
}

// y = a b (b a trailing block): mt_mul_f32; by a scalar constant: a scale.
void lower_mul_f32(Lowering& L, const Node& n) {
  if (const auto f = scalar_factor(L, n)) return lower_scale_f32(L, n, f->first, f->second);
  if (n.op == "div") L.fail(n, "float32 division lowers by a scalar constant only");
  const Shape& out = L.out_shape(n);
  const std::size_t i = full_operand(L, n);
  const View a = L.packed(n, L.act(n, n.inputs[i]));
  const auto [b, nb] = operand_f32(L, n, n.inputs[1 - i], out);
  const View y = L.out_act(n, Elem::F32, Format{});
  L.step("mt_mul_f32", {Arg::buf(a.buffer, a.offset), Arg::buf(b.buffer, b.offset), Arg::buf(y.buffer),
                        Arg::num(numel_of(out)), Arg::num(nb)},
         numel_of(out));
  if (L.keeps(n)) L.save(n, {a, b}, {static_cast<std::int64_t>(i), nb});
  L.set(n, y);
}

void backward_mul_f32(Lowering& L, const Node& n) {
  if (const auto f = scalar_factor(L, n)) return backward_scale_f32(L, n, f->second);
  const Lowering::Saved& s = L.saved(n);
  const auto i = static_cast<std::size_t>(s.ints[0]);
  auto da = L.grad_out(n.inputs[i]);
  auto db = L.grad_out(n.inputs[1 - i]);
  const int acc = L.acc_flags({&da, &db});
  const View& dy = L.grad(n.output);
  L.step("mt_mul_backward_f32", {Arg::buf(s.views[0].buffer, s.views[0].offset), Arg::buf(s.views[1].buffer, s.views[1].offset),
                                 Arg::buf(dy.buffer, dy.offset), buf_or_null(da), buf_or_null(db),
                                 Arg::num(numel_of(dy.shape)), Arg::num(s.ints[1]), Arg::num(acc)},
         2 * numel_of(dy.shape));
}

OpRule binary(const char* op, const char* summary,
              Tensor (*f)(const Tensor&, const Tensor&), void (*lower)(Lowering&, const Node&)) {
  OpRule r;
  r.op = op;
  r.summary = summary;
  r.min_inputs = r.max_inputs = 2;
  r.evaluate = [f](const Node&, const std::vector<Tensor>& in) { return f(in[0], in[1]); };
  r.lower = lower;
  return r;
}

}  // namespace

std::vector<OpRule> elementwise_rules() {
  OpRule neg;
  neg.op = "neg";
  neg.summary = "neg";
  neg.evaluate = [](const Node&, const std::vector<Tensor>& in) { return microtorch::neg(in[0]); };
  neg.lower = [](Lowering& L, const Node& n) { lower_scale(L, n, L.act(n, n.inputs[0]), -1.0); };
  neg.lower_f32 = [](Lowering& L, const Node& n) { lower_scale_f32(L, n, n.inputs[0], -1.0); };
  neg.backward_f32 = [](Lowering& L, const Node& n) { backward_scale_f32(L, n, -1.0); };

  // The links of an affine chain (affine_input.hpp), next = s prev + o for the constant v:
  // x + v; x - v and v - x; x v; x / v (v / x is not affine).
  OpRule add = binary("add", "add (activations, or a constant broadcast over trailing dims)",
                      [](const Tensor& a, const Tensor& b) { return a + b; },
                      [](Lowering& L, const Node& n) { lower_add(L, n, false); });
  add.residual = true;
  add.lower_f32 = [](Lowering& L, const Node& n) { lower_add_f32(L, n, false); };
  add.backward_f32 = [](Lowering& L, const Node& n) { backward_add_f32(L, n, false); };
  add.affine_link = [](double v, bool, double& s, double& o) { return s = 1, o = v, true; };
  OpRule sub = binary("sub", "sub", [](const Tensor& a, const Tensor& b) { return a - b; },
                      [](Lowering& L, const Node& n) { lower_add(L, n, true); });
  sub.residual = true;
  sub.lower_f32 = [](Lowering& L, const Node& n) { lower_add_f32(L, n, true); };
  sub.backward_f32 = [](Lowering& L, const Node& n) { backward_add_f32(L, n, true); };
  sub.affine_link = [](double v, bool constant_first, double& s, double& o) {
    return s = constant_first ? -1 : 1, o = constant_first ? v : -v, true;
  };
  OpRule mul = binary("mul", "mul (by an activation or a constant)", [](const Tensor& a, const Tensor& b) { return a * b; },
                      lower_mul);
  mul.lower_f32 = lower_mul_f32;
  mul.backward_f32 = backward_mul_f32;
  mul.affine_link = [](double v, bool, double& s, double& o) { return s = v, o = 0, true; };
  OpRule div = binary("div", "div (by a constant or a per-row activation)",
                      [](const Tensor& a, const Tensor& b) { return a / b; }, lower_div);
  div.zero_point_in = div.zero_point_out = false;  // the row division's operands are symmetric
  div.lower_f32 = lower_mul_f32;
  div.backward_f32 = backward_mul_f32;
  div.affine_link = [](double v, bool constant_first, double& s, double& o) {
    if (constant_first || v == 0) return false;
    return s = 1 / v, o = 0, true;
  };
  return {add, sub, mul, div, neg};
}

}  // namespace microtorch::lower
