// Rules: linear and matmul (mt_linear_<x>_<w>_<y>, mt_matmul_*).
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

// Parts of the output: when every reader of n's output reads it in parts (OpRule::input_parts:
// a multi_head_attention reads its packed q | k | v as 3 H parts, each of q, k, v as H), in
// equal numbers and types, each part gets its own scale (their ranges differ a lot: |q| 0.5
// beside |v| 4.8 in one packed tensor would leave q 14 of int8's 127 levels). Returns the
// number of parts (0: one scale) and the readers' type.
std::pair<std::int64_t, Elem> output_parts(const Lowering& L, const Node& n) {
  std::int64_t parts = 0;
  Elem elem = Elem::S8;
  for (const Node* r : L.readers(n.output)) {
    const OpRule* rule = find_rule(r->op);
    const std::int64_t p = rule && rule->input_parts ? rule->input_parts(*r, n.output) : 0;
    if (p == 0 || (parts != 0 && (p != parts || L.out_elem(*r) != elem))) return {0, elem};
    parts = p, elem = L.out_elem(*r);
  }
  return {L.channel_absmax(n.output).empty() ? 0 : parts, elem};
}

// y = x W^T + b: mt_linear_*; W [out, in] and b constant. Weights symmetric, one scale per
// output channel; the bias in the accumulator's scale scale_x * scale_w[c], with x's zero
// point folded in: b_q[c] - z_x sum_j W_q[c, j]; per-channel multipliers scale_x scale_w[c] /
// scale_y. An input with a format per channel j (a LayerNorm's) multiplies W's column j by
// its scale (then scale_x is 1) and folds its zero point into the bias column by column.
// A relu fused into the layer (Lowering::fused_relu) is its output.
void lower_linear(Lowering& L, const Node& n, std::int64_t x_id, const Tensor& w_in, const Tensor& b,
                  const std::string& bname, const std::string& wname) {
  if (w_in.dim() != 2) L.fail(n, "the weight must be 2-D [out, in]");
  const auto [x, x_stride] = L.strided_rows(n, L.act(n, x_id));
  const std::int64_t in = w_in.size(1), out = w_in.size(0), rows = numel_of(x.shape) / in;
  // integer training (train_integer.cpp): the weights and the bias table in RAM, made once
  const bool trains = L.trains_int(n);
  const Lowering::IntLayer* known = trains ? L.int_layer(n) : nullptr;
  if (trains && !x.segments.empty()) {
    L.fail(n, "integer training of a layer whose input has a format per feature (a layer norm's) is not lowered; "
              "Numeric::Float32 trains it");
  }
  // the input's scale and zero point per column
  std::vector<double> xs(static_cast<std::size_t>(in), x.scale);
  std::vector<std::int64_t> xz(static_cast<std::size_t>(in), x.zero);
  Tensor w = w_in;
  const std::vector<double>* gram = L.gram(x_id);
  std::vector<double> column_gram;
  if (!x.segments.empty()) {
    const std::int64_t group = in / static_cast<std::int64_t>(x.segments.size());
    Tensor wd = w_in.to(Dtype::Float64).contiguous().clone();
    for (std::int64_t j = 0; j < in; ++j) {
      const auto k = static_cast<std::size_t>(j), g = static_cast<std::size_t>(j / group);
      xs[k] = x.segments[g], xz[k] = x.segment_zeros.empty() ? 0 : x.segment_zeros[g];
      for (std::int64_t c = 0; c < out; ++c) wd.data<double>()[c * in + j] *= xs[k];
    }
    w = wd;
    if (gram) {  // the inputs of the scaled weights are x_j / scale_j
      column_gram = *gram;
      const auto m = static_cast<std::size_t>(in);
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < m; ++j) column_gram[i * m + j] /= xs[i] * xs[j];
      }
      gram = &column_gram;
    }
    std::fill(xs.begin(), xs.end(), 1.0);
  }
  const double x_scale = xs[0];
  std::int64_t zmax = 0;
  for (const auto z : xz) zmax = std::max<std::int64_t>(zmax, std::abs(z));
  const auto [parts, parts_elem] = output_parts(L, n);
  if (trains && parts) {
    L.fail(n, "integer training of a layer whose output is read in parts is not lowered; Numeric::Float32 trains it");
  }
  // integer training of the weight: room for it and the output to grow (Lowering::kTrainHeadroom)
  const bool trains_w = trains && L.trained(n.inputs[1]);
  // A fused relu (Lowering::fused_relu): the layer writes the relu's output, in the wider of
  // the two nodes' types, clamped at its zero point.
  const Node* relu = L.fused_relu(n);
  const Node* norm = L.folded_norm(n);  // folded into w_in and b by the caller (Lowering::fold_norm)
  const Node& top = relu ? *relu : norm ? *norm : n;  // the node whose output the layer writes
  const Elem we = L.weight_elem(n);
  Elem ye = parts ? parts_elem : L.out_elem(n);
  if (relu && elem_bytes(L.out_elem(*relu)) > elem_bytes(ye)) ye = L.out_elem(*relu);
  const Elem be = x.elem == Elem::S8 ? Elem::S32 : Elem::S64;
  const Tensor bias = b.defined() ? b.to(Dtype::Float64).contiguous() : Tensor();
  // An int32 bias must hold b / (scale_x scale_w) and the zero-point term: a tiny scale_x
  // (very small activations) then costs the weights resolution rather than the bias saturating.
  std::vector<double> min_scale;
  if (trains_w) {
    const Tensor wd = w.to(Dtype::Float64).contiguous();
    for (std::int64_t c = 0; c < out; ++c) {
      double m = 0;
      for (std::int64_t j = 0; j < in; ++j) m = std::max(m, std::abs(wd.data<double>()[c * in + j]));
      min_scale.push_back(Lowering::kTrainHeadroom * m / static_cast<double>(qmax(we)));
    }
  }
  if (be == Elem::S32 && bias.defined()) {
    const double room = 2147483647.0 - static_cast<double>(zmax) * static_cast<double>(in * qmax(we)) - 1.0;
    if (room < 1.0) L.fail(n, fmt::format("{} inputs are too many for an int32 accumulator with a zero point", in));
    min_scale.resize(static_cast<std::size_t>(out), 0.0);
    for (std::int64_t c = 0; c < out; ++c) {
      auto& ms = min_scale[static_cast<std::size_t>(c)];
      ms = std::max(ms, std::abs(bias.data<double>()[c]) / (x_scale * room));
    }
  }
  if (trains && elem_bytes(x.elem) != elem_bytes(we)) {
    L.fail(n, "integer training of a layer whose input and weights differ in width is not lowered; give them one "
              "precision, or train with Numeric::Float32");
  }
  const auto wb = known ? known->weight : L.weight_rows(w, we, wname, min_scale, gram);
  if (trains_w) L.program().buffer(wb).kind = BufferKind::Parameter;  // in RAM: the update re-derives it
  const Buffer wbuf = L.program().buffer(wb);
  std::vector<std::int64_t> b_q(static_cast<std::size_t>(out), 0), b_unfolded(static_cast<std::size_t>(out), 0);
  for (std::int64_t c = 0; c < out; ++c) {
    const double acc_scale = x_scale * row_scale(wbuf, c);
    std::int64_t zsum = 0;  // sum_j z_j W_q[c, j]
    for (std::int64_t j = 0; j < in; ++j) zsum += xz[static_cast<std::size_t>(j)] * wbuf.data[static_cast<std::size_t>(c * in + j)];
    const double b = bias.defined() ? bias.data<double>()[c] / acc_scale : 0.0;
    b_unfolded[static_cast<std::size_t>(c)] = static_cast<std::int64_t>(std::llround(b));
    b_q[static_cast<std::size_t>(c)] = b_unfolded[static_cast<std::size_t>(c)] - zsum;
  }
  // x and W of different widths: W's rows in the kernels' pair order (mt_kernels.h), now that
  // the sums above have read them in order
  if (elem_bytes(x.elem) != elem_bytes(we)) {
    Buffer& stored = L.program().buffer(wb);
    pair_order(stored.data, in);
    stored.rows_in_pair_order = true;
  }
  const bool need_bias = bias.defined() || zmax != 0;
  const std::string bias_what = "b_" + c_name(bias.defined() ? bname : wname + "_zero");
  const std::int64_t bb = !need_bias ? -1
                          : known    ? known->bias
                          : trains   ? L.parameter_table(be, b_q, bias_what)
                                     : L.table(be, b_q, TableRole::Bias, bias_what);
  Format f;
  std::vector<double> segments;
  if (parts) {
    const std::vector<double>& ch = L.channel_absmax(n.output);
    const std::int64_t group = out / parts;
    for (std::int64_t g = 0; g < parts; ++g) {
      const double m = *std::max_element(ch.begin() + g * group, ch.begin() + (g + 1) * group);
      const Format pf = L.part_format(m, ye, fmt::format("%{} = linear, part {}", n.output, g));
      segments.push_back(pf.scale);
      f.lo = std::min(f.lo, pf.lo), f.hi = std::max(f.hi, pf.hi);  // the parts' ranges together
    }
    f.scale = *std::max_element(segments.begin(), segments.end());
  } else {
    // power-of-two scales: the relu keeps its input's format (lower_relu), the layer's
    f = L.out_format(relu && L.options().scheme != Scheme::PowerOfTwo ? *relu : norm ? *norm : n, ye);
    if (trains_w) {
      f = L.range_format(f.lo * Lowering::kTrainHeadroom, f.hi * Lowering::kTrainHeadroom, ye, f.zero != 0,
                         fmt::format("%{} = linear (trained)", n.output));
    }
  }
  View y = L.out_act(top, ye, f);
  y.segments = segments;
  const bool per_channel = !wbuf.channel_scales.empty() || parts;
  std::vector<std::int64_t> rq;
  for (std::int64_t c = 0; c < (per_channel ? out : 1); ++c) {
    const double y_scale = parts ? segments[static_cast<std::size_t>(c / (out / parts))] : f.scale;
    const Multiplier m = L.rq(x_scale * row_scale(wbuf, c) / y_scale, fmt::format("%{} = linear", n.output));
    rq.push_back(m.m), rq.push_back(m.s);
  }
  const std::int64_t rqb = L.table(Elem::S32, std::move(rq), TableRole::Requantization, "rq_" + c_name(wname));
  L.step(Lowering::kernel("linear", {x.elem, we, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(wb), Arg::buf(bb), Arg::buf(y.buffer), Arg::num(rows), Arg::num(in),
          Arg::num(out), Arg::num(x_stride), Arg::buf(rqb), Arg::num(per_channel ? 1 : 0), Arg::num(f.zero),
          Arg::num(relu ? f.zero : qmin(ye))},
         rows * in * out);
  if (trains && !known) {
    Lowering::IntLayer l;
    l.weight = wb, l.bias = bb;
    for (std::int64_t c = 0; c < out; ++c) l.row_scales.push_back(row_scale(wbuf, c));
    l.x_scale = x_scale, l.x_zero = static_cast<std::int32_t>(xz[0]), l.x_elem = x.elem;
    l.in = in, l.out = out, l.rows = rows, l.x_stride = x_stride;
    l.bias_q = b_unfolded;
    l.y_lo = f.lo, l.y_hi = f.hi;
    L.set_int_layer(n, std::move(l));
  }
  if (L.keeps(n)) L.save(n, {x}, {x_stride});
  L.set(top, y);
}

