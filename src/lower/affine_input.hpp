// Elementwise affine ops on a linear layer's input fold into its weights: a chain like
// (x - mean) * inv_std or x / 255 + c (constants per input feature or scalars) that only the
// linear layer reads becomes W diag(a) and b + W c, so the integer program reads x itself,
// quantized once, instead of rounding after every step. Calibration and the linear rule
// find the chain with the same function.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "microtorch/lower/graph.hpp"

namespace microtorch::lower {

struct AffineInput {
  std::int64_t root = -1;            ///< the value the chain starts from
  std::vector<std::int64_t> nodes;   ///< indices of the chain's nodes in the graph
  std::vector<double> scale, shift;  ///< per input feature: linear input = scale * root + shift
};

/// Which values are constants: parameters, constants and outputs of nodes of constants only.
std::vector<bool> constant_values(const Graph& g);

/// The chain of elementwise affine ops with constant operands feeding the input (input 0,
/// features in its last dim `in`) of `linear`, a layer whose rule folds one
/// (OpRule::folds_affine_input) with its weight a constant, when there is one: each link an op
/// with an OpRule::affine_link (add, sub, mul, div by a constant without zeros) of one
/// activation of the output's shape and one constant that is a scalar or per feature, read by
/// nothing else. `data(id)` gives a
/// constant's value (constant_values()); without it, scale and shift stay empty.
std::optional<AffineInput> affine_input(const Graph& g, const Node& linear,
                                        const std::function<Tensor(std::int64_t)>& data = {});

}  // namespace microtorch::lower
