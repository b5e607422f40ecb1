// Rules: linear and matmul (mt_linear_*, mt_matmul_*).
#include <algorithm>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

// y = x W^T + b: mt_linear_*; W [out, in] is a constant.
void lower_linear(Lowering& L, const Node& n, std::int64_t x_id, const Tensor& w, std::int64_t b_id,
                  const std::string& wname) {
  if (w.dim() != 2) L.fail(n, "the weight must be 2-D [out, in]");
  const auto [x, x_stride] = L.strided_rows(n, L.act(n, x_id));
  const std::int64_t in = w.size(1), out = w.size(0), rows = numel_of(x.shape) / in;
  const int fx = x.frac;
  int fw = L.format(Lowering::absmax(w), L.weight_bits(), wname);
  // The bias is an int32 in the accumulator's format Q(fx + fw): when x is very finely
  // scaled (tiny activations) that format may not hold the bias; then the weights give up
  // fraction bits until it does, instead of the bias saturating.
  if (b_id >= 0 && L.is_const(b_id)) fw = std::min(fw, choose_frac(Lowering::absmax(L.data(b_id)), 32) - fx);
  const auto wb = L.weight(w, L.weight_bits() == 16 ? Elem::S16 : Elem::S8, fw, wname, wname);
  std::int64_t bb = -1;
  if (b_id >= 0) {
    if (!L.is_const(b_id)) L.fail(n, "the bias must be a parameter or constant");
    bb = L.weight(L.data(b_id), Elem::S32, fx + fw, L.const_name(b_id), L.const_name(b_id));
  }
  const int fy = L.frac_of(n.output);
  const View y = L.out_act(n, fy);
  const std::string kernel =
      L.bits() == 8 ? "mt_linear_s8_w8" : L.weight_bits() == 16 ? "mt_linear_s16_w16" : "mt_linear_s16_w8";
  L.step(kernel, {Arg::buf(x.buffer, x.offset), Arg::buf(wb), Arg::buf(bb), Arg::buf(y.buffer), Arg::num(rows),
                  Arg::num(in), Arg::num(out), Arg::num(fx + fw - fy), Arg::num(x_stride)},
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
  const View& a = L.act(n, a_id);
  const View& b = L.act(n, b_id);
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
  const int fy = L.frac_of(n.output);
  const View y = L.out_act(n, fy);
  L.step("mt_matmul_" + L.sfx(),
         {Arg::buf(pa.buffer, pa.offset), Arg::buf(pb.buffer, pb.offset), Arg::buf(y.buffer), Arg::num(batch),
          Arg::num(M), Arg::num(K), Arg::num(N), Arg::num(transposed ? 1 : 0), Arg::num(pa.frac + pb.frac - fy)},
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
  matmul.evaluate = [](const Node&, const std::vector<Tensor>& in) { return microtorch::matmul(in[0], in[1]); };
  matmul.lower = lower_matmul;
  return {linear, matmul};
}

}  // namespace microtorch::lower
