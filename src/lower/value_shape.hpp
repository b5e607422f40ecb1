// The shape check of one graph value, shared by Graph::validate (graph.cpp) and
// Graph::from_json (graph_json.cpp), which runs it before it reads a value's data.
#pragma once

#include <cstdint>

#include "microtorch/shape.hpp"

namespace microtorch::lower {

/// ValueError naming value %id unless its dims are non-negative and it has at most 2^31 - 1
/// elements (the firmware indexes elements with C int).
void check_value_shape(std::int64_t id, const Shape& shape);

}  // namespace microtorch::lower
