// scaled_dot_product_attention and multi_head_attention: fused primitives over the
// per-matrix kernels of attention_kernels.hpp (the math is written out there).
//
// Both describe their operands as batches of matrices in place (offsets + leading
// dimension) and share one driver, attention(), which runs the forward, saves two
// statistics per query row (and the L x S weights only when the caller takes them per
// matrix) and records the backward. SDPA takes q [N.., L, D]
// with broadcasting leading dims; multi_head_attention takes the projections [N, L, H D]
// as they come out of a Linear, so no head is ever transposed into its own buffer.
#include <cmath>
#include <cstring>
#include <memory>

#include "attention_kernels.hpp"
#include "gemm.hpp"
#include "microtorch/random.hpp"

namespace microtorch {

namespace {

using detail::Matrices;

// One attention operand (q, k or v): matrix i is input `input` + offsets[i], rows ld apart.
// Its gradient goes into the gradient of input `grad_input` (of shape grad_shape) at
// grad_offsets, rows grad_ld apart; operands of one input (packed q, k, v) fill one gradient
// tensor. Two layouts need the gradient finished after the kernels ran:
//   grouped-query attention (group > 1): matrices that share one key/value head each wrote
//     their own block of a [N, S, H width] gradient, which is summed over each group of
//     `group` heads into [N, S, H / group width];
//   a key/value cache (grad_rows >= 0): the operand is the cache, read from another input;
//     the gradient of the new positions is rows [grad_row0, grad_row0 + grad_rows).
struct Operand {
  std::size_t input = 0;
  std::vector<std::int64_t> offsets;
  std::int64_t ld = 0;
  std::size_t grad_input = 0;
  Shape grad_shape;
  std::vector<std::int64_t> grad_offsets;
  std::int64_t grad_ld = 0;
  std::int64_t group = 1, width = 0;
  std::int64_t grad_row0 = 0, grad_rows = -1;

