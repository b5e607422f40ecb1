// microtorch/parallel.hpp — the one thread setting.
//
// microtorch targets small models, where threads cost more than they give: by default
// everything runs on one thread. MICROTORCH_NUM_THREADS=<n> in the environment, or
// set_num_threads(n) in code, raises it (as torch.set_num_threads does) for BLAS and for
// attention, whose batch x heads loop is then split over n threads while OpenBLAS runs on
// one thread inside it (the cores are never oversubscribed).
#pragma once

namespace microtorch {

/// Threads microtorch may use: BLAS within one matmul, or attention's batch x heads loop (>= 1).
void set_num_threads(int n);
int get_num_threads();

}  // namespace microtorch
