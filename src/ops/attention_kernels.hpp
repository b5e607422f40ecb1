// Internal: the per-matrix kernels behind scaled_dot_product_attention and
// multi_head_attention (ops/attention.cpp).
//
// Operands are batches of matrices seen in place: matrix i starts at data + offsets[i] and
// its rows are ld elements apart. A contiguous [B, L, D] tensor has offsets i L D and
// ld = D; head h of batch n in a projection [N, L, H D] has offset n L H D + h D and
// ld = H D, so heads are split and merged without copies.
//
// Forward, per matrix i (attention_tiles_isa.hpp):
//   S = scale q k^T + bias            (blocked entries are -inf)
//   A = softmax_rows(S)               (a fully blocked row gives A = 0)
//   P = A * M                         (dropout: M holds 0 or 1 / (1 - p); otherwise P = A)
//   O = P v
// and per row two statistics, m = max_j S_j and 1 / l, l = sum_j e^(S_j - m) (both 0 for
// a fully blocked row).
// Backward, per matrix i, from the statistics (A = e^(S - m) / l recomputed unless saved):
//   dv = P^T dO,  dP = dO v^T,  dA = dP * M,
//   dS = A * (dA - rowsum(dA * A)),  dq = scale dS k,  dk = scale dS^T q,  dbias = dS
// Both are tiled as FlashAttention-2 is: no L x S matrix exists unless the caller asks for
// the weights, and a thread's workspace holds O((L + S) D) elements. Matrices are
// independent, so they are spread over microtorch's threads; the kernels call no BLAS (their own register tiles,
// gemm_tiles.hpp), so a parallel region never touches OpenBLAS's process-wide threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "../parallel.hpp"
#include "common.hpp"
#include "microtorch/parallel.hpp"

namespace microtorch::detail {

/// A batch of row-major matrices inside one buffer.
template <class T>
struct Matrices {
  T* data = nullptr;  // null: absent (no mask, gradient not wanted)
  std::vector<std::int64_t> offsets;
  std::int64_t ld = 0;
  T* operator[](std::size_t i) const { return data + offsets[i]; }
  explicit operator bool() const { return data != nullptr; }
};

struct AttentionDims {
  std::int64_t count = 0, L = 0, S = 0, D = 0, Dv = 0;
};

/// Shares [begin, end) of a matrix's query rows cut into `of` equal shares (in whole blocks
/// of rows): the forward of one matrix can be split over threads, its rows being independent.
struct RowShares {
  std::int64_t begin = 0, end = 1, of = 1;
};

/// The additive mask, broadcast: row r of matrix i at m[i] + r * row_stride, element j at
/// + j * col_stride (strides are 0 along broadcast dims).
template <class T>
struct MaskBias {
  Matrices<const T> m;
  std::int64_t row_stride = 0, col_stride = 0;
};

/// q, k, v and the additive mask of one matrix in place (rows ld apart; bias element
/// (r, j) at bias[r bias_row_stride + j bias_col_stride], col stride 0 or 1).
template <class T>
struct AttentionOperands {
  AttentionDims dims;
  T scale = 1;
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  std::int64_t ldq = 0, ldk = 0, ldv = 0;
  const T* bias = nullptr;
  std::int64_t bias_row_stride = 0, bias_col_stride = 0;

  AttentionOperands() = default;
  AttentionOperands(const AttentionDims& d, T s, const Matrices<const T>& q_, const Matrices<const T>& k_,
                    const Matrices<const T>& v_, const MaskBias<T>& b, std::size_t i)
      : dims(d), scale(s), q(q_[i]), k(k_[i]), v(v_[i]), ldq(q_.ld), ldk(k_.ld), ldv(v_.ld) {
    if (b.m) bias = b.m[i], bias_row_stride = b.row_stride, bias_col_stride = b.col_stride;
  }
};

/// One matrix of the forward: its operands; drop, weights (A), probs (P) and average are
/// contiguous [L, S] and null when absent; average receives average_weight P, added to it
/// unless average_first; stats ([L, 2]: the row max of the scores times log2 e, and 1 / l) is
/// written when not null.
template <class T>
struct AttentionMatrix : AttentionOperands<T> {
  using AttentionOperands<T>::AttentionOperands;
  const T* drop = nullptr;
  T *weights = nullptr, *probs = nullptr, *average = nullptr;
  T average_weight = 1;
  bool average_first = true;
  T* out = nullptr;
  std::int64_t ldo = 0;
  T* stats = nullptr;
};

/// One matrix of the backward: the forward's operands, dropout multipliers, row statistics
/// and output (or its A and P when it kept them: read instead of recomputed), dout, and the
/// gradients wanted (null when not).
template <class T>
struct AttentionGradMatrix : AttentionOperands<T> {
  using AttentionOperands<T>::AttentionOperands;
  const T *drop = nullptr, *weights = nullptr, *probs = nullptr;
  const T* stats = nullptr;
  const T* out = nullptr;  // read when weights is null
  std::int64_t ldo = 0;
  const T* dout = nullptr;
  std::int64_t lddo = 0;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  std::int64_t lddq = 0, lddk = 0, lddv = 0;
  T* dbias = nullptr;  // dS, contiguous [L, S], when the additive bias wants a gradient
};

/// Elements of the workspace one thread needs for matrices of these dims: forward of a group
/// of matrices (with whole rows when it writes weights, probs or an average) or backward of
/// one (with whole rows when it reads the saved weights).
template <class T>
std::int64_t attention_workspace(const AttentionDims& d, bool backward, bool whole_rows, std::int64_t group = 1);

/// O, the row statistics (and A, P, the average when wanted) of `count` matrices, on the
/// query rows of `shares`: the heads one average covers, run block by block (each block of
/// query rows through every head).
void attention_tiles(const AttentionMatrix<float>* a, std::int64_t count, RowShares shares, float* workspace);
void attention_tiles(const AttentionMatrix<double>* a, std::int64_t count, RowShares shares, double* workspace);
/// dq, dk, dv, dbias (those wanted) of one matrix.
void attention_tiles_backward(const AttentionGradMatrix<float>& a, float* workspace);
void attention_tiles_backward(const AttentionGradMatrix<double>& a, double* workspace);

/// A thread's workspace, 64-byte aligned.
template <class T>
class Workspace {
 public:
  explicit Workspace(std::int64_t elements)
      : buffer_(new unsigned char[static_cast<std::size_t>(elements) * sizeof(T) + 64]) {}
  T* get() const {
    const auto p = reinterpret_cast<std::uintptr_t>(buffer_.get());
    return reinterpret_cast<T*>((p + 63) / 64 * 64);
  }