  // The gradient as the input grad_input has it, from what the kernels wrote.
  Tensor finish(Tensor g) const {
    if (grad_rows >= 0) g = g.narrow(1, grad_row0, grad_rows);
    if (group > 1) {
      const std::int64_t N = g.size(0), S = g.size(1), heads = g.size(2) / width;
      g = sum(g.reshape({N, S, heads / group, group, width}), {3}).reshape({N, S, heads / group * width});
    }
    return g;
  }
};

struct Layout {
  detail::AttentionDims dims;
  Shape batch;  // the weights are batch + [L, S]
  Operand q, k, v;
  Shape out_shape;
  std::vector<std::int64_t> out_offsets;
  std::int64_t out_ld = 0;
};

std::vector<std::int64_t> strided(std::int64_t count, std::int64_t step) {
  std::vector<std::int64_t> o(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) o[static_cast<std::size_t>(i)] = i * step;
  return o;
}

template <class P>
Matrices<P> matrices(P* data, const std::vector<std::int64_t>& offsets, std::int64_t ld) {
  Matrices<P> m;
  m.data = data;
  m.offsets = offsets;
  m.ld = ld;
  return m;
}

// The additive mask seen as a broadcast batch of [L, S] matrices over `batch`.
template <class T>
detail::MaskBias<T> mask_bias(const Tensor& bias, const Shape& batch) {
  detail::MaskBias<T> b;
  if (!bias.defined()) return b;
  Shape s = bias.shape();
  while (s.size() < 2) s.insert(s.begin(), 1);
  const std::int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  b.m = matrices(static_cast<const T*>(bias.data<T>()),
                    detail::batch_offsets(Shape(s.begin(), s.end() - 2), batch, rows * cols), 0);
  b.row_stride = rows == 1 ? 0 : cols;
  b.col_stride = cols == 1 ? 0 : 1;
  return b;
}

// batch + [L, S]: the shape of the scores, weights, dropout multipliers and dbias.
Shape scores_shape(const Layout& lay) {
  Shape s = lay.batch;
  s.push_back(lay.dims.L);
  s.push_back(lay.dims.S);
  return s;
}

// What the caller wants back as weights: the per-matrix P, their mean over groups of
// `group` matrices (the heads), or nothing.
struct WeightsWanted {
  bool need = true, average = false;
  std::int64_t group = 1;
};

// The most memory that the heads' own A may take when the caller takes their average.
constexpr std::int64_t kKeepWeightsBytes = std::int64_t(64) << 20;

std::tuple<Tensor, Tensor> attention(const char* op, const TensorList& inputs, std::shared_ptr<const Layout> lay,
                                     const Mask& mask, double dropout_p, double scale, WeightsWanted wanted,
                                     autograd::Attrs attrs) {
  const auto& d = lay->dims;
  const Dtype dtype = inputs[0].dtype();
  const Shape weights_shape = scores_shape(*lay);
  mask.check_broadcast(weights_shape, op);
  const Tensor bias = mask.as_additive(dtype);  // requires grad when a learned additive bias does
  TensorList recorded = inputs;
  if (bias.defined()) recorded.push_back(bias);  // the bias's gradient is dS; a trace also sees the mask
  Tensor dropped;  // M / (1 - p) when dropout is on
  if (dropout_p > 0.0) {
    NoGradGuard no_grad;
    dropped = (rand(weights_shape, dtype) >= dropout_p).to(dtype) * (1.0 / (1.0 - dropout_p));
  }
  // An L x S buffer per matrix exists only when the caller asks for the weights: per matrix,
  // A (P with dropout, where backward also reads A * M from it); averaged over the heads, A
  // of each head is kept for backward too when backward will run, there is no dropout and
  // it takes at most kKeepWeightsBytes (reading it back costs less than recomputing it: the
  // attention core's forward + backward -11% at 4x512x512x8, -14% at 8x64x64x4, measured on
  // Zen 4). Otherwise backward recomputes A from two saved statistics per query row (the
  // softmax's max and 1 / sum).
  const bool recording = autograd::needs_recording(recorded);
  const bool keep_heads = wanted.need && wanted.average && recording && !dropped.defined() &&
                          numel_of(weights_shape) <= kKeepWeightsBytes / static_cast<std::int64_t>(dtype_size(dtype));
  const bool per_matrix = (wanted.need && !wanted.average) || keep_heads;
  const Tensor weights = per_matrix && !dropped.defined() ? Tensor::empty(weights_shape, dtype) : Tensor();
  const Tensor probs = per_matrix && dropped.defined() ? Tensor::empty(weights_shape, dtype) : weights;
  Tensor average;
  if (wanted.need && wanted.average) {
    Shape avg_shape(lay->batch.begin(), lay->batch.end() - 1);
    avg_shape.push_back(d.L);
    avg_shape.push_back(d.S);
    average = Tensor::empty(avg_shape, dtype);
  }
  Shape stats_shape = lay->batch;
  stats_shape.push_back(d.L);
  stats_shape.push_back(2);
  const Tensor stats = recording ? Tensor::empty(stats_shape, dtype) : Tensor();
  Tensor out = Tensor::empty(lay->out_shape, dtype);
  auto data = [](auto tag, const Tensor& t) {
    using T = typename decltype(tag)::type;
    return t.defined() ? t.data<T>() : static_cast<T*>(nullptr);
  };
  auto operand = [&inputs](auto tag, const Operand& o) {
    using T = typename decltype(tag)::type;
    return matrices(static_cast<const T*>(inputs[o.input].data<T>()), o.offsets, o.ld);
  };
  detail::visit_floating(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::attention_forward<T>(d, static_cast<T>(scale), operand(tag, lay->q), operand(tag, lay->k),
                                 operand(tag, lay->v), mask_bias<T>(bias, lay->batch), data(tag, dropped),
                                 data(tag, weights), dropped.defined() ? data(tag, probs) : nullptr,
                                 data(tag, average), average.defined() ? wanted.group : 1,
                                 matrices(out.data<T>(), lay->out_offsets, lay->out_ld), data(tag, stats));
    return 0;
  });
  // Saved: the inputs (and the bias), A, P, M (each undefined when not made; P is A without
  // dropout), the row statistics, and the output when A is not kept (backward's rowsum(dO O)). The weights handed back to the caller are A or P
  // themselves, which backward reads, so an in-place edit of them is caught by the saved
  // version, not silently differentiated through.
  const std::size_t n_in = inputs.size();
  autograd::Saved saved(recorded);
  const std::size_t n_saved = recorded.size();
  saved.tensors.insert(saved.tensors.end(), {weights, probs, dropped, stats, weights.defined() ? Tensor() : out});
  out = autograd::record(
      out, op, recorded, saved,
      [lay, n_in, n_saved, scale, op](const Tensor& g, const autograd::NeedsGrad& needs, const TensorList& s) {
        const Tensor &weights = s[n_saved], &probs = s[n_saved + 1], &dropped = s[n_saved + 2];
        const Tensor &stats = s[n_saved + 3], &out = s[n_saved + 4];
        const Tensor bias = n_saved > n_in ? s[n_in] : Tensor();
        TensorList grads(needs.size());
        for (const Operand* o : {&lay->q, &lay->k, &lay->v}) {
          if (needs[o->grad_input] && !grads[o->grad_input].defined()) {
            grads[o->grad_input] = Tensor::empty(o->grad_shape, g.dtype());
          }
        }
        // d bias = dS, of the scores' shape; the engine sums it back to the bias's shape
        const bool bias_grad = needs.size() > n_in && needs[n_in];
        if (bias_grad) grads[n_in] = Tensor::empty(scores_shape(*lay), g.dtype());
        detail::visit_floating(g.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          auto in = [&](const Operand& o) {
            return matrices(static_cast<const T*>(s[o.input].data<T>()), o.offsets, o.ld);
          };
          auto grad = [&](const Operand& o) {
            return needs[o.grad_input] ? matrices(grads[o.grad_input].data<T>(), o.grad_offsets, o.grad_ld)
                                       : Matrices<T>();
          };
          auto ptr = [](const Tensor& t) { return t.defined() ? static_cast<const T*>(t.data<T>()) : nullptr; };
          detail::attention_backward<T>(
              lay->dims, static_cast<T>(scale), in(lay->q), in(lay->k), in(lay->v), mask_bias<T>(bias, lay->batch),
              ptr(dropped), ptr(weights), dropped.defined() ? ptr(probs) : nullptr,
              ptr(stats), out.defined() ? matrices(static_cast<const T*>(out.data<T>()), lay->out_offsets, lay->out_ld) : Matrices<const T>(),
              matrices(static_cast<const T*>(g.data<T>()), lay->out_offsets, lay->out_ld), grad(lay->q),
              grad(lay->k), grad(lay->v), bias_grad ? grads[n_in].data<T>() : nullptr);
          return 0;
        });
        for (const Operand* o : {&lay->q, &lay->k, &lay->v}) {
          if (grads[o->grad_input].defined()) grads[o->grad_input] = o->finish(grads[o->grad_input]);
        }
        return grads;
      },
      std::move(attrs));
  if (!wanted.need) return {out, Tensor()};
  return {out, wanted.average ? average : probs.detach()};
}

