// Random small graphs for the lowering pipeline: a chain of lowerable ops over a random
// input shape, driven by any source of integers (a seeded generator in the doctest suite,
// the fuzzer's bytes in tests/fuzz/fuzz_lower.cpp). Every graph it builds is valid float
// code; whether it lowers, and to what, is what the callers check.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "microtorch/microtorch.hpp"

namespace random_graph {

namespace mt = microtorch;

struct Graph {
  mt::Shape input_shape;                           ///< [1, rows, cols]
  std::function<mt::Tensor(const mt::Tensor&)> fn;  ///< the forward
  std::string description;                         ///< the ops, for failure messages
  std::vector<mt::Tensor> constants;                ///< weights the forward captured
};

// `next(n)` returns an integer in [0, n).
template <class Next>
Graph make(Next&& next) {
  Graph g;
  const std::int64_t rows = 1 + next(6), cols = 2 + next(7);
  g.input_shape = {1, rows, cols};
  const int n_ops = 1 + next(6);
  std::vector<std::function<mt::Tensor(const mt::Tensor&)>> ops;
  std::int64_t width = cols;  // the last dim as the chain goes
  for (int i = 0; i < n_ops; ++i) {
    switch (next(10)) {
      case 0: {  // linear to a new width
        const std::int64_t out = 2 + next(7);
        const mt::Tensor w = mt::randn({out, width}) * 0.5, b = mt::randn({out}) * 0.1;
        g.constants.push_back(w), g.constants.push_back(b);
        ops.push_back([w, b](const mt::Tensor& x) { return mt::linear(x, w, b); });
        g.description += "linear ";
        width = out;
        break;
      }
      case 1: ops.push_back([](const mt::Tensor& x) { return mt::relu(x); }), g.description += "relu "; break;
      case 2: ops.push_back([](const mt::Tensor& x) { return mt::tanh(x); }), g.description += "tanh "; break;
      case 3: ops.push_back([](const mt::Tensor& x) { return mt::softmax(x, -1); }), g.description += "softmax "; break;
      case 4: {  // residual add with a scaled copy of itself
        const double c = 0.25 * static_cast<double>(1 + next(8));
        ops.push_back([c](const mt::Tensor& x) { return x + x * c; });
        g.description += "x+x*c ";
        break;
      }
      case 5:  // eps 1e-3, not PyTorch's 1e-5: a row whose spread is a few steps of its int16
               // input format would have that format's rounding amplified by up to
               // 1/sqrt(eps) (a fuzz finding: a [1, 3, 2] row 13 steps wide, 6% off), which
               // is the input's quantization, not the lowering's
        ops.push_back([](const mt::Tensor& x) { return mt::layer_norm(x, {x.size(-1)}, {}, {}, 1e-3); });
        g.description += "layer_norm ";
        break;
      case 6: {  // add a constant row (broadcast over the rows)
        const mt::Tensor c = mt::randn({width});
        g.constants.push_back(c);
        ops.push_back([c](const mt::Tensor& x) { return x + c; });
        g.description += "+row ";
        break;
      }
      case 7:  // transpose twice through a copy-free view and a scale
        ops.push_back([](const mt::Tensor& x) { return mt::transpose(mt::transpose(x, 1, 2) * 0.5, 1, 2); });
        g.description += "transpose*0.5 ";
        break;
      case 8: ops.push_back([](const mt::Tensor& x) { return mt::sigmoid(x) - 0.5; }), g.description += "sigmoid-0.5 "; break;
      default:  // self-attention without projections
        ops.push_back([](const mt::Tensor& x) {
          return std::get<0>(mt::scaled_dot_product_attention(x, x, x, mt::Mask(), 0.0, false));
        });
        g.description += "sdpa ";
        break;
    }
  }
  g.fn = [ops](const mt::Tensor& x) {
    mt::Tensor y = x;
    for (const auto& op : ops) y = op(y);
    return mt::mean(y, {1});  // [1, width]
  };
  return g;
}

}  // namespace random_graph
