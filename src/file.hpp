// Internal: the regular-file reader that read_file, load_npy and load_npz share, and the
// IoError every reader throws (file.cpp; the public part is microtorch/file.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace microtorch::detail {

/// Throws IoError "where: what". `where` names the operation and the source, e.g.
/// "load_npy: w.npy" or "load_npz: ckpt.npz: member 'fc.weight.npy'".
[[noreturn]] void fail_io(const std::string& where, const std::string& what);

/// An open regular file for reading. O_NONBLOCK: opening a FIFO never waits for a writer;
/// anything but a regular file (a directory, a FIFO, /dev/zero) is refused before a read.
/// Every failure throws IoError naming `where`.
class InputFile {
 public:
  InputFile(const std::string& path, const std::string& where);
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();
  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }
  /// Up to n bytes into dst; 0 at the end of the file.
  std::size_t read(char* dst, std::size_t n);

 private:
  std::string where_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace microtorch::detail
