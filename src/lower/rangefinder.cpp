// choose_range (quantize.hpp): an activation's range from its calibration histogram —
// everything seen, a central percentile, or the clipping with the least expected squared
// error.
#include <algorithm>
#include <cmath>

#include "microtorch/lower/quantize.hpp"

namespace microtorch::lower {

std::string_view range_method_name(RangeMethod m) {
  switch (m) {
    case RangeMethod::MinMax: return "min/max";
    case RangeMethod::Percentile: return "percentile";
    case RangeMethod::Mse: return "MSE";
  }
  return "?";
}

namespace {

// Expected squared error of quantizing the histogram with `levels` steps over [lo, hi]:
// rounding noise step^2 / 12 inside, the squared distance to the nearest end outside.
double quant_mse(const std::vector<double>& h, double min, double width, double lo, double hi, double levels) {
  const double step = (hi - lo) / levels;
  double e = 0;
  for (std::size_t b = 0; b < h.size(); ++b) {
    if (h[b] == 0) continue;
    const double c = min + (static_cast<double>(b) + 0.5) * width;
    const double out = c < lo ? lo - c : c > hi ? c - hi : 0.0;
    e += h[b] * (out > 0 ? out * out : step * step / 12.0);
  }
  return e;
}

}  // namespace

std::pair<double, double> choose_range(const Calibration& cal, std::int64_t value, RangeMethod method, int bits,
                                       bool affine, double percentile) {
  const auto k = static_cast<std::size_t>(value);
  const double lo = cal.min[k], hi = cal.max[k];
  const std::vector<double>* h = k < cal.histogram.size() && !cal.histogram[k].empty() ? &cal.histogram[k] : nullptr;
  if (method == RangeMethod::MinMax || !h) return affine ? std::pair{lo, hi} : std::pair{-cal.absmax[k], cal.absmax[k]};
  const double width = (hi - lo) / static_cast<double>(h->size());
  double total = 0;
  for (const double c : *h) total += c;
  if (method == RangeMethod::Percentile) {
    const double keep = std::clamp(percentile, 0.0, 100.0) / 100.0;
    if (affine) {  // the central share: (1 - keep) / 2 saturates at each end
      const double tail = total * (1.0 - keep) / 2.0;
      double acc = 0, a = lo, b = hi;
      for (std::size_t i = 0; i < h->size(); ++i) {
        if ((acc += (*h)[i]) > tail) {
          a = lo + static_cast<double>(i) * width;
          break;
        }
      }
      acc = 0;
      for (std::size_t i = h->size(); i-- > 0;) {
        if ((acc += (*h)[i]) > tail) {
          b = lo + static_cast<double>(i + 1) * width;
          break;
        }
      }
      return {std::min(a, 0.0), std::max(b, 0.0)};
    }
    // symmetric: the smallest t with |x| <= t for the kept share
    const double m = cal.absmax[k];
    std::vector<double> mag(h->size(), 0.0);  // |x| histogram over [0, m]
    for (std::size_t i = 0; i < h->size(); ++i) {
      const double c = std::abs(lo + (static_cast<double>(i) + 0.5) * width);
      mag[std::min(h->size() - 1, static_cast<std::size_t>(c / m * static_cast<double>(h->size())))] += (*h)[i];
    }
    double acc = 0;
    for (std::size_t i = 0; i < mag.size(); ++i) {
      if ((acc += mag[i]) >= keep * total) {
        const double t = m * static_cast<double>(i + 1) / static_cast<double>(mag.size());
        return {-t, t};
      }
    }
    return {-m, m};
  }
  // MSE: shrink the range by factors of the full one and keep the best (ties: the wider)
  const double levels = affine ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits) - 2;
  const double full_lo = affine ? lo : -cal.absmax[k], full_hi = affine ? hi : cal.absmax[k];
  double best = quant_mse(*h, lo, width, full_lo, full_hi, levels), best_f = 1.0;
  for (int i = 1; i < 200; ++i) {
    const double f = 1.0 - 0.0045 * i;  // down to 10% of the range
    const double e = quant_mse(*h, lo, width, full_lo * f, full_hi * f, levels);
    if (e < best) best = e, best_f = f;
  }
  return {full_lo * best_f, full_hi * best_f};
}

}  // namespace microtorch::lower
