#include "microtorch/nn/attention.hpp"

#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/random.hpp"

namespace microtorch::nn {

std::tuple<Tensor, Tensor> ScaledDotProductAttention::forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                              const Mask& mask, bool is_causal, bool enable_gqa) {
  return scaled_dot_product_attention(q, k, v, mask, is_training() ? dropout : 0.0, is_causal, scale, enable_gqa);
}

std::string ScaledDotProductAttention::extra_repr() const {
  return fmt::format("dropout={}, scale={}", dropout, scale == 0.0 ? std::string("1/sqrt(D)") : fmt::format("{}", scale));
}

MultiheadAttention::MultiheadAttention(std::int64_t e, std::int64_t h, MultiheadAttentionOptions opts)
    : embed_dim(e), num_heads(h), num_kv_heads(opts.num_kv_heads ? opts.num_kv_heads : h), head_dim(0),
      kdim(opts.kdim ? opts.kdim : e), vdim(opts.vdim ? opts.vdim : e), options(opts) {
  if (e <= 0 || h <= 0) {
    throw ValueError(fmt::format("MultiheadAttention: embed_dim and num_heads must be positive, got {} and {}", e, h));
  }
  if (e % h != 0) {
    throw ValueError(fmt::format("MultiheadAttention: embed_dim {} must be divisible by num_heads {} (each head gets "
                                 "embed_dim / num_heads features); try num_heads = {}",
                                 e, h, std::gcd(e, h)));
  }
  if (!(opts.dropout >= 0.0 && opts.dropout < 1.0)) {
    throw ValueError(fmt::format("MultiheadAttention: dropout must be in [0, 1), got {}", opts.dropout));
  }
  if (num_kv_heads <= 0 || h % num_kv_heads != 0) {
    throw ValueError(fmt::format("MultiheadAttention: num_kv_heads = {} must divide num_heads = {} (each key/value head "
                                 "serves an equal group of query heads)",
                                 opts.num_kv_heads, h));
  }
  head_dim = e / h;
  const std::int64_t kv = num_kv_heads * head_dim;  // the width of k and v
  if (kdim == e && vdim == e && kv == e) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}, opts.dtype));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({e, e}, opts.dtype));
    k_proj_weight = register_parameter("k_proj_weight", empty({kv, kdim}, opts.dtype));
    v_proj_weight = register_parameter("v_proj_weight", empty({kv, vdim}, opts.dtype));
  }
  if (opts.bias) in_proj_bias = register_parameter("in_proj_bias", empty({e + 2 * kv}, opts.dtype));
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, LinearOptions{opts.bias, opts.dtype}));
  reset_parameters();
}

