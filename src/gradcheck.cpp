// gradcheck: the analytic Jacobian (one backward per output element) against central
// finite differences, dy/dx_k ~ (f(x + eps e_k) - f(x - eps e_k)) / 2 eps, in float64.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"

namespace microtorch {

namespace {

std::vector<double> flat_values(const Tensor& y) {
  const Tensor d = y.detach().to(Dtype::Float64);
  return {d.data<double>(), d.data<double>() + d.numel()};
}

}  // namespace

bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs, double eps, double atol,
               double rtol) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].requires_grad() && inputs[i].dtype() != Dtype::Float64) {
      throw DtypeError(fmt::format("gradcheck: input {} is {}; finite differences need float64 to be meaningful, "
                                   "pass it as .to(kFloat64)",
                                   i, dtype_name(inputs[i].dtype())));
    }
  }
  if (std::none_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.requires_grad(); })) {
    throw AutogradError("gradcheck: no input requires grad, so nothing would be checked; call requires_grad_() on the "
                        "inputs to differentiate");
  }
  std::vector<Tensor> saved_grads;
  for (const auto& x : inputs) saved_grads.push_back(x.defined() ? x.grad() : Tensor());

  const Tensor y = fn(inputs);
  if (!y.is_floating_point()) throw DtypeError("gradcheck: fn must return a floating tensor");
  const std::int64_t ny = y.numel();

  std::string report;
  std::int64_t mismatches = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    const std::int64_t nx = x.numel();
    // analytic[j * nx + k] = dy_j / dx_k
    std::vector<double> analytic(static_cast<std::size_t>(ny * nx), 0.0);
    if (!y.requires_grad()) {
      throw AutogradError(fmt::format("gradcheck: the output does not depend on input {} through recorded ops", i));
    }
    for (std::int64_t j = 0; j < ny; ++j) {
      for (const auto& in : inputs) {
        if (in.defined() && in.requires_grad()) in.zero_grad();
      }
      Tensor onehot = zeros(y.shape(), y.dtype());
      visit_dtype(y.dtype(), [&](auto tag) { onehot.data<typename decltype(tag)::type>()[j] = 1; });
      y.backward(onehot, /*retain_graph=*/true);
      if (x.grad().defined()) {
        const auto g = flat_values(x.grad());
        std::copy(g.begin(), g.end(), analytic.begin() + j * nx);
      }
    }
    double* px = x.data<double>();
    for (std::int64_t k = 0; k < nx; ++k) {
      const double v = px[k];
      std::vector<double> plus, minus;
      {
        NoGradGuard no_grad;
        px[k] = v + eps;
        plus = flat_values(fn(inputs));
        px[k] = v - eps;
        minus = flat_values(fn(inputs));
        px[k] = v;
      }
      for (std::int64_t j = 0; j < ny; ++j) {
        const double numerical = (plus[static_cast<std::size_t>(j)] - minus[static_cast<std::size_t>(j)]) / (2 * eps);
        const double a = analytic[static_cast<std::size_t>(j * nx + k)];
        if (!(std::fabs(a - numerical) <= atol + rtol * std::fabs(numerical))) {
          if (++mismatches <= 10) {
            report += fmt::format("\n  input {} element {} -> output element {}: analytic {:.8g}, numerical {:.8g}", i,
                                  k, j, a, numerical);
          }
        }
      }
    }
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) inputs[i].set_grad(saved_grads[i]);
  }
  if (mismatches > 0) {
    throw AutogradError(fmt::format("gradcheck: {} Jacobian entries differ by more than atol {} + rtol {} * "
                                    "|numerical| (eps {}):{}{}",
                                    mismatches, atol, rtol, eps, report, mismatches > 10 ? "\n  ..." : ""));
  }
  return true;
}

}  // namespace microtorch
