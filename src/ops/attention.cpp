// scaled_dot_product_attention as one fused primitive.
//
// Forward, per batch of matrices (batched GEMMs, transposes passed to BLAS):
//   S = q k^T * scale + mask          (blocked entries are -inf)
//   A = softmax_rows(S)               (a fully blocked row gives A = 0)
//   P = A * M / (1 - p)               (dropout mask M, only when p > 0)
//   O = P v
// Backward (cs231n-style, reusing the saved A):
//   dv = P^T dO,  dP = dO v^T,  dA = dP * M / (1 - p),
//   dS = A * (dA - rowsum(dA * A)),  dq = dS k * scale,  dk = dS^T q * scale
#include <cmath>

#include "gemm.hpp"
#include "microtorch/random.hpp"
#include "softmax_kernels.hpp"

namespace microtorch {

namespace {

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
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
  for (const Tensor* t : {&q, &k, &v}) {
    if (!t->is_floating_point() || t->dtype() != q.dtype()) {
      throw DtypeError(fmt::format("{}: q, k and v must share one floating dtype, got {}, {}, {}", op,
                                   dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype())));
    }
  }
}

// dS = A * (dA - rowsum(dA * A)) * scale, in place over dA, one softmax row at a time.
template <class T>
void softmax_grad_inplace(const T* a, T* da, std::int64_t rows, std::int64_t n, T scale) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* ar = a + r * n;
    T* dr = da + r * n;
    T acc = 0;
    for (std::int64_t j = 0; j < n; ++j) acc += dr[j] * ar[j];
    for (std::int64_t j = 0; j < n; ++j) dr[j] = ar[j] * (dr[j] - acc) * scale;
  }
}

}  // namespace

std::tuple<Tensor, Tensor> scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                        const Mask& mask_in, double dropout_p, bool is_causal,
                                                        double scale) {
  check_inputs(q, k, v);
  if (!(dropout_p >= 0.0 && dropout_p < 1.0)) {
    throw ValueError(fmt::format("scaled_dot_product_attention: dropout_p must be in [0, 1), got {}", dropout_p));
  }
  const std::int64_t L = q.size(-2), S = k.size(-2), D = q.size(-1);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  const Mask mask = is_causal ? (mask_in & Mask::causal(L, S)) : mask_in;

  Tensor scores = detail::batched_gemm(q.detach(), k.detach(), false, true);  // [B.., L, S]
  mask.check_broadcast(scores.shape(), "scaled_dot_product_attention");
  const Tensor bias = mask.as_additive(q.dtype());  // broadcasts to scores (checked above)
  Tensor weights = Tensor::empty(scores.shape(), scores.dtype());
  Tensor dropped;  // M / (1 - p) when dropout is on
  const std::int64_t rows = numel_of(Shape(scores.shape().begin(), scores.shape().end() - 1));
  detail::visit_floating(q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* ps = scores.data<T>();
    const auto n = static_cast<std::int64_t>(scores.numel());
    for (std::int64_t i = 0; i < n; ++i) ps[i] *= static_cast<T>(scale);
    if (bias.defined()) {
      const Tensor b = bias.shape() == scores.shape() ? bias : bias.expand(scores.shape());
      const T* pb = b.data<T>();
      for (std::int64_t i = 0; i < n; ++i) ps[i] += pb[i];
    }
    detail::softmax_rows(ps, weights.data<T>(), detail::DimSplit{rows, S, 1}, false);
    return 0;
  });
  Tensor probs = weights;
  if (dropout_p > 0.0) {
    NoGradGuard no_grad;
    dropped = (rand(weights.shape(), weights.dtype()) >= dropout_p).to(weights.dtype()) * (1.0 / (1.0 - dropout_p));
    probs = weights * dropped;
  }
  Tensor out = detail::batched_gemm(probs, v.detach(), false, false);
  TensorList inputs{q, k, v};
  if (bias.defined()) inputs.push_back(bias);  // a constant input: the tracer sees the mask
  out = autograd::record(
      out, "scaled_dot_product_attention", inputs,
      [q = q.detach(), k = k.detach(), v = v.detach(), weights, probs, dropped, scale, rows,
       S](const Tensor& g, const autograd::NeedsGrad& needs) {
        TensorList grads(needs.size());
        if (needs[2]) grads[2] = detail::batched_gemm(probs, g, true, false);
        if (!needs[0] && !needs[1]) return grads;
        Tensor ds = detail::batched_gemm(g, v, false, true);  // dP
        if (dropped.defined()) ds = ds * dropped;              // dA
        detail::visit_floating(ds.dtype(), "backward", [&](auto tag) {
          using T = typename decltype(tag)::type;
          softmax_grad_inplace(weights.data<T>(), ds.data<T>(), rows, S, static_cast<T>(scale));
          return 0;
        });
        if (needs[0]) grads[0] = detail::batched_gemm(ds, k, false, false);
        if (needs[1]) grads[1] = detail::batched_gemm(ds, q, true, false);
        return grads;
      },
      {{"scale", scale}, {"dropout_p", dropout_p}, {"is_causal", is_causal}});
  return {out, probs.detach()};
}

}  // namespace microtorch
