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
#include <memory>

#include "attention_kernels.hpp"
#include "gemm.hpp"
#include "microtorch/random.hpp"

namespace microtorch {

namespace {

using detail::Matrices;

// One attention operand (q, k or v): matrix i is input `input` + offsets[i], rows ld apart.
// Its gradient goes into the gradient of that input (of shape grad_shape) at grad_offsets,
// rows grad_ld apart; operands of one input (packed q, k, v) fill one gradient tensor.
struct Operand {
  std::size_t input = 0;
  std::vector<std::int64_t> offsets;
  std::int64_t ld = 0;
  Shape grad_shape;
  std::vector<std::int64_t> grad_offsets;
  std::int64_t grad_ld = 0;
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

// Offsets of head h of batch n, (n, h) in row-major order: n len H W + col0 + h W.
std::vector<std::int64_t> head_offsets(std::int64_t N, std::int64_t H, std::int64_t len, std::int64_t row,
                                       std::int64_t col0, std::int64_t width) {
  std::vector<std::int64_t> o;
  o.reserve(static_cast<std::size_t>(N * H));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t h = 0; h < H; ++h) o.push_back(n * len * row + col0 + h * width);
  }
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
          if (needs[o->input] && !grads[o->input].defined()) grads[o->input] = Tensor::empty(o->grad_shape, g.dtype());
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
            return needs[o.input] ? matrices(grads[o.input].data<T>(), o.grad_offsets, o.grad_ld) : Matrices<T>();
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

std::tuple<Tensor, Tensor> scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                        const Mask& mask_in, double dropout_p, bool is_causal,
                                                        double scale) {
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
    o.input = input;
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

// q [N, L, H D] at column q_col of rows q_row wide, likewise k and v: the layout of
// multi_head_attention over `inputs` (one packed tensor or three).
std::tuple<Tensor, Tensor> heads_attention(const TensorList& inputs, std::size_t qi, std::size_t ki, std::size_t vi,
                                           std::int64_t H, std::int64_t N, std::int64_t L, std::int64_t S,
                                           std::int64_t E, std::int64_t Ev, std::int64_t q_col, std::int64_t k_col,
                                           std::int64_t v_col, const AttentionHeadsOptions& opts) {
  const std::int64_t D = E / H, Dv = Ev / H;
  const double scale = opts.scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(D)) : opts.scale;
  auto lay = std::make_shared<Layout>();
  lay->batch = {N, H};
  lay->dims = {N * H, L, S, D, Dv};
  auto operand = [&](std::size_t input, std::int64_t len, std::int64_t col, std::int64_t width) {
    Operand o;
    o.input = input;
    const std::int64_t row = inputs[input].size(2);
    o.offsets = head_offsets(N, H, len, row, col, width);
    o.ld = row;
    o.grad_shape = inputs[input].shape();
    o.grad_offsets = o.offsets;
    o.grad_ld = row;
    return o;
  };
  lay->q = operand(qi, L, q_col, D);
  lay->k = operand(ki, S, k_col, D);
  lay->v = operand(vi, S, v_col, Dv);
  lay->out_shape = {N, L, Ev};
  lay->out_offsets = head_offsets(N, H, L, Ev, 0, Dv);
  lay->out_ld = Ev;
  return attention("multi_head_attention", inputs, std::move(lay), opts.mask, opts.dropout_p, scale,
                   {opts.need_weights, opts.average_weights, H},
                   {{"num_heads", H}, {"scale", scale}, {"dropout_p", opts.dropout_p}});
}

void check_heads(const char* op, std::int64_t width, std::int64_t H, const Tensor& t) {
  if (H <= 0 || width % H != 0) {
    throw ShapeError(fmt::format("{}: the features of {} ({}) must split into num_heads = {} equal heads", op,
                                 shape_str(t.shape()), width, H));
  }
}

}  // namespace

std::tuple<Tensor, Tensor> multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                std::int64_t num_heads, const AttentionHeadsOptions& opts) {
  const char* op = "multi_head_attention";
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3 || k.size(0) != q.size(0) || v.size(0) != q.size(0) ||
      k.size(1) != v.size(1) || k.size(2) != q.size(2)) {
    throw ShapeError(fmt::format("{}: expects q [N, L, E], k [N, S, E], v [N, S, Ev], got {}, {}, {}", op,
                                 shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape())));
  }
  check_dtypes(op, q, k, v);
  check_dropout(op, opts.dropout_p);
  check_heads(op, q.size(2), num_heads, q);
  check_heads(op, v.size(2), num_heads, v);
  return heads_attention({q, k, v}, 0, 1, 2, num_heads, q.size(0), q.size(1), k.size(1), q.size(2), v.size(2), 0, 0,
                         0, opts);
}

std::tuple<Tensor, Tensor> multi_head_attention_packed(const Tensor& qkv, std::int64_t num_heads,
                                                       const AttentionHeadsOptions& opts) {
  const char* op = "multi_head_attention_packed";
  if (qkv.dim() != 3 || qkv.size(2) % 3 != 0) {
    throw ShapeError(fmt::format("{}: expects q, k, v packed as [N, L, 3 E], got {}", op, shape_str(qkv.shape())));
  }
  check_dtypes(op, qkv, qkv, qkv);
  check_dropout(op, opts.dropout_p);
  const std::int64_t E = qkv.size(2) / 3;
  check_heads(op, E, num_heads, qkv);
  return heads_attention({qkv}, 0, 0, 0, num_heads, qkv.size(0), qkv.size(1), qkv.size(1), E, E, 0, E, 2 * E, opts);
}

}  // namespace microtorch