 private:
  std::unique_ptr<unsigned char[]> buffer_;
};

/// Row shares per group of matrices such that `groups` groups spread evenly over `threads`:
/// 1 when they divide evenly, otherwise enough shares for each thread to get about 4.
inline std::int64_t row_shares(std::int64_t groups, std::int64_t threads) {
  if (threads <= 1 || groups <= 0 || groups % threads == 0) return 1;
  return (4 * threads + groups - 1) / groups;
}

/// Fills out, stats (when given: [count, L, 2]), and weights (A, [count, L, S]) and probs (P,
/// with dropout) when given. average, when given, receives the mean of P over each group of
/// `group` consecutive matrices (the heads of one batch element), [count / group, L, S].
/// The threads share out (group, query-row share) items; a thread's consecutive shares of
/// one group run as one call, which packs that group's K^T and v once.
template <class T>
void attention_forward(const AttentionDims& d, T scale, const Matrices<const T>& q, const Matrices<const T>& k,
                       const Matrices<const T>& v, const MaskBias<T>& bias, const T* drop, T* weights, T* probs,
                       T* average, std::int64_t group, const Matrices<T>& out, T* stats) {
  const std::int64_t LS = d.L * d.S;
  const double flops = 2.0 * static_cast<double>(LS) * static_cast<double>(d.D + d.Dv) * static_cast<double>(group);
  const bool whole_rows = weights || probs || average;
  const std::int64_t groups = d.count / group, shares = row_shares(groups, get_num_threads());
  parallel_for(groups * shares, flops / static_cast<double>(shares), [&](std::int64_t begin, std::int64_t end) {
    const Workspace<T> workspace(attention_workspace<T>(d, false, whole_rows, group));
    std::vector<AttentionMatrix<T>> heads(static_cast<std::size_t>(group));
    for (std::int64_t item = begin; item < end;) {
      const std::int64_t g = item / shares;
      const RowShares rows{item % shares, std::min(end - g * shares, shares), shares};
      item = g * shares + rows.end;
      for (std::int64_t h = 0; h < group; ++h) {
        const std::int64_t ii = g * group + h;
        const auto i = static_cast<std::size_t>(ii);
        AttentionMatrix<T>& a = heads[static_cast<std::size_t>(h)];
        a = AttentionMatrix<T>(d, scale, q, k, v, bias, i);
        if (drop) a.drop = drop + ii * LS;
        if (weights) a.weights = weights + ii * LS;
        if (probs) a.probs = probs + ii * LS;
        if (average) {  // mean over the group = sum of P / group
          a.average = average + g * LS;
          a.average_weight = T(1) / static_cast<T>(group);
          a.average_first = h == 0;
        }
        a.out = out[i], a.ldo = out.ld;
        if (stats) a.stats = stats + ii * 2 * d.L;
      }
      attention_tiles(heads.data(), group, rows, workspace.get());
    }
  });
}

/// Writes dq, dk, dv (each only when present) and dbias ([count, L, S], when not null) from
/// dout, given the forward's stats ([count, L, 2]), out and drop; weights (A) and probs (P)
/// are read instead of recomputed when not null (out is then not read).
template <class T>
void attention_backward(const AttentionDims& d, T scale, const Matrices<const T>& q, const Matrices<const T>& k,
                        const Matrices<const T>& v, const MaskBias<T>& bias, const T* drop, const T* weights,
                        const T* probs, const T* stats, const Matrices<const T>& out, const Matrices<const T>& dout,
                        const Matrices<T>& dq, const Matrices<T>& dk, const Matrices<T>& dv, T* dbias) {
  const std::int64_t LS = d.L * d.S;
  const double flops = 4.0 * static_cast<double>(LS) * static_cast<double>(d.D + d.Dv);
  parallel_for(d.count, flops, [&](std::int64_t begin, std::int64_t end) {
    const Workspace<T> workspace(attention_workspace<T>(d, true, weights != nullptr));
    for (std::int64_t ii = begin; ii < end; ++ii) {
      const auto i = static_cast<std::size_t>(ii);
      AttentionGradMatrix<T> a(d, scale, q, k, v, bias, i);
      if (drop) a.drop = drop + ii * LS;
      if (weights) a.weights = weights + ii * LS;
      if (probs) a.probs = probs + ii * LS;
      a.stats = stats + ii * 2 * d.L;
      if (out) a.out = out[i], a.ldo = out.ld;
      a.dout = dout[i], a.lddo = dout.ld;
      if (dq) a.dq = dq[i], a.lddq = dq.ld;
      if (dk) a.dk = dk[i], a.lddk = dk.ld;
      if (dv) a.dv = dv[i], a.lddv = dv.ld;
      if (dbias) a.dbias = dbias + ii * LS;
      attention_tiles_backward(a, workspace.get());
    }
  });
}

}  // namespace microtorch::detail
