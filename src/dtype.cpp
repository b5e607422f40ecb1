#include "microtorch/dtype.hpp"

#include <cstdint>

namespace microtorch {

std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::Float32: return "float32";
    case Dtype::Float64: return "float64";
    case Dtype::Int64: return "int64";
    case Dtype::Bool: return "bool";
  }
  return "unknown";
}

std::size_t dtype_size(Dtype d) {
  return visit_dtype(d, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

namespace {
int rank(Dtype d) {
  switch (d) {
    case Dtype::Bool: return 0;
    case Dtype::Int64: return 1;
    case Dtype::Float32: return 2;
    case Dtype::Float64: return 3;
  }
  return 0;
}
}  // namespace

Dtype promote_types(Dtype a, Dtype b) { return rank(a) >= rank(b) ? a : b; }

}  // namespace microtorch
