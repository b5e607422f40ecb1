// microtorch/io.hpp — tensors to and from numpy's .npy files (via xtensor's xnpy).
#pragma once

#include <string>

#include "microtorch/tensor.hpp"

namespace microtorch {

/// Writes x as a .npy file that numpy.load opens (float32 '<f4', float64 '<f8',
/// int64 '<i8', bool '|b1'). Throws IoError when the file cannot be written.
void save_npy(const Tensor& x, const std::string& path);

/// Reads a .npy file of one of the four dtypes (C or Fortran order). A missing, truncated
/// or malformed file, or an unsupported dtype, throws IoError naming the file and the problem.
Tensor load_npy(const std::string& path);

}  // namespace microtorch