void lower_matmul(Lowering& L, const Node& n) {
  const std::int64_t a_id = n.inputs[0], b_id = n.inputs[1];
  if (L.is_const(b_id)) {  // x @ W is linear with the weight W^T
    const Tensor& w = L.data(b_id);
    if (w.dim() != 2) L.fail(n, "a constant right operand must be 2-D");
    return lower_linear(L, n, a_id, transpose(w, 0, 1).contiguous(), Tensor(), "", L.const_name(b_id));
  }
  const Elem T = L.out_elem(n);
  const View a = L.as_elem(n, L.act(n, a_id), T);
  const View b = L.as_elem(n, L.act(n, b_id), T);
  if (a.shape.size() < 2 || a.shape.size() != b.shape.size() ||
      !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin())) {
    L.fail(n, "both operands must be [batch.., M, K] @ [batch.., K, N] with equal batch dims (no broadcasting)");
  }
  const std::size_t r = a.shape.size();
  const std::int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = b.shape[r - 1];
  const std::int64_t batch = numel_of(Shape(a.shape.begin(), a.shape.end() - 2));
  const View pa = L.packed(n, a);
  // b read as the transpose of a packed [.., N, K] when that is how it is laid out.
  View bt = b;
  std::swap(bt.shape[r - 1], bt.shape[r - 2]);
  std::swap(bt.strides[r - 1], bt.strides[r - 2]);
  const bool transposed = !is_packed(b) && is_packed(bt);
  const View pb = transposed ? bt : L.packed(n, b);
  const Format f = L.out_format(n, T);
  const View y = L.out_act(n, T, f);
  const Multiplier m = L.rq(pa.scale * pb.scale / f.scale, fmt::format("%{} = matmul", n.output));
  L.step(Lowering::kernel("matmul", {T}),
         {Arg::buf(pa.buffer, pa.offset), Arg::buf(pb.buffer, pb.offset), Arg::buf(y.buffer), Arg::num(batch),
          Arg::num(M), Arg::num(K), Arg::num(N), Arg::num(transposed ? 1 : 0), Arg::num(m.m), Arg::num(m.s)},
         batch * M * K * N);
  L.set(n, y);
}

