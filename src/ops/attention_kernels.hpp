// Internal: the per-matrix kernels behind scaled_dot_product_attention and
// multi_head_attention (ops/attention.cpp).
//
// Operands are batches of matrices seen in place: matrix i starts at data + offsets[i] and
// its rows are ld elements apart. A contiguous [B, L, D] tensor has offsets i L D and
// ld = D; head h of batch n in a projection [N, L, H D] has offset n L H D + h D and
// ld = H D, so heads are split and merged without copies.
//
// Forward, per matrix i (attention_rows):
//   S = scale q k^T + bias            (blocked entries are -inf)
//   A = softmax_rows(S)               (a fully blocked row gives A = 0)
//   P = A * M                         (dropout: M holds 0 or 1 / (1 - p); otherwise P = A)
//   O = P v
// Backward, per matrix i (attention_rows_backward), from the saved A (and M, P):
//   dv = P^T dO,  dP = dO v^T,  dA = dP * M,
//   dS = A * (dA - rowsum(dA * A)),  dq = scale dS k,  dk = scale dS^T q,  dbias = dS
// Both run fused over blocks of 16 query rows (attention_rows.cpp), in a small scratch per
// thread. Matrices are independent, so they are spread over microtorch's threads.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "common.hpp"
#include "parallel_for.hpp"

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

/// The additive mask, broadcast: row r of matrix i at m[i] + r * row_stride, element j at
/// + j * col_stride (strides are 0 along broadcast dims).
template <class T>
struct MaskBias {
  Matrices<const T> m;
  std::int64_t row_stride = 0, col_stride = 0;
};

/// q, k and v of one matrix in place (rows ld apart).
template <class T>
struct AttentionOperands {
  AttentionDims dims;
  T scale = 1;
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  std::int64_t ldq = 0, ldk = 0, ldv = 0;

  AttentionOperands() = default;
  AttentionOperands(const AttentionDims& d, T s, const Matrices<const T>& q_, const Matrices<const T>& k_,
                    const Matrices<const T>& v_, std::size_t i)
      : dims(d), scale(s), q(q_[i]), k(k_[i]), v(v_[i]), ldq(q_.ld), ldk(k_.ld), ldv(v_.ld) {}
};

/// One matrix of the forward: its operands, bias element (r, j) at bias[r bias_row_stride
/// + j bias_col_stride]; drop, weights, probs and average are contiguous [L, S] and null
/// when absent. average receives average_weight P, added to it unless average_first.
template <class T>
struct AttentionMatrix : AttentionOperands<T> {
  using AttentionOperands<T>::AttentionOperands;
  const T* bias = nullptr;
  std::int64_t bias_row_stride = 0, bias_col_stride = 0;
  const T* drop = nullptr;
  T *weights = nullptr, *probs = nullptr, *average = nullptr;
  T average_weight = 1;
  bool average_first = true;
  T* out = nullptr;
  std::int64_t ldo = 0;
};

/// One matrix of the backward: the forward's operands, its saved weights (and dropout
/// multipliers and probs), dout, and the gradients wanted (null when not).
template <class T>
struct AttentionGradMatrix : AttentionOperands<T> {
  using AttentionOperands<T>::AttentionOperands;
  const T *weights = nullptr, *drop = nullptr, *probs = nullptr;
  const T* dout = nullptr;
  std::int64_t lddo = 0;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  std::int64_t lddq = 0, lddk = 0, lddv = 0;
  T* dbias = nullptr;  // dS, contiguous [L, S], when the additive bias wants a gradient
};

/// Elements of the scratch attention_rows and attention_rows_backward need: transposed
/// blocks of at most 16 query rows (attention_rows.cpp).
inline std::int64_t attention_rows_scratch(const AttentionDims& d) { return (std::max(d.D, d.Dv) + 4 * d.S) * 16; }