void check_dtypes(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  for (const Tensor* t : {&q, &k, &v}) {
    if (!t->is_floating_point() || t->dtype() != q.dtype()) {
      throw DtypeError(fmt::format("{}: q, k and v must share one floating dtype, got {}, {}, {}", op,
                                   dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype())));
    }
  }
}

void check_dropout(const char* op, double p) {
  if (!(p >= 0.0 && p < 1.0)) throw ValueError(fmt::format("{}: dropout_p must be in [0, 1), got {}", op, p));
}

void check_sdpa_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  const char* op = "scaled_dot_product_attention";
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2) {
    throw ShapeError(fmt::format("{}: q, k, v need at least 2 dims (N.. x L x D), got {}, {}, {}", op,
                                 shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape())));
  }
  if (q.size(-1) != k.size(-1)) {
    throw ShapeError(fmt::format("{}: q {} and k {} must share the last dim D (queries and keys live in one space)", op,
                                 shape_str(q.shape()), shape_str(k.shape())));
  }
  if (k.size(-2) != v.size(-2)) {
    throw ShapeError(fmt::format("{}: k {} and v {} must have the same length S (dim -2): one value per key", op,
                                 shape_str(k.shape()), shape_str(v.shape())));
  }
  check_dtypes(op, q, k, v);
}

Shape batch_dims(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

}  // namespace

