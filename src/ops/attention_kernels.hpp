// Internal: the per-matrix kernels behind scaled_dot_product_attention and
// multi_head_attention (ops/attention.cpp).
//
// Operands are batches of matrices seen in place: matrix i starts at data + offsets[i] and
// its rows are ld elements apart. A contiguous [B, L, D] tensor has offsets i L D and
// ld = D; head h of batch n in a projection [N, L, H D] has offset n L H D + h D and
// ld = H D, so heads are split and merged without copies.
//
// Forward, per matrix i (S and A share one L x S buffer, the saved weights):
//   S = scale q k^T + bias            (one GEMM, alpha = scale; blocked entries are -inf)
//   A = softmax_rows(S)               (in place; a fully blocked row gives A = 0)
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

/// Fills out, and weights (A, [count, L, S]) and probs (P, with dropout) when given; without
/// them each thread works in its own L x S scratch (inference keeps no L x S buffer).
/// average, when given, receives the mean of P over each group of `group` consecutive
/// matrices (the heads of one batch element), [count / group, L, S], accumulated while
/// each P is still in cache; a group never straddles two threads.
template <class T>
void attention_forward(const AttentionDims& d, T scale, const Matrices<const T>& q, const Matrices<const T>& k,
                       const Matrices<const T>& v, const MaskBias<T>& bias, const T* drop, T* weights, T* probs,
                       T* average, std::int64_t group, const Matrices<T>& out) {
  const std::int64_t LS = d.L * d.S;
  const double flops = 2.0 * static_cast<double>(LS) * static_cast<double>(d.D + d.Dv) * static_cast<double>(group);
  parallel_for(d.count / group, flops, [&](std::int64_t begin, std::int64_t end) {
    const std::unique_ptr<T[]> scratch(weights ? nullptr : new T[static_cast<std::size_t>(LS * (drop ? 2 : 1))]);
    for (std::int64_t ii = begin * group; ii < end * group; ++ii) {
      const auto i = static_cast<std::size_t>(ii);
      T* a = weights ? weights + ii * LS : scratch.get();
      gemm(false, true, d.L, d.S, d.D, scale, q[i], q.ld, k[i], k.ld, T(0), a, d.S);
      for (std::int64_t r = 0; r < d.L; ++r) {
        T* row = a + r * d.S;
        if (bias.m) {
          const T* b = bias.m[i] + r * bias.row_stride;
          for (std::int64_t j = 0; j < d.S; ++j) row[j] += b[j * bias.col_stride];
        }
        softmax_row(row, row, d.S);
      }
      const T* p = a;
      if (drop) {
        T* pd = weights ? probs + ii * LS : scratch.get() + LS;
        const T* m = drop + ii * LS;
        for (std::int64_t j = 0; j < LS; ++j) pd[j] = a[j] * m[j];
        p = pd;
      }
      if (average) {  // mean over the group = sum of P / group
        T* avg = average + (ii / group) * LS;
        const T w = T(1) / static_cast<T>(group);
        if (ii % group == 0) {
          for (std::int64_t j = 0; j < LS; ++j) avg[j] = p[j] * w;
        } else {
          for (std::int64_t j = 0; j < LS; ++j) avg[j] += p[j] * w;
        }
      }
      gemm(false, false, d.L, d.Dv, d.S, T(1), p, d.S, v[i], v.ld, T(0), out[i], out.ld);
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
