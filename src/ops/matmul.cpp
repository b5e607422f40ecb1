// matmul with PyTorch semantics, computed by BLAS (cblas_sgemm / cblas_dgemm).
//
// The kernel multiplies batches of row-major matrices whose leading (batch) dims
// broadcast, with optional transposes passed to BLAS as flags instead of copies. The
// backward of C = A B reuses it: dA = dC B^T, dB = A^T dC (transposed operands are
// never materialised); the engine sums broadcast batch dims back to each input.
#include <cblas.h>

#include <algorithm>
#include <limits>

#include "../parallel.hpp"
#include "gemm.hpp"
#include "microtorch/parallel.hpp"

namespace microtorch {

namespace detail {

namespace {

void gemv(CBLAS_ORDER o, CBLAS_TRANSPOSE t, int m, int n, float alpha, const float* a, int lda, const float* x,
          int incx, float beta, float* y, int incy) {
  cblas_sgemv(o, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
void gemv(CBLAS_ORDER o, CBLAS_TRANSPOSE t, int m, int n, double alpha, const double* a, int lda, const double* x,
          int incx, double beta, double* y, int incy) {
  cblas_dgemv(o, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

// cblas takes int sizes. The rows of a non-transposed A and of C are independent, so a
// product taller than INT_MAX rows runs in slices; any other size beyond INT_MAX is refused.
// One row (m = 1: a linear layer decoding one token) is a matrix-vector product,
// c = alpha op(B)^T a + beta c, which BLAS's gemv does in one pass over B (sgemm would first
// pack B, about three times the memory traffic).
template <class T, class Blas>
void gemm_slices(Blas blas, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                 std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  if (n > kMax || k > kMax || lda > kMax || ldb > kMax || ldc > kMax || (ta && m > kMax)) {
    throw ShapeError(fmt::format("matmul: a {} x {} by {} x {} product has a size beyond the 2^31 - 1 that BLAS "
                                 "takes; split the operands",
                                 m, k, k, n));
  }
  if (m == 1 && k > 0 && n > 0) {
    if (beta == T(0)) std::fill_n(c, n, T(0));  // c may hold anything (NaN) when beta is 0
    gemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, static_cast<int>(tb ? n : k), static_cast<int>(tb ? k : n),
         alpha, b, static_cast<int>(ldb), a, static_cast<int>(ta ? lda : 1), beta, c, 1);
    return;
  }
  for (std::int64_t r = 0; r < m; r += kMax) {
    const std::int64_t rows = std::min(kMax, m - r);
    blas(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
         static_cast<int>(n), static_cast<int>(k), alpha, a + r * (ta ? 1 : lda), static_cast<int>(lda), b,
         static_cast<int>(ldb), beta, c + r * ldc, static_cast<int>(ldc));
  }
}

// The product split over microtorch's threads (parallel_for), each part a one-thread BLAS
// call: blocks of kBlock rows of C (of op(A)), or of columns (of op(B)) when C is wider than
// tall, at least kMinPart FLOPs a part (below that, waking a thread costs more than it saves).
// A part's edge tiles may round a sum differently from the whole product's: results agree
// across thread counts to the dtype's rounding, not bit for bit.
template <class T, class Blas>
void gemm_checked(Blas blas, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                  std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  constexpr std::int64_t kBlock = 16;
  constexpr double kMinPart = 2e6;
  const bool by_rows = m >= n;
  const std::int64_t extent = by_rows ? m : n;
  const std::int64_t blocks = (extent + kBlock - 1) / kBlock;
  const double block_flops = 2.0 * kBlock * static_cast<double>(by_rows ? n : m) * static_cast<double>(k);
  const std::int64_t parts = std::min<std::int64_t>(
      {blocks, get_num_threads(), static_cast<std::int64_t>(block_flops * static_cast<double>(blocks) / kMinPart)});
  if (parts < 2) return gemm_slices(blas, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const std::int64_t per = (blocks + parts - 1) / parts, span = per * kBlock;  // blocks, rows or columns of a part
  const std::int64_t items = (blocks + per - 1) / per;  // parts, none empty
  parallel_for(items, block_flops * static_cast<double>(per), [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t first = begin * span, size = std::min(end * span, extent) - first;
    if (by_rows) {
      gemm_slices(blas, ta, tb, size, n, k, alpha, a + first * (ta ? 1 : lda), lda, b, ldb, beta, c + first * ldc,
                  ldc);
    } else {
      gemm_slices(blas, ta, tb, m, size, k, alpha, a, lda, b + first * (tb ? ldb : 1), ldb, beta, c + first, ldc);
    }
  });
}

}  // namespace

void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  gemm_checked(cblas_sgemm, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  gemm_checked(cblas_dgemm, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::vector<std::int64_t> batch_offsets(const Shape& dims, const Shape& batch, std::int64_t matrix_size) {
  const std::size_t lead = batch.size() - dims.size();
  Shape strides(batch.size(), 0);
  std::int64_t acc = matrix_size;
  for (std::size_t i = dims.size(); i-- > 0;) {
    strides[i + lead] = dims[i] == 1 ? 0 : acc;
    acc *= dims[i];
  }
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(numel_of(batch)));
  Shape idx(batch.size(), 0);
  for (auto& off : offsets) {
    std::int64_t o = 0;
    for (std::size_t d = 0; d < batch.size(); ++d) o += idx[d] * strides[d];
    off = o;
    for (std::size_t d = batch.size(); d-- > 0;) {  // odometer increment
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return offsets;
}

Tensor batched_gemm(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const std::int64_t ar = as[as.size() - 2], ac = as[as.size() - 1];
  const std::int64_t br = bs[bs.size() - 2], bc = bs[bs.size() - 1];
  const std::int64_t m = ta ? ac : ar, k = ta ? ar : ac;
  const std::int64_t kb = tb ? bc : br, n = tb ? br : bc;
  if (k != kb) {
    throw ShapeError(fmt::format("matmul: inner dimensions differ: {} @ {} ({} vs {}); did you forget "
                                 "transpose(-2, -1)?",
                                 shape_str(as), shape_str(bs), k, kb));
  }
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  const Shape batch = broadcast_shapes(a_batch, b_batch, "matmul (batch dims)");
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  if (m == 0 || n == 0 || k == 0) return zeros(out_shape, a.dtype());
  Tensor c = Tensor::empty(out_shape, a.dtype());  // every element is written (beta = 0)
  detail::visit_floating(a.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = c.data<T>();
    if (numel_of(b_batch) == 1 && !ta && numel_of(a_batch) == numel_of(batch)) {
      // One matrix on the right, a plain batch on the left: fold the batch into the rows.
      gemm(false, tb, numel_of(batch) * m, n, k, T(1), pa, k, pb, tb ? k : n, T(0), pc, n);
      return 0;
    }
    const auto offa = batch_offsets(a_batch, batch, ar * ac);
    const auto offb = batch_offsets(b_batch, batch, br * bc);
    for (std::size_t i = 0; i < offa.size(); ++i) {
      gemm(ta, tb, m, n, k, T(1), pa + offa[i], ac, pb + offb[i], bc, T(0), pc + static_cast<std::int64_t>(i) * m * n, n);
    }
    return 0;
  });
  return c;
}

}  // namespace detail

namespace {

using detail::batched_gemm;

// dB = A^T dC. When B is one matrix shared by a batch of A (x @ W), the batch folds into
// the contraction: one GEMM of [K, batch*M] @ [batch*M, N] instead of a sum of products.
Tensor matmul_grad_b(const Tensor& a, const Tensor& g, const Tensor& b) {
  if (b.dim() == 2 && a.dim() > 2 && numel_of(Shape(g.shape().begin(), g.shape().end() - 2)) ==
                                         numel_of(Shape(a.shape().begin(), a.shape().end() - 2))) {
    // The row counts are spelled out: reshape's -1 cannot infer them when a size is 0.
    const auto rows = [](const Tensor& t) { return numel_of(Shape(t.shape().begin(), t.shape().end() - 1)); };
    return batched_gemm(reshape(a, {rows(a), a.size(-1)}), reshape(g, {rows(g), g.size(-1)}), true, false);
  }
  return batched_gemm(a, g, true, false);
}

// C = A B ;  dA = dC B^T, dB = A^T dC   (for >= 2-D operands)
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  Tensor c = batched_gemm(a, b, false, false);
  return autograd::record(c, "matmul", {a, b}, autograd::Saved{a, b},
                          [](const Tensor& g, const autograd::NeedsGrad& needs, const TensorList& s) {
                            return TensorList{needs[0] ? batched_gemm(g, s[1], false, true) : Tensor(),
                                              needs[1] ? matmul_grad_b(s[0], g, s[1]) : Tensor()};
                          });
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  if (a_in.dim() == 0 || b_in.dim() == 0) {
    throw ShapeError(fmt::format("matmul: both operands need at least 1 dim, got {} @ {}; use mul() for scalars",
                                 shape_str(a_in.shape()), shape_str(b_in.shape())));
  }
  if (!a_in.is_floating_point() || !b_in.is_floating_point()) {
    throw DtypeError(fmt::format("matmul: expects floating tensors, got {} @ {}; convert with .to(kFloat32)",
                                 dtype_name(a_in.dtype()), dtype_name(b_in.dtype())));
  }
  const Dtype d = promote_types(a_in.dtype(), b_in.dtype());
  const Tensor a = a_in.to(d), b = b_in.to(d);
  // 1-D operands become matrices ([K] -> [1, K] on the left, [K, 1] on the right) and the
  // added dim is removed from the result, as in PyTorch.
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  if (a_vec && b_vec && a.size(0) != b.size(0)) {
    throw ShapeError(fmt::format("matmul: dot product of vectors of different lengths: {} @ {}",
                                 shape_str(a.shape()), shape_str(b.shape())));
  }
  Tensor c = matmul_nd(a_vec ? reshape(a, {1, a.size(0)}) : a, b_vec ? reshape(b, {b.size(0), 1}) : b);
  if (!a_vec && !b_vec) return c;
  Shape out(c.shape().begin(), c.shape().end() - 2);
  if (!a_vec) out.push_back(c.size(-2));
  if (!b_vec) out.push_back(c.size(-1));
  return reshape(c, out);
}

}  // namespace microtorch
