// Rule: scaled_dot_product_attention (mt_attention_stream_*, mt_attention_twopass_*), one
// kernel call per (batch, head) matrix, q, k and v read in place through row strides.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/mask.hpp"
#include "microtorch/ops.hpp"
#include "../runtime/mt_kernels.h"

namespace microtorch::lower {

namespace {

void lower_attention(Lowering& L, const Node& n) {
  if (node_attr<double>(n, "dropout_p") != 0.0) L.fail(n, "dropout must be 0 (call model.eval() before tracing)");
  View q = L.act(n, n.inputs[0]), k = L.act(n, n.inputs[1]), v = L.act(n, n.inputs[2]);
  const std::size_t r = q.shape.size();
  if (r < 2 || k.shape.size() != r || v.shape.size() != r || !std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin())) {
    L.fail(n, "q, k and v must share their leading (batch, head) dims; broadcasting them is not supported");
  }
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

  // A constant additive mask (0 = attend, -inf = blocked) becomes keep bits per head.
  Tensor keep;  // bool [lead.., L, S]
  if (n.inputs.size() > 3 && n.inputs[3] >= 0) {
    if (!L.is_const(n.inputs[3])) L.fail(n, "the attention mask depends on the input; only fixed masks are baked in");
    const Tensor m = L.data(n.inputs[3]).to(Dtype::Float64);
    const double* pm = m.data<double>();
    for (std::int64_t i = 0; i < m.numel(); ++i) {
      if (pm[i] != 0.0 && !(std::isinf(pm[i]) && pm[i] < 0)) {
        L.fail(n, fmt::format("the additive mask holds {}; only 0 (attend) and -inf (blocked) can be baked in as keep bits",
                              pm[i]));
      }
    }
    Shape full = lead;
    full.push_back(Lq), full.push_back(S);
    keep = microtorch::expand(eq(m, zeros_like(m)), full).clone();
  }

  AttentionParams base;
  base.L = static_cast<int>(Lq), base.S = static_cast<int>(S), base.D = static_cast<int>(D), base.Dv = static_cast<int>(Dv);
  base.q_stride = static_cast<int>(q.strides[r - 2]);
  base.k_stride = static_cast<int>(k.strides[r - 2]);
  base.v_stride = static_cast<int>(v.strides[r - 2]);
  base.out_stride = static_cast<int>(Dv);
  base.q_frac = q.frac, base.k_frac = k.frac, base.v_frac = v.frac;
  base.out_frac = L.frac_of(n.output);
  const double scale = node_attr<double>(n, "scale");
  if (!(scale > 0)) L.fail(n, fmt::format("the scale must be positive, got {}", scale));
  base.scale_frac = std::clamp(static_cast<int>(std::floor(std::log2(65535.0 / scale))), 0, 62);
  base.scale_q = static_cast<std::uint32_t>(std::min<std::int64_t>(quantize_value(scale, base.scale_frac, 32), 65535));
  base.flags = node_attr<bool>(n, "is_causal") ? MT_ATTN_CAUSAL : 0u;

  const bool stream = L.options().attention == AttentionKernel::Streaming;
  // The streaming kernel may write each output row over its query row (mt_kernels.h): then
  // the output needs no bytes of its own.
  const bool in_place = stream && Dv <= D && L.can_overwrite(q, {k, v});
  const View y = in_place ? View{q.buffer, q.offset, L.out_shape(n), q.strides, base.out_frac} : L.out_act(n, base.out_frac);
  Program& p = L.program();
  if (in_place) {
    base.out_stride = base.q_stride;
    p.buffer(q.buffer).origin += fmt::format(", then %{} = attention (Q{}.{}) over its query rows", n.output,
                                             L.bits() - 1 - base.out_frac, base.out_frac);
  }
  const Elem acc = stream && L.bits() == 16 ? Elem::S64 : Elem::S32;
  const View scratch = L.new_act({stream ? Dv : Lq * S}, 0, -1, acc, false);
  p.buffer(scratch.buffer).origin =
      fmt::format("attention scratch for %{} ({})", n.output, stream ? "streaming" : "two-pass scores");
  p.buffer(scratch.buffer).name = fmt::format("scratch{}", n.output);
  p.buffer(scratch.buffer).kind = BufferKind::Scratch;

  std::map<std::int64_t, std::int64_t> params_for_keep;  // keep table -> params index
  Shape idx(lead.size(), 0);
  for (std::int64_t h = 0; h < heads; ++h) {
    std::int64_t qo = q.offset, ko = k.offset, vo = v.offset;
    for (std::size_t d = 0; d < lead.size(); ++d) {
      qo += idx[d] * q.strides[d], ko += idx[d] * k.strides[d], vo += idx[d] * v.strides[d];
    }
    std::int64_t keep_id = -1;
    if (keep.defined()) {
      const Tensor km = keep.reshape({heads, Lq * S});
      const Tensor row = microtorch::slice(km, 0, h, h + 1).reshape({Lq * S});
      std::vector<std::int64_t> bits(static_cast<std::size_t>((Lq * S + 7) / 8), 0);
      const bool* pk = row.data<bool>();
      for (std::int64_t i = 0; i < Lq * S; ++i) {
        if (pk[i]) bits[static_cast<std::size_t>(i >> 3)] |= std::int64_t{1} << (i & 7);
      }
      keep_id = L.table(Elem::U8, std::move(bits), fmt::format("keep{}", n.output));
    }
    auto it = params_for_keep.find(keep_id);
    if (it == params_for_keep.end()) {
      AttentionParams ap = base;
      ap.keep = keep_id;
      p.attention.push_back(ap);
      it = params_for_keep.emplace(keep_id, static_cast<std::int64_t>(p.attention.size()) - 1).first;
    }
    L.step(fmt::format("mt_attention_{}_{}", stream ? "stream" : "twopass", L.sfx()),
           {Arg::attn(it->second), Arg::buf(q.buffer, qo), Arg::buf(k.buffer, ko), Arg::buf(v.buffer, vo),
            Arg::buf(y.buffer, in_place ? qo : h * Lq * Dv), Arg::buf(scratch.buffer)},
           Lq * S * (D + Dv));
    for (std::size_t d = lead.size(); d-- > 0;) {  // next (batch, head) index
      if (++idx[d] < lead[d]) break;
      idx[d] = 0;
    }
  }
  L.set(n, y);
}

}  // namespace

std::vector<OpRule> attention_rules() {
  OpRule sdpa;
  sdpa.op = "scaled_dot_product_attention";
  sdpa.summary = "scaled_dot_product_attention (fixed masks)";
  sdpa.min_inputs = 3, sdpa.max_inputs = 4;
  sdpa.attrs = {{"scale", AttrSpec::Type::Float}, {"dropout_p", AttrSpec::Type::Float}, {"is_causal", AttrSpec::Type::Bool}};
  sdpa.kernels = {"mt_attention_stream", "mt_attention_twopass"};
  sdpa.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    const Mask mask = in.size() > 3 && in[3].defined() ? Mask::additive(in[3]) : Mask();
    return std::get<0>(scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0, node_attr<bool>(n, "is_causal"),
                                                    node_attr<double>(n, "scale")));
  };
  sdpa.lower = lower_attention;
  return {sdpa};
}

}  // namespace microtorch::lower
