#include <fmt/format.h>

#include "microtorch/nn/layers.hpp"

namespace microtorch::nn {

LayerNorm::LayerNorm(Shape shape, LayerNormOptions opts) : normalized_shape(std::move(shape)), options(opts) {
  if (normalized_shape.empty()) throw ValueError("LayerNorm: normalized_shape must name at least one dim");
  if (options.elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape, options.dtype));
    bias = register_parameter("bias", zeros(normalized_shape, options.dtype));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, options.eps); }

std::string LayerNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", shape_str(normalized_shape), options.eps,
                     options.elementwise_affine);
}

RMSNorm::RMSNorm(Shape shape, RMSNormOptions opts) : normalized_shape(std::move(shape)), options(opts) {
  if (normalized_shape.empty()) throw ValueError("RMSNorm: normalized_shape must name at least one dim");
  if (options.elementwise_affine) weight = register_parameter("weight", ones(normalized_shape, options.dtype));
}

Tensor RMSNorm::forward(const Tensor& x) { return rms_norm(x, normalized_shape, weight, options.eps); }

std::string RMSNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", shape_str(normalized_shape),
                     options.eps ? fmt::format("{}", *options.eps) : std::string("None"), options.elementwise_affine);
}

}  // namespace microtorch::nn
