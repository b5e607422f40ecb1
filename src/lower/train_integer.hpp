// train_program's integer mode (train.hpp, Numeric::Integer): train_integer.cpp.
#pragma once

#include <string>
#include <vector>

#include "microtorch/lower/train.hpp"

namespace microtorch::lower {

/// The id of the parameter value `name` in `g`, or -1 (train.cpp).
std::int64_t parameter_value(const Graph& g, const std::string& name);
/// A RAM buffer of the training state (gradient, momentum, loss) of element type `elem`,
/// zeroed at start-up (train.cpp).
std::int64_t state_buffer(Program& p, const std::string& name, const std::string& origin, std::int64_t size, Elem elem);

/// The Program of train_program for Numeric::Integer, training `names` (checked selected).
Program train_program_integer(const Graph& graph, const Calibration& calibration, const QuantOptions& quantize,
                              const TrainOptions& options, const std::vector<std::string>& names);

}  // namespace microtorch::lower
