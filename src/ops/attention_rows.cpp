// The fused forward and backward of one attention matrix (declared in attention_kernels.hpp):
//   S = scale q k^T + bias,  A = softmax_rows(S),  P = A * M,  O = P v
// computed for W query rows at a time, W = the lanes of one vector (16 floats, 8 doubles;
// simd.hpp), in transposed form: lane r of vector j holds S[i0 + r, j]. Every step of a
// block is then elementwise over lanes:
//   S^T[j] = sum_d k[j, d] Q^T[d]            (Q^T: the block's rows of q, scaled, transposed)
//   m = max_j S^T[j],  E^T[j] = exp(S^T[j] - m),  A^T[j] = E^T[j] / sum_j E^T[j]
//   O[i0 + r] = sum_j P^T[j][r] v[j]         (one accumulator vector per row r)
// so the row max and row sum of the softmax are vector max / add over j (no horizontal
// reductions), and the products are broadcast FMAs with one pass over k and v per block.
// Blocks of q, A, M and dO change between rows and lanes through in-register transposes
// (simd::transpose), W x W at a time. No L x S matrix is computed in memory: the thread's
// scratch holds n x W and S x W blocks (Scratch), and A, P and the head average are
// written out only when wanted. A fully masked row (every S = -inf) gives A = 0 and
// O = 0; a NaN in a row makes the row NaN.
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

template <class T>
using VecOf = typename Lanes<T>::V;
template <class T>
constexpr int kW = sizeof(VecOf<T>) / sizeof(T);  // query rows per block = lanes
constexpr int kKeys = 8;                          // keys per step: 8 independent FMA chains

// A block of W x W between row-major memory and W vectors, through simd::transpose.
// load_columns: x[c][r] = src[r ld + c] for r < rows (0 beyond).
template <class V, class T, int W>
[[gnu::always_inline]] inline void load_columns(const T* src, std::int64_t ld, int rows, V (&x)[W]) {
  for (int r = 0; r < W; ++r) x[r] = r < rows ? simd::load(src + r * ld) : V{};
  simd::transpose(x);
}

// xt[c] = w (x[0..rows)[c])^T for c < n: `rows` rows of x (ld apart) as n vectors, lanes past
// rows 0.
template <class T>
[[gnu::always_inline]] inline void transpose_rows(const T* x, std::int64_t ld, int rows, std::int64_t n, T w, T* xt) {
  constexpr int W = kW<T>;
  std::int64_t c0 = 0;
  for (; c0 + W <= n; c0 += W) {
    VecOf<T> cols[W];
    load_columns(x + c0, ld, rows, cols);
    for (int c = 0; c < W; ++c) simd::store(xt + (c0 + c) * W, w * cols[c]);
  }
  for (std::int64_t c = c0; c < n; ++c) {
    for (int r = 0; r < W; ++r) xt[c * W + r] = r < rows ? w * x[r * ld + c] : T(0);
  }
}

// The converse for n vectors xt: dst[r ld + c] = w xt[c][r] (+ dst[r ld + c] when add), r < rows.
template <class T>
[[gnu::always_inline]] inline void untranspose_rows(const T* xt, std::int64_t n, int rows, bool add, T w, T* dst,
                                                    std::int64_t ld) {
  constexpr int W = kW<T>;
  std::int64_t c0 = 0;
  for (; c0 + W <= n; c0 += W) {
    VecOf<T> x[W];
    for (int c = 0; c < W; ++c) x[c] = simd::load(xt + (c0 + c) * W);
    simd::transpose(x);
    for (int r = 0; r < rows; ++r) {
      T* p = dst + r * ld + c0;
      simd::store(p, (add ? simd::load(p) : VecOf<T>{}) + w * x[r]);
    }
  }
  for (int r = 0; r < rows; ++r) {
    for (std::int64_t c = c0; c < n; ++c) dst[r * ld + c] = (add ? dst[r * ld + c] : T(0)) + w * xt[c * W + r];
  }
}

