#include <fmt/format.h>

#include "microtorch/nn/layers.hpp"

namespace microtorch::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(children().size()), std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& m : children()) y = m->forward(y);
  return y;
}

std::shared_ptr<Module> Sequential::operator[](std::size_t i) const {
  const auto c = children();
  if (i >= c.size()) throw IndexError(fmt::format("Sequential: index {} is out of range for {} modules", i, c.size()));
  return c[i];
}

}  // namespace microtorch::nn
