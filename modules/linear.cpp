#include <cmath>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/nn/layers.hpp"
#include "microtorch/random.hpp"

namespace microtorch::nn {

Linear::Linear(std::int64_t in, std::int64_t out, LinearOptions options) : in_features(in), out_features(out) {
  if (in <= 0 || out <= 0) {
    throw ValueError(fmt::format("Linear: in_features and out_features must be positive, got {} and {}", in, out));
  }
  weight = register_parameter("weight", empty({out, in}, options.dtype));
  if (options.bias) bias = register_parameter("bias", empty({out}, options.dtype));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));  // = U(-1/sqrt(in), 1/sqrt(in))
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features, out_features, bias.defined());
}

}  // namespace microtorch::nn
