#include "microtorch/nn/rope.hpp"

#include <cmath>

#include <fmt/format.h>

namespace microtorch::nn {

// cos_cached[p, i] = cos(p theta_i), sin_cached[p, i] = sin(p theta_i), theta_i = base^(-2i / D),
// in float64 (an angle p theta_i of a late position keeps its digits), then stored in dtype.
RotaryEmbedding::RotaryEmbedding(std::int64_t dim, RotaryEmbeddingOptions opts) : head_dim(dim), options(opts) {
  if (dim <= 0 || dim % 2 != 0) {
    throw ValueError(fmt::format("RotaryEmbedding: head_dim must be even and positive (features turn in pairs), got {}",
                                 dim));
  }
  if (opts.max_seq_len <= 0 || !(opts.base > 0) || !std::isfinite(opts.base)) {
    throw ValueError(fmt::format("RotaryEmbedding: max_seq_len must be positive and base a positive number, got {} and {}",
                                 opts.max_seq_len, opts.base));
  }
  const std::int64_t half = dim / 2;
  Tensor c = Tensor::empty({opts.max_seq_len, half}, Dtype::Float64), s = Tensor::empty({opts.max_seq_len, half}, Dtype::Float64);
  double* pc = c.data<double>();
  double* ps = s.data<double>();
  for (std::int64_t i = 0; i < half; ++i) {
    const double theta = std::pow(opts.base, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
    for (std::int64_t p = 0; p < opts.max_seq_len; ++p) {
      pc[p * half + i] = std::cos(static_cast<double>(p) * theta);
      ps[p * half + i] = std::sin(static_cast<double>(p) * theta);
    }
  }
  cos_cached = register_buffer("cos_cached", c.to(opts.dtype), /*persistent=*/false);
  sin_cached = register_buffer("sin_cached", s.to(opts.dtype), /*persistent=*/false);
}

void RotaryEmbedding::check_input(const Tensor& x) const {
  if (x.dim() < 3 || x.size(-1) != head_dim) {
    throw ShapeError(fmt::format("RotaryEmbedding: expects x [N, L, H, {}] (positions at dim -3, heads at -2), got {}",
                                 head_dim, shape_str(x.shape())));
  }
}

Tensor RotaryEmbedding::forward(const Tensor& x, std::int64_t offset) {
  check_input(x);
  const std::int64_t L = x.size(-3), half = head_dim / 2;
  if (offset < 0 || offset > options.max_seq_len - L) {
    throw ValueError(fmt::format("RotaryEmbedding: positions {} .. {} are beyond max_seq_len {}; construct it with a "
                                 "larger max_seq_len",
                                 offset, offset + L - 1, options.max_seq_len));
  }
  const Tensor c = cos_cached.narrow(0, offset, L).reshape({L, 1, half});
  const Tensor s = sin_cached.narrow(0, offset, L).reshape({L, 1, half});
  return rotary_embedding(x, c.to(x.dtype()), s.to(x.dtype()), options.interleaved);
}

Tensor RotaryEmbedding::forward(const Tensor& x, const Tensor& positions) {
  check_input(x);
  const std::int64_t L = x.size(-3), half = head_dim / 2;
  const bool per_sequence = positions.dim() == 2 && x.dim() == 4 && positions.size(0) == x.size(0);
  if (positions.dtype() != Dtype::Int64 || !((positions.dim() == 1 || per_sequence) && positions.size(-1) == L)) {
    throw ShapeError(fmt::format("RotaryEmbedding: positions must be int64 [L] = [{}] or [N, L] for x {}, got {} {}", L,
                                 shape_str(x.shape()), dtype_name(positions.dtype()), shape_str(positions.shape())));
  }
  const std::int64_t* p = positions.data<std::int64_t>();
  for (std::int64_t i = 0; i < positions.numel(); ++i) {
    if (p[i] < 0 || p[i] >= options.max_seq_len) {
      throw ValueError(fmt::format("RotaryEmbedding: position {} is outside [0, max_seq_len = {}); construct it with a "
                                   "larger max_seq_len",
                                   p[i], options.max_seq_len));
    }
  }
  Shape table = positions.shape();  // [L, 1, D/2] or [N, L, 1, D/2]
  table.push_back(1);
  table.push_back(half);
  const Tensor flat = positions.reshape({-1});
  const Tensor c = index_select(cos_cached, 0, flat).reshape(table);
  const Tensor s = index_select(sin_cached, 0, flat).reshape(table);
  return rotary_embedding(x, c.to(x.dtype()), s.to(x.dtype()), options.interleaved);
}

std::string RotaryEmbedding::extra_repr() const {
  return fmt::format("head_dim={}, base={}, interleaved={}, max_seq_len={}", head_dim, options.base, options.interleaved,
                     options.max_seq_len);
}

}  // namespace microtorch::nn
