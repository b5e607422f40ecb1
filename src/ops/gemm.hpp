// Internal: the batched BLAS kernel shared by matmul, linear and attention.
#pragma once

#include "common.hpp"

namespace microtorch::detail {

/// op(a) @ op(b) for floating tensors of the same dtype with >= 2 dims, where op transposes
/// the last two dims when its flag is set (passed to BLAS, never copied). Leading dims
/// broadcast. Records nothing.
Tensor batched_gemm(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);

}  // namespace microtorch::detail
