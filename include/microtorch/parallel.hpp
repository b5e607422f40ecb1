/// \file
/// The one thread setting, the instruction set of microtorch's own kernels, and what
/// threads of your own may share.
///
/// microtorch targets small models, where threads cost more than they give: by default
/// everything runs on one thread. `MICROTORCH_NUM_THREADS=<n>` in the environment, or
/// set_num_threads(n) in code, raises it (as torch.set_num_threads does) for BLAS and for
/// attention, whose batch x heads matrices are then split over n threads (the forward's
/// query rows too, when the matrices do not divide evenly; the results are the same bits on
/// any n). Its kernels call no BLAS, so the cores are never oversubscribed.
///
/// Threads of your own: tensors, modules and optimizers hold no hidden shared state, so
/// independent models may be built, trained, saved and loaded in independent threads (a
/// tensor or module used by two threads at once needs your own lock, as in PyTorch). Random
/// draws are safe from any thread (random.hpp: GeneratorGuard gives a thread its own
/// stream). The setting below is process-wide, like torch.set_num_threads: set it at
/// start-up, or between steps, not while other threads run matmuls.
#pragma once

namespace microtorch {

/// Sets the threads microtorch may use: BLAS within one matmul, or attention's batch x heads
/// matrices (and query rows). Process-wide; n < 1 throws ValueError.
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
