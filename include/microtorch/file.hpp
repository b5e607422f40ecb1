/// \file
/// Whole files, as every microtorch save and load handles them: written atomically
/// (a temporary file renamed over the target), read only when they are regular files.
///
/// \code
///   microtorch::write_file("weights.svg", svg);   // readers see the old file or the new one
/// \endcode
#pragma once

#include <string>
#include <string_view>

namespace microtorch {

/// Writes `bytes` to `path` the way every microtorch save does: into a temporary file next
/// to the target, flushed (fsync) and renamed over it, so readers see the old file or the
/// new one, never a mix. A symbolic link is written through (the file it points to is
/// replaced; the link stays), a replaced file keeps its permission bits (and owner, where
/// allowed), and a target that is not a regular file (a directory, a FIFO, a device) is
/// refused. Missing parent directories are an error, not created. IoError names `op` and
/// the path on any failure; no temporary file is left behind.
void write_file(const std::string& path, std::string_view bytes, const std::string& op = "write_file");

/// The whole content of a regular file; a directory, FIFO or device is refused without
/// blocking (the file is opened non-blocking and checked first). IoError names `op`.
std::string read_file(const std::string& path, const std::string& op = "read_file");

}  // namespace microtorch