namespace {

// Grouped-query SDPA as broadcasting: q [B.., H, L, D] seen as [B.., Hkv, G, L, D] and k, v
// [B.., Hkv, S, D] as [B.., Hkv, 1, S, D] (views: nothing is copied), the mask likewise split
// at its head dim; the engine sums k's and v's gradients over the broadcast group dim.
std::tuple<Tensor, Tensor> grouped_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask,
                                        double dropout_p, bool is_causal, double scale) {
  const char* op = "scaled_dot_product_attention (enable_gqa)";
  if (q.dim() < 3 || k.dim() < 3 || v.dim() < 3) {
    throw ShapeError(fmt::format("{}: q, k, v need a head dim (N.. x H x L x D), got {}, {}, {}", op,
                                 shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape())));
  }
  const std::int64_t H = q.size(-3), Hkv = k.size(-3);
  if (v.size(-3) != Hkv || Hkv <= 0 || H % Hkv != 0) {
    throw ShapeError(fmt::format("{}: k {} and v {} must have one number of heads (dim -3) dividing the {} heads of q "
                                 "{}: each key/value head serves an equal group of query heads",
                                 op, shape_str(k.shape()), shape_str(v.shape()), H, shape_str(q.shape())));
  }
  const std::int64_t G = H / Hkv;
  auto split_heads = [&](const Shape& shape, std::int64_t heads_dim_size) {  // [.., X, a, b] -> [.., Hkv, G|1, a, b]
    Shape out(shape.begin(), shape.end() - 3);
    out.push_back(heads_dim_size == 1 ? 1 : Hkv);
    out.push_back(heads_dim_size == 1 ? 1 : G);
    out.insert(out.end(), shape.end() - 2, shape.end());
    return out;
  };
  Shape scores(q.shape().begin(), q.shape().end() - 1);
  scores.push_back(k.size(-2));
  Mask grouped;
  if (!mask.empty()) {
    mask.check_broadcast(scores, op);
    Shape m = mask.shape();
    while (m.size() < scores.size()) m.insert(m.begin(), 1);
    grouped = mask.reshape(split_heads(m, m[m.size() - 3]));
  }
  auto [out, weights] = scaled_dot_product_attention(q.reshape(split_heads(q.shape(), H)), k.unsqueeze(-3),
                                                     v.unsqueeze(-3), grouped, dropout_p, is_causal, scale);
  Shape out_shape(q.shape().begin(), q.shape().end() - 1);
  out_shape.push_back(v.size(-1));
  return {out.reshape(out_shape), weights.reshape(scores)};
}

}  // namespace

std::tuple<Tensor, Tensor> scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                        const Mask& mask_in, double dropout_p, bool is_causal,
                                                        double scale, bool enable_gqa) {
  if (enable_gqa && q.dim() >= 3 && k.dim() >= 3 && q.size(-3) != k.size(-3)) {
    return grouped_sdpa(q, k, v, mask_in, dropout_p, is_causal, scale);
  }
  check_sdpa_inputs(q, k, v);
  check_dropout("scaled_dot_product_attention", dropout_p);
  const std::int64_t L = q.size(-2), S = k.size(-2), D = q.size(-1), Dv = v.size(-1);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  const Mask mask = is_causal ? (mask_in & Mask::causal(L, S)) : mask_in;

  auto lay = std::make_shared<Layout>();
  const char* op = "scaled_dot_product_attention (batch dims of q, k, v)";
  lay->batch = broadcast_shapes(broadcast_shapes(batch_dims(q), batch_dims(k), op), batch_dims(v), op);
  const std::int64_t count = numel_of(lay->batch);
  lay->dims = {count, L, S, D, Dv};
  auto operand = [&](std::size_t input, const Tensor& t, std::int64_t rows, std::int64_t cols) {
    Operand o;
    o.input = o.grad_input = input;
    o.offsets = detail::batch_offsets(batch_dims(t), lay->batch, rows * cols);
    o.ld = cols;
    o.grad_shape = lay->batch;  // a broadcast input's gradient is summed back by the engine
    o.grad_shape.push_back(rows);
    o.grad_shape.push_back(cols);
    o.grad_offsets = strided(count, rows * cols);
    o.grad_ld = cols;
    return o;
  };
  lay->q = operand(0, q, L, D);
  lay->k = operand(1, k, S, D);
  lay->v = operand(2, v, S, Dv);
  lay->out_shape = lay->batch;
  lay->out_shape.push_back(L);
  lay->out_shape.push_back(Dv);
  lay->out_offsets = strided(count, L * Dv);
  lay->out_ld = Dv;
  return attention("scaled_dot_product_attention", {q, k, v}, std::move(lay), mask, dropout_p, scale, {},
                   {{"scale", scale}, {"dropout_p", dropout_p}, {"is_causal", is_causal}});
}

