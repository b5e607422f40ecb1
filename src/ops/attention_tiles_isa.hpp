// The fused forward and backward of one attention matrix, tiled as FlashAttention-2 (Dao,
// 2023) tiles them, for the one ISA that MICROTORCH_TILES_ISA names (simd::Avx512, Avx2 or
// Baseline) with the function attribute MICROTORCH_TILES_TARGET: each of
// attention_tiles_{avx512,avx2,baseline}.cpp defines the two and includes this file once,
// so the ISAs compile in parallel; attention_tiles.cpp calls the one cpu_isa() picks.
//
// Scores are kept in base 2, T = S log2 e, so that e^(S - m) = 2^(T - m log2 e) takes no
// multiplication: K^T is packed times scale log2 e (pack_transposed), so one product gives
// T = q (scale log2 e K)^T, and an additive bias joins it times log2 e.
//
// Forward, per block i of kBlockRows query rows, over chunks j of keys (online softmax):
//   T_ij = q_i (scale log2e k_j)^T + log2e bias_ij              (gemm: rows of q x panels of K^T)
//   t_i' = max(t_i, rowmax T_ij),  E_ij = 2^(T_ij - t_i'),  c_i = 2^(t_i - t_i')
//   l_i' = c_i l_i + rowsum E_ij,  O_i' = c_i O_i + (E * M)_ij v_j   (gemm: rows of E x rows of v)
// then O_i / l_i is the output, and t_i (= m_i log2 e) and 1 / l_i are kept for backward.
// When weights are wanted (returned or averaged) a chunk is the whole row, so that A = E / l
// is exact in it.
//
// Backward, FlashAttention-2's loop order: per chunk j of keys (dk_j and dv_j add up in
// place) and block i of query rows (dq_i adds up over the chunks):
//   A_ij = 2^(T_ij - t_i) / l_i,  dP_ij = dO_i v_j^T,  dA_ij = dP_ij M_ij
//   dS_ij = A_ij (dA_ij - D_i)   (= dbias),  D_i = rowsum(dA_i A_i) = rowsum(dO_i O_i)
//   dv_j += (A * M)_ij^T dO_i,  dq_i += scale dS_ij k_j,  dk_j += scale dS_ij^T q_i
// When the forward kept A (the caller took the weights per matrix), A is read instead of
// recomputed and a chunk is the whole row, so D_i is summed from the very dA that dS uses,
// as PyTorch's softmax backward does, and each row of dS sums to zero up to rounding.
// Without the saved A, D_i comes from the output, and the tiles stay in L1/L2 however long
// the rows.
//
// Every product is a simd::gemm_tiles call on register tiles; the elementwise steps run
// along rows in whole vectors. K^T and v^T are packed once per matrix into panels of the
// tiles' width, other operands into zero-padded rows, so the tiles never see a ragged edge.
// A fully masked row (every score -inf) has m = -inf, E = 0, l = 0: its output, weights
// and gradients are 0. A NaN in a row makes that row's output NaN.
#if !defined(MICROTORCH_TILES_ISA) || !defined(MICROTORCH_TILES_TARGET)
#error "attention_tiles_isa.hpp: define MICROTORCH_TILES_ISA and MICROTORCH_TILES_TARGET first"
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "microtorch/parallel.hpp"

#include "attention_kernels.hpp"
#include "attention_tiles.hpp"
#include "gemm_tiles.hpp"
#include "simd.hpp"

namespace microtorch::detail {

namespace {

using simd::kLanesOf;
using simd::kPanelOf;
using simd::load_vec;
using simd::store_vec;
using simd::VecOf;

template <class T>
constexpr T kLog2e = T(1.4426950408889634074);

constexpr std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

// ---- the register-tiled products, compiled once per ISA -------------------------------

MICROTORCH_TILES_TARGET void gemm_tiled(simd::MICROTORCH_TILES_ISA, const Gemm<float>& g) {
  simd::gemm_tiles<simd::MICROTORCH_TILES_ISA>(g);
}
MICROTORCH_TILES_TARGET void gemm_tiled(simd::MICROTORCH_TILES_ISA, const Gemm<double>& g) {
  simd::gemm_tiles<simd::MICROTORCH_TILES_ISA>(g);
}

// ---- shapes and workspace ---------------------------------------------------------------

// Query rows per block (16 tiles of rows) and keys per chunk (512 bytes of a row, a
// multiple of the panels): a block's chunk of scores, 96 x 128 floats on AVX-512, stays in
// L2 between the passes over it.
template <class Isa, class T>
struct Blocking {
  static constexpr int W = kLanesOf<Isa, T>, P = kPanelOf<Isa, T>;
  static constexpr std::int64_t kBlockRows = 16 * Isa::kRows;
  static constexpr std::int64_t kChunk = round_up(512 / static_cast<std::int64_t>(sizeof(T)), P);
};

// Sub-buffers carved out of the workspace, each starting on a 64-byte boundary (a null
// base only counts).
template <class T>
class Carve {
 public:
  explicit Carve(T* base) : base_(base) {}
  T* take(std::int64_t n) {
    T* p = base_ ? base_ + used_ : nullptr;
    used_ += round_up(n, 64 / static_cast<std::int64_t>(sizeof(T)));
    return p;
  }
  std::int64_t used() const { return used_; }