/// O (and A, P, the average when wanted) of one matrix, a block of query rows at a time.
void attention_rows(const AttentionMatrix<float>& a, float* scratch);
void attention_rows(const AttentionMatrix<double>& a, double* scratch);
/// dq, dk, dv (those wanted) of one matrix.
void attention_rows_backward(const AttentionGradMatrix<float>& a, float* scratch);
void attention_rows_backward(const AttentionGradMatrix<double>& a, double* scratch);

/// Fills out, and weights (A, [count, L, S]) and probs (P, with dropout) when given.
/// average, when given, receives the mean of P over each group of `group` consecutive
/// matrices (the heads of one batch element), [count / group, L, S]; a group never
/// straddles two threads.
template <class T>
void attention_forward(const AttentionDims& d, T scale, const Matrices<const T>& q, const Matrices<const T>& k,
                       const Matrices<const T>& v, const MaskBias<T>& bias, const T* drop, T* weights, T* probs,
                       T* average, std::int64_t group, const Matrices<T>& out) {
  const std::int64_t LS = d.L * d.S;
  const double flops = 2.0 * static_cast<double>(LS) * static_cast<double>(d.D + d.Dv) * static_cast<double>(group);
  parallel_for(d.count / group, flops, [&](std::int64_t begin, std::int64_t end) {
    const std::unique_ptr<T[]> scratch(new T[static_cast<std::size_t>(attention_rows_scratch(d))]);
    for (std::int64_t ii = begin * group; ii < end * group; ++ii) {
      const auto i = static_cast<std::size_t>(ii);
      AttentionMatrix<T> a(d, scale, q, k, v, i);
      if (bias.m) a.bias = bias.m[i], a.bias_row_stride = bias.row_stride, a.bias_col_stride = bias.col_stride;
      if (drop) a.drop = drop + ii * LS;
      if (weights) a.weights = weights + ii * LS;
      if (probs) a.probs = probs + ii * LS;
      if (average) {  // mean over the group = sum of P / group
        a.average = average + (ii / group) * LS;
        a.average_weight = T(1) / static_cast<T>(group);
        a.average_first = ii % group == 0;
      }
      a.out = out[i], a.ldo = out.ld;
      attention_rows(a, scratch.get());
    }
  });
}

/// Writes dq, dk, dv (each only when present) and dbias ([count, L, S], when not null) from
/// dout; weights/drop/probs as saved by attention_forward.
template <class T>
void attention_backward(const AttentionDims& d, T scale, const Matrices<const T>& q, const Matrices<const T>& k,
                        const Matrices<const T>& v, const T* weights, const T* drop, const T* probs,
                        const Matrices<const T>& dout, const Matrices<T>& dq, const Matrices<T>& dk,
                        const Matrices<T>& dv, T* dbias) {
  const std::int64_t LS = d.L * d.S;
  const double flops = 4.0 * static_cast<double>(LS) * static_cast<double>(d.D + d.Dv);
  parallel_for(d.count, flops, [&](std::int64_t begin, std::int64_t end) {
    const std::unique_ptr<T[]> scratch(new T[static_cast<std::size_t>(attention_rows_scratch(d))]);
    for (std::int64_t ii = begin; ii < end; ++ii) {
      const auto i = static_cast<std::size_t>(ii);
      AttentionGradMatrix<T> a(d, scale, q, k, v, i);
      a.weights = weights + ii * LS;
      if (drop) a.drop = drop + ii * LS, a.probs = probs + ii * LS;
      a.dout = dout[i], a.lddo = dout.ld;
      if (dq) a.dq = dq[i], a.lddq = dq.ld;
      if (dk) a.dk = dk[i], a.lddk = dk.ld;
      if (dv) a.dv = dv[i], a.lddv = dv.ld;
      if (dbias) a.dbias = dbias + ii * LS;
      attention_rows_backward(a, scratch.get());
    }
  });
}

}  // namespace microtorch::detail
