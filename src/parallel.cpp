#include "microtorch/parallel.hpp"

#include <cstdlib>

#include <cblas.h>
#include <fmt/format.h>

#include "microtorch/error.hpp"

namespace microtorch {

namespace {

int threads_from_environment() {
  const char* env = std::getenv("MICROTORCH_NUM_THREADS");
  const int n = env ? std::atoi(env) : 1;
  return n >= 1 ? n : 1;
}

// Applied when the library is loaded, before any matmul.
const int initial_threads = [] {
  const int n = threads_from_environment();
  openblas_set_num_threads(n);
  return n;
}();

int current_threads = initial_threads;

}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw ValueError(fmt::format("set_num_threads: needs at least 1 thread, got {}", n));
  openblas_set_num_threads(n);
  current_threads = n;
}

int get_num_threads() { return current_threads; }

}  // namespace microtorch
