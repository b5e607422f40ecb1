// Internal: the per-matrix kernels behind scaled_dot_product_attention and
// multi_head_attention (ops/attention.cpp).
//
// Operands are batches of matrices seen in place: matrix i starts at data + offsets[i] and
// its rows are ld elements apart. A contiguous [B, L, D] tensor has offsets i L D and
// ld = D; head h of batch n in a projection [N, L, H D] has offset n L H D + h D and
// ld = H D, so heads are split and merged without copies.
//
// Forward, per matrix i (attention_rows, fused over blocks of query rows in attention_rows.cpp):
//   S = scale q k^T + bias            (blocked entries are -inf)
//   A = softmax_rows(S)               (a fully blocked row gives A = 0)
//   P = A * M                         (dropout: M holds 0 or 1 / (1 - p); otherwise P = A)
//   O = P v
// Backward, per matrix i, in one L x S scratch per thread (not one per matrix):
//   dv = P^T dO,  dP = dO v^T,  dA = dP * M,
//   dS = A * (dA - rowsum(dA * A)),  dq = scale dS k,  dk = scale dS^T q
// Matrices are independent, so they are spread over microtorch's threads.
#pragma once

#include <memory>
#include <vector>

#include "gemm.hpp"
#include "parallel_for.hpp"
#include "softmax_kernels.hpp"

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

/// One matrix of the forward: operands in place (rows ld apart), bias element (r, j) at
/// bias[r bias_row_stride + j bias_col_stride]; drop, weights, probs and average are
/// contiguous [L, S] and null when absent. average receives average_weight P, added to it
/// unless average_first.
template <class T>
struct AttentionMatrix {
  std::int64_t L = 0, S = 0, D = 0, Dv = 0;
  T scale = 1;
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  std::int64_t ldq = 0, ldk = 0, ldv = 0;
  const T* bias = nullptr;
  std::int64_t bias_row_stride = 0, bias_col_stride = 0;
  const T* drop = nullptr;
  T *weights = nullptr, *probs = nullptr, *average = nullptr;
  T average_weight = 1;
  bool average_first = true;
  T* out = nullptr;
  std::int64_t ldo = 0;
};

/// Elements of the scratch attention_rows needs: Q^T, S^T and padded v columns of one
/// block of query rows (at most 16 lanes each).
inline std::int64_t attention_rows_scratch(const AttentionDims& d) { return (d.D + 2 * d.S) * 16; }

/// O (and A, P, the average when wanted) of one matrix, a block of query rows at a time
/// (attention_rows.cpp).
void attention_rows(const AttentionMatrix<float>& a, float* scratch);
void attention_rows(const AttentionMatrix<double>& a, double* scratch);

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
      AttentionMatrix<T> a;
      a.L = d.L, a.S = d.S, a.D = d.D, a.Dv = d.Dv, a.scale = scale;
      a.q = q[i], a.k = k[i], a.v = v[i], a.ldq = q.ld, a.ldk = k.ld, a.ldv = v.ld;
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

/// Writes dq, dk, dv (each only when present) from dout; weights/drop/probs as saved by
/// attention_forward.
template <class T>
void attention_backward(const AttentionDims& d, T scale, const Matrices<const T>& q, const Matrices<const T>& k,
                        const Matrices<const T>& v, const T* weights, const T* drop, const T* probs,
                        const Matrices<const T>& dout, const Matrices<T>& dq, const Matrices<T>& dk,
                        const Matrices<T>& dv) {
  const std::int64_t LS = d.L * d.S;
  const double flops = 4.0 * static_cast<double>(LS) * static_cast<double>(d.D + d.Dv);
  parallel_for(d.count, flops, [&](std::int64_t begin, std::int64_t end) {
    const std::unique_ptr<T[]> scratch(dq || dk ? new T[static_cast<std::size_t>(LS)] : nullptr);
    for (std::int64_t ii = begin; ii < end; ++ii) {
      const auto i = static_cast<std::size_t>(ii);
      const T* a = weights + ii * LS;
      if (dv) gemm(true, false, d.S, d.Dv, d.L, T(1), drop ? probs + ii * LS : a, d.S, dout[i], dout.ld, T(0), dv[i], dv.ld);
      if (!dq && !dk) continue;
      T* ds = scratch.get();
      gemm(false, true, d.L, d.S, d.Dv, T(1), dout[i], dout.ld, v[i], v.ld, T(0), ds, d.S);  // dP
      if (drop) {
        const T* m = drop + ii * LS;
        for (std::int64_t j = 0; j < LS; ++j) ds[j] *= m[j];  // dA
      }
      for (std::int64_t r = 0; r < d.L; ++r) softmax_grad_row(a + r * d.S, ds + r * d.S, ds + r * d.S, d.S);
      if (dq) gemm(false, false, d.L, d.D, d.S, scale, ds, d.S, k[i], k.ld, T(0), dq[i], dq.ld);
      if (dk) gemm(true, false, d.S, d.D, d.L, scale, ds, d.S, q[i], q.ld, T(0), dk[i], dk.ld);
    }
  });
}

}  // namespace microtorch::detail
