/// \file
/// Linear attention: attention in O(L) memory with a ReLU feature map.
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
/// Shapes that do not fit throw ShapeError.
Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool normalize = true, double eps = 1e-6);
}  // namespace functional

/// Constructor options of LinearAttention.
struct LinearAttentionOptions {
  bool bias = true;              ///< biases in the four projections
  bool normalize = true;         ///< divide each row by its normaliser (see linear_attention)
  double eps = 1e-6;             ///< added to the normaliser
  Dtype dtype = Dtype::Float32;  ///< of the parameters
};

/// Multi-head linear attention on [N, L, E] (batch first): q_proj, k_proj, v_proj, out_proj
/// (Linear E -> E), heads by reshape [N, L, E] -> [N, H, L, E/H].
class LinearAttention : public Module {
 public:
  /// embed_dim E split into num_heads heads (ValueError unless both are positive and
  /// num_heads divides E); the projections are initialised as Linear's.
  LinearAttention(std::int64_t embed_dim, std::int64_t num_heads = 1, LinearAttentionOptions options = {});
  /// Self-attention: forward(x, x, x).
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  /// query [N, L, E], key and value [N, S, E] -> [N, L, E] (ShapeError for other shapes).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value);
  std::string extra_repr() const override;

  std::int64_t embed_dim;  ///< E
  std::int64_t num_heads;  ///< H
  std::int64_t head_dim;   ///< E / H
  LinearAttentionOptions options;  ///< as given to the constructor
  ///@{
  /// The projections E -> E ("q_proj", "k_proj", "v_proj", "out_proj" in the state dict).
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;
  ///@}
};

}  // namespace microtorch::nn
