// lower_decoder — an nn::DecoderLM as a step program (decoder.hpp): the float model's ranges
// through its own modules, then one int16 kernel call sequence per token with the key/value
// caches and the position counter as State buffers.
#include "microtorch/lower/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "kernels.hpp"
#include "lowering.hpp"
#include "rms_norm.hpp"
#include "microtorch/autograd.hpp"
#include "microtorch/error.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/ops.hpp"
#include "runtime/mt_kernels.h"

namespace microtorch::lower {

namespace {

double absmax_of(const Tensor& t) {
  const Tensor d = t.to(Dtype::Float64).contiguous();
  double m = 0;
  for (std::int64_t i = 0; i < d.numel(); ++i) m = std::max(m, std::abs(d.data<double>()[i]));
  return m;
}

// The calibrated |max| of each value of a step, by name ("layers.0.q", "logits", ...).
using Ranges = std::map<std::string, double>;

void note(Ranges& r, const std::string& key, const Tensor& t) { r[key] = std::max(r[key], absmax_of(t)); }

// The float model on the calibration tokens through its own modules, in the order its
// forward calls them (DecoderLM::forward with a cache: causal, every position at once),
// noting the range of each value the step program holds.
Ranges calibrate_decoder(nn::DecoderLM& model, const Tensor& tokens) {
  NoGradGuard no_grad;
  const bool training = model.is_training();
  model.eval();
  Ranges r;
  const std::int64_t N = tokens.size(0), L = tokens.size(1);
  nn::KVCache cache = model.make_cache(N, L);
  Tensor x = model.model->embed_tokens->forward(tokens);
  note(r, "embed", x);
  for (std::size_t i = 0; i < model.model->layers->size(); ++i) {
    const auto& layer = *(*model.model->layers)[i];
    const auto& at = *layer.self_attn;
    const std::string k = fmt::format("layers.{}.", i);
    const Tensor h = layer.input_layernorm->forward(x);
    note(r, k + "norm1", h);
    Tensor q = at.q_proj->forward(h), kk = at.k_proj->forward(h), v = at.v_proj->forward(h);
    note(r, k + "q", q), note(r, k + "k", kk), note(r, k + "v", v);
    if (at.rotary_emb) {
      q = at.rotary_emb->forward(q.reshape({N, L, at.num_heads, at.head_dim}), 0).reshape({N, L, at.num_heads * at.head_dim});
      kk = at.rotary_emb->forward(kk.reshape({N, L, at.num_kv_heads, at.head_dim}), 0)
               .reshape({N, L, at.num_kv_heads * at.head_dim});
      note(r, k + "q", q), note(r, k + "k", kk);
    }
    AttentionHeadsOptions o;
    o.need_weights = false;
    o.num_kv_heads = at.num_kv_heads;
    const Tensor a = std::get<0>(cache.attend(static_cast<std::int64_t>(i), q, kk, v, at.num_heads, o));
    note(r, k + "attn", a);
    const Tensor ao = at.o_proj->forward(a);
    note(r, k + "o", ao);
    x = x + ao;
    note(r, k + "mid", x);
    const Tensor h2 = layer.post_attention_layernorm->forward(x);
    note(r, k + "norm2", h2);
    const auto& mlp = *layer.mlp;
    const Tensor up = mlp.up_proj->forward(h2);
    note(r, k + "up", up);
    const Tensor pre = mlp.gate_proj ? mlp.gate_proj->forward(h2) : up;
    note(r, k + "gate", pre);
    const Tensor act = mlp.options.activation == "silu" ? silu(pre) : gelu(pre);
    note(r, k + "act", act);
    const Tensor prod = mlp.gate_proj ? act * up : act;
    note(r, k + "prod", prod);
    const Tensor down = mlp.down_proj->forward(prod);
    note(r, k + "down", down);
    x = x + down;
    note(r, k + "out", x);
  }
  const Tensor f = model.model->norm->forward(x);
  note(r, "norm", f);
  note(r, "logits", model.lm_head->forward(f));
  model.train(training);  // the caller's mode given back
  return r;
}

// Builds the step program: buffers, tables and kernel calls.
class StepBuilder {
 public:
  StepBuilder(const DecoderLowerOptions& o) : o_(o) {
    p_.name = o.name;
    p_.activation_bits = 16;
    p_.weight_bits = o.weight_bits;
    p_.scheme = "symmetric, per-channel weights";
  }
  Program& program() { return p_; }