// ---- float32 ----

// y = x W^T + b in float (mt_linear_f32); x read in place through its row stride.
void lower_linear_f32(Lowering& L, const Node& n) {
  const auto [x, xs] = L.strided_rows(n, L.act(n, n.inputs[0]));
  const View w = L.constant_f32(n, n.inputs[1]);
  if (w.shape.size() != 2) L.fail(n, "the weight must be 2-D [out, in]");
  const std::int64_t in = w.shape[1], out = w.shape[0], rows = numel_of(x.shape) / in;
  const View b = n.inputs.size() > 2 && n.inputs[2] >= 0 ? L.constant_f32(n, n.inputs[2]) : View{};
  const View y = L.out_act(n, Elem::F32, Format{});
  L.step("mt_linear_f32",
         {Arg::buf(x.buffer, x.offset), Arg::buf(w.buffer), Arg::buf(b.buffer), Arg::buf(y.buffer), Arg::num(rows),
          Arg::num(in), Arg::num(out), Arg::num(xs)},
         rows * in * out);
  if (L.keeps(n)) L.save(n, {x, w, b});
  L.set(n, y);
}

// dx = dy W, dW += dy^T x, db += column sums of dy (mt_linear_backward_f32).
void backward_linear_f32(Lowering& L, const Node& n) {
  const std::vector<View>& s = L.saved(n).views;
  const View &x = s[0], &w = s[1], &b = s[2];
  const std::int64_t in = w.shape[1], out = w.shape[0], rows = numel_of(x.shape) / in;
  const View& dy = L.grad(n.output);
  auto dx = L.grad_out(n.inputs[0]);
  auto dw = L.grad_out(n.inputs[1]);
  auto db = b.buffer >= 0 ? L.grad_out(n.inputs[2]) : std::nullopt;
  const int acc = L.acc_flags({&dx}, {&dw, &db});
  L.step("mt_linear_backward_f32",
         {Arg::buf(x.buffer, x.offset), Arg::buf(w.buffer), Arg::buf(dy.buffer, dy.offset), buf_or_null(dx),
          buf_or_null(dw), buf_or_null(db), Arg::num(rows), Arg::num(in), Arg::num(out),
          Arg::num(row_stride(x).value_or(0)), Arg::num(acc)},
         rows * in * out * ((dx ? 1 : 0) + (dw ? 1 : 0)));
}

