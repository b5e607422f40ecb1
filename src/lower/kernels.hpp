// The runtime kernels as the host sees them: one entry per kernel function declared in
// runtime/mt_kernels.h (the list is extracted from that header at build time by
// tools/embed_runtime.py), each parameter's kind and C type deduced from the declaration
// itself. The lowering checks every kernel call it builds against this (a wrong argument
// count, an int16 buffer passed for an int8 parameter, a value that does not fit the C
// type fail at lowering time, naming the step), and the simulator calls the kernels
// through it. The C signature is written once, in mt_kernels.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "microtorch/lower/program.hpp"

namespace microtorch::lower {

/// One parameter of a kernel: a pointer to an array of `elem`, or an integer of the C
/// type's range [lo, hi].
struct KernelParam {
  enum class Kind { Pointer, Int, Real };
  Kind kind = Kind::Int;
  Elem elem = Elem::S32;    ///< Pointer: the element type
  bool writes = false;      ///< Pointer: not const (the kernel writes through it)
  std::int64_t lo = 0, hi = 0;  ///< Int: the C type's range
};

/// A resolved argument: the host pointer of a buffer argument, or the value of an integer.
struct KernelArg {
  void* ptr = nullptr;
  std::int64_t value = 0;
  double real = 0;
};

struct KernelInfo {
  std::string_view name;
  std::vector<KernelParam> params;
  bool returns_status = false;            ///< int return: non-zero = bad data (status 1)
  int (*call)(const KernelArg* args) = nullptr;  ///< returns the kernel's status (0 for void)
};

/// The kernel named `name`, or nullptr.
const KernelInfo* find_kernel(std::string_view name);

/// Checks a kernel call against the kernel's declaration; throws ValueError naming the
/// kernel, the argument and `label` (the step's node) on a mismatch.
void check_call(const Program& p, const Step& s);

}  // namespace microtorch::lower
