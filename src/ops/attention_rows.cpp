// The fused forward of one attention matrix (declared in attention_kernels.hpp):
//   S = scale q k^T + bias,  A = softmax_rows(S),  P = A * M,  O = P v
// computed for W query rows at a time, W = the lanes of one vector (16 floats, 8 doubles;
// simd.hpp), in transposed form: lane r of vector j holds S[i0 + r, j]. Every step of the
// block is then elementwise over lanes:
//   S^T[j] = sum_d k[j, d] Q^T[d]            (Q^T: the block's rows of q, scaled, transposed)
//   m = max_j S^T[j],  E^T[j] = exp(S^T[j] - m),  A^T[j] = E^T[j] / sum_j E^T[j]
//   O[i0 + r] = sum_j P^T[j][r] v[j]         (one accumulator vector per row r)
// so the row max and row sum of the softmax are vector max / add over j (no horizontal
// reductions), and both products are broadcast FMAs: per block, D + Dv FMAs per key, one
// pass over k and v, and no L x S matrix in memory. The thread's scratch holds Q^T
// (D x W), S^T (S x W) and a zero-padded copy of the last columns of v (S x W); A, P and the head average are written out only when wanted.
// A fully masked row (every S = -inf) gives A = 0 and O = 0; a NaN in a row makes it NaN.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "attention_kernels.hpp"
#include "simd.hpp"

