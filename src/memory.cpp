// The block cache behind tensor storage (microtorch/memory.hpp).
#include "microtorch/memory.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "microtorch/error.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define MICROTORCH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MICROTORCH_ASAN 1
#endif
#endif
#if defined(MICROTORCH_ASAN)
#include <sanitizer/asan_interface.h>
#define MICROTORCH_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define MICROTORCH_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define MICROTORCH_POISON(p, n) ((void)(p), (void)(n))
#define MICROTORCH_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace microtorch::memory {

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kDefaultLimit = std::size_t{256} << 20;

// Requests above this can never be met (tensors hold at most 2^60 elements of 8 bytes); the
// bound also keeps the page rounding below from wrapping.
constexpr std::size_t kMaxBytes = std::size_t{1} << 63;

std::size_t page_rounded(std::size_t bytes) { return (bytes + kPage - 1) & ~(kPage - 1); }

// Each first touch of a 4 KB page is a fault (a few microseconds in a VM). Transparent huge
// pages in the kernel's "madvise" mode make that one fault per 2 MB: a fresh block's
// 2 MB-aligned interior is advised so.
void advise_huge_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  if (bytes < kHuge) return;
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (start + kHuge - 1) & ~(kHuge - 1), end = (start + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data, (void)bytes;
#endif
}

void* system_allocate(std::size_t bytes) {
  try {
    return ::operator new(bytes, std::align_val_t{kAlignment});
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(fmt::format("memory: the system refused {} bytes; use smaller tensors or free some "
                                       "(memory::empty_cache() returns cached blocks)",
                                       bytes));
  }
}
void system_free(void* p) noexcept { ::operator delete(p, std::align_val_t{kAlignment}); }

std::size_t limit_from_environment() {
  const char* v = std::getenv("MICROTORCH_CACHE_LIMIT");
  if (v == nullptr || *v == '\0') return kDefaultLimit;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  return end != nullptr && *end == '\0' ? static_cast<std::size_t>(n) : kDefaultLimit;
}

struct Block {
  void* p;
  std::size_t bytes;  // page-rounded
};

// Cached blocks oldest first: a request takes the newest block of its size (the one most
// likely still in the CPU caches); trimming drops the oldest.
class Cache {
 public:
  void* take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
      if (it->bytes != bytes) continue;
      void* p = it->p;
      cached_ -= bytes;
      blocks_.erase(std::next(it).base());
      ++hits_;
      MICROTORCH_UNPOISON(p, bytes);
      return p;
    }
    ++misses_;
    return nullptr;
  }

  // Keeps the block (true) or leaves it to the caller to free (false: over the limit).
  bool give(void* p, std::size_t bytes) {
    std::vector<Block> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (bytes > limit_) return false;
      blocks_.push_back({p, bytes});
      cached_ += bytes;
      MICROTORCH_POISON(p, bytes);
      trim_locked(limit_, dropped);
    }
    release(dropped);
    return true;
  }

  void trim(std::size_t to) {
    std::vector<Block> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      trim_locked(to, dropped);
    }
    release(dropped);
  }

  void set_limit(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      limit_ = bytes;
    }
    trim(bytes);
  }

  std::size_t limit() {
    std::lock_guard<std::mutex> lock(mu_);
    return limit_;
  }

  Stats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {cached_, blocks_.size(), hits_, misses_};
  }

 private:
  void trim_locked(std::size_t to, std::vector<Block>& dropped) {
    std::size_t n = 0;
    for (; n < blocks_.size() && cached_ > to; ++n) cached_ -= blocks_[n].bytes;
    dropped.assign(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(n));
    blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(n));
  }

  static void release(const std::vector<Block>& blocks) {
    for (const Block& b : blocks) {
      MICROTORCH_UNPOISON(b.p, b.bytes);
      system_free(b.p);
    }
  }

  std::mutex mu_;
  std::vector<Block> blocks_;
  std::size_t cached_ = 0, limit_ = limit_from_environment();
  std::uint64_t hits_ = 0, misses_ = 0;
};

// Never destroyed: tensors in static storage may die after the cache would have.
Cache& cache() {
  static Cache* c = new Cache();
  return *c;
}

}  // namespace

void* allocate(std::size_t bytes) {
  if (bytes > kMaxBytes) {
    throw OutOfMemoryError(fmt::format("memory: {} bytes requested, more than any tensor may hold (2^63)", bytes));
  }
  if (bytes < kCachedMinBytes) return system_allocate(std::max<std::size_t>(bytes, 1));
  const std::size_t rounded = page_rounded(bytes);
  if (void* p = cache().take(rounded)) return p;
  void* p = system_allocate(rounded);
  advise_huge_pages(p, rounded);
  return p;
}

void* allocate_array(std::size_t n, std::size_t size) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    throw OutOfMemoryError(fmt::format("memory: {} elements of {} bytes do not fit in a size_t", n, size));
  }
  return allocate(bytes);
}

void deallocate(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kCachedMinBytes) {
    system_free(p);
    return;
  }
  bool kept = false;
  try {
    kept = cache().give(p, page_rounded(bytes));
  } catch (...) {  // no room to remember the block: free it
  }
  if (!kept) system_free(p);
}

void empty_cache() { cache().trim(0); }
void set_cache_limit(std::size_t bytes) { cache().set_limit(bytes); }
std::size_t cache_limit() { return cache().limit(); }
Stats stats() { return cache().stats(); }

}  // namespace microtorch::memory
