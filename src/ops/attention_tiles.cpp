// The attention tiles' dispatch: the ISA whose kernels run (attention_tiles_<isa>.cpp, from
// attention_tiles_isa.hpp), picked once at load time, and the entry points of
// attention_kernels.hpp that call its kernels.
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "microtorch/error.hpp"

#include "attention_kernels.hpp"
#include "attention_tiles.hpp"
#include "simd.hpp"

namespace microtorch::detail {

namespace {

enum class IsaLevel { baseline, avx2, avx512 };

// The ISA the kernels run: the best one compiled that this CPU has, at most MICROTORCH_ISA
// when it is set (avx512, avx2 or baseline), so that a lesser ISA's kernels can be tested
// and measured on a better CPU. Decided once.
IsaLevel isa() {
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

// f(Isa{}) for isa().
template <class F>
decltype(auto) on_isa(F&& f) {
  switch (isa()) {
#if defined(MICROTORCH_ISAS_AVX512)
    case IsaLevel::avx512:
      return f(simd::Avx512{});
#endif
#if defined(MICROTORCH_ISAS_AVX2)
    case IsaLevel::avx2:
      return f(simd::Avx2{});
#endif
    default:
#if defined(MICROTORCH_ISAS_BASELINE)
      return f(simd::Baseline{});
#else
      std::abort();  // unreachable: isa() returns a compiled ISA
#endif
  }
}

}  // namespace

template <class T>
std::int64_t attention_workspace(const AttentionDims& d, bool backward, bool whole_rows, std::int64_t group) {
  return on_isa([&](auto isa) { return tiles_workspace<T>(isa, d, backward, whole_rows, group); });
}
template std::int64_t attention_workspace<float>(const AttentionDims&, bool, bool, std::int64_t);
template std::int64_t attention_workspace<double>(const AttentionDims&, bool, bool, std::int64_t);

void attention_tiles(const AttentionMatrix<float>* a, std::int64_t count, RowShares r, float* w) {
  on_isa([&](auto isa) { tiles_forward(isa, a, count, r, w); });
}
void attention_tiles(const AttentionMatrix<double>* a, std::int64_t count, RowShares r, double* w) {
  on_isa([&](auto isa) { tiles_forward(isa, a, count, r, w); });
}
void attention_tiles_backward(const AttentionGradMatrix<float>& a, float* w) {
  on_isa([&](auto isa) { tiles_backward(isa, a, w); });
}
void attention_tiles_backward(const AttentionGradMatrix<double>& a, double* w) {
  on_isa([&](auto isa) { tiles_backward(isa, a, w); });
}

}  // namespace microtorch::detail

namespace microtorch {

const char* get_cpu_capability() {
  switch (detail::isa()) {
    case detail::IsaLevel::avx512:
      return "avx512";
    case detail::IsaLevel::avx2:
      return "avx2";
    default:
      return "baseline";
  }
}

}  // namespace microtorch