  // An activation in the arena with scale `scale` (int16 unless `elem` says).
  std::int64_t act(std::int64_t size, double scale, const std::string& origin, BufferKind kind = BufferKind::Activation,
                   Elem elem = Elem::S16) {
    Buffer b;
    b.kind = kind;
    b.elem = elem;
    b.size = size;
    b.name = fmt::format("t{}", p_.buffers.size());
    b.origin = origin;
    b.scale = scale;
    b.hi = scale * static_cast<double>(qmax(elem)), b.lo = -b.hi;
    return p_.add_buffer(std::move(b));
  }
  // The symmetric scale in `elem` of a value whose calibrated |max| is `absmax`, widened.
  double scale_of(double absmax, Elem elem = Elem::S16) const {
    const double top = absmax > 0 ? absmax * (1 + o_.margin) : 1.0;
    return top / static_cast<double>(qmax(elem));
  }
  // A constant array (weights, tables) in flash.
  std::int64_t constant(Elem elem, std::vector<std::int64_t> values, const std::string& name, const std::string& origin,
                        bool fixed_point, TableRole role = TableRole::Bias, std::vector<std::string> fields = {}) {
    Buffer b;
    b.kind = BufferKind::Weight;
    b.elem = elem;
    b.size = static_cast<std::int64_t>(values.size());
    b.name = unique("w_" + c_name(name));
    b.origin = origin;
    b.fixed_point = fixed_point;
    b.role = role;
    b.data = std::move(values);
    b.fields = std::move(fields);
    return p_.add_buffer(std::move(b));
  }
  // A zeroed RAM array that keeps its values between steps.
  std::int64_t state(Elem elem, std::int64_t size, const std::string& name, const std::string& origin, double scale = 1.0) {
    Buffer b;
    b.kind = BufferKind::State;
    b.elem = elem;
    b.size = size;
    b.name = unique(c_name(p_.name + "_" + name));
    b.origin = origin;
    b.fixed_point = elem == Elem::S16 || elem == Elem::S8;
    b.scale = scale;
    return p_.add_buffer(std::move(b));
  }
  void step(const std::string& kernel, std::vector<Arg> args, const std::string& label, std::int64_t macs = 0,
            std::int64_t out = -1) {
    Step s;
    s.kernel = kernel;
    s.args = std::move(args);
    s.label = label;
    s.macs = macs;
    const KernelInfo* k = find_kernel(kernel);
    if (!k) throw ValueError(fmt::format("lower_decoder: the runtime has no kernel {}", kernel));
    s.returns_status = k->returns_status;
    if (out >= 0) s.out_format = format_name(p_.buffer(out).elem, p_.buffer(out).scale, 0);
    check_call(p_, s);
    p_.steps.push_back(std::move(s));
  }

