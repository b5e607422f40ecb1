// Internal: C (+)= A B on register tiles, the inner loops of the fused attention kernels
// (attention_tiles_isa.hpp).
//
// BLIS's micro-kernel design: a tile of Isa::kRows rows x Isa::kVectors vectors of C stays
// in registers while k runs; each step loads kVectors vectors of row k of B and broadcasts
// kRows scalars of column k of A into kRows x kVectors FMAs, so each load feeds several
// FMAs (AVX-512: 24 FMAs per 4 vector loads and 6 broadcasts).
//
// A is read one scalar at a time through a row and a column stride, so a matrix and its
// transpose are both read in place. B is read in whole vectors from panels of P = kVectors
// x lanes columns: B(k, n) = b[(n / P) b_panel + k ldb + n % P] (a row-major matrix is the
// case b_panel = P; a packed panel is b_panel = K ldb, ldb = P). C is row-major. B and C
// are read and written up to N rounded up to the lanes, so their rows must extend that far
// (packed, zero-padded buffers).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "simd.hpp"

namespace microtorch::detail {

/// An epilogue that stores the product as it is.
struct AsIs {
  template <class V>
  V operator()(V acc, std::int64_t, std::int64_t) const {
    return acc;
  }
};

/// How a product meets C.
enum class Into {
  overwrite,  ///< C = A B
  add,        ///< C += A B
  rescale,    ///< C = s_i C + A B (row i times row_scale[i]: an online softmax's correction)
};

/// One product C (+)= A B, M x N with inner dimension K.
template <class T>
struct Gemm {
  std::int64_t M = 0, N = 0, K = 0;
  const T* a = nullptr;
  std::int64_t a_row = 0, a_col = 0;  // A(i, k) = a[i a_row + k a_col]
  const T* b = nullptr;
  std::int64_t ldb = 0, b_panel = 0;  // B(k, n) = b[(n / P) b_panel + k ldb + n % P]
  T* c = nullptr;
  std::int64_t ldc = 0;
  Into into = Into::overwrite;
  const T* row_scale = nullptr;  // Into::rescale
};

namespace simd {

// MR x NV vectors of C from K steps; A and C start at the tile's first row, B at its first
// column, which are row i0 and column j0 of the product. Each vector of C is stored as
// epilogue(vector, row, column): the product's elementwise continuation, done while the tile
// is in registers.
template <class V, int MR, int NV, class T, class Epilogue>
[[gnu::always_inline]] inline void gemm_tile(std::int64_t K, const T* a, std::int64_t a_row, std::int64_t a_col,
                                             const T* b, std::int64_t ldb, T* c, std::int64_t ldc, Into into,
                                             const T* row_scale, std::int64_t i0, std::int64_t j0,
                                             const Epilogue& epilogue) {
  constexpr int W = sizeof(V) / sizeof(T);
  V acc[MR][NV];  // every loop over it unrolled, so that it lives in registers
  _Pragma("GCC unroll 8") for (int r = 0; r < MR; ++r) {
    _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  }
  for (std::int64_t k = 0; k < K; ++k, a += a_col, b += ldb) {
    V bk[NV];
    _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v) bk[v] = load_vec<V>(b + v * W);
    _Pragma("GCC unroll 8") for (int r = 0; r < MR; ++r) {
      const T ark = a[r * a_row];
      _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v) acc[r][v] += ark * bk[v];
    }
  }
  if (into == Into::add) {
    _Pragma("GCC unroll 8") for (int r = 0; r < MR; ++r) {
      _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v) acc[r][v] += load_vec<V>(c + r * ldc + v * W);
    }
  } else if (into == Into::rescale) {
    _Pragma("GCC unroll 8") for (int r = 0; r < MR; ++r) {
      _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v) acc[r][v] += row_scale[r] * load_vec<V>(c + r * ldc + v * W);
    }
  }
  _Pragma("GCC unroll 8") for (int r = 0; r < MR; ++r) {
    _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v) {
      store_vec(c + r * ldc + v * W, epilogue(acc[r][v], i0 + r, j0 + v * W));
    }
  }
}

