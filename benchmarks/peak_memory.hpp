// benchmarks/peak_memory.hpp — peak resident memory of one piece of work (Linux).
//
// Method (tools/bench_torch.py does exactly the same for PyTorch): writing "5" to
// /proc/self/clear_refs resets the process's RSS high-water mark (VmHWM); the work then
// runs once and its peak is VmHWM - VmRSS, both read from /proc/self/status. It counts
// every page the work touches (tensors, saved activations, gradients, allocator slack),
// whoever allocates them.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace bench {

inline std::int64_t status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  return -1;
}

/// Bytes by which fn() raises the resident set above where it started (-1 if unknown).
template <class F>
std::int64_t peak_memory_bytes(F&& fn) {
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";
    if (!reset) return -1;
  }
  const std::int64_t before = status_kib("VmRSS");
  fn();
  const std::int64_t peak = status_kib("VmHWM");
  return before < 0 || peak < 0 ? -1 : (peak - before) * 1024;
}

}  // namespace bench