// A matmul operand in float: an activation, or a constant as a float array.
View operand_f32(Lowering& L, const Node& n, std::int64_t id) {
  return L.is_const(id) ? L.constant_f32(n, id) : L.act(n, id);
}

// y = a @ b in float (mt_matmul_f32), b read transposed when it is laid out that way.
void lower_matmul_f32(Lowering& L, const Node& n) {
  const View a = L.packed(n, operand_f32(L, n, n.inputs[0])), b = operand_f32(L, n, n.inputs[1]);
  if (a.shape.size() < 2 || a.shape.size() != b.shape.size() ||
      !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin())) {
    L.fail(n, "both operands must be [batch.., M, K] @ [batch.., K, N] with equal batch dims (no broadcasting)");
  }
  const std::size_t r = a.shape.size();
  const std::int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = b.shape[r - 1];
  const std::int64_t batch = numel_of(Shape(a.shape.begin(), a.shape.end() - 2));
  View bt = b;
  std::swap(bt.shape[r - 1], bt.shape[r - 2]);
  std::swap(bt.strides[r - 1], bt.strides[r - 2]);
  const bool transposed = !is_packed(b) && is_packed(bt);
  const View pb = transposed ? bt : L.packed(n, b);
  const View y = L.out_act(n, Elem::F32, Format{});
  L.step("mt_matmul_f32",
         {Arg::buf(a.buffer, a.offset), Arg::buf(pb.buffer, pb.offset), Arg::buf(y.buffer), Arg::num(batch), Arg::num(M),
          Arg::num(K), Arg::num(N), Arg::num(transposed ? 1 : 0)},
         batch * M * K * N);
  if (L.keeps(n)) L.save(n, {a, pb}, {transposed ? 1 : 0});
  L.set(n, y);
}

