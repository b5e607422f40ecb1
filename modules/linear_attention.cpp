#include "microtorch/nn/linear_attention.hpp"

#include <fmt/format.h>

namespace microtorch::nn {

namespace functional {

// phi = relu ;  kv = phi(k)^T v  [D, Dv] ;  out_i = phi(q_i) kv / (phi(q_i) . sum_j phi(k_j) + eps)
Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool normalize, double eps) {
  if (q.dim() < 2 || q.size(-1) != k.size(-1) || k.size(-2) != v.size(-2)) {
    throw ShapeError(fmt::format("linear_attention: expects q [N.., L, D], k [N.., S, D], v [N.., S, Dv], got {}, {}, {}",
                                 shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape())));
  }
  const Tensor fq = relu(q), fk = relu(k);
  const Tensor out = matmul(fq, matmul(fk.transpose(-2, -1), v));
  if (!normalize) return out;
  const Tensor z = matmul(fq, sum(fk, {-2}, /*keepdim=*/true).transpose(-2, -1));  // [N.., L, 1]
  return out / (z + eps);
}

}  // namespace functional

LinearAttention::LinearAttention(std::int64_t e, std::int64_t h, LinearAttentionOptions opts)
    : embed_dim(e), num_heads(h), head_dim(0), options(opts) {
  if (e <= 0 || h <= 0 || e % h != 0) {
    throw ValueError(fmt::format("LinearAttention: embed_dim {} must be positive and divisible by num_heads {}", e, h));
  }
  head_dim = e / h;
  const LinearOptions lo{opts.bias, opts.dtype};
  q_proj = register_module("q_proj", std::make_shared<Linear>(e, e, lo));
  k_proj = register_module("k_proj", std::make_shared<Linear>(e, e, lo));
  v_proj = register_module("v_proj", std::make_shared<Linear>(e, e, lo));
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, lo));
}

Tensor LinearAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value) {
  if (query.dim() != 3 || key.dim() != 3 || value.dim() != 3 || key.size(1) != value.size(1)) {
    throw ShapeError(fmt::format("LinearAttention: expects [N, L, E] query and [N, S, E] key/value, got {}, {}, {}",
                                 shape_str(query.shape()), shape_str(key.shape()), shape_str(value.shape())));
  }
  const std::int64_t N = query.size(0), L = query.size(1), S = key.size(1);
  auto heads = [&](const Tensor& t, std::int64_t len) {
    return t.reshape({N, len, num_heads, head_dim}).transpose(1, 2);
  };
  const Tensor out = functional::linear_attention(heads(q_proj->forward(query), L), heads(k_proj->forward(key), S),
                                                  heads(v_proj->forward(value), S), options.normalize, options.eps);
  return out_proj->forward(out.transpose(1, 2).reshape({N, L, embed_dim}));
}

std::string LinearAttention::extra_repr() const {
  return fmt::format("embed_dim={}, num_heads={}, normalize={}", embed_dim, num_heads, options.normalize);
}

}  // namespace microtorch::nn
