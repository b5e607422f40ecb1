// Internal: the attention tiles' entry points, one set per ISA the build compiles
// (simd.hpp's MICROTORCH_ISAS_*), each defined by attention_tiles_<isa>.cpp from
// attention_tiles_isa.hpp; attention_tiles.cpp calls the set of the ISA it picks.
#pragma once

#include <cstdint>

#include "attention_kernels.hpp"
#include "simd.hpp"

namespace microtorch::detail {

#define MICROTORCH_DECLARE_ATTENTION_TILES(Isa)                                                                  \
  void tiles_forward(simd::Isa, const AttentionMatrix<float>* a, std::int64_t count, RowShares r, float* w);    \
  void tiles_forward(simd::Isa, const AttentionMatrix<double>* a, std::int64_t count, RowShares r, double* w);  \
  void tiles_backward(simd::Isa, const AttentionGradMatrix<float>& a, float* w);                                \
  void tiles_backward(simd::Isa, const AttentionGradMatrix<double>& a, double* w);                              \
  template <class T>                                                                                            \
  std::int64_t tiles_workspace(simd::Isa, const AttentionDims& d, bool backward, bool whole_rows, std::int64_t group);

#if defined(MICROTORCH_ISAS_AVX512)
MICROTORCH_DECLARE_ATTENTION_TILES(Avx512)
#endif
#if defined(MICROTORCH_ISAS_AVX2)
MICROTORCH_DECLARE_ATTENTION_TILES(Avx2)
#endif
#if defined(MICROTORCH_ISAS_BASELINE)
MICROTORCH_DECLARE_ATTENTION_TILES(Baseline)
#endif

#undef MICROTORCH_DECLARE_ATTENTION_TILES

}  // namespace microtorch::detail