namespace microtorch::detail {

namespace {

template <class T>
struct Lanes;
template <>
struct Lanes<float> {
  using V = simd::Vec;
  [[gnu::always_inline]] static V exp(V x) { return simd::exp_nonpositive<V, simd::IVec>(x); }
};
template <>
struct Lanes<double> {
  using V = simd::VecD;
  [[gnu::always_inline]] static V exp(V x) {
    for (int r = 0; r < 8; ++r) x[r] = std::exp(x[r]);
    return x;
  }
};

// Blocks of W x W between row-major memory and transposed vectors, through simd::transpose.
// load_columns: x[c][r] = src[r ld + c] for r < rows (0 beyond).
template <class V, class T, int W>
[[gnu::always_inline]] inline void load_columns(const T* src, std::int64_t ld, int rows, V (&x)[W]) {
  for (int r = 0; r < W; ++r) x[r] = r < rows ? simd::load(src + r * ld) : V{};
  simd::transpose(x);
}
// store_columns: dst[r ld + c] = w x[c][r] (+ dst[r ld + c] when add) for r < rows.
template <class V, class T, int W>
[[gnu::always_inline]] inline void store_columns(V (&x)[W], T* dst, std::int64_t ld, int rows, bool add, T w) {
  simd::transpose(x);
  for (int r = 0; r < rows; ++r) {
    T* p = dst + r * ld;
    simd::store(p, (add ? simd::load(p) : V{}) + w * x[r]);
  }
}

template <class T>
[[gnu::always_inline]] inline void attention_rows_body(const AttentionMatrix<T>& a, T* scratch) {
  using V = typename Lanes<T>::V;
  constexpr int W = sizeof(V) / sizeof(T);
  constexpr int kKeys = 8;  // keys per step of S^T: 8 independent FMA chains
  const V minus_inf = V{} - std::numeric_limits<T>::infinity();
  T* qt = scratch;            // D x W
  T* st = qt + a.D * W;       // S x W
  T* vpad = st + a.S * W;     // S x W
  for (std::int64_t i0 = 0; i0 < a.L; i0 += W) {
    const int rows = static_cast<int>(std::min<std::int64_t>(W, a.L - i0));
    // Q^T = scale (q[i0 : i0 + rows])^T, lanes past the last row 0
    const T* q = a.q + i0 * a.ldq;
    std::int64_t d0 = 0;
    for (; d0 + W <= a.D; d0 += W) {
      V x[W];
      load_columns(q + d0, a.ldq, rows, x);
      for (int c = 0; c < W; ++c) simd::store(qt + (d0 + c) * W, a.scale * x[c]);
    }
    for (std::int64_t d = d0; d < a.D; ++d) {
      for (int r = 0; r < W; ++r) qt[d * W + r] = r < rows ? a.scale * q[r * a.ldq + d] : T(0);
    }
    // S^T = Q^T k^T, kKeys keys at a time
    std::int64_t keys = 0;
    for (; keys + kKeys <= a.S; keys += kKeys) {
      V acc[kKeys] = {};
      for (std::int64_t d = 0; d < a.D; ++d) {
        const V qd = simd::load(qt + d * W);
        _Pragma("GCC unroll 8") for (int u = 0; u < kKeys; ++u) acc[u] += a.k[(keys + u) * a.ldk + d] * qd;
      }
      for (int u = 0; u < kKeys; ++u) simd::store(st + (keys + u) * W, acc[u]);
    }
    for (std::int64_t j = keys; j < a.S; ++j) {
      V acc{};
      for (std::int64_t d = 0; d < a.D; ++d) acc += a.k[j * a.ldk + d] * simd::load(qt + d * W);
      simd::store(st + j * W, acc);
    }
    if (a.bias) {  // lane r, key j: bias[(i0 + r) rs + j cs] (strides 0 where broadcast)
      for (int r = 0; r < rows; ++r) {
        const T* b = a.bias + (i0 + r) * a.bias_row_stride;
        for (std::int64_t j = 0; j < a.S; ++j) st[j * W + r] += b[j * a.bias_col_stride];
      }
    }
    V m = minus_inf;
    for (std::int64_t j = 0; j < a.S; ++j) {
      const V s = simd::load(st + j * W);
      m = s > m ? s : m;  // a NaN is skipped here and propagates through its exp
    }
    // A^T = exp(S^T - m) / sum; a fully masked lane (m = -inf) exponentiates -inf - 0 = -inf
    const V shift = m == minus_inf ? V{} : m;
    V sum{};
    for (std::int64_t j = 0; j < a.S; ++j) {
      const V e = Lanes<T>::exp(simd::load(st + j * W) - shift);
      simd::store(st + j * W, e);
      sum += e;
    }
    const V inv = sum == V{} ? V{} : T(1) / sum;
    for (std::int64_t j = 0; j < a.S; ++j) simd::store(st + j * W, simd::load(st + j * W) * inv);
    // rows of A, P = A * M and the head average, each only when wanted: W keys at a time
    // through a register transpose, the last S mod W keys one by one
    const std::int64_t full = a.S - a.S % W;
    auto write_rows = [&](T* dst, bool add, T w) {
      dst += i0 * a.S;
      for (std::int64_t j0 = 0; j0 < full; j0 += W) {
        V x[W];
        for (int c = 0; c < W; ++c) x[c] = simd::load(st + (j0 + c) * W);
        store_columns(x, dst + j0, a.S, rows, add, w);
      }
      for (int r = 0; r < rows; ++r) {
        for (std::int64_t j = full; j < a.S; ++j) dst[r * a.S + j] = (add ? dst[r * a.S + j] : T(0)) + w * st[j * W + r];
      }
    };
    if (a.weights) write_rows(a.weights, false, T(1));
    if (a.drop) {  // P^T = A^T * M^T
      const T* mask = a.drop + i0 * a.S;
      for (std::int64_t j0 = 0; j0 < full; j0 += W) {
        V x[W];
        load_columns(mask + j0, a.S, rows, x);
        for (int c = 0; c < W; ++c) simd::store(st + (j0 + c) * W, simd::load(st + (j0 + c) * W) * x[c]);
      }
      for (int r = 0; r < rows; ++r) {
        for (std::int64_t j = full; j < a.S; ++j) st[j * W + r] *= mask[r * a.S + j];
      }
      if (a.probs) write_rows(a.probs, false, T(1));
    }
    if (a.average) write_rows(a.average, !a.average_first, a.average_weight);
    // O = P v, Dv in chunks of W columns; a last partial chunk of v is read zero-padded
    for (std::int64_t c = 0; c < a.Dv; c += W) {
      const int width = static_cast<int>(std::min<std::int64_t>(W, a.Dv - c));
      const T* vc = a.v + c;
      std::int64_t ldv = a.ldv;
      if (width < W) {
        for (std::int64_t j = 0; j < a.S; ++j) {
          std::fill(vpad + j * W, vpad + (j + 1) * W, T(0));
          std::copy(vc + j * a.ldv, vc + j * a.ldv + width, vpad + j * W);
        }
        vc = vpad, ldv = W;
      }
      V acc[W] = {};
      for (std::int64_t j = 0; j < a.S; ++j) {
        const V vj = simd::load(vc + j * ldv);
        const T* p = st + j * W;
        _Pragma("GCC unroll 16") for (int r = 0; r < W; ++r) acc[r] += p[r] * vj;
      }
      for (int r = 0; r < rows; ++r) {
        T* orow = a.out + (i0 + r) * a.ldo + c;
        if (width == W) {
          simd::store(orow, acc[r]);
        } else {
          std::memcpy(orow, &acc[r], static_cast<std::size_t>(width) * sizeof(T));
        }
      }
    }
  }
}

}  // namespace

MICROTORCH_CLONES void attention_rows(const AttentionMatrix<float>& a, float* scratch) {
  attention_rows_body(a, scratch);
}

MICROTORCH_CLONES void attention_rows(const AttentionMatrix<double>& a, double* scratch) {
  attention_rows_body(a, scratch);
}

}  // namespace microtorch::detail
