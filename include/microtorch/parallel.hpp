// microtorch/parallel.hpp — the one thread setting.
//
// microtorch targets small models, where BLAS threads cost more than they give: by
// default BLAS runs on one thread. MICROTORCH_NUM_THREADS=<n> in the environment, or
// set_num_threads(n) in code, raises it (as torch.set_num_threads does).
#pragma once

namespace microtorch {

/// Threads BLAS may use for one matmul (>= 1).
void set_num_threads(int n);
int get_num_threads();

}  // namespace microtorch