// out[j] = sum_e keys[j, e] bt[e] for j < S: S x n keys (ld apart) times n vectors bt.
template <class T>
[[gnu::always_inline]] inline void keys_times(const T* keys, std::int64_t ld, std::int64_t S, std::int64_t n,
                                              const T* bt, T* out) {
  constexpr int W = kW<T>;
  std::int64_t j0 = 0;
  for (; j0 + kKeys <= S; j0 += kKeys) {
    VecOf<T> acc[kKeys] = {};
    for (std::int64_t e = 0; e < n; ++e) {
      const VecOf<T> b = simd::load(bt + e * W);
      _Pragma("GCC unroll 8") for (int u = 0; u < kKeys; ++u) acc[u] += keys[(j0 + u) * ld + e] * b;
    }
    for (int u = 0; u < kKeys; ++u) simd::store(out + (j0 + u) * W, acc[u]);
  }
  for (std::int64_t j = j0; j < S; ++j) {
    VecOf<T> acc{};
    for (std::int64_t e = 0; e < n; ++e) acc += keys[j * ld + e] * simd::load(bt + e * W);
    simd::store(out + j * W, acc);
  }
}

// out[r, c] = sum_j st[j][r] x[j, c] for r < rows, c < n: the block's rows of (S^T)^T x, x
// S x n (ld apart), read W columns at a time; a last partial chunk of x goes through the
// zero-padded pad (S x W).
template <class T>
[[gnu::always_inline]] inline void rows_times(const T* st, std::int64_t S, const T* x, std::int64_t ld,
                                              std::int64_t n, int rows, T* out, std::int64_t ldo, T* pad) {
  constexpr int W = kW<T>;
  for (std::int64_t c = 0; c < n; c += W) {
    const int width = static_cast<int>(std::min<std::int64_t>(W, n - c));
    const T* xc = x + c;
    std::int64_t ldx = ld;
    if (width < W) {
      for (std::int64_t j = 0; j < S; ++j) {
        std::fill(pad + j * W, pad + (j + 1) * W, T(0));
        std::copy(xc + j * ld, xc + j * ld + width, pad + j * W);
      }
      xc = pad, ldx = W;
    }
    VecOf<T> acc[W] = {};
    for (std::int64_t j = 0; j < S; ++j) {
      const VecOf<T> xj = simd::load(xc + j * ldx);
      const T* p = st + j * W;
      _Pragma("GCC unroll 16") for (int r = 0; r < W; ++r) acc[r] += p[r] * xj;
    }
    for (int r = 0; r < rows; ++r) {
      if (width == W) {
        simd::store(out + r * ldo + c, acc[r]);
      } else {
        std::memcpy(out + r * ldo + c, &acc[r], static_cast<std::size_t>(width) * sizeof(T));
      }
    }
  }
}

// p[0 .. width) as a vector, 0 past width.
template <class V, class T>
[[gnu::always_inline]] inline V load_first(const T* p, std::size_t width) {
  if (width * sizeof(T) == sizeof(V)) return simd::load(p);
  V v{};
  std::memcpy(&v, p, width * sizeof(T));
  return v;
}

// p[0 .. width) += v[0 .. width)
template <class V, class T>
[[gnu::always_inline]] inline void add_first(T* p, V v, std::size_t width) {
  if (width * sizeof(T) == sizeof(V)) {
    simd::store(p, simd::load(p) + v);
  } else {
    V d{};
    std::memcpy(&d, p, width * sizeof(T));
    d += v;
    std::memcpy(p, &d, width * sizeof(T));
  }
}

// dst[j, c] += sum_r st[j][r] x[r, c] for j < S, c < n: the outer products of the block's
// rows of x (rows of n, ld apart) with the lanes of S^T, added to dst (S x n, ldd apart).
template <class T>
[[gnu::always_inline]] inline void add_outer(const T* st, std::int64_t S, const T* x, std::int64_t ld, std::int64_t n,
                                             int rows, T* dst, std::int64_t ldd) {
  constexpr int W = kW<T>;
  using V = VecOf<T>;
  for (std::int64_t c = 0; c < n; c += W) {
    const auto width = static_cast<std::size_t>(std::min<std::int64_t>(W, n - c));
    V xr[W];  // row r of x, columns c .. c + width (0 past them and past the rows)
    for (int r = 0; r < W; ++r) xr[r] = r < rows ? load_first<V>(x + r * ld + c, width) : V{};
    std::int64_t j0 = 0;
    for (; j0 + kKeys <= S; j0 += kKeys) {
      V acc[kKeys] = {};
      _Pragma("GCC unroll 16") for (int r = 0; r < W; ++r) {
        _Pragma("GCC unroll 8") for (int u = 0; u < kKeys; ++u) acc[u] += st[(j0 + u) * W + r] * xr[r];
      }
      for (int u = 0; u < kKeys; ++u) add_first(dst + (j0 + u) * ldd + c, acc[u], width);
    }
    for (std::int64_t j = j0; j < S; ++j) {
      V acc{};
      for (int r = 0; r < W; ++r) acc += st[j * W + r] * xr[r];
      add_first(dst + j * ldd + c, acc, width);
    }
  }
}

