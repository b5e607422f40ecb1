// Checkpoints: state dicts as numpy .npz archives (the file format lives in src/npz.cpp).
#include "microtorch/nn/checkpoint.hpp"

#include <fmt/format.h>

#include "microtorch/io.hpp"

namespace microtorch::nn {

void save(const Module& m, const std::string& path) { save_npz(m.state_dict(), path); }

void load(Module& m, const std::string& path, bool strict) {
  const NamedTensors state = load_npz(path);  // IoError names the file and the member
  try {
    m.load_state_dict(state, strict);
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("nn::load: checkpoint '{}': {}", path, e.what()));
  }
}

}  // namespace microtorch::nn