// PyTorch's _reset_parameters: xavier_uniform_ on the input projections, zero biases.
void MultiheadAttention::reset_parameters() {
  for (Tensor* w : {&in_proj_weight, &q_proj_weight, &k_proj_weight, &v_proj_weight}) {
    if (w->defined()) init::xavier_uniform_(*w);
  }
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

std::string MultiheadAttention::extra_repr() const {
  return fmt::format("embed_dim={}, num_heads={}, kdim={}, vdim={}, dropout={}, batch_first={}{}", embed_dim, num_heads,
                     kdim, vdim, options.dropout, options.batch_first,
                     num_kv_heads != num_heads ? fmt::format(", num_kv_heads={}", num_kv_heads) : std::string());
}

Tensor MultiheadAttention::forward(const Tensor& x) { return std::get<0>(forward(x, x, x, {})); }

namespace {

Mask torch_mask(const Tensor& m, const char* what) {
  if (m.dtype() == Dtype::Bool) return Mask::block(m);  // PyTorch: true = not allowed
  if (m.is_floating_point()) return Mask::additive(m);
  throw DtypeError(fmt::format("MultiheadAttention: {} must be bool (true = not allowed, PyTorch's polarity) or float "
                               "(added to the scores), got {}",
                               what, dtype_name(m.dtype())));
}

}  // namespace

Mask MultiheadAttention::combined_mask(const MhaForwardOptions& o, std::int64_t N, std::int64_t L,
                                       std::int64_t S) const {
  Mask mask = o.mask;
  if (o.key_padding_mask.defined()) {
    const Tensor& kpm = o.key_padding_mask;
    if (kpm.shape() != Shape{N, S}) {
      // The transpose of what was expected: the inputs are laid out the other way round.
      const bool swapped = kpm.shape() == Shape{S, N} && N != S;
      throw ShapeError(fmt::format(
          "MultiheadAttention: key_padding_mask must be [N, S] = [{}, {}], got {}{}", N, S, shape_str(kpm.shape()),
          !swapped ? ""
          : options.batch_first
              ? "; the module has batch_first = true, so query, key and value are read as [N, L, E]: are yours [L, N, E]?"
              : "; the module reads query, key and value as [L, N, E] (PyTorch's default): if yours are [N, L, E], "
                "construct it with {.batch_first = true}"));
    }
    mask = mask & torch_mask(kpm, "key_padding_mask").reshape({N, 1, 1, S});
  }
  if (o.attn_mask.defined()) {
    const Tensor& am = o.attn_mask;
    if (am.shape() == Shape{L, S}) {
      mask = mask & torch_mask(am, "attn_mask");
    } else if (am.shape() == Shape{N * num_heads, L, S}) {
      mask = mask & torch_mask(am, "attn_mask").reshape({N, num_heads, L, S});
    } else {
      throw ShapeError(fmt::format("MultiheadAttention: attn_mask must be [L, S] = [{}, {}] or [N * num_heads, L, S] = "
                                   "[{}, {}, {}], got {}",
                                   L, S, N * num_heads, L, S, shape_str(am.shape())));
    }
  }
  if (o.is_causal) mask = mask & Mask::causal(L, S);
  return mask;
}

// q = query Wq^T + bq, ... ; heads: [N, L, E] -> [N, H, L, D]; SDPA per head;
// merge [N, H, L, D] -> [N, L, E]; out = merged Wo^T + bo.
std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                       const MhaForwardOptions& o) {
  const bool batched = query.dim() == 3;
  if (!batched && query.dim() != 2) {
    throw ShapeError(fmt::format("MultiheadAttention: query must be 3-D ({}) or 2-D [L, E] unbatched, got {}",
                                 options.batch_first ? "[N, L, E] with batch_first" : "[L, N, E]",
                                 shape_str(query.shape())));
  }
  if (key.dim() != query.dim() || value.dim() != query.dim()) {
    throw ShapeError(fmt::format("MultiheadAttention: query {}, key {} and value {} must have the same number of dims",
                                 shape_str(query.shape()), shape_str(key.shape()), shape_str(value.shape())));
  }
  // Canonical layout [N, L, E].
  auto canonical = [&](const Tensor& t) {
    if (!batched) return t.unsqueeze(0);
    return options.batch_first ? t : t.transpose(0, 1);
  };
  const Tensor q_in = canonical(query), k_in = canonical(key), v_in = canonical(value);
  const std::int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1);
  if (q_in.size(2) != embed_dim || k_in.size(2) != kdim || v_in.size(2) != vdim) {
    throw ShapeError(fmt::format("MultiheadAttention: expected query/key/value features {}/{}/{} (embed_dim/kdim/vdim), "
                                 "got query {}, key {}, value {}",
                                 embed_dim, kdim, vdim, shape_str(query.shape()), shape_str(key.shape()),
                                 shape_str(value.shape())));
  }
  if (v_in.size(1) != S || k_in.size(0) != N || v_in.size(0) != N) {
    throw ShapeError(fmt::format("MultiheadAttention: key {} and value {} must have the same batch and length (and the "
                                 "batch of query {})",
                                 shape_str(key.shape()), shape_str(value.shape()), shape_str(query.shape())));
  }
  MhaForwardOptions opts = o;
  if (!batched && opts.key_padding_mask.defined() && opts.key_padding_mask.dim() == 1) {
    opts.key_padding_mask = opts.key_padding_mask.unsqueeze(0);
  }
  const Mask mask = combined_mask(opts, N, L, S);

  const double dropout_p = is_training() ? options.dropout : 0.0;
  // One computation whether it runs or is traced: the heads stay where the projections wrote
  // them (multi_head_attention reads them in place), and a trace records that one op, which
  // the lowering lowers as it is.
  AttentionHeadsOptions heads_options;
  heads_options.mask = mask;
  heads_options.dropout_p = dropout_p;
  heads_options.need_weights = o.need_weights;
  heads_options.average_weights = o.average_attn_weights;
  heads_options.num_kv_heads = num_kv_heads;
  Tensor attn, weights;  // attn [N, L, E], weights [N, H, L, S] or averaged [N, L, S]
  if (in_proj_weight.defined() && query.is_same(key) && key.is_same(value)) {
    // self-attention: one GEMM projects q, k and v, and the heads read them packed
    std::tie(attn, weights) =
        multi_head_attention_packed(linear(q_in, in_proj_weight, in_proj_bias), num_heads, heads_options);
  } else {
    const std::int64_t kv = num_kv_heads * head_dim;
    const Tensor bq = in_proj_bias.defined() ? in_proj_bias.narrow(0, 0, embed_dim) : Tensor();
    const Tensor bk = in_proj_bias.defined() ? in_proj_bias.narrow(0, embed_dim, kv) : Tensor();
    const Tensor bv = in_proj_bias.defined() ? in_proj_bias.narrow(0, embed_dim + kv, kv) : Tensor();
    Tensor q, k, v;
    if (in_proj_weight.defined()) {
      q = linear(q_in, in_proj_weight.narrow(0, 0, embed_dim), bq);
      k = linear(k_in, in_proj_weight.narrow(0, embed_dim, embed_dim), bk);
      v = linear(v_in, in_proj_weight.narrow(0, 2 * embed_dim, embed_dim), bv);
    } else {
      q = linear(q_in, q_proj_weight, bq);
      k = linear(k_in, k_proj_weight, bk);
      v = linear(v_in, v_proj_weight, bv);
    }
    std::tie(attn, weights) = multi_head_attention(q, k, v, num_heads, heads_options);
  }
  Tensor out = out_proj->forward(attn);
  out = !batched ? out.squeeze(0) : options.batch_first ? out : out.transpose(0, 1);
  if (!o.need_weights) return {out, Tensor()};
  if (!batched) weights = weights.squeeze(0);
  return {out, weights};
}

}  // namespace microtorch::nn
