// Rounding weights to integers (weight_rounding.hpp): to nearest, or with error feedback.
#include "weight_rounding.hpp"

#include <algorithm>
#include <cmath>

namespace microtorch::lower {

std::int64_t quantize_to(double x, double scale, std::int32_t zero, Elem elem) {
  const double q = std::round(x / scale) + zero;  // std::round: ties away from zero
  return static_cast<std::int64_t>(
      std::clamp<double>(q, static_cast<double>(elem_min(elem)), static_cast<double>(elem_max(elem))));
}

namespace {

// In-place Cholesky factor of a symmetric positive definite n x n matrix: a = L L^T, L in
// the lower triangle. False when a is not positive definite.
bool cholesky(std::vector<double>& a, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (std::size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return false;
    a[j * n + j] = std::sqrt(d);
    for (std::size_t i = j + 1; i < n; ++i) {
      double v = a[i * n + j];
      for (std::size_t k = 0; k < j; ++k) v -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = v / a[j * n + j];
    }
    for (std::size_t k = j + 1; k < n; ++k) a[j * n + k] = 0;
  }
  return true;
}

// The upper Cholesky factor U of H^-1 (H^-1 = U^T U) for H = gram + damping, which the
// error-feedback rounding walks column by column; empty when H is not usable.
std::vector<double> inverse_factor(std::vector<double> h, std::size_t n) {
  double mean = 0;
  for (std::size_t j = 0; j < n; ++j) mean += h[j * n + j];
  mean /= static_cast<double>(n);
  if (!(mean > 0)) return {};
  for (std::size_t j = 0; j < n; ++j) {
    if (h[j * n + j] == 0) h[j * n + j] = mean;  // an input never seen
    h[j * n + j] += 0.01 * mean;
  }
  if (!cholesky(h, n)) return {};
  // H^-1 = L^-T L^-1: invert L (lower), then form the product
  std::vector<double> li(n * n, 0.0);
  for (std::size_t j = 0; j < n; ++j) {
    li[j * n + j] = 1.0 / h[j * n + j];
    for (std::size_t i = j + 1; i < n; ++i) {
      double v = 0;
      for (std::size_t k = j; k < i; ++k) v -= h[i * n + k] * li[k * n + j];
      li[i * n + j] = v / h[i * n + i];
    }
  }
  std::vector<double> inv(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j <= i; ++j) {
      double v = 0;
      for (std::size_t k = i; k < n; ++k) v += li[k * n + i] * li[k * n + j];
      inv[i * n + j] = inv[j * n + i] = v;
    }
  }
  if (!cholesky(inv, n)) return {};
  std::vector<double> u(n * n, 0.0);  // U = L_inv^T
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i; j < n; ++j) u[i * n + j] = inv[j * n + i];
  }
  return u;
}

}  // namespace

std::vector<std::int64_t> round_rows(const double* w, std::int64_t rows, std::int64_t cols,
                                     const std::vector<double>& scales, Elem elem, const std::vector<double>* gram) {
  const auto n = static_cast<std::size_t>(cols);
  // one n x n block per group of rows (a grouped convolution's), each group rows / groups rows
  const std::size_t groups = gram && n > 0 && gram->size() % (n * n) == 0 ? gram->size() / (n * n) : 0;
  const bool fits = groups > 0 && static_cast<std::size_t>(rows) % groups == 0;
  const std::size_t per_group = fits ? static_cast<std::size_t>(rows) / groups : static_cast<std::size_t>(rows);
  std::vector<double> u;
  std::vector<std::int64_t> out(static_cast<std::size_t>(rows * cols));
  std::vector<double> row(n);
  for (std::int64_t r = 0; r < rows; ++r) {
    if (static_cast<std::size_t>(r) % per_group == 0) {  // a group's first row: its block's factor
      const std::size_t g = static_cast<std::size_t>(r) / per_group;
      u = fits ? inverse_factor(std::vector<double>(gram->begin() + static_cast<std::ptrdiff_t>(g * n * n),
                                                    gram->begin() + static_cast<std::ptrdiff_t>((g + 1) * n * n)),
                                n)
               : std::vector<double>{};
    }
    const double sc = scales[static_cast<std::size_t>(r)];
    std::copy(w + r * cols, w + (r + 1) * cols, row.begin());
    for (std::size_t c = 0; c < n; ++c) {
      const std::int64_t q = quantize_to(row[c], sc, 0, elem);
      out[static_cast<std::size_t>(r * cols) + c] = q;
      if (u.empty() || !std::isfinite(row[c])) continue;
      // the column's error e carried into the columns after it: row[k] -= e U[c, k] / U[c, c]
      const double e = (row[c] - static_cast<double>(q) * sc) / u[c * n + c];
      for (std::size_t k = c + 1; k < n; ++k) row[k] -= e * u[c * n + k];
    }
  }
  return out;
}

}  // namespace microtorch::lower
