#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/nn/layers.hpp"
#include "microtorch/random.hpp"

namespace microtorch::nn {

namespace functional {

// y = x * m / (1 - p), m ~ Bernoulli(1 - p) ;  dx = dy * m / (1 - p) (derived by autograd)
Tensor dropout(const Tensor& x, double p, bool training) {
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(fmt::format("dropout: p must be in [0, 1], got {}", p));
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  Tensor keep;
  {
    NoGradGuard no_grad;
    keep = (rand(x.shape(), x.dtype()) >= p).to(x.dtype()) * (1.0 / (1.0 - p));
  }
  return x * keep;
}

}  // namespace functional

Dropout::Dropout(double p_) : p(p_) {
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(fmt::format("Dropout: p must be in [0, 1], got {}", p));
}

Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const { return fmt::format("p={}", p); }

}  // namespace microtorch::nn
