// Rules: linear and matmul (mt_linear_<x>_<w>_<y>, mt_matmul_*).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

// y = x W^T + b: mt_linear_*; W [out, in] and b constant. Weights symmetric, one scale per
// output channel; the bias in the accumulator's scale scale_x * scale_w[c], with x's zero
// point folded in: b_q[c] - z_x sum_j W_q[c, j]; per-channel multipliers scale_x scale_w[c] /
// scale_y.
void lower_linear(Lowering& L, const Node& n, std::int64_t x_id, const Tensor& w, std::int64_t b_id,
                  const std::string& wname) {
  if (w.dim() != 2) L.fail(n, "the weight must be 2-D [out, in]");
  const auto [x, x_stride] = L.strided_rows(n, L.act(n, x_id));
  const std::int64_t in = w.size(1), out = w.size(0), rows = numel_of(x.shape) / in;
  const Elem we = L.weight_elem(n), ye = L.out_elem(n);
  const Elem be = x.elem == Elem::S8 ? Elem::S32 : Elem::S64;
  Tensor bias;
  if (b_id >= 0) {
    if (!L.is_const(b_id)) L.fail(n, "the bias must be a parameter or constant");
    bias = L.data(b_id).to(Dtype::Float64).contiguous();
  }
  // An int32 bias must hold b / (scale_x scale_w) and the zero-point term: a tiny scale_x
  // (very small activations) then costs the weights resolution rather than the bias saturating.
  std::vector<double> min_scale;
  if (be == Elem::S32 && bias.defined()) {
    const double room = 2147483647.0 - std::abs(static_cast<double>(x.zero)) * static_cast<double>(in * qmax(we)) - 1.0;
    if (room < 1.0) L.fail(n, fmt::format("{} inputs are too many for an int32 accumulator with a zero point", in));
    for (std::int64_t c = 0; c < out; ++c) min_scale.push_back(std::abs(bias.data<double>()[c]) / (x.scale * room));
  }
  const auto wb = L.weight_rows(w, we, wname, min_scale);
  const Buffer wbuf = L.program().buffer(wb);
  std::vector<std::int64_t> b_q(static_cast<std::size_t>(out), 0);
  for (std::int64_t c = 0; c < out; ++c) {
    const double acc_scale = x.scale * row_scale(wbuf, c);
    std::int64_t wsum = 0;
    for (std::int64_t j = 0; j < in; ++j) wsum += wbuf.data[static_cast<std::size_t>(c * in + j)];
    const double b = bias.defined() ? bias.data<double>()[c] / acc_scale : 0.0;
    b_q[static_cast<std::size_t>(c)] = static_cast<std::int64_t>(std::llround(b)) - x.zero * wsum;
  }
  const bool need_bias = bias.defined() || x.zero != 0;
  const std::int64_t bb =
      need_bias ? L.table(be, b_q, "b_" + c_name(b_id >= 0 ? L.const_name(b_id) : wname + "_zero")) : -1;
  const Format f = L.out_format(n, ye);
  const View y = L.out_act(n, ye, f);
  const bool per_channel = !wbuf.channel_scales.empty();
  std::vector<std::int64_t> rq;
  for (std::int64_t c = 0; c < (per_channel ? out : 1); ++c) {
    const Multiplier m = L.rq(x.scale * row_scale(wbuf, c) / f.scale, fmt::format("%{} = linear", n.output));
    rq.push_back(m.m), rq.push_back(m.s);
  }
  const std::int64_t rqb = L.table(Elem::S32, std::move(rq), "rq_" + c_name(wname));
  L.step(Lowering::kernel("linear", {x.elem, we, ye}),
         {Arg::buf(x.buffer, x.offset), Arg::buf(wb), Arg::buf(bb), Arg::buf(y.buffer), Arg::num(rows), Arg::num(in),
          Arg::num(out), Arg::num(x_stride), Arg::buf(rqb), Arg::num(per_channel ? 1 : 0), Arg::num(f.zero),
          Arg::num(qmin(ye))},
         rows * in * out);
  L.set(n, y);
}

void lower_matmul(Lowering& L, const Node& n) {
  const std::int64_t a_id = n.inputs[0], b_id = n.inputs[1];
  if (L.is_const(b_id)) {  // x @ W is linear with the weight W^T
    const Tensor& w = L.data(b_id);
    if (w.dim() != 2) L.fail(n, "a constant right operand must be 2-D");
    return lower_linear(L, n, a_id, transpose(w, 0, 1).contiguous(), -1, L.const_name(b_id));
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

}  // namespace

std::vector<OpRule> linear_rules() {
  OpRule linear;
  linear.op = "linear";
  linear.summary = "linear (constant weight and bias)";
  linear.min_inputs = 2, linear.max_inputs = 3;
  linear.kernels = {"mt_linear"};
  linear.evaluate = [](const Node&, const std::vector<Tensor>& in) {
    return microtorch::linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor());
  };
  linear.lower = [](Lowering& L, const Node& n) {
    if (!L.is_const(n.inputs[1])) L.fail(n, "the weight must be a parameter or constant");
    lower_linear(L, n, n.inputs[0], L.data(n.inputs[1]), n.inputs.size() > 2 ? n.inputs[2] : -1,
                 L.const_name(n.inputs[1]));
  };

  OpRule matmul;
  matmul.op = "matmul";
  matmul.summary = "matmul (of activations, batched; or by a constant matrix)";
  matmul.min_inputs = matmul.max_inputs = 2;
  matmul.kernels = {"mt_matmul", "mt_linear"};
  matmul.zero_point_in = matmul.zero_point_out = false;
  matmul.evaluate = [](const Node&, const std::vector<Tensor>& in) { return microtorch::matmul(in[0], in[1]); };
  matmul.lower = lower_matmul;
  return {linear, matmul};
}

}  // namespace microtorch::lower
