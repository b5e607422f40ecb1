// The integer constants of mt_rmsnorm_s16 (mt_kernels.h), shared by the rms_norm rule
// (rules/norm.cpp) and the decoder's step (decoder.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace microtorch::lower {

struct RmsNormConstants {
  std::vector<std::int64_t> rq;  ///< per channel (m, s): the ratio 16 sqrt(n) g_j / scale_y
  std::int64_t eps_q = 0;        ///< 2^8 n eps / scale_x^2 = eps_q 2^eps_shift, eps_q < 2^32
  int eps_shift = 0;
};

/// For rows of n = gains.size() features in scale sx, outputs in scale sy.
RmsNormConstants rms_norm_constants(const std::vector<double>& gains, double eps, double sx, double sy);

}  // namespace microtorch::lower
