/// \file
/// Where tensor memory comes from: a size-keyed cache of large blocks.
///
/// A training or inference loop allocates the same buffers on every step (activations,
/// saved attention weights, gradients). Fresh memory from the system costs a page fault per
/// page on first touch, plus zeroing by the kernel; on a VM that is several percent of a
/// GEMM-bound step. Blocks of at least kCachedMinBytes therefore go back to a cache when a
/// tensor dies and are handed out again for the next request of the same (page-rounded)
/// size, still resident. Smaller blocks are left to malloc, which already keeps them.
///
/// The cache holds at most cache_limit() bytes (default 256 MiB; `MICROTORCH_CACHE_LIMIT=<bytes>`
/// in the environment or set_cache_limit() in code; 0 turns caching off); beyond that the
/// oldest cached blocks are returned to the system. empty_cache() returns all of them (as
/// torch.cuda.empty_cache does for PyTorch's GPU cache). Under AddressSanitizer a cached
/// block is poisoned, so a use after free is still reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

/// The block cache behind every tensor's storage (see memory.hpp).
namespace microtorch::memory {

/// Blocks smaller than this are not cached.
constexpr std::size_t kCachedMinBytes = std::size_t{64} << 10;
/// Every block is aligned for the widest SIMD loads (AVX-512).
constexpr std::size_t kAlignment = 64;

/// A snapshot of the block cache, from stats() (counters since the process started).
struct Stats {
  std::size_t cached_bytes = 0;    ///< held by the cache, ready for reuse
  std::size_t cached_blocks = 0;   ///< how many blocks those bytes are
  std::uint64_t hits = 0;          ///< large requests served from the cache
  std::uint64_t misses = 0;        ///< large requests that went to the system
};

/// Returns every cached block to the system.
void empty_cache();
/// Sets the most bytes the cache may hold (0: no caching); lowering it returns the oldest
/// blocks to the system at once.
void set_cache_limit(std::size_t bytes);
/// The most bytes the cache may hold: 256 MiB unless MICROTORCH_CACHE_LIMIT or
/// set_cache_limit() said otherwise.
std::size_t cache_limit();
/// The cache's current size and its hit and miss counts.
Stats stats();

/// A raw block of `bytes`, kAlignment-aligned, from the cache or the system. Throws
/// OutOfMemoryError (a microtorch::Error) when the system refuses or the size is impossible.
void* allocate(std::size_t bytes);
/// Gives back a block from allocate(); `bytes` must be the size it was allocated with.
/// Large blocks go to the cache (or to the system when the cache is full), small ones to free.
void deallocate(void* p, std::size_t bytes) noexcept;
/// allocate(n * size), throwing OutOfMemoryError when the product does not fit in a size_t.
void* allocate_array(std::size_t n, std::size_t size);

/// The allocator of tensor storage: a stateless standard allocator (usable with any std or
/// xtensor container) over memory::allocate and memory::deallocate.
template <class T>
struct CachingAllocator {
  using value_type = T;  ///< the element type, as the Allocator requirements ask
  /// A stateless allocator: every instance shares the one process-wide cache.
  CachingAllocator() noexcept = default;
  /// The same allocator for another element type (containers rebind their allocator).
  template <class U>
  CachingAllocator(const CachingAllocator<U>&) noexcept {}  // NOLINT: rebinding converts implicitly
  /// Memory for n elements of T, kAlignment-aligned; throws OutOfMemoryError.
  T* allocate(std::size_t n) {
    return static_cast<T*>(memory::allocate_array(n, sizeof(T)));
  }
  /// Gives back the memory of n elements from allocate(n).
  void deallocate(T* p, std::size_t n) noexcept { memory::deallocate(p, n * sizeof(T)); }
  /// Always true: memory from one instance may be freed by any other.
  template <class U>
  bool operator==(const CachingAllocator<U>&) const noexcept { return true; }
  /// Always false (see operator==).
  template <class U>
  bool operator!=(const CachingAllocator<U>&) const noexcept { return false; }
};

}  // namespace microtorch::memory
