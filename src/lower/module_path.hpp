// Which module a graph node belongs to, as far as the graph tells: the dotted prefix of the
// parameters it uses ("encoder.layers.0.linear1" for its weight), or, for a node without
// parameters (an activation, a residual add, attention), the module of the nearest node
// before it that has some. Error messages, the per-layer report and per-layer precision
// name nodes by it.
#pragma once

#include <cstdint>
#include <string>

#include "microtorch/lower/graph.hpp"

namespace microtorch::lower {

struct ModulePath {
  std::string path;  ///< "" when no node before it uses parameters; "<root>" for the model's own
  bool own = false;  ///< the node uses the module's parameters itself
};
ModulePath module_path(const Graph& g, const Node& n);

}  // namespace microtorch::lower
