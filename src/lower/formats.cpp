// Number formats: the power-of-two rule, the rounding of a value, the multiplier of a real
// ratio (the requantization of mt_kernels.h), the schemes' names.
#include <algorithm>
#include <cmath>

#include "microtorch/lower/quantize.hpp"

namespace microtorch::lower {

std::int64_t quantize_value(double x, int frac, int bits) {
  const double hi = std::ldexp(1.0, bits - 1) - 1.0, lo = -std::ldexp(1.0, bits - 1);
  const double r = std::round(std::ldexp(x, frac));  // std::round: ties away from zero
  return static_cast<std::int64_t>(std::clamp(r, lo, hi));
}

int choose_frac(double absmax, int bits, bool* clamped) {
  constexpr int lo = -16, hi = 31;
  if (clamped) *clamped = false;
  if (!(absmax > 0)) return std::min(bits - 1, hi);
  const double limit = std::ldexp(1.0, bits - 1) - 1.0;
  const double ideal = std::floor(std::log2(limit / absmax));
  if (!(ideal >= lo - 1 && ideal <= hi + 1)) {  // far outside (or inf): no need to settle it
    if (clamped) *clamped = true;
    return ideal < lo ? lo : hi;
  }
  int f = static_cast<int>(ideal);
  // log2 can be off by one ulp at exact powers of two: settle it with the rounding rule.
  while (std::round(std::ldexp(absmax, f + 1)) <= limit) ++f;
  while (std::round(std::ldexp(absmax, f)) > limit) --f;
  if (clamped) *clamped = f < lo || f > hi;
  return std::clamp(f, lo, hi);
}

std::string_view scheme_name(Scheme s) {
  switch (s) {
    case Scheme::Symmetric: return "symmetric";
    case Scheme::Affine: return "affine";
    case Scheme::PowerOfTwo: return "power-of-two";
  }
  return "?";
}

Multiplier multiplier(double r) {
  Multiplier out;
  if (r == 0 || !std::isfinite(r)) {  // nothing passes (a shift past every value)
    out.s = 127;
    return out;
  }
  int e = 0;
  const double mant = std::frexp(std::abs(r), &e);  // |r| = mant 2^e, mant in [0.5, 1)
  if (mant == 0.5 && r > 0) {
    out.s = 1 - e;  // r = 2^(e - 1): a shift
    return out;
  }
  auto m = static_cast<std::int64_t>(std::llround(std::ldexp(mant, 31)));  // [2^30, 2^31]
  if (m == (std::int64_t{1} << 31)) m >>= 1, ++e;
  out.m = static_cast<std::int32_t>(r < 0 ? -m : m);
  out.s = -e;  // r = m 2^-31 2^e
  return out;
}

double Multiplier::value() const {
  return m == 0 ? std::ldexp(1.0, -s) : std::ldexp(static_cast<double>(m), -31 - s);
}

}  // namespace microtorch::lower