  // y = x W^T + b for the rows of `parts` stacked, each part requantized to its own scale
  // (`scales`, one per part). Rows symmetric per channel at weight_bits, rounded to nearest.
  void linear(std::int64_t x, const std::vector<const nn::Linear*>& parts, const std::vector<double>& scales,
              std::int64_t y, const std::string& name) {
    const double sx = p_.buffer(x).scale;
    const Elem xe = p_.buffer(x).elem;
    const std::int64_t in = parts[0]->weight.size(1);
    const Elem we = o_.weight_bits == 8 ? Elem::S8 : Elem::S16;
    const double wmax = static_cast<double>(qmax(we));
    std::vector<std::int64_t> w, rq, bias;
    std::vector<double> channel;
    bool any_bias = false;
    std::int64_t rows = 0;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const Tensor wt = parts[k]->weight.to(Dtype::Float64).contiguous();
      const Tensor bt = parts[k]->bias.defined() ? parts[k]->bias.to(Dtype::Float64).contiguous() : Tensor();
      any_bias = any_bias || bt.defined();
      const std::int64_t out = wt.size(0);
      for (std::int64_t r = 0; r < out; ++r, ++rows) {
        const double* row = wt.data<double>() + r * in;
        double m = 0;
        for (std::int64_t j = 0; j < in; ++j) m = std::max(m, std::abs(row[j]));
        const double sw = m > 0 ? m / wmax : 1.0;
        channel.push_back(sw);
        for (std::int64_t j = 0; j < in; ++j) w.push_back(static_cast<std::int64_t>(std::round(row[j] / sw)));
        const Multiplier mu = multiplier(sx * sw / scales[k]);
        rq.push_back(mu.m), rq.push_back(mu.s);
        bias.push_back(bt.defined() ? static_cast<std::int64_t>(std::round(bt.data<double>()[r] / (sx * sw))) : 0);
      }
    }
    const bool pairs = we != xe;  // x and weights of different widths: rows in pair order (mt_kernels.h)
    if (pairs) pair_order(w, in);
    const std::int64_t wb = constant(we, std::move(w), name + ".weight", name + ".weight", true);
    p_.buffer(wb).channel_scales = channel;
    p_.buffer(wb).scale = *std::max_element(channel.begin(), channel.end());
    p_.buffer(wb).rows_in_pair_order = pairs;
    const std::int64_t rb = constant(Elem::S32, std::move(rq), name + ".rq", name + " requantization", false,
                                     TableRole::Requantization);
    // the biases in the accumulators' type: int32 for int8 x, int64 for int16 x
    if (xe == Elem::S8) {
      for (auto& b : bias) b = std::clamp<std::int64_t>(b, INT32_MIN, INT32_MAX);
    }
    const std::int64_t bb =
        any_bias ? constant(xe == Elem::S8 ? Elem::S32 : Elem::S64, std::move(bias), name + ".bias", name + ".bias", false) : -1;
    step(Lowering::kernel("linear", {xe, we, Elem::S16}),
         {Arg::buf(x), Arg::buf(wb), Arg::buf(bb), Arg::buf(y), Arg::num(1), Arg::num(in), Arg::num(rows), Arg::num(0),
          Arg::buf(rb), Arg::num(1), Arg::num(0), Arg::num(-32768)},
         name, rows * in, y);
  }

  // y = rms_norm(x) * weight, y in its buffer's scale (mt_rmsnorm_s16: the ratios 16 sqrt(n) g / scale_y).
  void rms_norm(std::int64_t x, const nn::RMSNorm& norm, std::int64_t y, const std::string& name) {
    const Buffer& xb = p_.buffer(x);
    const std::int64_t n = xb.size;
    const double sx = xb.scale, sy = p_.buffer(y).scale;
    std::vector<double> gains(static_cast<std::size_t>(n), 1.0);
    if (norm.weight.defined()) {
      const Tensor g = norm.weight.to(Dtype::Float64).contiguous();
      for (std::int64_t j = 0; j < n; ++j) gains[static_cast<std::size_t>(j)] = g.data<double>()[j];
    }
    const double eps = norm.options.eps.value_or(static_cast<double>(std::numeric_limits<float>::epsilon()));
    RmsNormConstants k = rms_norm_constants(gains, eps, sx, sy);
    const std::int64_t rb = constant(Elem::S32, std::move(k.rq), name + ".rq", name + " gains", false, TableRole::Norm);
    step("mt_rmsnorm_s16",
         {Arg::buf(x), Arg::buf(y), Arg::num(1), Arg::num(n), Arg::num(k.eps_q), Arg::num(k.eps_shift), Arg::buf(rb)},
         name, 2 * n, y);
  }