// The S x W blocks of the thread's scratch (attention_rows_scratch).
template <class T>
struct Scratch {
  T *bt, *st, *at, *mt, *pad;  // n x W (n = max(D, Dv)), then S x W each
  Scratch(T* s, const AttentionDims& d) {
    const std::int64_t n = std::max(d.D, d.Dv) * kW<T>, block = d.S * kW<T>;
    bt = s, st = bt + n, at = st + block, mt = at + block, pad = mt + block;
  }
};

template <class T>
[[gnu::always_inline]] inline void attention_rows_body(const AttentionMatrix<T>& a, T* scratch) {
  using V = VecOf<T>;
  constexpr int W = kW<T>;
  const V minus_inf = V{} - std::numeric_limits<T>::infinity();
  const Scratch<T> z(scratch, a.dims);
  const std::int64_t L = a.dims.L, S = a.dims.S, D = a.dims.D, Dv = a.dims.Dv;
  for (std::int64_t i0 = 0; i0 < L; i0 += W) {
    const int rows = static_cast<int>(std::min<std::int64_t>(W, L - i0));
    transpose_rows(a.q + i0 * a.ldq, a.ldq, rows, D, a.scale, z.bt);  // Q^T, scaled
    keys_times(a.k, a.ldk, S, D, z.bt, z.st);                          // S^T
    if (a.bias) {  // lane r, key j: bias[(i0 + r) rs + j cs] (strides 0 where broadcast)
      for (int r = 0; r < rows; ++r) {
        const T* b = a.bias + (i0 + r) * a.bias_row_stride;
        for (std::int64_t j = 0; j < S; ++j) z.st[j * W + r] += b[j * a.bias_col_stride];
      }
    }
    V m = minus_inf;
    for (std::int64_t j = 0; j < S; ++j) {
      const V s = simd::load(z.st + j * W);
      m = s > m ? s : m;  // a NaN is skipped here and propagates through its exp
    }
    // A^T = exp(S^T - m) / sum; a fully masked lane (m = -inf) exponentiates -inf - 0 = -inf
    const V shift = m == minus_inf ? V{} : m;
    V sum{};
    for (std::int64_t j = 0; j < S; ++j) {
      const V e = Lanes<T>::exp(simd::load(z.st + j * W) - shift);
      simd::store(z.st + j * W, e);
      sum += e;
    }
    const V inv = sum == V{} ? V{} : T(1) / sum;
    for (std::int64_t j = 0; j < S; ++j) simd::store(z.st + j * W, simd::load(z.st + j * W) * inv);
    // rows of A, P = A * M and the head average, each only when wanted
    if (a.weights) untranspose_rows(z.st, S, rows, false, T(1), a.weights + i0 * S, S);
    if (a.drop) {
      transpose_rows(a.drop + i0 * S, S, rows, S, T(1), z.mt);
      for (std::int64_t j = 0; j < S; ++j) simd::store(z.st + j * W, simd::load(z.st + j * W) * simd::load(z.mt + j * W));
      if (a.probs) untranspose_rows(z.st, S, rows, false, T(1), a.probs + i0 * S, S);
    }
    if (a.average) untranspose_rows(z.st, S, rows, !a.average_first, a.average_weight, a.average + i0 * S, S);
    rows_times(z.st, S, a.v, a.ldv, Dv, rows, a.out + i0 * a.ldo, a.ldo, z.pad);  // O = P v
  }
}

