// microtorch/nn/linear_attention.hpp — attention in O(L) memory with a ReLU feature map.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "microtorch/nn/layers.hpp"

namespace microtorch::nn {

namespace functional {
/// out = phi(q) (phi(k)^T v), phi = relu, over q [N.., L, D], k [N.., S, D], v [N.., S, Dv].
/// With normalize, each row is divided by phi(q_i) . sum_j phi(k_j) + eps (a row whose
/// features are all zero gives 0, not NaN). phi(k)^T v is D x Dv: no L x S matrix exists.
Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool normalize = true, double eps = 1e-6);
}  // namespace functional

struct LinearAttentionOptions {
  bool bias = true;
  bool normalize = true;
  double eps = 1e-6;
  Dtype dtype = Dtype::Float32;
};

/// Multi-head linear attention on [N, L, E] (batch first): q_proj, k_proj, v_proj, out_proj
/// (Linear E -> E), heads by reshape [N, L, E] -> [N, H, L, E/H].
class LinearAttention : public Module {
 public:
  LinearAttention(std::int64_t embed_dim, std::int64_t num_heads = 1, LinearAttentionOptions options = {});
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value);
  std::string extra_repr() const override;

  std::int64_t embed_dim, num_heads, head_dim;
  LinearAttentionOptions options;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;
};

}  // namespace microtorch::nn
