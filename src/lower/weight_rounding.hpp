// Rounding a layer's weights to integers: to nearest, or with error feedback from the
// calibration inputs' correlations (GPTQ, Frantar et al. 2022), which Lowering::weight_rows
// chooses by QuantOptions::rounding.
#pragma once

#include <cstdint>
#include <vector>

#include "microtorch/lower/program.hpp"

namespace microtorch::lower {

/// round(x / scale) + zero (ties away from zero), saturated to elem's range.
std::int64_t quantize_to(double x, double scale, std::int32_t zero, Elem elem);

/// The rows of W [rows, cols] (row-major) as integers of `elem`, row r in units of
/// scales[r]. Without `gram`, each to nearest (quantize_to). With `gram` (x^T x of the
/// layer's calibration inputs, cols x cols), column by column with error feedback: the
/// rounding error e of column c moves the columns after it by -e U[c, k] / U[c, c], U the
/// upper Cholesky factor of (x^T x + 1% of its mean diagonal)^-1, so that x W^T moves least
/// on those inputs; to nearest when that matrix is not positive definite. `gram` may hold
/// one cols x cols block per group of rows (a grouped convolution's: rows / groups rows each,
/// in order), each group rounded with its own.
std::vector<std::int64_t> round_rows(const double* w, std::int64_t rows, std::int64_t cols,
                                     const std::vector<double>& scales, Elem elem, const std::vector<double>* gram);

}  // namespace microtorch::lower
