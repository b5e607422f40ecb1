// Internal: the BLAS kernels shared by matmul, linear and attention.
#pragma once

#include <vector>

#include "common.hpp"

namespace microtorch::detail {

/// C = alpha op(A) op(B) + beta C on row-major matrices with leading dimensions (cblas
/// sgemm/dgemm; op transposes when its flag is set). A is m x k after op, B k x n, C m x n.
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc);

/// Element offsets of each batch of `batch` (row-major order) into a tensor whose own batch
/// dims are `dims` (right-aligned, size-1 dims broadcast) and whose matrices hold
/// `matrix_size` elements.
std::vector<std::int64_t> batch_offsets(const Shape& dims, const Shape& batch, std::int64_t matrix_size);

/// op(a) @ op(b) for floating tensors of the same dtype with >= 2 dims, where op transposes
/// the last two dims when its flag is set (passed to BLAS, never copied). Leading dims
/// broadcast. Records nothing.
Tensor batched_gemm(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);

}  // namespace microtorch::detail
