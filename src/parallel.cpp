// The thread setting and the pool behind parallel_for, and the instruction set the kernels
// run on: microtorch/parallel.hpp (public) and parallel.hpp (internal).
#include "microtorch/parallel.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cblas.h>
#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "ops/simd.hpp"  // MICROTORCH_ISAS_*: the instruction sets compiled
#include "parallel.hpp"

namespace microtorch {

namespace {

int threads_from_environment() {
  const char* env = std::getenv("MICROTORCH_NUM_THREADS");
  const int n = env ? std::atoi(env) : 1;
  return n >= 1 ? n : 1;
}

// OpenBLAS runs every call on the calling thread: microtorch's matmuls split their work
// over the pool below themselves (matmul.cpp). Two pools on the same cores fight: after a
// multi-threaded call OpenBLAS's workers spin in sched_yield for ~2^28 cycles (its
// THREAD_TIMEOUT), taking the core the next region's worker needs (MHA 4x512x512x8 forward +
// backward at 2 threads: 83 ms with them, 76 ms without). Set when the library is loaded,
// before any matmul, and again by set_num_threads in case other code changed it.
void blas_on_caller() { openblas_set_num_threads(1); }

const int initial_threads = [] {
  blas_on_caller();
  return threads_from_environment();
}();

// Read by every parallel_for on any thread; written by set_num_threads.
std::atomic<int> current_threads{initial_threads};
std::mutex blas_threads_mutex;  // openblas_set_num_threads is not meant to run concurrently

// Below this many FLOPs a parallel region costs more (waking a thread: ~10 us) than it saves.
constexpr double kMinParallelFlops = 2e6;

/// Worker threads that wait until a region hands them a range. Only one region runs at a
/// time; a region started while another runs (from another user thread) runs serially.
///
/// A waiting thread (a worker between regions, the caller for the workers' ranges) first
/// polls for kSpin, then sleeps on a condition variable: the regions of one training step
/// come tens of microseconds apart, and waking a sleeping thread (a futex wake-up, on a
/// virtual machine an idle vCPU's exit to the hypervisor) costs about as much.
class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  // Runs body over [0, n) on `threads` threads (the caller included); false when busy.
  bool run(int threads, std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
    std::unique_lock<std::mutex> region(region_, std::try_to_lock);
    if (!region.owns_lock()) return false;
    while (static_cast<int>(workers_.size()) < threads - 1) {
      workers_.emplace_back([this, id = static_cast<int>(workers_.size()) + 1] { work(id); });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      n_ = n;
      threads_ = threads;
      pending_ = threads - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    std::exception_ptr mine;
    try {
      range(0, body);
    } catch (...) {
      mine = std::current_exception();
    }
    poll([this] { return pending_.load(std::memory_order_acquire) == 0; });
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    body_ = nullptr;
    if (mine) std::rethrow_exception(mine);
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void range(int id, const std::function<void(std::int64_t, std::int64_t)>& body) const {
    const std::int64_t begin = n_ * id / threads_, end = n_ * (id + 1) / threads_;
    if (begin < end) body(begin, end);
  }

  // Returns when ready() holds or kSpin has passed.
  template <class Ready>
  static void poll(Ready ready) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (!ready() && std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }

  void work(int id) {
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      lock.unlock();
      poll([&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; });
      lock.lock();
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (id >= threads_) continue;  // a smaller region than the pool
      const auto* body = body_;
      lock.unlock();
      std::exception_ptr error;
      try {
        range(id, *body);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !error_) error_ = error;
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex region_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(std::int64_t, std::int64_t)>* body_ = nullptr;
  std::int64_t n_ = 0;
  int threads_ = 1;
  // Written under mutex_ (the condition variables' predicates), polled without it.
  std::atomic<int> pending_{0};
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  static constexpr std::chrono::microseconds kSpin{100};
  std::exception_ptr error_;
};

thread_local bool in_region = false;

}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw ValueError(fmt::format("set_num_threads: needs at least 1 thread, got {}", n));
  std::lock_guard<std::mutex> lock(blas_threads_mutex);
  blas_on_caller();
  current_threads.store(n);
}

int get_num_threads() { return current_threads.load(); }

namespace detail {

void parallel_for(std::int64_t n, double cost_per_item, const std::function<void(std::int64_t, std::int64_t)>& body) {
  const int threads = static_cast<int>(std::min<std::int64_t>(current_threads.load(), n));
  if (threads <= 1 || in_region || cost_per_item * static_cast<double>(n) < kMinParallelFlops) {
    if (n > 0) body(0, n);
    return;
  }
  static Pool pool;
  struct Region {  // the caller's nested parallel_for calls run serially
    Region() { in_region = true; }
    ~Region() { in_region = false; }
  } region;
  auto guarded = [&body](std::int64_t b, std::int64_t e) {
    in_region = true;  // nested regions inside a worker run serially
    body(b, e);
  };
  if (!pool.run(threads, n, guarded)) body(0, n);
}

// The ISA the kernels run: the best one compiled that this CPU has, at most MICROTORCH_ISA
// when it is set (avx512, avx2 or baseline), so that a lesser ISA's kernels can be tested
// and measured on a better CPU. Decided once.
IsaLevel cpu_isa() {
  static const IsaLevel level = [] {
    IsaLevel cap = IsaLevel::avx512;
    if (const char* env = std::getenv("MICROTORCH_ISA"); env && *env) {
      const std::string want = env;
      if (want == "avx2") {
        cap = IsaLevel::avx2;
      } else if (want == "baseline") {
        cap = IsaLevel::baseline;
      } else if (want != "avx512") {
        throw ValueError(fmt::format("MICROTORCH_ISA: expected avx512, avx2 or baseline, got '{}'", want));
      }
    }
#if defined(MICROTORCH_ISAS_AVX512)
    if (cap >= IsaLevel::avx512 && __builtin_cpu_supports("avx512f")) return IsaLevel::avx512;
#endif
#if defined(MICROTORCH_ISAS_AVX2)
    if (cap >= IsaLevel::avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      return IsaLevel::avx2;
    }
#endif
#if defined(MICROTORCH_ISAS_BASELINE)
    return IsaLevel::baseline;
#elif defined(MICROTORCH_ISAS_AVX2)
    return IsaLevel::avx2;  // the build's -march fixed it: nothing lesser is compiled
#else
    return IsaLevel::avx512;
#endif
  }();
  return level;
}

}  // namespace detail

const char* get_cpu_capability() {
  switch (detail::cpu_isa()) {
    case detail::IsaLevel::avx512:
      return "avx512";
    case detail::IsaLevel::avx2:
      return "avx2";
    default:
      return "baseline";
  }
}

}  // namespace microtorch