// da = dy b^T, db = a^T dy (mt_matmul_backward_f32); each into a packed copy of its operand's
// layout, then into its gradient when that layout is not the operand's own.
void backward_matmul_f32(Lowering& L, const Node& n) {
  const Lowering::Saved& s = L.saved(n);
  const View &a = s.views[0], &b = s.views[1];
  const bool transposed = s.ints[0] != 0;
  const std::size_t r = a.shape.size();
  const std::int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = transposed ? b.shape[r - 2] : b.shape[r - 1];
  const std::int64_t batch = numel_of(Shape(a.shape.begin(), a.shape.end() - 2));
  auto da = L.grad_out(n.inputs[0]);
  auto db = L.grad_out(n.inputs[1]);
  if (db && transposed) L.fail(n, "the gradient of a transposed right operand is not lowered; make it contiguous");
  const int acc = L.acc_flags({&da, &db});
  const View& dy = L.grad(n.output);
  L.step("mt_matmul_backward_f32",
         {Arg::buf(a.buffer, a.offset), Arg::buf(b.buffer, b.offset), Arg::buf(dy.buffer, dy.offset), buf_or_null(da),
          buf_or_null(db), Arg::num(batch), Arg::num(M), Arg::num(K), Arg::num(N), Arg::num(transposed ? 1 : 0),
          Arg::num(acc & 1)},
         2 * batch * M * K * N);
}

}  // namespace

std::vector<OpRule> linear_rules() {
  OpRule linear;
  linear.op = "linear";
  linear.summary = "linear (constant weight and bias)";
  linear.min_inputs = 2, linear.max_inputs = 3;
  linear.reads_parts = true;
  linear.weight_input = 1;
  linear.folds_affine_input = linear.rounds_with_gram = linear.reads_feature_formats = linear.fuses_activation = true;
  linear.folds_norm_rank = 2;  // BatchNorm1d over [N, C] after it
  linear.evaluate = [](const Node&, const std::vector<Tensor>& in) {
    return microtorch::linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor());
  };
  linear.lower = [](Lowering& L, const Node& n) {
    if (!L.is_const(n.inputs[1])) L.fail(n, "the weight must be a parameter or constant");
    const std::int64_t b_id = n.inputs.size() > 2 ? n.inputs[2] : -1;
    if (b_id >= 0 && !L.is_const(b_id)) L.fail(n, "the bias must be a parameter or constant");
    // a batch_norm after the layer folds into W and b first (Lowering::fold_norm)
    const auto [w, b_in] = L.fold_norm(n, L.data(n.inputs[1]), b_id >= 0 ? L.data(b_id) : Tensor());
    const std::string sfx = L.folded_norm(n) ? "_bn" : "";
    const auto chain = L.affine_input(n);
    const std::string bname = (b_id >= 0 ? L.const_name(b_id) : L.const_name(n.inputs[1])) + sfx;
    if ((chain || L.folded_norm(n)) && L.trains_int(n)) {
      L.fail(n, fmt::format("integer training of a layer with {} folded into its weights is not lowered; "
                            "Numeric::Float32 trains it",
                            chain ? "an affine chain" : "a batch_norm"));
    }
    if (!chain || w.dim() != 2) return lower_linear(L, n, n.inputs[0], w, b_in, bname, L.const_name(n.inputs[1]) + sfx);
    // x = scale * root + shift: W diag(scale) applied to root, bias b + W shift
    const auto in = static_cast<std::int64_t>(chain->scale.size());
    if (w.size(1) != in) L.fail(n, "the weight must be [out, in] for an input of `in` features");
    const Tensor wd = w.to(Dtype::Float64).contiguous();
    Tensor wf = empty(w.shape(), Dtype::Float64), bf = zeros({w.size(0)}, Dtype::Float64);
    const Tensor b = b_in.defined() ? b_in.to(Dtype::Float64).contiguous() : Tensor();
    for (std::int64_t o = 0; o < w.size(0); ++o) {
      double acc = b.defined() ? b.data<double>()[o] : 0.0;
      for (std::int64_t j = 0; j < in; ++j) {
        const double v = wd.data<double>()[o * in + j];
        wf.data<double>()[o * in + j] = v * chain->scale[static_cast<std::size_t>(j)];
        acc += v * chain->shift[static_cast<std::size_t>(j)];
      }
      bf.data<double>()[o] = acc;
    }
    lower_linear(L, n, chain->root, wf, bf, bname + "_folded", L.const_name(n.inputs[1]) + sfx + "_folded");
  };

  linear.lower_f32 = lower_linear_f32;
  linear.backward_f32 = backward_linear_f32;

  OpRule matmul;
  matmul.op = "matmul";
  matmul.summary = "matmul (of activations, batched; or by a constant matrix)";
  matmul.min_inputs = matmul.max_inputs = 2;
  matmul.zero_point_in = matmul.zero_point_out = false;
  matmul.evaluate = [](const Node&, const std::vector<Tensor>& in) { return microtorch::matmul(in[0], in[1]); };
  matmul.lower = lower_matmul;
  matmul.lower_f32 = lower_matmul_f32;
  matmul.backward_f32 = backward_matmul_f32;
  return {linear, matmul};
}

}  // namespace microtorch::lower
