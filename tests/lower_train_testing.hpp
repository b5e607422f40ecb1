// Training-step test helpers: the step taken on the simulator and on the host model
// (microtorch's autograd and torch.optim.SGD written out), compared.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "microtorch/lower/quantize.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/lower/train.hpp"
#include "microtorch/nn.hpp"

namespace lower_testing {

namespace lower = microtorch::lower;

inline double max_abs_diff(const microtorch::Tensor& a, const microtorch::Tensor& b) {
  return microtorch::max(microtorch::abs(a.to(microtorch::Dtype::Float64) - b.to(microtorch::Dtype::Float64))).item();
}

inline lower::QuantOptions named(const std::string& name) {
  lower::QuantOptions q;
  q.name = name;
  return q;
}

// One torch.optim.SGD step written out (weight decay, momentum with PyTorch's first step
// m = d) on the host model's parameters named in `names`, momentum buffers in `bufs`.
inline void host_sgd(microtorch::nn::Module& model, const std::vector<std::string>& names,
                     const lower::TrainOptions& t, std::map<std::string, microtorch::Tensor>& bufs) {
  microtorch::NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    microtorch::Tensor d = p.grad().clone();
    if (t.weight_decay > 0) d = d + p * t.weight_decay;
    if (t.momentum > 0) {
      auto it = bufs.find(name);
      d = it == bufs.end() ? d : it->second * t.momentum + d;
      bufs[name] = d.clone();
    }
    p.copy_(p - d * t.lr);
  }
  model.zero_grad();
}

// Takes `steps` training steps on the simulator and on the host model (autograd, the SGD
// step written out), on batches of `batch` rows of `xs` with targets `ys`; checks that each
// step's loss and every trained parameter agree within `tol` after each step.
inline void compare_steps(microtorch::nn::Module& model, const lower::Graph& graph, const lower::Calibration& cal,
                          const lower::TrainOptions& t, const microtorch::Tensor& xs, const microtorch::Tensor& ys,
                          std::int64_t steps, double tol) {
  const lower::Program p = lower::train_program(graph, cal, named("step"), t);
  lower::Simulator sim(p);
  const std::vector<std::string> names = lower::trained_parameters(graph, t);
  std::map<std::string, microtorch::Tensor> bufs;
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t lo = (s * t.batch) % xs.size(0);
    const microtorch::Tensor x = xs.slice(0, lo, lo + t.batch), y = ys.slice(0, lo, lo + t.batch);
    const double loss = sim.train_step(x, y);
    const microtorch::Tensor out = model.forward(x);
    const microtorch::Tensor host_loss =
        y.is_floating_point() ? microtorch::nn::functional::mse_loss(out, y)
                              : microtorch::nn::functional::cross_entropy(out.reshape({-1, out.size(-1)}), y.reshape({-1}));
    host_loss.backward();
    host_sgd(model, names, t, bufs);
    INFO("step " << s);
    CHECK(std::abs(loss - host_loss.item()) <= tol);
    for (auto& [name, w] : model.named_parameters()) {
      if (std::find(names.begin(), names.end(), name) == names.end()) continue;
      INFO(name);
      CHECK(max_abs_diff(sim.parameter(name), w) <= tol);
    }
  }
}

}  // namespace lower_testing