namespace {

// Offsets of the matrix each (n, h) reads, in row-major order of (n, h): head h / group of
// batch n in a [N, len, row] tensor, n len row + col0 + (h / group) width. With group > 1
// (grouped-query attention) consecutive query heads share one key/value head.
std::vector<std::int64_t> group_offsets(std::int64_t N, std::int64_t H, std::int64_t group, std::int64_t len,
                                        std::int64_t row, std::int64_t col0, std::int64_t width) {
  std::vector<std::int64_t> o;
  o.reserve(static_cast<std::size_t>(N * H));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t h = 0; h < H; ++h) o.push_back(n * len * row + col0 + (h / group) * width);
  }
  return o;
}

// The heads of one multi-head call: H query heads over Hkv key/value heads, and where k and v
// are read (their input, column and, for a cache, rows).
struct HeadsSpec {
  std::int64_t H = 1, Hkv = 1, N = 0, L = 0, S = 0, E = 0, Ev = 0;
  std::size_t qi = 0, ki = 0, vi = 0;     // the inputs q, k, v are read from
  std::int64_t q_col = 0, k_col = 0, v_col = 0;
  std::int64_t kv_rows = 0;               // rows of the tensors k and v are read from (S, or a cache's capacity)
  std::size_t k_grad = 0, v_grad = 0;     // the inputs their gradients go to
  std::int64_t grad_row0 = 0, grad_rows = -1;  // the rows of the new positions (a cache), or all
};

// q [N, L, H D] at column q_col of rows q_row wide, likewise k and v (Hkv heads): the layout
// of multi_head_attention over `inputs` (one packed tensor, three, or three and two caches).
Layout heads_layout(const TensorList& inputs, const HeadsSpec& sp) {
  const std::int64_t D = sp.E / sp.H, Dv = sp.Ev / sp.H, G = sp.H / sp.Hkv;
  Layout lay;
  lay.batch = {sp.N, sp.H};
  lay.dims = {sp.N * sp.H, sp.L, sp.S, D, Dv};
  auto operand = [&](std::size_t input, std::int64_t len, std::int64_t col, std::int64_t width, std::int64_t group,
                     std::size_t grad_input, std::int64_t grad_len) {
    Operand o;
    o.input = input;
    o.grad_input = grad_input;
    const std::int64_t row = inputs[input].size(2);
    o.offsets = group_offsets(sp.N, sp.H, group, len, row, col, width);
    o.ld = row;
    o.group = group;
    o.width = width;
    if (group == 1 && grad_input == input) {  // the gradient has the input's layout
      o.grad_shape = inputs[input].shape();
      o.grad_offsets = o.offsets;
      o.grad_ld = row;
    } else {  // one block per query head: [N, grad_len, H width]
      o.grad_shape = {sp.N, grad_len, sp.H * width};
      o.grad_offsets = group_offsets(sp.N, sp.H, 1, grad_len, sp.H * width, 0, width);
      o.grad_ld = sp.H * width;
    }
    return o;
  };
  lay.q = operand(sp.qi, sp.L, sp.q_col, D, 1, sp.qi, sp.L);
  lay.k = operand(sp.ki, sp.kv_rows, sp.k_col, D, G, sp.k_grad, sp.S);
  lay.v = operand(sp.vi, sp.kv_rows, sp.v_col, Dv, G, sp.v_grad, sp.S);
  for (Operand* o : {&lay.k, &lay.v}) o->grad_row0 = sp.grad_row0, o->grad_rows = sp.grad_rows;
  lay.out_shape = {sp.N, sp.L, sp.Ev};
  lay.out_offsets = group_offsets(sp.N, sp.H, 1, sp.L, sp.Ev, 0, Dv);
  lay.out_ld = sp.Ev;
  return lay;
}

void check_heads(const char* op, std::int64_t width, std::int64_t H, const Tensor& t) {
  if (H <= 0 || width % H != 0) {
    throw ShapeError(fmt::format("{}: the features of {} ({}) must split into num_heads = {} equal heads", op,
                                 shape_str(t.shape()), width, H));
  }
}