 private:
  T* base_;
  std::int64_t used_ = 0;
};

// K^T and v of each matrix of a group, and one block's tiles.
template <class Isa, class T>
struct ForwardBuffers {
  using B = Blocking<Isa, T>;
  std::int64_t chunk, lds, ldv, kt_size, v_size;
  T *kt, *v, *s, *o;  // K^T panels [D x S] and v rows [S x ldv] per matrix; scores [rows x lds], O [rows x ldv]
  ForwardBuffers(const AttentionDims& d, bool whole_rows, std::int64_t count, T* base) {
    Carve<T> carve(base);
    const std::int64_t S_panels = round_up(d.S, B::P);
    chunk = whole_rows ? std::max<std::int64_t>(S_panels, B::P) : B::kChunk;
    lds = chunk + B::W;  // not a power of two: a tile's column walks through every L1 set
    ldv = round_up(std::max<std::int64_t>(d.Dv, 1), B::W);
    kt_size = round_up(S_panels * d.D, 16), v_size = round_up(d.S * ldv, 16);
    kt = carve.take(count * kt_size);
    v = carve.take(count * v_size);
    const std::int64_t block = std::min(B::kBlockRows, d.L);  // rows of the largest block
    s = carve.take(block * lds);
    o = carve.take(block * ldv);
    end = carve.used();
  }
  std::int64_t end;
};

// With the saved A, a chunk is the whole row (rowsum(dA A) is then summed in the tile);
// otherwise kChunk keys.
template <class Isa, class T>
struct BackwardBuffers {
  using B = Blocking<Isa, T>;
  std::int64_t chunk, ldt, ldd, lddv;
  T *kt, *k, *vt, *q, *dout, *dq, *dk, *dv, *s, *dp, *di;
  BackwardBuffers(const AttentionDims& d, bool saved_weights, T* base) {
    Carve<T> carve(base);
    const std::int64_t S_panels = std::max<std::int64_t>(round_up(d.S, B::P), B::P);
    chunk = saved_weights ? S_panels : B::kChunk;
    ldt = chunk + B::W;  // as ForwardBuffers::lds
    ldd = round_up(std::max<std::int64_t>(d.D, 1), B::W);
    lddv = round_up(std::max<std::int64_t>(d.Dv, 1), B::W);
    kt = carve.take(saved_weights ? 0 : S_panels * d.D);  // K^T panels, for the recomputed scores
    vt = carve.take(S_panels * d.Dv);                    // v^T panels, for dP
    k = carve.take(d.S * ldd);                           // rows of k, q and dO (and of dq, dk and dv
    q = carve.take(d.L * ldd);                           // when not a whole number of vectors)
    dout = carve.take(d.L * lddv);
    dq = carve.take(d.L * ldd);
    dk = carve.take(d.S * ldd);
    dv = carve.take(d.S * lddv);
    const std::int64_t block = std::min(B::kBlockRows, d.L);  // rows of the largest block
    s = carve.take(saved_weights ? 0 : block * ldt);  // a block's chunk of A (then A * M)
    dp = carve.take(block * ldt);                      // ... of dP (then scale dS)
    di = carve.take(saved_weights ? 0 : d.L);                    // rowsum(dO * O)
    end = carve.used();
  }
  std::int64_t end;
};

template <class Isa, class T>
std::int64_t workspace_for(const AttentionDims& d, bool backward, bool whole_rows, std::int64_t group) {
  return backward ? BackwardBuffers<Isa, T>(d, whole_rows, nullptr).end
                  : ForwardBuffers<Isa, T>(d, whole_rows, group, nullptr).end;
}

// ---- elementwise helpers ------------------------------------------------------------------

template <class Isa, class T, class V>
[[gnu::always_inline]] inline V exp2_lanes(V t) {
  if constexpr (std::is_same_v<T, float>) {
    return simd::exp2_nonpositive<V, typename Isa::I>(t);
  } else {
    for (int l = 0; l < kLanesOf<Isa, T>; ++l) t[l] = std::exp2(t[l]);
    return t;
  }
}

// p[0 .. n) as a vector (n < lanes: `fill` past n).
template <class V, class T>
[[gnu::always_inline]] inline V load_first(const T* p, std::int64_t n, T fill) {
  constexpr int W = sizeof(V) / sizeof(T);
  if (n >= W) return load_vec<V>(p);
  V v = V{} + fill;
  for (std::int64_t l = 0; l < n; ++l) v[l] = p[l];
  return v;
}

template <class V, class T>
[[gnu::always_inline]] inline void store_first(T* p, V v, std::int64_t n) {
  constexpr int W = sizeof(V) / sizeof(T);
  if (n >= W) return store_vec(p, v);
  for (std::int64_t l = 0; l < n; ++l) p[l] = v[l];
}

// Lane folds in log2(lanes) steps, each combining every lane l with lane l ^ s (s = half
// the lanes, ..., 1), so that every lane ends with the fold of all (a pairwise sum). The
// max is taken of lanes without NaN: scores_row's running max skips a NaN score (a NaN row
// still turns NaN through its exponentials).
template <int s, class V, int... l>
[[gnu::always_inline]] inline V lanes_xor(V v, std::integer_sequence<int, l...>) {
  return __builtin_shufflevector(v, v, (l ^ s)...);
}
template <int s, class V, class Op>
[[gnu::always_inline]] inline auto fold_lanes(V v, Op op) {
  constexpr int W = sizeof(V) / sizeof(v[0]);
  if constexpr (s == 0) {
    return v[0];
  } else {
    return fold_lanes<s / 2>(op(v, lanes_xor<s>(v, std::make_integer_sequence<int, W>{})), op);
  }
}
struct MaxOf {
  template <class V>
  [[gnu::always_inline]] V operator()(V x, V y) const {
    return x > y ? x : y;
  }
};
struct SumOf {
  template <class V>
  [[gnu::always_inline]] V operator()(V x, V y) const {
    return x + y;
  }
};
template <class V>
[[gnu::always_inline]] inline auto max_lanes(V v) {
  return fold_lanes<sizeof(V) / sizeof(v[0]) / 2>(v, MaxOf{});
}
template <class V>
[[gnu::always_inline]] inline auto sum_lanes(V v) {
  return fold_lanes<sizeof(V) / sizeof(v[0]) / 2>(v, SumOf{});
}

// One row of a chunk of scores in base 2 in place: t += log2e bias, -inf past `cols` (up to
// the lanes); returns the row's max. bias is the row's first element (stride 0 or 1), or
// null; without it and without a ragged edge the row is only read.
template <class V, class T>
[[gnu::always_inline]] inline T scores_row(T* s, std::int64_t cols, std::int64_t width, const T* bias,
                                           std::int64_t bias_stride) {
  constexpr int W = sizeof(V) / sizeof(T);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  V vmax = V{} + minus_inf;
  if (!bias && cols == width) {
    for (std::int64_t j = 0; j < width; j += W) {
      const V x = load_vec<V>(s + j);
      vmax = x > vmax ? x : vmax;
    }
    return max_lanes(vmax);
  }
  for (std::int64_t j = 0; j < width; j += W) {
    V x = load_vec<V>(s + j);
    if (bias) x += kLog2e<T> * (bias_stride == 0 ? V{} + bias[0] : load_first<V>(bias + j, cols - j, T(0)));
    if (cols - j < W) {
      for (int l = static_cast<int>(cols - j); l < W; ++l) x[l] = minus_inf;
    }
    store_vec(s + j, x);
    vmax = x > vmax ? x : vmax;
  }
  return max_lanes(vmax);
}

// 2^(t - shift): the difference first, exact for the scores near the max that matter, so
// the exponent carries no rounding of the scores' magnitude.
template <class Isa, class T, class V>
[[gnu::always_inline]] inline V exp_shifted(V t, T shift) {
  return exp2_lanes<Isa, T>(t - shift);
}

// sum x[c] y[c] over c < n, in double: vectors of the ISA's doubles, the rest one by one.
template <class Isa, class T>
[[gnu::always_inline]] inline double dot_in_double(const T* x, const T* y, std::int64_t n) {
  using Vd = typename Isa::D;
  constexpr int W = kLanesOf<Isa, double>;
  typedef T Vt __attribute__((vector_size(W * sizeof(T))));  // W of T, converted to W doubles
  Vd acc{};
  std::int64_t c = 0;
  for (; c + W <= n; c += W) {
    acc += __builtin_convertvector(load_vec<Vt>(x + c), Vd) * __builtin_convertvector(load_vec<Vt>(y + c), Vd);
  }
  double sum = sum_lanes(acc);
  for (; c < n; ++c) sum += static_cast<double>(x[c]) * static_cast<double>(y[c]);
  return sum;
}

// dst[r ldd + c] = src[r ld + c] for c < cols, 0 up to ldd.
template <class T>
void pack_rows(const T* src, std::int64_t ld, std::int64_t rows, std::int64_t cols, T* dst, std::int64_t ldd) {
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy_n(src + r * ld, cols, dst + r * ldd);
    std::fill(dst + r * ldd + cols, dst + (r + 1) * ldd, T(0));
  }
}

// Rows of a gradient that the tiles write and add to in whole vectors: the gradient itself
// when a row is a whole number of vectors, otherwise a zero-padded buffer in the
// workspace. (Operands read as B are always packed into contiguous rows: in place, their
// rows would sit a power of two apart in many layouts, all in a few L1 sets.)
template <class T>
struct VectorRows {
  T* p;
  std::int64_t ld;
};
template <int W, class T>
VectorRows<T> vector_rows_out(T* dst, std::int64_t ld, std::int64_t cols, T* buffer, std::int64_t ld_buffer) {
  return cols % W == 0 ? VectorRows<T>{dst, ld} : VectorRows<T>{buffer, ld_buffer};
}

// The transpose of `count` rows of K elements (ld apart) times `factor`, as panels of P
// columns: dst[(n / P) K P + k P + n % P] = factor src[n ld + k], zero for n in [count,
// count rounded up to the lanes). Blocks of W x W go through simd::transpose.
template <class Isa, class T>
[[gnu::always_inline]] inline void pack_transposed(const T* src, std::int64_t ld, std::int64_t count,
                                                   std::int64_t K, T factor, T* dst) {
  using V = VecOf<Isa, T>;
  constexpr int W = kLanesOf<Isa, T>, P = kPanelOf<Isa, T>;
  auto at = [&](std::int64_t n, std::int64_t k) { return dst + (n / P) * K * P + k * P + n % P; };
  const std::int64_t width = round_up(count, W);
  for (std::int64_t n0 = 0; n0 < width; n0 += W) {
    std::int64_t k0 = 0;
    if (n0 + W <= count) {
      for (; k0 + W <= K; k0 += W) {
        V x[W];
        for (int r = 0; r < W; ++r) x[r] = load_vec<V>(src + (n0 + r) * ld + k0);
        simd::transpose(x);
        for (int c = 0; c < W; ++c) store_vec(at(n0, k0 + c), factor * x[c]);
      }
    }
    for (std::int64_t k = k0; k < K; ++k) {
      T* p = at(n0, k);
      for (int r = 0; r < W; ++r) p[r] = n0 + r < count ? factor * src[(n0 + r) * ld + k] : T(0);
    }
  }
}

// C = A B^T for a block of rows of A (lda apart) and the keys j0 .. j0 + width of B, whose
// transpose B^T (K x keys) is packed in panels (pack_transposed): the scores q k^T and dO v^T.
// With an epilogue the product is compiled here, the epilogue inlined into its tiles; it must
// then be whole tiles (simd::gemm_tiles).
template <class Isa, class T, class Epilogue = AsIs>
[[gnu::always_inline]] inline void times_panels(std::int64_t rows, std::int64_t width, std::int64_t K, const T* a,
                                                std::int64_t lda, const T* panels, std::int64_t j0, T* c,
                                                std::int64_t ldc, const Epilogue& epilogue = {}) {
  constexpr int P = kPanelOf<Isa, T>;
  Gemm<T> g;
  g.M = rows, g.N = width, g.K = K;
  g.a = a, g.a_row = lda, g.a_col = 1;
  g.b = panels + (j0 / P) * K * P, g.ldb = P, g.b_panel = K * P;
  g.c = c, g.ldc = ldc;
  if constexpr (std::is_same_v<Epilogue, AsIs>) {
    gemm_tiled(Isa{}, g);
  } else {
    simd::gemm_tiles<Isa>(g, epilogue);
  }
}

// ---- forward ----------------------------------------------------------------------------------

// One block of query rows of one matrix, its K^T and v packed in kt and v.
template <class Isa, class T>
[[gnu::always_inline]] inline void forward_block(const AttentionMatrix<T>& a, const ForwardBuffers<Isa, T>& z,
                                                 const T* kt, const T* v, std::int64_t i0) {
  using V = VecOf<Isa, T>;
  using B = Blocking<Isa, T>;
  constexpr int W = B::W, P = B::P;
  constexpr std::int64_t BR = B::kBlockRows;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  const std::int64_t L = a.dims.L, S = a.dims.S, D = a.dims.D, Dv = a.dims.Dv;
  const bool whole_rows = a.weights || a.probs || a.average;
  const std::int64_t rows = std::min(BR, L - i0);
  T m[BR], l[BR], correction[BR];
  std::fill(m, m + rows, minus_inf);
  std::fill(l, l + rows, T(0));
  if (S == 0) std::fill(z.o, z.o + rows * z.ldv, T(0));
  for (std::int64_t j0 = 0; j0 < S; j0 += z.chunk) {
    const std::int64_t cols = std::min(z.chunk, S - j0), width = round_up(cols, W);
    times_panels<Isa>(rows, width, D, a.q + i0 * a.ldq, a.ldq, kt, j0, z.s, z.lds);  // T_ij
    for (std::int64_t r = 0; r < rows; ++r) {
      T* t = z.s + r * z.lds;
      const T* bias = a.bias ? a.bias + (i0 + r) * a.bias_row_stride + j0 * a.bias_col_stride : nullptr;
      const T m_new = std::max(m[r], scores_row<V>(t, cols, width, bias, a.bias_col_stride));
      const T shift = m_new == minus_inf ? T(0) : m_new;  // a fully masked row: 2^-inf = 0
      correction[r] = j0 == 0 ? T(0) : std::exp2(m[r] - shift);  // the first chunk: l = 0, O overwritten
      V sum{};
      for (std::int64_t j = 0; j < width; j += W) {
        const V e = exp_shifted<Isa>(load_vec<V>(t + j), shift);
        store_vec(t + j, e);
        sum += e;
      }
      l[r] = correction[r] * l[r] + sum_lanes(sum);
      m[r] = m_new;
      const T* drop = a.drop ? a.drop + (i0 + r) * S + j0 : nullptr;
      const std::int64_t row = (i0 + r) * S + j0;
      if (whole_rows) {  // the one chunk: A = E / l exactly, P = A * M; O is corrected as in any chunk
        const T inv = l[r] == T(0) ? T(0) : T(1) / l[r];
        // The outputs in locals: a store through one of them could otherwise change the
        // matrix's fields, so each vector would reload and test them.
        T* const weights = a.weights ? a.weights + row : nullptr;
        T* const probs = a.probs ? a.probs + row : nullptr;
        T* const average = a.average ? a.average + row : nullptr;
        const bool average_first = a.average_first;
        const T share = a.average_weight;
        for (std::int64_t j = 0; j < width; j += W) {
          V e = load_vec<V>(t + j), x = inv * e;
          if (weights) store_first(weights + j, x, cols - j);
          if (drop) {
            const V mj = load_first<V>(drop + j, cols - j, T(0));
            x *= mj, e *= mj;
            if (probs) store_first(probs + j, x, cols - j);
            store_vec(t + j, e);
          }
          if (average) {
            const V prior = average_first ? V{} : load_first<V>(average + j, cols - j, T(0));
            store_first(average + j, prior + share * x, cols - j);
          }
        }
      } else if (drop) {
        for (std::int64_t j = 0; j < width; j += W) {
          store_vec(t + j, load_vec<V>(t + j) * load_first<V>(drop + j, cols - j, T(0)));
        }
      }
    }
    Gemm<T> pv;  // O_i = c_i O_i + P_ij v_j
    pv.M = rows, pv.N = Dv, pv.K = cols;
    pv.a = z.s, pv.a_row = z.lds, pv.a_col = 1;
    pv.b = v + j0 * z.ldv, pv.ldb = z.ldv, pv.b_panel = P;
    pv.c = z.o, pv.ldc = z.ldv;
    pv.into = j0 == 0 ? Into::overwrite : Into::rescale, pv.row_scale = correction;
    gemm_tiled(Isa{}, pv);
  }
  for (std::int64_t r = 0; r < rows; ++r) {  // O / l; A's shift and 1 / l for backward
    const T inv = l[r] == T(0) ? T(0) : T(1) / l[r];
    T* out = a.out + (i0 + r) * a.ldo;
    for (std::int64_t j = 0; j < Dv; ++j) out[j] = inv * z.o[r * z.ldv + j];
    if (a.stats) {
      a.stats[2 * (i0 + r)] = m[r] == minus_inf ? T(0) : m[r];
      a.stats[2 * (i0 + r) + 1] = inv;
    }
  }
}

// A group of matrices (the heads one average covers) block by block, each block through
// every matrix, so that the block's rows of the average stay in cache between the heads;
// only the blocks of query rows in `shares`.
template <class Isa, class T>
[[gnu::always_inline]] inline void forward_body(const AttentionMatrix<T>* a, std::int64_t count, RowShares shares,
                                                T* workspace) {
  constexpr std::int64_t BR = Blocking<Isa, T>::kBlockRows;
  const AttentionDims& d = a[0].dims;
  const std::int64_t blocks = (d.L + BR - 1) / BR;
  const std::int64_t first = blocks * shares.begin / shares.of, last = blocks * shares.end / shares.of;
  if (first == last) return;
  const bool whole_rows = a[0].weights || a[0].probs || a[0].average;
  const ForwardBuffers<Isa, T> z(d, whole_rows, count, workspace);
  for (std::int64_t h = 0; h < count; ++h) {
    pack_transposed<Isa>(a[h].k, a[h].ldk, d.S, d.D, a[h].scale * kLog2e<T>, z.kt + h * z.kt_size);
    pack_rows(a[h].v, a[h].ldv, d.S, d.Dv, z.v + h * z.v_size, z.ldv);
  }
  for (std::int64_t i0 = first * BR; i0 < last * BR; i0 += BR) {
    for (std::int64_t h = 0; h < count; ++h) forward_block(a[h], z, z.kt + h * z.kt_size, z.v + h * z.v_size, i0);
  }
}

// ---- backward ---------------------------------------------------------------------------------

template <class Isa, class T>
[[gnu::always_inline]] inline void backward_body(const AttentionGradMatrix<T>& a, T* workspace) {
  using V = VecOf<Isa, T>;
  using B = Blocking<Isa, T>;
  constexpr int W = B::W, P = B::P;
  constexpr std::int64_t BR = B::kBlockRows;
  const std::int64_t L = a.dims.L, S = a.dims.S, D = a.dims.D, Dv = a.dims.Dv;
  const bool saved = a.weights != nullptr;
  const BackwardBuffers<Isa, T> z(a.dims, saved, workspace);
  const std::int64_t BC = z.chunk, LT = z.ldt;
  const bool want_ds = a.dq || a.dk || a.dbias;
  if (!saved) pack_transposed<Isa>(a.k, a.ldk, S, D, a.scale * kLog2e<T>, z.kt);
  if (want_ds) pack_transposed<Isa>(a.v, a.ldv, S, Dv, T(1), z.vt);
  if (a.dq) pack_rows(a.k, a.ldk, S, D, z.k, z.ldd);
  pack_rows(a.q, a.ldq, L, D, z.q, z.ldd);
  pack_rows(a.dout, a.lddo, L, Dv, z.dout, z.lddv);
  const VectorRows<T> dq_out = vector_rows_out<W>(a.dq, a.lddq, D, z.dq, z.ldd);
  const VectorRows<T> dk_out = vector_rows_out<W>(a.dk, a.lddk, D, z.dk, z.ldd);
  const VectorRows<T> dv_out = vector_rows_out<W>(a.dv, a.lddv, Dv, z.dv, z.lddv);
  for (std::int64_t j = 0; L == 0 && j < S; ++j) {  // otherwise written by the first block
    if (a.dk) std::fill(dk_out.p + j * dk_out.ld, dk_out.p + j * dk_out.ld + D, T(0));
    if (a.dv) std::fill(dv_out.p + j * dv_out.ld, dv_out.p + j * dv_out.ld + Dv, T(0));
  }
  for (std::int64_t i = 0; a.dq && S == 0 && i < L; ++i) std::fill(dq_out.p + i * dq_out.ld, dq_out.p + i * dq_out.ld + D, T(0));
  // rowsum(dA A) = rowsum(dO O), summed in double (without keys there is no dA: a caller
  // that kept the weights passes no O, and A of an empty row is no pointer)
  if (!saved && want_ds && S > 0) {
    for (std::int64_t i = 0; i < L; ++i) z.di[i] = static_cast<T>(dot_in_double<Isa>(a.dout + i * a.lddo, a.out + i * a.ldo, Dv));
  }
  for (std::int64_t j0 = 0; j0 < S; j0 += BC) {
    const std::int64_t cols = std::min(BC, S - j0), width = round_up(cols, W);
    for (std::int64_t i0 = 0; i0 < L; i0 += BR) {
      const std::int64_t rows = std::min(BR, L - i0);
      const bool whole_tiles = rows % Isa::kRows == 0 && cols % P == 0;  // for the tiles' epilogues
      const T* at = z.s;  // A_ij, rows lda apart
      std::int64_t lda = LT;
      if (saved) {
        at = a.weights + i0 * S + j0, lda = S;
      } else if (whole_tiles && !a.bias) {  // A = 2^(T - t) / l as the tiles of T_ij are made
        const T* stats = a.stats + 2 * i0;
        times_panels<Isa>(rows, width, D, z.q + i0 * z.ldd, z.ldd, z.kt, j0, z.s, LT,
                          [stats](V t, std::int64_t r, std::int64_t) __attribute__((always_inline)) {
                            return stats[2 * r + 1] * exp_shifted<Isa>(t, stats[2 * r]);
                          });
      } else {
        times_panels<Isa>(rows, width, D, z.q + i0 * z.ldd, z.ldd, z.kt, j0, z.s, LT);  // T_ij
        for (std::int64_t r = 0; r < rows; ++r) {  // A = 2^(T - t) / l
          T* t = z.s + r * LT;
          const T* bias = a.bias ? a.bias + (i0 + r) * a.bias_row_stride + j0 * a.bias_col_stride : nullptr;
          if (bias || cols < width) scores_row<V>(t, cols, width, bias, a.bias_col_stride);
          const T shift = a.stats[2 * (i0 + r)], inv = a.stats[2 * (i0 + r) + 1];
          for (std::int64_t j = 0; j < width; j += W) store_vec(t + j, inv * exp_shifted<Isa>(load_vec<V>(t + j), shift));
        }
      }
      if (want_ds && whole_tiles && !saved && !a.drop && !a.dbias) {  // scale dS = scale A (dP - D), in dP's tiles
        const T* d = z.di + i0;
        const T* ab = z.s;
        const T scale = a.scale;
        times_panels<Isa>(rows, width, Dv, z.dout + i0 * z.lddv, z.lddv, z.vt, j0, z.dp, LT,
                          [d, ab, LT, scale](V dp, std::int64_t r, std::int64_t c) __attribute__((always_inline)) {
                            return scale * (load_vec<V>(ab + r * LT + c) * (dp - d[r]));
                          });
      } else if (want_ds) {
        times_panels<Isa>(rows, width, Dv, z.dout + i0 * z.lddv, z.lddv, z.vt, j0, z.dp, LT);  // dP_ij = dO_i v_j^T
        const T scale = a.scale;  // a local: the stores below could otherwise change it
        for (std::int64_t r = 0; r < rows; ++r) {  // dS = A (dA - rowsum(dA A)), dA = dP M; kept as scale dS
          T* ds = z.dp + r * LT;
          const T* ar = at + r * lda;
          const T* drop = a.drop ? a.drop + (i0 + r) * S + j0 : nullptr;
          T d;
          if (saved) {  // the whole row is here
            V dot{};
            for (std::int64_t j = 0; j < width; j += W) {
              V da = load_vec<V>(ds + j);
              if (drop) da *= load_first<V>(drop + j, cols - j, T(0));
              store_vec(ds + j, da);
              dot += da * load_first<V>(ar + j, cols - j, T(0));
            }
            d = sum_lanes(dot);
          } else {
            d = z.di[i0 + r];
            for (std::int64_t j = 0; drop && j < width; j += W) {
              store_vec(ds + j, load_vec<V>(ds + j) * load_first<V>(drop + j, cols - j, T(0)));
            }
          }
          T* dbias = a.dbias ? a.dbias + (i0 + r) * S + j0 : nullptr;
          for (std::int64_t j = 0; j < width; j += W) {
            const V x = load_first<V>(ar + j, cols - j, T(0)) * (load_vec<V>(ds + j) - d);
            if (dbias) store_first(dbias + j, x, cols - j);
            store_vec(ds + j, scale * x);
          }
        }
      }
      if (a.dv) {
        const T* pd = at;  // (A * M)_ij
        std::int64_t ldpd = lda;
        if (a.probs) {
          pd = a.probs + i0 * S + j0, ldpd = S;
        } else if (a.drop) {  // A is ours here (a saved A exists only without dropout)
          for (std::int64_t r = 0; r < rows; ++r) {
            T* ar = z.s + r * LT;
            const T* drop = a.drop + (i0 + r) * S + j0;
            for (std::int64_t j = 0; j < width; j += W) {
              store_vec(ar + j, load_vec<V>(ar + j) * load_first<V>(drop + j, cols - j, T(0)));
            }
          }
        }
        Gemm<T> dv;  // dv_j += (A * M)_ij^T dO_i
        dv.M = cols, dv.N = Dv, dv.K = rows;
        dv.a = pd, dv.a_row = 1, dv.a_col = ldpd;
        dv.b = z.dout + i0 * z.lddv, dv.ldb = z.lddv, dv.b_panel = P;
        dv.c = dv_out.p + j0 * dv_out.ld, dv.ldc = dv_out.ld, dv.into = i0 == 0 ? Into::overwrite : Into::add;
        gemm_tiled(Isa{}, dv);
      }
      if (a.dq) {
        Gemm<T> dq;  // dq_i += scale dS_ij k_j
        dq.M = rows, dq.N = D, dq.K = cols;
        dq.a = z.dp, dq.a_row = LT, dq.a_col = 1;
        dq.b = z.k + j0 * z.ldd, dq.ldb = z.ldd, dq.b_panel = P;
        dq.c = dq_out.p + i0 * dq_out.ld, dq.ldc = dq_out.ld, dq.into = j0 == 0 ? Into::overwrite : Into::add;
        gemm_tiled(Isa{}, dq);
      }
      if (a.dk) {
        Gemm<T> dk;  // dk_j += scale dS_ij^T q_i
        dk.M = cols, dk.N = D, dk.K = rows;
        dk.a = z.dp, dk.a_row = 1, dk.a_col = LT;
        dk.b = z.q + i0 * z.ldd, dk.ldb = z.ldd, dk.b_panel = P;
        dk.c = dk_out.p + j0 * dk_out.ld, dk.ldc = dk_out.ld, dk.into = i0 == 0 ? Into::overwrite : Into::add;
        gemm_tiled(Isa{}, dk);
      }
    }
  }
  auto flush = [](const VectorRows<T>& from, T* to, std::int64_t ld, std::int64_t rows, std::int64_t cols) {
    if (to && from.p != to) {
      for (std::int64_t r = 0; r < rows; ++r) std::copy_n(from.p + r * from.ld, cols, to + r * ld);
    }
  };
  flush(dq_out, a.dq, a.lddq, L, D);
  flush(dk_out, a.dk, a.lddk, S, D);
  flush(dv_out, a.dv, a.lddv, S, Dv);
}

}  // namespace

