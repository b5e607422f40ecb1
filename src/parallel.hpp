// Internal: the rest of what parallel.cpp defines (the public part is microtorch/parallel.hpp):
// the work split across microtorch's threads, and the instruction set its own kernels run on.
#pragma once

#include <cstdint>
#include <functional>

namespace microtorch::detail {

/// Calls body(begin, end) on disjoint ranges covering [0, n), on up to get_num_threads()
/// threads (the caller is one of them; the others are a pool kept for the library's
/// life). Runs serially when the total work, `cost_per_item * n` in FLOPs, is too small
/// to pay for waking a thread, when one thread is set, or when called from inside another
/// parallel_for (or while another user thread's region holds the pool). Bodies may call
/// BLAS: OpenBLAS runs each call on its caller (parallel.cpp), so the pool is the only one.
void parallel_for(std::int64_t n, double cost_per_item, const std::function<void(std::int64_t, std::int64_t)>& body);

/// The instruction sets the register-tiled kernels are written for (ops/simd.hpp; the
/// MICROTORCH_ISAS_* macros say which ones the build compiles).
enum class IsaLevel { baseline, avx2, avx512 };

/// The instruction set the kernels run on, as get_cpu_capability() names it: the best one
/// compiled that this CPU has, at most MICROTORCH_ISA. Decided once, at the first call;
/// any other MICROTORCH_ISA throws ValueError.
IsaLevel cpu_isa();

}  // namespace microtorch::detail
