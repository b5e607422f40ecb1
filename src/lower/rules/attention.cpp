// Rules: scaled_dot_product_attention and multi_head_attention (mt_attention_stream_*,
// mt_attention_twopass_*): one kernel call per (batch, head) matrix, q, k and v read in
// place through row strides, the output written over the query rows when it can be.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/mask.hpp"
#include "microtorch/ops.hpp"
#include "../runtime/mt_kernels.h"

namespace microtorch::lower {

namespace {

// A constant additive mask (0 = attend, -inf = blocked) as keep bits: bool [lead.., L, S]
// (undefined without a mask).
Tensor keep_of(Lowering& L, const Node& n, std::int64_t mask, const Shape& lead, std::int64_t Lq, std::int64_t S) {
  if (mask < 0) return Tensor();
  if (!L.is_const(mask)) L.fail(n, "the attention mask depends on the input; only fixed masks are baked in");
  const Tensor m = L.data(mask).to(Dtype::Float64);
  const double* pm = m.data<double>();
  for (std::int64_t i = 0; i < m.numel(); ++i) {
    if (pm[i] != 0.0 && !(std::isinf(pm[i]) && pm[i] < 0)) {
      L.fail(n, fmt::format("the additive mask holds {}; only 0 (attend) and -inf (blocked) can be baked in as keep bits",
                            pm[i]));
    }
  }
  Shape full = lead;
  full.push_back(Lq), full.push_back(S);
  return microtorch::expand(eq(m, zeros_like(m)), full).clone();
}

// Matrix h's keep-bit table (-1: none) and causal flag. A mask that blocks every key after
// its query (j > i) is causal: the kernels then stop each query's key loop at i
// (MT_ATTN_CAUSAL) instead of computing logits that the keep bits discard, and the bits are
// emitted only if they also block a key j <= i (the kernel ANDs the two). The same keys in
// the same order: the same results.
std::pair<std::int64_t, bool> head_keep(Lowering& L, const Node& n, const Tensor& keep, std::int64_t h,
                                        std::int64_t heads, std::int64_t Lq, std::int64_t S, bool causal) {
  if (!keep.defined()) return {-1, causal};
  const Tensor km = keep.reshape({heads, Lq * S});
  const Tensor row = microtorch::slice(km, 0, h, h + 1).reshape({Lq * S});
  const bool* pk = row.data<bool>();
  bool blocks_after = true, blocks_before = false;  // every j > i blocked; some j <= i blocked
  for (std::int64_t i = 0; i < Lq; ++i) {
    for (std::int64_t j = 0; j < S; ++j) {
      if (j > i) blocks_after = blocks_after && !pk[i * S + j];
      else blocks_before = blocks_before || !pk[i * S + j];
    }
  }
  const bool causal_h = causal || blocks_after;
  if (causal_h && !blocks_before) return {-1, causal_h};
  std::vector<std::int64_t> bits(static_cast<std::size_t>((Lq * S + 7) / 8), 0);
  for (std::int64_t i = 0; i < Lq * S; ++i) {
    if (pk[i]) bits[static_cast<std::size_t>(i >> 3)] |= std::int64_t{1} << (i & 7);
  }
  return {L.table(Elem::U8, std::move(bits), TableRole::Mask, fmt::format("keep{}", n.output)), causal_h};
}

// The attention of `n` over q [lead.., L, D], k [lead.., S, D], v [lead.., S, Dv] (strided
// views whose rows are contiguous), written to make_out() [lead.., L, Dv] (a strided view of
// a new buffer, made only when needed), or over q's rows when the streaming kernel may and
// `may_overwrite_q`. `mask` is the additive mask input (-1: none). `head_scale(view, h)` is
// the scale of matrix h of q, k or v (the parts of a projection have their own).
struct HeadsResult {
  bool in_place = false;  ///< the output was written over the rows of `q`
  View q;                 ///< the query rows the kernels read (a copy of q's, if they had to be)
  double out_scale = 1.0;
};

using HeadScale = std::function<double(const View&, char which, std::int64_t h)>;

HeadsResult lower_heads(Lowering& L, const Node& n, View q, View k, View v, const std::function<View()>& make_out,
                        std::int64_t mask, double scale, bool causal, bool may_overwrite_q, const HeadScale& head_scale) {
  // one type for q, k, v and the output: the node's precision (an attention projection
  // with per-head scales was made in it)
  const Elem T = L.out_elem(n);
  q = L.as_elem(n, q, T), k = L.as_elem(n, k, T), v = L.as_elem(n, v, T);
  const std::size_t r = q.shape.size();
  const std::int64_t Lq = q.shape[r - 2], D = q.shape[r - 1], S = k.shape[r - 2], Dv = v.shape[r - 1];
  if (S > 32767 || D > 65535) L.fail(n, "attention is limited to S <= 32767 keys and D <= 65535");
  // Rows are read in place through a row stride when each row is contiguous.
  auto rows_in_place = [&](View& t) {
    if (t.strides[r - 1] != 1 && t.shape[r - 1] != 1) t = L.packed(n, t);
    if (t.shape[r - 2] == 1) t.strides[r - 2] = t.shape[r - 1];
  };
  rows_in_place(q), rows_in_place(k), rows_in_place(v);
  const Shape lead(q.shape.begin(), q.shape.end() - 2);
  const std::int64_t heads = numel_of(lead);

  const Tensor keep = keep_of(L, n, mask, lead, Lq, S);

  const bool stream = L.options().attention == AttentionKernel::Streaming;
  // The streaming kernel may write each output row over its query row (mt_kernels.h): then
  // the output needs no bytes of its own.
  HeadsResult result;
  result.q = q;
  result.in_place = stream && may_overwrite_q && Dv <= D && L.can_overwrite(q, {k, v});
  const Format f = L.out_format(n, T);
  const View out = result.in_place ? View{} : make_out();

  if (!(scale > 0)) L.fail(n, fmt::format("the scale must be positive, got {}", scale));
  const std::string what = fmt::format("%{} = {}", n.output, n.op);
  // The parameters of matrix h: base-2 logits in Q16 = q.k scale_q scale_k * scale * log2(e)
  // * 2^16; out = v * scale_v / scale_out. Matrices with equal parameters share one table.
  auto params_of = [&](std::int64_t h, bool causal_h) {
    const Multiplier logit =
        L.rq(std::ldexp(head_scale(q, 'q', h) * head_scale(k, 'k', h) * scale / std::log(2.0), 16), what);
    const Multiplier out_m = L.rq(head_scale(v, 'v', h) / f.scale, what);
    std::vector<std::int64_t> params(MT_ATTN_PARAMS, 0);
    params[MT_ATTN_L] = Lq, params[MT_ATTN_S] = S, params[MT_ATTN_D] = D, params[MT_ATTN_DV] = Dv;
    params[MT_ATTN_Q_STRIDE] = q.strides[r - 2];
    params[MT_ATTN_K_STRIDE] = k.strides[r - 2];
    params[MT_ATTN_V_STRIDE] = v.strides[r - 2];
    params[MT_ATTN_OUT_STRIDE] = result.in_place ? q.strides[r - 2] : out.strides[r - 2];
    params[MT_ATTN_LOGIT_M] = logit.m, params[MT_ATTN_LOGIT_S] = logit.s;
    params[MT_ATTN_OUT_M] = out_m.m, params[MT_ATTN_OUT_S] = out_m.s;
    params[MT_ATTN_FLAGS] = causal_h ? MT_ATTN_CAUSAL : 0;
    return L.table(Elem::S32, params, TableRole::Parameters, fmt::format("attn{}", n.output),
                   {"MT_ATTN_L", "MT_ATTN_S", "MT_ATTN_D", "MT_ATTN_DV", "MT_ATTN_Q_STRIDE", "MT_ATTN_K_STRIDE",
                    "MT_ATTN_V_STRIDE", "MT_ATTN_OUT_STRIDE", "MT_ATTN_LOGIT_M", "MT_ATTN_LOGIT_S", "MT_ATTN_OUT_M",
                    "MT_ATTN_OUT_S", "MT_ATTN_FLAGS"});
  };
  result.out_scale = f.scale;

  Program& p = L.program();
  if (result.in_place) {
    p.buffer(q.buffer).origin += fmt::format(", then %{} = attention ({}) over its query rows", n.output,
                                             format_name(T, f.scale, 0));
  }
  const Elem acc = stream && T == Elem::S16 ? Elem::S64 : Elem::S32;
  const View scratch = L.new_act({stream ? Dv : Lq * S}, acc, Format{}, -1, false);
  p.buffer(scratch.buffer).origin =
      fmt::format("attention scratch for %{} ({})", n.output, stream ? "streaming" : "two-pass scores");
  p.buffer(scratch.buffer).name = fmt::format("scratch{}", n.output);
  p.buffer(scratch.buffer).kind = BufferKind::Scratch;

  Shape idx(lead.size(), 0);
  for (std::int64_t h = 0; h < heads; ++h) {
    std::int64_t qo = q.offset, ko = k.offset, vo = v.offset, oo = out.offset;
    for (std::size_t d = 0; d < lead.size(); ++d) {
      qo += idx[d] * q.strides[d], ko += idx[d] * k.strides[d], vo += idx[d] * v.strides[d];
      if (!result.in_place) oo += idx[d] * out.strides[d];
    }
    const auto [keep_id, causal_h] = head_keep(L, n, keep, h, heads, Lq, S, causal);
    L.step(Lowering::kernel(stream ? "attention_stream" : "attention_twopass", {T}),
           {Arg::buf(params_of(h, causal_h)), Arg::buf(keep_id), Arg::buf(q.buffer, qo), Arg::buf(k.buffer, ko), Arg::buf(v.buffer, vo),
            result.in_place ? Arg::buf(q.buffer, qo) : Arg::buf(out.buffer, oo), Arg::buf(scratch.buffer)},
           Lq * S * (D + Dv));
    for (std::size_t d = lead.size(); d-- > 0;) {  // next (batch, head) index
      if (++idx[d] < lead[d]) break;
      idx[d] = 0;
    }
  }
  return result;
}

void lower_sdpa(Lowering& L, const Node& n) {
  if (node_attr<double>(n, "dropout_p") != 0.0) L.fail(n, "dropout must be 0 (call model.eval() before tracing)");
  const View &q = L.act(n, n.inputs[0]), &k = L.act(n, n.inputs[1]), &v = L.act(n, n.inputs[2]);
  const std::size_t r = q.shape.size();
  if (r < 2 || k.shape.size() != r || v.shape.size() != r || !std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin())) {
    L.fail(n, "q, k and v must share their leading (batch, head) dims; broadcasting them is not supported");
  }
  View out;
  auto make_out = [&] { return out = L.out_act(n, L.out_elem(n), L.out_format(n, L.out_elem(n))); };
  const HeadsResult h = lower_heads(L, n, q, k, v, make_out, n.inputs.size() > 3 ? n.inputs[3] : -1,
                                    node_attr<double>(n, "scale"), node_attr<bool>(n, "is_causal"), true,
                                    [](const View& t, char, std::int64_t) { return t.scale; });
  if (h.in_place) {  // the output rows are the query rows: same offsets and row strides
    out = h.q;
    out.shape = L.out_shape(n);
    out.scale = h.out_scale, out.zero = 0, out.segments.clear();
  }
  L.set(n, out);
}

// The heads of [N, len, row] projections: head h of a [N, len, H * width] block that starts
// at column col is [N, H, len, width] with strides (len * row, width, row, 1).
View heads_view(const View& t, std::int64_t H, std::int64_t col, std::int64_t width) {
  const std::int64_t N = t.shape[0], len = t.shape[1];
  View h = t;
  h.offset = t.offset + col * t.strides[2];
  h.shape = {N, H, len, width};
  h.strides = {t.strides[0], width * t.strides[2], t.strides[1], t.strides[2]};
  return h;
}

// multi_head_attention(q [N, L, H D], k [N, S, H D], v [N, S, H Dv] [, mask]) or, packed,
// (qkv [N, L, 3 H D] [, mask]): the heads are read where the projections wrote them, and the
// output [N, L, H Dv] is written head by head (or over the query columns).
void lower_mha(Lowering& L, const Node& n) {
  if (node_attr<double>(n, "dropout_p") != 0.0) L.fail(n, "dropout must be 0 (call model.eval() before tracing)");
  const bool packed = n.inputs.size() <= 2;
  const std::size_t count = packed ? 1 : 3;
  const std::int64_t mask = n.inputs.size() > count ? n.inputs[count] : -1;
  const std::int64_t H = node_attr<std::int64_t>(n, "num_heads");
  const Shape& out_shape = L.out_shape(n);
  const std::int64_t Ev = out_shape[2];
  auto rows = [&](std::int64_t id) {  // a [N, len, width] view with contiguous rows
    View t = L.act(n, id);
    if (t.shape.size() != 3 || (t.strides[2] != 1 && t.shape[2] != 1)) t = L.packed(n, t);
    return t;
  };
  View q, k, v;
  std::int64_t E = 0;
  if (packed) {
    const View t = rows(n.inputs[0]);
    E = t.shape[2] / 3;
    q = heads_view(t, H, 0, E / H), k = heads_view(t, H, E, E / H), v = heads_view(t, H, 2 * E, E / H);
  } else {
    const View tq = rows(n.inputs[0]), tk = rows(n.inputs[1]), tv = rows(n.inputs[2]);
    E = tq.shape[2];
    q = heads_view(tq, H, 0, E / H), k = heads_view(tk, H, 0, E / H), v = heads_view(tv, H, 0, Ev / H);
  }
  View y;  // [N, L, Ev]
  auto make_out = [&] {
    y = L.out_act(n, L.out_elem(n), L.out_format(n, L.out_elem(n)));
    return heads_view(y, H, 0, Ev / H);
  };
  // Over q only when the heads stay side by side (Dv = D): the output is then q's columns
  // of the projection, [N, L, E] with q's row stride.
  // a projection made for these heads has a scale per head (View::segments): head h of q, k
  // and v starts at column col + h * width of the [N, len, row] tensor
  const std::int64_t qcol = 0, kcol = packed ? E : 0, vcol = packed ? 2 * E : 0;
  auto head_scale = [&](const View& t, char which, std::int64_t h) {
    if (t.segments.empty()) return t.scale;
    const std::int64_t width = which == 'v' ? Ev / H : E / H;  // the columns of one head
    const std::int64_t col = (which == 'q' ? qcol : which == 'k' ? kcol : vcol) + (h % H) * width;
    const std::int64_t row = packed ? 3 * E : which == 'v' ? Ev : E;  // the projection's width
    return t.segments[static_cast<std::size_t>(col / (row / static_cast<std::int64_t>(t.segments.size())))];
  };
  const HeadsResult h = lower_heads(L, n, q, k, v, make_out, mask, node_attr<double>(n, "scale"), false, Ev == E,
                                    head_scale);
  if (h.in_place) {
    y = h.q;
    y.shape = out_shape, y.strides = {h.q.strides[0], h.q.strides[2], 1};
    y.scale = h.out_scale, y.zero = 0, y.segments.clear();
  }
  L.set(n, y);
}

// ---- float32 ----

// The element offset of matrix idx (the lead indices) of a [lead.., rows, cols] view.
std::int64_t matrix_offset(const View& t, const Shape& idx) {
  std::int64_t o = t.offset;
  for (std::size_t d = 0; d < idx.size(); ++d) o += idx[d] * t.strides[d];
  return o;
}

// Steps the lead indices to the next matrix; false after the last.
bool next_matrix(Shape& idx, const Shape& lead) {
  for (std::size_t d = lead.size(); d-- > 0;) {
    if (++idx[d] < lead[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// One float attention per (batch, head) matrix (mt_attention_f32), over q [lead.., L, D],
// k [lead.., S, D], v [lead.., S, Dv] and out [lead.., L, Dv] views whose rows are
// contiguous. A training step keeps each query's log-sum-exp for the backward, and what it
// read: views {q, k, v, out, lse}, then per matrix its parameter and keep-bit tables.
void attention_f32(Lowering& L, const Node& n, const View& q, const View& k, const View& v, const View& out,
                   std::int64_t mask, double scale, bool causal) {
  const std::size_t r = q.shape.size();
  const std::int64_t Lq = q.shape[r - 2], D = q.shape[r - 1], S = k.shape[r - 2], Dv = v.shape[r - 1];
  if (!(scale > 0)) L.fail(n, fmt::format("the scale must be positive, got {}", scale));
  const Shape lead(q.shape.begin(), q.shape.end() - 2);
  const std::int64_t heads = numel_of(lead);
  const Tensor keep = keep_of(L, n, mask, lead, Lq, S);
  View lse;
  if (L.keeps(n)) {
    lse = L.new_act({heads * Lq}, Elem::F32, Format{}, -1, false);
    L.program().buffer(lse.buffer).origin = fmt::format("the log-sum-exp of each query of %{}", n.output);
  }
  std::vector<std::int64_t> tables;
  Shape idx = lead;  // the lead indices, from 0 (GCC 12 warns of a bad free for Shape(n, 0) here)
  std::fill(idx.begin(), idx.end(), 0);
  for (std::int64_t h = 0; h < heads; ++h, next_matrix(idx, lead)) {
    const auto [keep_id, causal_h] = head_keep(L, n, keep, h, heads, Lq, S, causal);
    std::vector<std::int64_t> params(MT_ATTN_PARAMS, 0);
    params[MT_ATTN_L] = Lq, params[MT_ATTN_S] = S, params[MT_ATTN_D] = D, params[MT_ATTN_DV] = Dv;
    params[MT_ATTN_Q_STRIDE] = q.strides[r - 2], params[MT_ATTN_K_STRIDE] = k.strides[r - 2];
    params[MT_ATTN_V_STRIDE] = v.strides[r - 2], params[MT_ATTN_OUT_STRIDE] = out.strides[r - 2];
    params[MT_ATTN_FLAGS] = causal_h ? MT_ATTN_CAUSAL : 0;
    const std::int64_t pt = L.table(Elem::S32, params, TableRole::Parameters, fmt::format("attn{}", n.output),
                                    {"MT_ATTN_L", "MT_ATTN_S", "MT_ATTN_D", "MT_ATTN_DV", "MT_ATTN_Q_STRIDE",
                                     "MT_ATTN_K_STRIDE", "MT_ATTN_V_STRIDE", "MT_ATTN_OUT_STRIDE", "MT_ATTN_LOGIT_M",
                                     "MT_ATTN_LOGIT_S", "MT_ATTN_OUT_M", "MT_ATTN_OUT_S", "MT_ATTN_FLAGS"});
    tables.push_back(pt), tables.push_back(keep_id);
    L.step("mt_attention_f32",
           {Arg::buf(pt), Arg::buf(keep_id), Arg::buf(q.buffer, matrix_offset(q, idx)),
            Arg::buf(k.buffer, matrix_offset(k, idx)), Arg::buf(v.buffer, matrix_offset(v, idx)),
            Arg::buf(out.buffer, matrix_offset(out, idx)), Arg::buf(lse.buffer, lse.buffer >= 0 ? h * Lq : 0),
            Arg::real(scale)},
           Lq * S * (D + Dv));
  }
  if (L.keeps(n)) L.save(n, {q, k, v, out, lse}, tables);
}

// The backward of attention_f32 into the gradients dq, dk, dv (views laid out as q, k, v:
// the same matrix offsets from their starts and the same row strides), each matrix by
// mt_attention_backward_f32 (the scores recomputed, no L x S buffer). `acc`: add to them.
void attention_backward_f32(Lowering& L, const Node& n, const View& dq, const View& dk, const View& dv, int acc,
                            double scale) {
  const Lowering::Saved& s = L.saved(n);
  const View &q = s.views[0], &k = s.views[1], &v = s.views[2], &out = s.views[3], &lse = s.views[4];
  const std::size_t r = q.shape.size();
  const std::int64_t Lq = q.shape[r - 2], D = q.shape[r - 1], S = k.shape[r - 2], Dv = v.shape[r - 1];
  const Shape lead(q.shape.begin(), q.shape.end() - 2);
  // the output's gradient is packed like the output the forward wrote (a new packed buffer),
  // so its matrices sit where the output's do
  const View& dout = L.grad(n.output);
  Shape idx(lead.size(), 0);
  for (std::int64_t h = 0; h < numel_of(lead); ++h, next_matrix(idx, lead)) {
    auto at = [&](const View& g, const View& f) {
      return Arg::buf(g.buffer, g.buffer >= 0 ? g.offset + matrix_offset(f, idx) - f.offset : 0);
    };
    L.step("mt_attention_backward_f32",
           {Arg::buf(s.ints[static_cast<std::size_t>(2 * h)]), Arg::buf(s.ints[static_cast<std::size_t>(2 * h + 1)]),
            Arg::buf(q.buffer, matrix_offset(q, idx)), Arg::buf(k.buffer, matrix_offset(k, idx)),
            Arg::buf(v.buffer, matrix_offset(v, idx)), Arg::buf(out.buffer, matrix_offset(out, idx)),
            at(dout, out), Arg::buf(lse.buffer, h * Lq), at(dq, q), at(dk, k), at(dv, v),
            Arg::real(scale), Arg::num(acc)},
           2 * Lq * S * (D + Dv));
  }
}

// sdpa in float: q, k, v packed (their gradients' layout), a new output.
void lower_sdpa_f32(Lowering& L, const Node& n) {
  if (node_attr<double>(n, "dropout_p") != 0.0) L.fail(n, "dropout must be 0 (call model.eval() before tracing)");
  const View q = L.packed(n, L.act(n, n.inputs[0])), k = L.packed(n, L.act(n, n.inputs[1])),
             v = L.packed(n, L.act(n, n.inputs[2]));
  const std::size_t r = q.shape.size();
  if (r < 2 || k.shape.size() != r || v.shape.size() != r || !std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin())) {
    L.fail(n, "q, k and v must share their leading (batch, head) dims; broadcasting them is not supported");
  }
  const View out = L.out_act(n, Elem::F32, Format{});
  attention_f32(L, n, q, k, v, out, n.inputs.size() > 3 ? n.inputs[3] : -1, node_attr<double>(n, "scale"),
                node_attr<bool>(n, "is_causal"));
  L.set(n, out);
}

// The gradients of attention's inputs: one target per distinct input value; when two of q,
// k, v are one value, or a target already holds a gradient, every target is added to
// (zeroed first where it would have been stored).
struct AttentionGrads {
  std::vector<std::optional<Lowering::GradTarget>> targets;  // per input value of q, k, v
  int acc = 0;
};
AttentionGrads attention_grads(Lowering& L, const std::vector<std::int64_t>& ids) {
  AttentionGrads g;
  std::vector<std::int64_t> seen;
  bool repeated = false;
  for (const auto id : ids) {
    repeated = repeated || std::find(seen.begin(), seen.end(), id) != seen.end();
    seen.push_back(id);
  }
  std::vector<std::int64_t> distinct;
  for (const auto id : ids) {
    if (std::find(distinct.begin(), distinct.end(), id) == distinct.end()) {
      distinct.push_back(id);
      g.targets.push_back(L.grad_out(id));
    }
  }
  std::vector<std::optional<Lowering::GradTarget>*> ptrs;
  for (auto& t : g.targets) ptrs.push_back(&t);
  g.acc = L.acc_flags(ptrs);
  if (repeated && g.acc == 0) {
    for (auto& t : g.targets) {
      if (t) L.zero(t->view), t->add = true;
    }
    g.acc = 1;
  }
  // targets back in the order of ids
  std::vector<std::optional<Lowering::GradTarget>> ordered;
  for (const auto id : ids) {
    ordered.push_back(g.targets[static_cast<std::size_t>(std::find(distinct.begin(), distinct.end(), id) - distinct.begin())]);
  }
  g.targets = ordered;
  return g;
}

void backward_sdpa_f32(Lowering& L, const Node& n) {
  AttentionGrads g = attention_grads(L, {n.inputs[0], n.inputs[1], n.inputs[2]});
  auto view = [](const std::optional<Lowering::GradTarget>& t) { return t ? t->view : View{}; };
  attention_backward_f32(L, n, view(g.targets[0]), view(g.targets[1]), view(g.targets[2]), g.acc,
                         node_attr<double>(n, "scale"));
}

// multi_head_attention in float: the heads of the packed projection (or of q, k, v), each
// input packed (its gradient's layout), the output [N, L, Ev] head by head.
void lower_mha_f32(Lowering& L, const Node& n) {
  if (node_attr<double>(n, "dropout_p") != 0.0) L.fail(n, "dropout must be 0 (call model.eval() before tracing)");
  const bool packed = n.inputs.size() <= 2;
  const std::size_t count = packed ? 1 : 3;
  const std::int64_t mask = n.inputs.size() > count ? n.inputs[count] : -1;
  const std::int64_t H = node_attr<std::int64_t>(n, "num_heads");
  const std::int64_t Ev = L.out_shape(n)[2];
  View q, k, v;
  if (packed) {
    const View t = L.packed(n, L.act(n, n.inputs[0]));
    const std::int64_t E = t.shape[2] / 3;
    q = heads_view(t, H, 0, E / H), k = heads_view(t, H, E, E / H), v = heads_view(t, H, 2 * E, E / H);
  } else {
    const View tq = L.packed(n, L.act(n, n.inputs[0])), tk = L.packed(n, L.act(n, n.inputs[1])),
               tv = L.packed(n, L.act(n, n.inputs[2]));
    q = heads_view(tq, H, 0, tq.shape[2] / H), k = heads_view(tk, H, 0, tk.shape[2] / H), v = heads_view(tv, H, 0, Ev / H);
  }
  const View y = L.out_act(n, Elem::F32, Format{});
  attention_f32(L, n, q, k, v, heads_view(y, H, 0, Ev / H), mask, node_attr<double>(n, "scale"), false);
  L.set(n, y);
}

void backward_mha_f32(Lowering& L, const Node& n) {
  const bool packed = n.inputs.size() <= 2;
  const std::int64_t H = node_attr<std::int64_t>(n, "num_heads");
  const std::int64_t Ev = L.out_shape(n)[2];
  // the heads of each gradient as the forward took them from its input
  auto heads_of = [&](const std::optional<Lowering::GradTarget>& t, std::int64_t col, std::int64_t width) {
    return t ? heads_view(t->view, H, col, width) : View{};
  };
  if (packed) {
    AttentionGrads g = attention_grads(L, {n.inputs[0]});
    const std::int64_t E = L.graph().value(n.inputs[0]).shape[2] / 3;
    const auto& t = g.targets[0];
    return attention_backward_f32(L, n, heads_of(t, 0, E / H), heads_of(t, E, E / H), heads_of(t, 2 * E, E / H), g.acc,
                                  node_attr<double>(n, "scale"));
  }
  AttentionGrads g = attention_grads(L, {n.inputs[0], n.inputs[1], n.inputs[2]});
  const std::int64_t E = L.graph().value(n.inputs[0]).shape[2];
  attention_backward_f32(L, n, heads_of(g.targets[0], 0, E / H), heads_of(g.targets[1], 0, E / H),
                         heads_of(g.targets[2], 0, Ev / H), g.acc, node_attr<double>(n, "scale"));
}

}  // namespace

std::vector<OpRule> attention_rules() {
  OpRule mha;
  mha.op = "multi_head_attention";
  mha.summary = "multi_head_attention (MultiheadAttention's heads, fixed masks)";
  mha.min_inputs = 1, mha.max_inputs = 4;  // qkv [, mask] (packed) or q, k, v [, mask]
  mha.attrs = {{"num_heads", AttrSpec::Type::Int}, {"scale", AttrSpec::Type::Float}, {"dropout_p", AttrSpec::Type::Float}};
  mha.reads_parts = true;
  mha.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    const bool packed = in.size() <= 2;
    const std::size_t count = packed ? 1 : 3;
    AttentionHeadsOptions o;
    if (in.size() > count && in[count].defined()) o.mask = Mask::additive(in[count]);
    o.scale = node_attr<double>(n, "scale");
    o.need_weights = false;
    const std::int64_t H = node_attr<std::int64_t>(n, "num_heads");
    return std::get<0>(packed ? multi_head_attention_packed(in[0], H, o) : multi_head_attention(in[0], in[1], in[2], H, o));
  };
  mha.lower = lower_mha;
  mha.lower_f32 = lower_mha_f32;
  mha.backward_f32 = backward_mha_f32;
  mha.zero_point_in = mha.zero_point_out = false;  // q, k, v and the output are symmetric
  mha.sensitive_output = true;
  // each head's q, k and v with a scale of its own: 3 H parts of the packed input, H of each
  // of q, k, v (not of the mask)
  mha.input_parts = [](const Node& n, std::int64_t value) -> std::int64_t {
    const std::int64_t H = node_attr<std::int64_t>(n, "num_heads");
    const bool packed = n.inputs.size() <= 2;
    if (packed) return n.inputs[0] == value ? 3 * H : 0;
    return std::find(n.inputs.begin(), n.inputs.begin() + 3, value) != n.inputs.begin() + 3 ? H : 0;
  };

  OpRule sdpa;
  sdpa.op = "scaled_dot_product_attention";
  sdpa.summary = "scaled_dot_product_attention (fixed masks)";
  sdpa.min_inputs = 3, sdpa.max_inputs = 4;
  sdpa.attrs = {{"scale", AttrSpec::Type::Float}, {"dropout_p", AttrSpec::Type::Float}, {"is_causal", AttrSpec::Type::Bool}};
  sdpa.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    const Mask mask = in.size() > 3 && in[3].defined() ? Mask::additive(in[3]) : Mask();
    return std::get<0>(scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0, node_attr<bool>(n, "is_causal"),
                                                    node_attr<double>(n, "scale")));
  };
  sdpa.lower = lower_sdpa;
  sdpa.lower_f32 = lower_sdpa_f32;
  sdpa.backward_f32 = backward_sdpa_f32;
  sdpa.zero_point_in = sdpa.zero_point_out = false;
  return {sdpa, mha};
}

}  // namespace microtorch::lower
