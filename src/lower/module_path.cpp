// module_path (module_path.hpp): a breadth-first walk back from the node to the nearest
// node that reads a parameter.
#include "module_path.hpp"

#include <vector>

namespace microtorch::lower {

ModulePath module_path(const Graph& g, const Node& n) {
  std::vector<const Node*> frontier{&n};
  for (std::size_t hops = 0; hops < 64 && !frontier.empty(); ++hops) {
    std::vector<const Node*> next;
    for (const Node* m : frontier) {
      for (auto i : m->inputs) {
        if (i < 0) continue;
        const Value& v = g.value(i);
        if (v.kind == ValueKind::Parameter) {
          const auto dot = v.name.rfind('.');
          return {dot == std::string::npos ? "<root>" : v.name.substr(0, dot), m == &n};
        }
        if (v.kind == ValueKind::OpOutput) {
          for (const Node& p : g.nodes) {
            if (p.output == i) next.push_back(&p);
          }
        }
      }
    }
    frontier = std::move(next);
  }
  return {};
}

}  // namespace microtorch::lower
