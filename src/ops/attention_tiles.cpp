// The attention tiles' dispatch: the entry points of attention_kernels.hpp, each calling the
// kernels (attention_tiles_<isa>.cpp, from attention_tiles_isa.hpp) of the ISA that
// cpu_isa() picks (parallel.cpp).
#include <cstdlib>

#include "../parallel.hpp"
#include "attention_kernels.hpp"
#include "attention_tiles.hpp"
#include "simd.hpp"

namespace microtorch::detail {

namespace {

// f(Isa{}) for cpu_isa() (parallel.cpp).
template <class F>
decltype(auto) on_isa(F&& f) {
  switch (cpu_isa()) {
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
      std::abort();  // unreachable: cpu_isa() returns a compiled ISA
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
