// Who computes each value of a graph and how many node inputs read it: what the fusions
// (an affine chain folded into a linear layer, a relu fused after one) look up to know that
// a value has one producer and one reader.
#pragma once

#include <cstdint>
#include <vector>

#include "microtorch/lower/graph.hpp"

namespace microtorch::lower {

struct ValueUses {
  std::vector<std::int64_t> producer;  ///< per value: index of the node computing it, -1 for none
  std::vector<std::int64_t> readers;   ///< per value: how many node inputs read it
};

inline ValueUses value_uses(const Graph& g) {
  ValueUses u{std::vector<std::int64_t>(g.values.size(), -1), std::vector<std::int64_t>(g.values.size(), 0)};
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    u.producer[static_cast<std::size_t>(g.nodes[i].output)] = static_cast<std::int64_t>(i);
    for (const auto v : g.nodes[i].inputs) {
      if (v >= 0) ++u.readers[static_cast<std::size_t>(v)];
    }
  }
  return u;
}

}  // namespace microtorch::lower