// ---- the entry points of this ISA (attention_tiles.hpp) ------------------------------------

MICROTORCH_TILES_TARGET void tiles_forward(simd::MICROTORCH_TILES_ISA, const AttentionMatrix<float>* a,
                                           std::int64_t n, RowShares r, float* w) {
  forward_body<simd::MICROTORCH_TILES_ISA>(a, n, r, w);
}
MICROTORCH_TILES_TARGET void tiles_forward(simd::MICROTORCH_TILES_ISA, const AttentionMatrix<double>* a,
                                           std::int64_t n, RowShares r, double* w) {
  forward_body<simd::MICROTORCH_TILES_ISA>(a, n, r, w);
}
MICROTORCH_TILES_TARGET void tiles_backward(simd::MICROTORCH_TILES_ISA, const AttentionGradMatrix<float>& a, float* w) {
  backward_body<simd::MICROTORCH_TILES_ISA>(a, w);
}
MICROTORCH_TILES_TARGET void tiles_backward(simd::MICROTORCH_TILES_ISA, const AttentionGradMatrix<double>& a,
                                            double* w) {
  backward_body<simd::MICROTORCH_TILES_ISA>(a, w);
}
template <class T>
std::int64_t tiles_workspace(simd::MICROTORCH_TILES_ISA, const AttentionDims& d, bool backward, bool whole_rows,
                             std::int64_t group) {
  return workspace_for<simd::MICROTORCH_TILES_ISA, T>(d, backward, whole_rows, group);
}
template std::int64_t tiles_workspace<float>(simd::MICROTORCH_TILES_ISA, const AttentionDims&, bool, bool,
                                             std::int64_t);
template std::int64_t tiles_workspace<double>(simd::MICROTORCH_TILES_ISA, const AttentionDims&, bool, bool,
                                              std::int64_t);

}  // namespace microtorch::detail
