/// \file
/// Tensors to and from numpy's .npy files and named tensors to and from numpy's .npz
/// archives (via libzip). Writes are atomic (write_file, file.hpp); reads check everything.
///
/// \code
///   using namespace microtorch;
///   save_npz({{"weight", w}, {"out_proj.bias", b}}, "ckpt.npz");   // np.load("ckpt.npz")["weight"]
///   for (auto& [name, t] : load_npz("ckpt.npz")) fmt::print("{} {}\n", name, t.shape());
/// \endcode
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "microtorch/file.hpp"
#include "microtorch/tensor.hpp"

namespace microtorch {

/// Writes x as a .npy file that numpy.load opens (float32 '<f4', float64 '<f8',
/// int64 '<i8', bool '|b1'). The file is written next to `path` under a temporary name,
/// flushed to disk and renamed, so a failure never leaves half a file. Throws IoError when
/// the file cannot be written.
void save_npy(const Tensor& x, const std::string& path);

/// Reads a .npy file of one of the four dtypes (C or Fortran order). A missing, truncated
/// or malformed file, or an unsupported dtype, throws IoError naming the file and the problem.
Tensor load_npy(const std::string& path);

/// The bytes of the .npy file save_npy would write (for in-memory use and fuzzing).
std::string encode_npy(const Tensor& x);

/// Parses the bytes of a .npy file with the same checks as load_npy; `source` names the
/// bytes in error messages.
Tensor decode_npy(std::string_view bytes, const std::string& source = "<memory>");

/// Writes named tensors as a numpy .npz archive: one member `<name>.npy` per tensor, in
/// order, stored uncompressed (as numpy.savez does), so `numpy.load(path)[name]` reads them.
/// Names may contain dots ("out_proj.weight"); they must be non-empty and unique
/// (ValueError otherwise).
///
/// The archive is built in a temporary file in the same directory (`<path>.tmp-XXXXXX`),
/// flushed to disk (fsync) and renamed over `path`: readers see the old file or the new
/// one, never a mix. On any failure the temporary file is removed, an existing `path` is
/// left untouched, and IoError names the path and libzip's or the system's message.
void save_npz(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& path);

/// Reads a .npz archive (numpy.savez or numpy.savez_compressed, or save_npz) into named
/// tensors in archive order; the `.npy` suffix is dropped from each member's name.
/// Every problem throws IoError naming the file and, where there is one, the member: a
/// missing, empty, truncated or non-zip file, a member that is not `<name>.npy`, a
/// duplicate name, a corrupt member (CRC error, bad .npy header or data) or an
/// unsupported dtype.
std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path);

/// load_npz on the bytes of a .npz archive held in memory; `source` names them in errors.
std::vector<std::pair<std::string, Tensor>> decode_npz(std::string_view bytes,
                                                       const std::string& source = "<memory>");

}  // namespace microtorch
