#include <fmt/format.h>

#include "microtorch/nn/layers.hpp"
#include "microtorch/random.hpp"

namespace microtorch::nn {

Embedding::Embedding(std::int64_t num, std::int64_t dim, Dtype dtype) : num_embeddings(num), embedding_dim(dim) {
  if (num <= 0 || dim <= 0) {
    throw ValueError(fmt::format("Embedding: num_embeddings and embedding_dim must be positive, got {} and {}", num, dim));
  }
  weight = register_parameter("weight", empty({num, dim}, dtype));
  init::normal_(weight);
}

// out[..., :] = weight[indices[...], :] ; the gradient adds dy rows back at each index.
Tensor Embedding::forward(const Tensor& indices) {
  if (indices.dtype() != Dtype::Int64) {
    throw DtypeError(fmt::format("Embedding: indices must be int64, got {} of shape {}; convert with .to(kInt64)",
                                 dtype_name(indices.dtype()), shape_str(indices.shape())));
  }
  const Tensor flat = indices.reshape({-1});
  const std::int64_t* p = flat.data<std::int64_t>();
  for (std::int64_t i = 0; i < flat.numel(); ++i) {
    if (p[i] < 0 || p[i] >= num_embeddings) {
      throw IndexError(fmt::format("Embedding: index {} is out of range for {} embeddings (valid 0 .. {})", p[i],
                                   num_embeddings, num_embeddings - 1));
    }
  }
  Shape out = indices.shape();
  out.push_back(embedding_dim);
  return index_select(weight, 0, flat).reshape(out);
}

std::string Embedding::extra_repr() const { return fmt::format("{}, {}", num_embeddings, embedding_dim); }

}  // namespace microtorch::nn