  // y = a + b, one rounding (mt_add_s16_s16_s16 with the ratios at the largest shift that
  // keeps them below 2^30, as the elementwise rule does).
  void add(std::int64_t a, std::int64_t b, std::int64_t y, const std::string& label) {
    const double sy = p_.buffer(y).scale, ra = p_.buffer(a).scale / sy, rb = p_.buffer(b).scale / sy;
    const double bound = std::ldexp(1.0, 30);
    const int shift = std::clamp(static_cast<int>(std::floor(std::log2(bound / std::max(ra, rb)))), -31, 62);
    auto mult = [&](double r) { return static_cast<std::int64_t>(std::min(std::round(std::ldexp(r, shift)), bound)); };
    const std::int64_t n = p_.buffer(y).size;
    step("mt_add_s16_s16_s16",
         {Arg::buf(a), Arg::buf(b), Arg::num(n), Arg::buf(y), Arg::num(n), Arg::num(mult(ra)), Arg::num(mult(rb)),
          Arg::num(0), Arg::num(shift), Arg::num(0)},
         label, 0, y);
  }

  // y = a * b (elementwise), requantized once.
  void mul(std::int64_t a, std::int64_t b, std::int64_t y, const std::string& label) {
    const Multiplier mu = multiplier(p_.buffer(a).scale * p_.buffer(b).scale / p_.buffer(y).scale);
    const std::int64_t n = p_.buffer(y).size;
    step("mt_mul_s16",
         {Arg::buf(a), Arg::buf(b), Arg::num(n), Arg::buf(y), Arg::num(n), Arg::num(0), Arg::num(0), Arg::num(mu.m),
          Arg::num(mu.s), Arg::num(0)},
         label, n, y);
  }

 private:
  DecoderLowerOptions o_;
  Program p_;
  std::map<std::string, int> names_;
  std::string unique(const std::string& base) {
    const int k = names_[base]++;
    return k == 0 ? base : fmt::format("{}_{}", base, k);
  }
};

}  // namespace