// The number of key/value heads options ask for (0 = num_heads); it must divide num_heads.
std::int64_t kv_heads(const char* op, std::int64_t H, const AttentionHeadsOptions& opts) {
  const std::int64_t Hkv = opts.num_kv_heads == 0 ? H : opts.num_kv_heads;
  if (Hkv <= 0 || H <= 0 || H % Hkv != 0) {
    throw ShapeError(fmt::format("{}: num_kv_heads = {} must divide num_heads = {}: each key/value head serves an "
                                 "equal group of query heads",
                                 op, opts.num_kv_heads, H));
  }
  return Hkv;
}

// k and v of [N, rows, Hkv D] and [N, rows, Hkv Dv] next to q [N, L, H D], the output of
// H Dv features (given as Ev, the value features of all query heads).
void check_kv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t H, std::int64_t Hkv,
              const char* k_name, const char* v_name) {
  const bool ok = q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && k.size(0) == q.size(0) && v.size(0) == q.size(0) &&
                  k.size(1) == v.size(1) && k.size(2) * H == q.size(2) * Hkv && v.size(2) % Hkv == 0;
  if (!ok) {
    throw ShapeError(fmt::format("{}: expects q [N, L, H D], {} [N, S, Hkv D], {} [N, S, Hkv Dv] with H = {} and Hkv = "
                                 "{}, got {}, {}, {}",
                                 op, k_name, v_name, H, Hkv, shape_str(q.shape()), shape_str(k.shape()),
                                 shape_str(v.shape())));
  }
}

}  // namespace

std::tuple<Tensor, Tensor> multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                std::int64_t num_heads, const AttentionHeadsOptions& opts) {
  const char* op = "multi_head_attention";
  const std::int64_t Hkv = kv_heads(op, num_heads, opts);
  check_kv(op, q, k, v, num_heads, Hkv, "k", "v");
  check_dtypes(op, q, k, v);
  check_dropout(op, opts.dropout_p);
  check_heads(op, q.size(2), num_heads, q);
  HeadsSpec sp;
  sp.H = num_heads, sp.Hkv = Hkv, sp.N = q.size(0), sp.L = q.size(1), sp.S = k.size(1);
  sp.E = q.size(2), sp.Ev = v.size(2) / Hkv * num_heads;
  sp.qi = 0, sp.ki = sp.k_grad = 1, sp.vi = sp.v_grad = 2;
  sp.kv_rows = sp.S;
  const double scale = opts.scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(sp.E / num_heads)) : opts.scale;
  autograd::Attrs attrs{{"num_heads", num_heads}, {"scale", scale}, {"dropout_p", opts.dropout_p}};
  if (Hkv != num_heads) attrs.insert(attrs.begin() + 1, {"num_kv_heads", Hkv});
  return attention(Hkv == num_heads ? "multi_head_attention" : "grouped_query_attention", {q, k, v},
                   std::make_shared<Layout>(heads_layout({q, k, v}, sp)), opts.mask, opts.dropout_p, scale,
                   {opts.need_weights, opts.average_weights, num_heads}, std::move(attrs));
}

std::tuple<Tensor, Tensor> multi_head_attention_packed(const Tensor& qkv, std::int64_t num_heads,
                                                       const AttentionHeadsOptions& opts) {
  const char* op = "multi_head_attention_packed";
  if (qkv.dim() != 3 || qkv.size(2) % 3 != 0) {
    throw ShapeError(fmt::format("{}: expects q, k, v packed as [N, L, 3 E], got {}", op, shape_str(qkv.shape())));
  }
  if (opts.num_kv_heads != 0 && opts.num_kv_heads != num_heads) {
    throw ShapeError(fmt::format("{}: q, k and v packed as [N, L, 3 E] have one number of heads; for num_kv_heads = {} "
                                 "of num_heads = {} call multi_head_attention(q, k, v, ...)",
                                 op, opts.num_kv_heads, num_heads));
  }
  check_dtypes(op, qkv, qkv, qkv);
  check_dropout(op, opts.dropout_p);
  const std::int64_t E = qkv.size(2) / 3;
  check_heads(op, E, num_heads, qkv);
  HeadsSpec sp;
  sp.H = sp.Hkv = num_heads, sp.N = qkv.size(0), sp.L = sp.S = sp.kv_rows = qkv.size(1), sp.E = sp.Ev = E;
  sp.k_col = E, sp.v_col = 2 * E;
  const double scale = opts.scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(E / num_heads)) : opts.scale;
  return attention("multi_head_attention", {qkv}, std::make_shared<Layout>(heads_layout({qkv}, sp)), opts.mask,
                   opts.dropout_p, scale, {opts.need_weights, opts.average_weights, num_heads},
                   {{"num_heads", num_heads}, {"scale", scale}, {"dropout_p", opts.dropout_p}});
}

