// The kernel table (kernels.hpp): every kernel of runtime/mt_kernels.h bound by its own C
// declaration. kernel_list.inc (generated from the header) holds one MT_KERNEL(name) per
// kernel function.
#include "kernels.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "runtime/mt_kernels.h"

namespace microtorch::lower {

namespace {

template <class T>
constexpr Elem elem_of() {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<U, std::int8_t>) return Elem::S8;
  else if constexpr (std::is_same_v<U, std::uint8_t>) return Elem::U8;
  else if constexpr (std::is_same_v<U, float>) return Elem::F32;
  else if constexpr (std::is_same_v<U, std::int16_t>) return Elem::S16;
  else if constexpr (std::is_same_v<U, std::int32_t>) return Elem::S32;
  else if constexpr (std::is_same_v<U, std::int64_t>) return Elem::S64;
  else static_assert(sizeof(T) == 0, "a kernel parameter points to a type the lowering has no Elem for");
}

template <class A>
KernelParam param_of() {
  KernelParam p;
  if constexpr (std::is_pointer_v<A>) {
    using T = std::remove_pointer_t<A>;
    p.kind = KernelParam::Kind::Pointer;
    p.elem = elem_of<T>();
    p.writes = !std::is_const_v<T>;
  } else if constexpr (std::is_same_v<A, float>) {
    p.kind = KernelParam::Kind::Real;
  } else {
    static_assert(std::is_integral_v<A>, "kernel parameters are pointers, integers or floats");
    p.kind = KernelParam::Kind::Int;
    p.lo = static_cast<std::int64_t>(std::numeric_limits<A>::min());
    p.hi = static_cast<std::int64_t>(std::min<std::uint64_t>(std::numeric_limits<A>::max(), INT64_MAX));
  }
  return p;
}

template <class A>
A convert(const KernelArg& a) {
  if constexpr (std::is_pointer_v<A>) {
    return static_cast<A>(a.ptr);
  } else if constexpr (std::is_same_v<A, float>) {
    return static_cast<float>(a.real);
  } else {
    return static_cast<A>(a.value);
  }
}

template <auto F, class R, class... A, std::size_t... I>
int invoke(const KernelArg* args, std::index_sequence<I...>) {
  if constexpr (std::is_void_v<R>) {
    F(convert<A>(args[I])...);
    return 0;
  } else {
    return F(convert<A>(args[I])...) != 0 ? 1 : 0;
  }
}

template <auto F, class R, class... A>
KernelInfo bind(std::string_view name, R (*)(A...)) {
  static_assert(std::is_void_v<R> || std::is_same_v<R, int>, "kernels return void or an int status");
  KernelInfo k;
  k.name = name;
  k.params = {param_of<A>()...};
  k.returns_status = !std::is_void_v<R>;
  k.call = [](const KernelArg* args) { return invoke<F, R, A...>(args, std::index_sequence_for<A...>{}); };
  return k;
}

const std::vector<KernelInfo>& table() {
  static const std::vector<KernelInfo> kernels = [] {
    std::vector<KernelInfo> k;
#define MT_KERNEL(name) k.push_back(bind<&name>(#name, &name));
#include "kernel_list.inc"
#undef MT_KERNEL
    std::sort(k.begin(), k.end(), [](const KernelInfo& a, const KernelInfo& b) { return a.name < b.name; });
    return k;
  }();
  return kernels;
}

}  // namespace

const KernelInfo* find_kernel(std::string_view name) {
  const auto& k = table();
  auto it = std::lower_bound(k.begin(), k.end(), name, [](const KernelInfo& a, std::string_view n) { return a.name < n; });
  return it != k.end() && it->name == name ? &*it : nullptr;
}

void check_call(const Program& p, const Step& s) {
  const KernelInfo* k = find_kernel(s.kernel);
  auto bad = [&](const std::string& why) {
    return ValueError(fmt::format("lower: the call of {} for {} is malformed: {}", s.kernel, s.label, why));
  };
  if (!k) throw bad("mt_kernels.h declares no such kernel");
  if (s.args.size() != k->params.size()) {
    throw bad(fmt::format("{} arguments for {} parameters", s.args.size(), k->params.size()));
  }
  for (std::size_t i = 0; i < s.args.size(); ++i) {
    const Arg& a = s.args[i];
    const KernelParam& want = k->params[i];
    switch (want.kind) {
      case KernelParam::Kind::Pointer:
        if (a.kind != Arg::Kind::Buffer) throw bad(fmt::format("argument {} must be a buffer", i));
        if (a.buffer >= 0 && p.buffer(a.buffer).elem != want.elem) {
          throw bad(fmt::format("argument {} is a {} buffer, the kernel takes {}", i,
                                elem_ctype(p.buffer(a.buffer).elem), elem_ctype(want.elem)));
        }
        break;
      case KernelParam::Kind::Real:
        if (a.kind != Arg::Kind::Real) throw bad(fmt::format("argument {} must be a float", i));
        break;
      case KernelParam::Kind::Int:
        if (a.kind != Arg::Kind::Int) throw bad(fmt::format("argument {} must be an integer", i));
        if (a.value < want.lo || a.value > want.hi) {
          throw bad(fmt::format("argument {} = {} does not fit its C type [{}, {}]", i, a.value, want.lo, want.hi));
        }
        break;
    }
  }
}

}  // namespace microtorch::lower