Program lower_decoder(nn::DecoderLM& model, const Tensor& calibration, const DecoderLowerOptions& options) {
  check_firmware_name(options.name);
  const nn::DecoderConfig& c = model.config;
  if (options.weight_bits != 8 && options.weight_bits != 16) {
    throw ValueError(fmt::format("lower_decoder: weight_bits must be 8 or 16, got {}", options.weight_bits));
  }
  if (options.cache_bits != 8 && options.cache_bits != 16) {
    throw ValueError(fmt::format("lower_decoder: cache_bits must be 8 or 16, got {}", options.cache_bits));
  }
  const std::int64_t capacity = options.capacity == 0 ? c.max_seq_len : options.capacity;
  if (capacity <= 0 || capacity > c.max_seq_len || capacity > 32767) {
    throw ValueError(fmt::format("lower_decoder: capacity {} must be in [1, max_seq_len = {}] and at most 32767 (the "
                                 "attention kernels' keys)",
                                 capacity, c.max_seq_len));
  }
  if (calibration.dim() != 2 || calibration.size(1) > capacity || calibration.numel() == 0) {
    throw ShapeError(fmt::format("lower_decoder: calibration takes int64 tokens [N, L] with 0 < L <= capacity {}, got {}",
                                 capacity, shape_str(calibration.shape())));
  }
  const auto& layer0 = *(*model.model->layers)[0];
  const std::string& activation = layer0.mlp->options.activation;
  if (activation != "silu" && activation != "gelu") {
    throw ValueError(fmt::format("lower_decoder: the MLP's activation \"{}\" has no int16 step kernel; \"silu\" and "
                                 "\"gelu\" lower",
                                 activation));
  }
  const Ranges r = calibrate_decoder(model, calibration);
  const std::int64_t E = c.d_model, V = c.vocab_size;
  const std::int64_t H = layer0.self_attn->num_heads, Hkv = layer0.self_attn->num_kv_heads, D = layer0.self_attn->head_dim;
  const std::int64_t hidden = layer0.mlp->up_proj->weight.size(0);
  const bool gated = layer0.mlp->gate_proj != nullptr;

  StepBuilder B(options);
  Program& p = B.program();
  // input: the token id; the position counter
  {
    Buffer in;
    in.kind = BufferKind::Input, in.elem = Elem::S32, in.size = 1, in.name = "in", in.origin = "token id";
    in.fixed_point = false;
    p.input = p.add_buffer(std::move(in));
    p.input_shape = {1};
  }
  const std::int64_t pos = B.state(Elem::S32, 1, "position", "the position of the next token");
  // embedding: the table in the embedding's own scale (its rows are the first residual values)
  const Tensor emb = model.model->embed_tokens->weight.to(Dtype::Float64).contiguous();
  const double se = B.scale_of(r.at("embed")) / (1 + options.margin);
  std::vector<std::int64_t> table(static_cast<std::size_t>(emb.numel()));
  for (std::size_t i = 0; i < table.size(); ++i) {
    table[i] = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::round(emb.data<double>()[i] / se)), -32767, 32767);
  }
  const std::int64_t tb = B.constant(Elem::S16, std::move(table), "model.embed_tokens.weight", "model.embed_tokens.weight", true);
  p.buffer(tb).scale = se;
  std::int64_t x = B.act(E, se, "model.embed_tokens");
  B.step("mt_embedding_s16", {Arg::buf(p.input), Arg::num(1), Arg::buf(tb), Arg::num(V), Arg::num(E), Arg::buf(x)},
         "model.embed_tokens", 0, x);

  // RoPE tables in Q14 (shared by the layers): cos and sin of the first `capacity` positions
  std::int64_t cos_b = -1, sin_b = -1;
  if (layer0.self_attn->rotary_emb) {
    const auto& re = *layer0.self_attn->rotary_emb;
    const Tensor cs = re.cos_cached.to(Dtype::Float64).contiguous(), sn = re.sin_cached.to(Dtype::Float64).contiguous();
    std::vector<std::int64_t> cq, sq;
    for (std::int64_t i = 0; i < capacity * (D / 2); ++i) {
      cq.push_back(static_cast<std::int64_t>(std::round(std::ldexp(cs.data<double>()[i], 14))));
      sq.push_back(static_cast<std::int64_t>(std::round(std::ldexp(sn.data<double>()[i], 14))));
    }
    cos_b = B.constant(Elem::S16, std::move(cq), "rope.cos", "RoPE cos table, Q14 [capacity, head_dim / 2]", false,
                       TableRole::Lookup);
    sin_b = B.constant(Elem::S16, std::move(sq), "rope.sin", "RoPE sin table, Q14 [capacity, head_dim / 2]", false,
                       TableRole::Lookup);
  }
  // the streaming attention's accumulators: int64 for int16 caches, int32 for int8 (mt_kernels.h)
  const std::int64_t acc = B.act(D, 1.0, "attention accumulators", BufferKind::Scratch,
                                 options.cache_bits == 8 ? Elem::S32 : Elem::S64);
  p.buffer(acc).fixed_point = false;
  std::int64_t state_bytes = 4;

  for (std::size_t i = 0; i < model.model->layers->size(); ++i) {
    const auto& layer = *(*model.model->layers)[i];
    const auto& at = *layer.self_attn;
    const std::string k = fmt::format("layers.{}.", i), m = "model." + k;
    auto range = [&](const std::string& key) { return B.scale_of(r.at(k + key)); };
    // attention block
    const std::int64_t h = B.act(E, range("norm1"), m + "input_layernorm");
    B.rms_norm(x, *layer.input_layernorm, h, m + "input_layernorm");
    const double sq = range("q"), sk = range("k"), sv = range("v");
    const std::int64_t qkv = B.act((H + 2 * Hkv) * D, sq, m + "self_attn q | k | v");
    B.linear(h, {at.q_proj.get(), at.k_proj.get(), at.v_proj.get()}, {sq, sk, sv}, qkv, m + "self_attn.qkv_proj");
    if (cos_b >= 0) {
      B.step("mt_rope_s16",
             {Arg::buf(qkv), Arg::num(H + Hkv), Arg::num(D), Arg::buf(cos_b), Arg::buf(sin_b), Arg::buf(pos),
              Arg::num(capacity), Arg::num(at.rotary_emb->options.interleaved ? 1 : 0)},
             m + "self_attn.rotary_emb (q, k)", 0);
    }
    // the caches, and with int8 caches the queries and the attention's output, at cache_bits
    const Elem ce = options.cache_bits == 8 ? Elem::S8 : Elem::S16;
    const std::string cs = Lowering::elem_sfx(ce);
    const double cq = B.scale_of(r.at(k + "q"), ce), ck = B.scale_of(r.at(k + "k"), ce), cv = B.scale_of(r.at(k + "v"), ce);
    const std::int64_t kc = B.state(ce, capacity * Hkv * D, fmt::format("k_cache{}", i), m + "keys", ck);
    const std::int64_t vc = B.state(ce, capacity * Hkv * D, fmt::format("v_cache{}", i), m + "values", cv);
    state_bytes += 2 * p.buffer(kc).bytes();
    std::int64_t q_at = qkv, k_at = qkv, v_at = qkv, k_off = H * D, v_off = (H + Hkv) * D;
    if (ce == Elem::S8) {  // q | k | v to int8, each part in its own format
      const std::int64_t q8 = B.act((H + 2 * Hkv) * D, cq, m + "self_attn q | k | v (int8)", BufferKind::Activation, Elem::S8);
      const std::int64_t parts[3][3] = {{0, H * D, 0}, {H * D, Hkv * D, 1}, {(H + Hkv) * D, Hkv * D, 2}};
      const double from[3] = {sq, sk, sv}, to[3] = {cq, ck, cv};
      for (const auto& part : parts) {
        const Multiplier mu = multiplier(from[part[2]] / to[part[2]]);
        B.step("mt_requant_s16_s8",
               {Arg::buf(qkv, part[0]), Arg::buf(q8, part[0]), Arg::num(part[1]), Arg::num(0), Arg::num(mu.m),
                Arg::num(mu.s), Arg::num(0), Arg::num(0)},
               m + "self_attn q | k | v to int8", 0);
      }
      q_at = k_at = v_at = q8;
    }
    B.step("mt_cache_append_" + cs,
           {Arg::buf(k_at, k_off), Arg::buf(kc), Arg::num(Hkv * D), Arg::buf(pos), Arg::num(capacity)},
           m + "self_attn keys -> cache", 0);
    B.step("mt_cache_append_" + cs,
           {Arg::buf(v_at, v_off), Arg::buf(vc), Arg::num(Hkv * D), Arg::buf(pos), Arg::num(capacity)},
           m + "self_attn values -> cache", 0);
    const double sa = B.scale_of(r.at(k + "attn"), ce);
    const std::int64_t a = B.act(H * D, sa, m + "self_attn attention", BufferKind::Activation, ce);
    {
      const double aq = ce == Elem::S8 ? cq : sq, ak = ce == Elem::S8 ? ck : sk, av = ce == Elem::S8 ? cv : sv;
      const Multiplier logit = multiplier(std::ldexp(aq * ak / std::sqrt(static_cast<double>(D)) / std::log(2.0), 16));
      const Multiplier out_m = multiplier(av / sa);
      std::vector<std::int64_t> prm(MT_ATTN_PARAMS, 0);
      prm[MT_ATTN_L] = 1, prm[MT_ATTN_S] = capacity, prm[MT_ATTN_D] = D, prm[MT_ATTN_DV] = D;
      prm[MT_ATTN_K_STRIDE] = Hkv * D, prm[MT_ATTN_V_STRIDE] = Hkv * D;
      prm[MT_ATTN_LOGIT_M] = logit.m, prm[MT_ATTN_LOGIT_S] = logit.s;
      prm[MT_ATTN_OUT_M] = out_m.m, prm[MT_ATTN_OUT_S] = out_m.s;
      const std::int64_t pb = B.constant(
          Elem::S32, prm, m + "attn", m + "self_attn attention parameters", false, TableRole::Parameters,
          {"MT_ATTN_L", "MT_ATTN_S", "MT_ATTN_D", "MT_ATTN_DV", "MT_ATTN_Q_STRIDE", "MT_ATTN_K_STRIDE", "MT_ATTN_V_STRIDE",
           "MT_ATTN_OUT_STRIDE", "MT_ATTN_LOGIT_M", "MT_ATTN_LOGIT_S", "MT_ATTN_OUT_M", "MT_ATTN_OUT_S", "MT_ATTN_FLAGS"});
      B.step("mt_attention_cached_" + cs,
             {Arg::buf(pb), Arg::buf(pos), Arg::num(Hkv), Arg::num(H / Hkv), Arg::buf(q_at), Arg::buf(kc), Arg::buf(vc),
              Arg::buf(a), Arg::buf(acc)},
             m + "self_attn attention over the cache", 2 * H * D, a);
    }
    const std::int64_t o = B.act(E, range("o"), m + "self_attn.o_proj");
    B.linear(a, {at.o_proj.get()}, {range("o")}, o, m + "self_attn.o_proj");
    const std::int64_t mid = B.act(E, range("mid"), m + "residual (attention)");
    B.add(x, o, mid, m + "residual (attention)");
    // MLP block
    const auto& mlp = *layer.mlp;
    const std::int64_t h2 = B.act(E, range("norm2"), m + "post_attention_layernorm");
    B.rms_norm(mid, *layer.post_attention_layernorm, h2, m + "post_attention_layernorm");
    const double sg = range("gate"), su = range("up");
    const std::int64_t gu = B.act((gated ? 2 : 1) * hidden, sg, m + (gated ? "mlp gate | up" : "mlp up"));
    if (gated) {
      B.linear(h2, {mlp.gate_proj.get(), mlp.up_proj.get()}, {sg, su}, gu, m + "mlp.gate_up_proj");
    } else {
      B.linear(h2, {mlp.up_proj.get()}, {sg}, gu, m + "mlp.up_proj");
    }
    std::int64_t prod = -1;
    if (gated && activation == "silu") {  // SwiGLU: silu(g) u in one pass (mt_swiglu_s16), the
      // sigmoid in Q0.15, silu(g) in the calibrated format of act, then the product with the up
      // half of gate | up (offset `hidden`, in the up projection's scale)
      prod = B.act(hidden, range("prod"), m + "mlp silu(gate) * up");
      const double s_act = B.scale_of(r.at(k + "act"));
      const Multiplier in = multiplier(std::ldexp(sg, 20)), sig = multiplier(std::ldexp(1.0, -21 + 15));
      const Multiplier a = multiplier(sg * std::ldexp(1.0, -15) / s_act), mu = multiplier(s_act * su / p.buffer(prod).scale);
      B.step("mt_swiglu_s16",
             {Arg::buf(gu), Arg::buf(gu, hidden), Arg::buf(prod), Arg::num(hidden), Arg::num(in.m), Arg::num(in.s),
              Arg::num(sig.m), Arg::num(sig.s), Arg::num(a.m), Arg::num(a.s), Arg::num(mu.m), Arg::num(mu.s)},
             m + "mlp silu(gate) * up", 2 * hidden, prod);
    } else {
      const std::int64_t act = B.act(hidden, range("act"), m + "mlp " + activation);
      if (activation == "silu") {  // silu(g) = g sigmoid(g): the sigmoid in Q0.15, then one product
        const std::int64_t sig = B.act(hidden, std::ldexp(1.0, -15), m + "mlp sigmoid");
        const Multiplier in = multiplier(std::ldexp(sg, 20)), out = multiplier(std::ldexp(1.0, -21 + 15));
        B.step("mt_sigmoid_s16_s16",
               {Arg::buf(gu), Arg::buf(sig), Arg::num(hidden), Arg::num(in.m), Arg::num(in.s), Arg::num(out.m),
                Arg::num(out.s), Arg::num(0)},
               m + "mlp sigmoid", 0, sig);
        B.mul(gu, sig, act, m + "mlp silu");
      } else {  // gelu(g) = g Phi(g): mt_gelu's result in units of g's scale 2^-16
        const Multiplier in = multiplier(std::ldexp(sg, 20)), out = multiplier(std::ldexp(sg, -16) / p.buffer(act).scale);
        B.step("mt_gelu_s16_s16",
               {Arg::buf(gu), Arg::buf(act), Arg::num(hidden), Arg::num(in.m), Arg::num(in.s), Arg::num(out.m),
                Arg::num(out.s), Arg::num(0)},
               m + "mlp gelu", 0, act);
      }
      prod = act;
      if (gated) {
        prod = B.act(hidden, range("prod"), m + "mlp act(gate) * up");
        // the up half of gate | up, read in place (offset `hidden`), is in the up projection's scale
        const Multiplier mu = multiplier(p.buffer(act).scale * su / p.buffer(prod).scale);
        B.step("mt_mul_s16",
               {Arg::buf(act), Arg::buf(gu, hidden), Arg::num(hidden), Arg::buf(prod), Arg::num(hidden), Arg::num(0),
                Arg::num(0), Arg::num(mu.m), Arg::num(mu.s), Arg::num(0)},
               m + "mlp act(gate) * up", hidden, prod);
      }
    }
    const std::int64_t down = B.act(E, range("down"), m + "mlp.down_proj");
    B.linear(prod, {mlp.down_proj.get()}, {range("down")}, down, m + "mlp.down_proj");
    const std::int64_t out = B.act(E, range("out"), m + "residual (mlp)");
    B.add(mid, down, out, m + "residual (mlp)");
    x = out;
  }
  const std::int64_t f = B.act(E, B.scale_of(r.at("norm")), "model.norm");
  B.rms_norm(x, *model.model->norm, f, "model.norm");
  const std::int64_t logits = B.act(V, B.scale_of(r.at("logits")), "lm_head (logits)", BufferKind::Output);
  p.buffer(logits).name = "out";
  B.linear(f, {model.lm_head.get()}, {p.buffer(logits).scale}, logits, "lm_head");
  p.output = logits;
  p.output_shape = {V};
  B.step("mt_position_next", {Arg::buf(pos), Arg::num(capacity)}, "position += 1");
  Decoding d;
  d.capacity = capacity, d.vocab = V, d.position = pos, d.state_bytes = state_bytes;
  p.decoding = d;
  plan_memory(p);
  return p;
}

