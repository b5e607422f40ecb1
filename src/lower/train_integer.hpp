// train_program's integer mode (train.hpp, Numeric::Integer): train_integer.cpp.
#pragma once

#include <string>
#include <vector>

#include "microtorch/lower/train.hpp"

namespace microtorch::lower {

/// The Program of train_program for Numeric::Integer, training `names` (checked selected).
Program train_program_integer(const Graph& graph, const Calibration& calibration, const QuantOptions& quantize,
                              const TrainOptions& options, const std::vector<std::string>& names);

}  // namespace microtorch::lower