// The tile for mr <= MR rows and nv <= NV vectors, each shape compiled once, C stored as it is
// (an epilogue takes the full tile only: gemm_tiles).
template <class V, int MR, int NV, class T>
[[gnu::always_inline]] inline void gemm_tile_upto(int mr, int nv, std::int64_t K, const T* a, std::int64_t a_row,
                                                  std::int64_t a_col, const T* b, std::int64_t ldb, T* c,
                                                  std::int64_t ldc, Into into, const T* row_scale) {
  if constexpr (MR > 1) {
    if (mr < MR) return gemm_tile_upto<V, MR - 1, NV>(mr, nv, K, a, a_row, a_col, b, ldb, c, ldc, into, row_scale);
  }
  if constexpr (NV > 1) {
    if (nv < NV) return gemm_tile_upto<V, MR, NV - 1>(mr, nv, K, a, a_row, a_col, b, ldb, c, ldc, into, row_scale);
  }
  gemm_tile<V, MR, NV>(K, a, a_row, a_col, b, ldb, c, ldc, into, row_scale, 0, 0, AsIs{});
}

/// Columns of one panel of B: a tile's width.
template <class Isa, class T>
constexpr int kPanelOf = Isa::kVectors * kLanesOf<Isa, T>;

/// g.c (+)= g.a g.b, each vector of C stored as epilogue(vector, row, column) (row < M,
/// column a multiple of the lanes < N). K runs in slices of 128, so that the slice of a
/// panel of B that all the tiles of a column of C read stays in L1 (32 KiB at most on
/// AVX-512); the epilogue applies to the last slice only. A product with an epilogue must be
/// whole tiles (M a multiple of kRows, N of kPanelOf): the epilogue is compiled into the one
/// full tile shape, not into each of the edge shapes.
template <class Isa, class T, class Epilogue = AsIs>
[[gnu::always_inline]] inline void gemm_tiles(const Gemm<T>& g, const Epilogue& epilogue = {}) {
  using V = VecOf<Isa, T>;
  constexpr int W = kLanesOf<Isa, T>, MR = Isa::kRows, NV = Isa::kVectors, P = kPanelOf<Isa, T>;
  constexpr std::int64_t kSlice = 128;
  std::int64_t k0 = 0;
  do {
    const std::int64_t kc = std::min(kSlice, g.K - k0);
    const Into into = k0 == 0 ? g.into : Into::add;
    const bool last = k0 + kSlice >= g.K;
    for (std::int64_t n0 = 0; n0 < g.N; n0 += P) {
      const int nv = static_cast<int>(std::min<std::int64_t>(NV, (g.N - n0 + W - 1) / W));
      const T* b = g.b + (n0 / P) * g.b_panel + k0 * g.ldb;
      for (std::int64_t m0 = 0; m0 < g.M; m0 += MR) {
        const int mr = static_cast<int>(std::min<std::int64_t>(MR, g.M - m0));
        const T* a = g.a + m0 * g.a_row + k0 * g.a_col;
        const T* row_scale = g.row_scale ? g.row_scale + m0 : nullptr;
        T* c = g.c + m0 * g.ldc + n0;
        if constexpr (std::is_same_v<Epilogue, AsIs>) {
          gemm_tile_upto<V, MR, NV>(mr, nv, kc, a, g.a_row, g.a_col, b, g.ldb, c, g.ldc, into, row_scale);
        } else if (last) {
          gemm_tile<V, MR, NV>(kc, a, g.a_row, g.a_col, b, g.ldb, c, g.ldc, into, row_scale, m0, n0, epilogue);
        } else {
          gemm_tile<V, MR, NV>(kc, a, g.a_row, g.a_col, b, g.ldb, c, g.ldc, into, row_scale, m0, n0, AsIs{});
        }
      }
    }
    k0 += kSlice;
  } while (k0 < g.K);
}

}  // namespace simd

}  // namespace microtorch::detail