std::int32_t inv_temperature_q16(double temperature) {
  if (!(temperature > 0)) throw ValueError(fmt::format("sample: the temperature must be positive, got {}", temperature));
  return static_cast<std::int32_t>(std::clamp(std::round(65536.0 / temperature), 1.0, 2147483647.0));
}

std::int32_t logit_log2e_q24(const Program& program) {
  const double q = std::round(std::ldexp(program.buffer(program.output).scale / std::log(2.0), 24));
  return static_cast<std::int32_t>(std::clamp(q, 0.0, 2147483647.0));
}

std::int64_t sample_token(const Program& program, const std::vector<std::int64_t>& logits, int top_k,
                          double temperature, std::uint32_t& seed) {
  if (!program.decoding) throw ValueError(fmt::format("sample_token: the program {} is not a decoder's step", program.name));
  std::vector<std::int16_t> l(logits.size());
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<std::int16_t>(std::clamp<std::int64_t>(logits[i], -32768, 32767));
  return mt_sample_s16(l.data(), static_cast<int>(l.size()), top_k, logit_log2e_q24(program), inv_temperature_q16(temperature),
                       &seed);
}

std::int64_t greedy_token(const std::vector<std::int64_t>& logits) {
  return static_cast<std::int64_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<std::int64_t> greedy_generate(Simulator& sim, const std::vector<std::int64_t>& prompt, std::int64_t new_tokens) {
  if (prompt.empty()) throw ValueError("greedy_generate: the prompt must hold at least one token");
  sim.reset();
  std::vector<std::int64_t> tokens = prompt, logits;
  for (const std::int64_t t : prompt) logits = sim.step(t);
  for (std::int64_t i = 0; i < new_tokens; ++i) {
    tokens.push_back(greedy_token(logits));
    if (i + 1 < new_tokens) logits = sim.step(tokens.back());
  }
  return tokens;
}

}  // namespace microtorch::lower
