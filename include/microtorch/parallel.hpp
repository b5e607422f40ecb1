/// \file
/// The one thread setting, the instruction set of microtorch's own kernels, and what
/// threads of your own may share.
///
/// microtorch targets small models, where threads cost more than they give: by default
/// everything runs on one thread. `MICROTORCH_NUM_THREADS=<n>` in the environment, or
/// set_num_threads(n) in code, raises it (as torch.set_num_threads does) for matmuls and
/// linear layers, whose products are split by rows (or columns) over n threads, and for
/// attention, whose batch x heads matrices are split over n threads (the forward's query
/// rows too, when the matrices do not divide evenly; attention's results are the same bits
/// on any n, a split product's agree to the dtype's rounding). Small products stay on one
/// thread. microtorch runs one pool of threads: it keeps OpenBLAS at one thread per call
/// (OpenBLAS's own workers, spinning between calls, would take the cores its pool needs), so
/// a BLAS call of your own (xtensor-blas) runs on one thread unless you raise OpenBLAS's
/// count yourself; set_num_threads sets it back to one.
///
/// Threads of your own: tensors, modules and optimizers hold no hidden shared state, so
/// independent models may be built, trained, saved and loaded in independent threads (a
/// tensor or module used by two threads at once needs your own lock, as in PyTorch). Random
/// draws are safe from any thread (random.hpp: GeneratorGuard gives a thread its own
/// stream). The setting below is process-wide, like torch.set_num_threads: set it at
/// start-up, or between steps, not while other threads run matmuls.
#pragma once

namespace microtorch {

/// Sets the threads microtorch may use: the rows (or columns) of one matmul, or attention's
/// batch x heads matrices (and query rows). Process-wide; n < 1 throws ValueError.
void set_num_threads(int n);
/// The current thread setting: 1 unless MICROTORCH_NUM_THREADS or set_num_threads raised it.
int get_num_threads();

/// The instruction set the attention kernels run on: "avx512", "avx2" or "baseline" (SSE2
/// on x86-64; the compiler's default elsewhere). It is the best one the build compiled that
/// this CPU has, at most `MICROTORCH_ISA=avx512|avx2|baseline` from the environment, as
/// PyTorch's ATEN_CPU_CAPABILITY caps its kernels (torch.backends.cpu.get_cpu_capability()).
/// A build with -march=native or -march=haswell compiles only that one, which the cap cannot
/// lower. Chosen once, at the first call or the first attention; any other MICROTORCH_ISA
/// throws ValueError.
const char* get_cpu_capability();

}  // namespace microtorch