// Per block, with A^T and P^T read back from the saved weights:
//   dv[j] += sum_r P^T[j][r] dO[i0 + r]
//   dP^T[j] = sum_e v[j, e] dO^T[e],  dA^T = dP^T * M^T
//   dS^T[j] = A^T[j] (dA^T[j] - sum_j' dA^T[j'] A^T[j'])   (the row sums elementwise over lanes)
//   dbias[i0 + r] = dS[r]  (when wanted, before the scale is applied)
//   dq[i0 + r] = scale sum_j dS^T[j][r] k[j],  dk[j] += scale sum_r dS^T[j][r] q[i0 + r]
template <class T>
[[gnu::always_inline]] inline void attention_rows_backward_body(const AttentionGradMatrix<T>& a, T* scratch) {
  using V = VecOf<T>;
  constexpr int W = kW<T>;
  const Scratch<T> z(scratch, a.dims);
  const std::int64_t L = a.dims.L, S = a.dims.S, D = a.dims.D, Dv = a.dims.Dv;
  for (std::int64_t j = 0; j < S; ++j) {  // dk and dv add up over the blocks
    if (a.dk) std::fill(a.dk + j * a.lddk, a.dk + j * a.lddk + D, T(0));
    if (a.dv) std::fill(a.dv + j * a.lddv, a.dv + j * a.lddv + Dv, T(0));
  }
  for (std::int64_t i0 = 0; i0 < L; i0 += W) {
    const int rows = static_cast<int>(std::min<std::int64_t>(W, L - i0));
    const T* dout = a.dout + i0 * a.lddo;
    transpose_rows(a.weights + i0 * S, S, rows, S, T(1), z.at);  // A^T
    if (a.dv) {
      const T* pt = z.at;
      if (a.drop) {
        transpose_rows(a.probs + i0 * S, S, rows, S, T(1), z.mt);
        pt = z.mt;
      }
      add_outer(pt, S, dout, a.lddo, Dv, rows, a.dv, a.lddv);
    }
    if (!a.dq && !a.dk && !a.dbias) continue;
    transpose_rows(dout, a.lddo, rows, Dv, T(1), z.bt);  // dO^T
    keys_times(a.v, a.ldv, S, Dv, z.bt, z.st);         // dP^T
    if (a.drop) {
      transpose_rows(a.drop + i0 * S, S, rows, S, T(1), z.mt);
      for (std::int64_t j = 0; j < S; ++j) simd::store(z.st + j * W, simd::load(z.st + j * W) * simd::load(z.mt + j * W));
    }
    V d0{}, d1{}, d2{}, d3{};  // sum_j dA^T[j] A^T[j] in 4 independent chains
    std::int64_t j4 = 0;
    for (; j4 + 4 <= S; j4 += 4) {
      d0 += simd::load(z.st + j4 * W) * simd::load(z.at + j4 * W);
      d1 += simd::load(z.st + (j4 + 1) * W) * simd::load(z.at + (j4 + 1) * W);
      d2 += simd::load(z.st + (j4 + 2) * W) * simd::load(z.at + (j4 + 2) * W);
      d3 += simd::load(z.st + (j4 + 3) * W) * simd::load(z.at + (j4 + 3) * W);
    }
    for (std::int64_t j = j4; j < S; ++j) d0 += simd::load(z.st + j * W) * simd::load(z.at + j * W);
    const V dot = (d0 + d1) + (d2 + d3);
    if (a.dbias) {  // dS^T, stored unscaled as rows of dbias, then scaled for dq and dk
      for (std::int64_t j = 0; j < S; ++j) {
        simd::store(z.st + j * W, simd::load(z.at + j * W) * (simd::load(z.st + j * W) - dot));
      }
      untranspose_rows(z.st, S, rows, false, T(1), a.dbias + i0 * S, S);
      for (std::int64_t j = 0; j < S; ++j) simd::store(z.st + j * W, a.scale * simd::load(z.st + j * W));
    } else {
      for (std::int64_t j = 0; j < S; ++j) {
        const V aj = simd::load(z.at + j * W);
        simd::store(z.st + j * W, a.scale * aj * (simd::load(z.st + j * W) - dot));  // scale dS^T
      }
    }
    if (a.dq) rows_times(z.st, S, a.k, a.ldk, D, rows, a.dq + i0 * a.lddq, a.lddq, z.pad);
    if (a.dk) add_outer(z.st, S, a.q + i0 * a.ldq, a.ldq, D, rows, a.dk, a.lddk);
  }
}

}  // namespace

MICROTORCH_CLONES void attention_rows(const AttentionMatrix<float>& a, float* scratch) {
  attention_rows_body(a, scratch);
}

MICROTORCH_CLONES void attention_rows(const AttentionMatrix<double>& a, double* scratch) {
  attention_rows_body(a, scratch);
}

MICROTORCH_CLONES void attention_rows_backward(const AttentionGradMatrix<float>& a, float* scratch) {
  attention_rows_backward_body(a, scratch);
}

MICROTORCH_CLONES void attention_rows_backward(const AttentionGradMatrix<double>& a, double* scratch) {
  attention_rows_backward_body(a, scratch);
}

}  // namespace microtorch::detail