// Writes rows [position, position + L) of every batch's cache from `rows` [N, L, W].
namespace {
void write_cache(const Tensor& cache, const Tensor& rows, std::int64_t position) {
  const std::int64_t N = rows.size(0), L = rows.size(1), W = rows.size(2), C = cache.size(1);
  const std::size_t esize = dtype_size(rows.dtype());
  const char* src = detail::bytes_of(rows);
  char* dst = detail::bytes_of(cache);
  for (std::int64_t n = 0; n < N && L * W > 0; ++n) {
    std::memcpy(dst + static_cast<std::size_t>((n * C + position) * W) * esize,
                src + static_cast<std::size_t>(n * L * W) * esize, static_cast<std::size_t>(L * W) * esize);
  }
  cache.bump_version();
}
}  // namespace

std::tuple<Tensor, Tensor> multi_head_attention_cached(const Tensor& q, const Tensor& k, const Tensor& v,
                                                       const Tensor& k_cache, const Tensor& v_cache,
                                                       std::int64_t position, std::int64_t num_heads,
                                                       const AttentionHeadsOptions& opts) {
  const char* op = "multi_head_attention_cached";
  const std::int64_t Hkv = kv_heads(op, num_heads, opts);
  check_kv(op, q, k, v, num_heads, Hkv, "k", "v");
  check_kv(op, q, k_cache, v_cache, num_heads, Hkv, "k_cache", "v_cache");
  if (k_cache.size(2) != k.size(2) || v_cache.size(2) != v.size(2)) {
    throw ShapeError(fmt::format("{}: the caches k_cache {} and v_cache {} must hold rows like k {} and v {}", op,
                                 shape_str(k_cache.shape()), shape_str(v_cache.shape()), shape_str(k.shape()),
                                 shape_str(v.shape())));
  }
  check_dtypes(op, q, k, v);
  check_dtypes(op, q, k_cache, v_cache);
  check_dropout(op, opts.dropout_p);
  check_heads(op, q.size(2), num_heads, q);
  const std::int64_t L = q.size(1), capacity = k_cache.size(1);
  if (position < 0 || position > capacity - L) {
    throw ValueError(fmt::format("{}: {} new positions after {} cached exceed the cache's capacity of {} positions; "
                                 "make a cache with a larger capacity (or reset it)",
                                 op, L, position, capacity));
  }
  for (const Tensor* c : {&k_cache, &v_cache}) {
    if (c->requires_grad()) {
      throw AutogradError(fmt::format("{}: a cache {} that requires grad would be written in place; caches are plain "
                                      "buffers (zeros(...) without requires_grad)",
                                      op, shape_str(c->shape())));
    }
  }
  write_cache(k_cache, k.detach(), position);
  write_cache(v_cache, v.detach(), position);
  HeadsSpec sp;
  sp.H = num_heads, sp.Hkv = Hkv, sp.N = q.size(0), sp.L = L, sp.S = position + L;
  sp.E = q.size(2), sp.Ev = v.size(2) / Hkv * num_heads;
  sp.qi = 0, sp.ki = 3, sp.vi = 4, sp.k_grad = 1, sp.v_grad = 2;
  sp.kv_rows = capacity;
  sp.grad_row0 = position, sp.grad_rows = L;
  const double scale = opts.scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(sp.E / num_heads)) : opts.scale;
  // new query i sees keys j <= position + i: all of them when there is one new query
  const Mask mask = L > 1 ? opts.mask & Mask::causal(L, sp.S, CausalAlign::BottomRight) : opts.mask;
  const TensorList inputs{q, k, v, k_cache, v_cache};
  return attention("kv_cache_attention", inputs, std::make_shared<Layout>(heads_layout(inputs, sp)), mask,
                   opts.dropout_p, scale, {opts.need_weights, opts.average_weights, num_heads},
                   {{"num_heads", num_heads},
                    {"num_kv_heads", Hkv},
                    {"position", position},
                    {"scale", scale},
                    {"dropout_p", opts.dropout_p}});
}

}  // namespace microtorch
