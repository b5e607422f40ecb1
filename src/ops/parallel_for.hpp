// Internal: work split across microtorch's threads (the one setting of parallel.hpp).
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

}  // namespace microtorch::detail
