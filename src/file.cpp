// Whole files: written atomically, read only when regular (microtorch/file.hpp), and the
// regular-file reader the .npy and .npz loaders share (file.hpp).
//
// A write goes to a temporary file in the target's directory, which is fsync'ed and then
// renamed over the target: rename(2) is atomic within a filesystem, so readers (and a
// crash) see the old file or the new one, never a mix.
#include "microtorch/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "file.hpp"
#include "microtorch/error.hpp"

namespace microtorch {

namespace detail {

void fail_io(const std::string& where, const std::string& what) {
  throw IoError(fmt::format("{}: {}", where, what));
}

}  // namespace detail

namespace {

using detail::fail_io;

std::string errno_str(int err) { return std::strerror(err); }

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// ---- atomic file replacement ----------------------------------------------------------

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// The file a save replaces: `path`, or the file its chain of symbolic links ends at (the
/// links stay links). `existing` holds the file's status when it exists; anything but a
/// regular file there (a directory, a FIFO, a device such as /dev/null) is refused.
struct SaveTarget {
  std::string path;
  bool exists = false;
  struct stat existing {};
};

SaveTarget resolve_target(const std::string& path, const std::string& op) {
  SaveTarget t{path};
  for (int hops = 0;; ++hops) {
    if (::lstat(t.path.c_str(), &t.existing) != 0) {
      if (errno == ENOENT) return t;  // a new file (through a dangling link: at its target)
      throw IoError(fmt::format("{}: cannot inspect '{}': {}", op, t.path, errno_str(errno)));
    }
    if (!S_ISLNK(t.existing.st_mode)) break;
    if (hops == 40) throw IoError(fmt::format("{}: '{}': too many levels of symbolic links", op, path));
    std::string link(PATH_MAX, '\0');
    const ssize_t n = ::readlink(t.path.c_str(), link.data(), link.size());
    if (n < 0 || static_cast<std::size_t>(n) >= link.size()) {
      throw IoError(fmt::format("{}: cannot read the symbolic link '{}': {}", op, t.path, errno_str(errno)));
    }
    link.resize(static_cast<std::size_t>(n));
    t.path = link[0] == '/' ? link : directory_of(t.path) + "/" + link;
  }
  if (!S_ISREG(t.existing.st_mode)) {
    throw IoError(fmt::format("{}: '{}' is {}; microtorch saves only to regular files (choose a file name)", op,
                              t.path, file_kind(t.existing.st_mode)));
  }
  t.exists = true;
  return t;
}

/// A new file next to the target, named `<target>.tmp-XXXXXX` (the target's name shortened
/// when that would pass the file system's name limit), created with O_EXCL. A new file gets
/// mode 0666 less the umask, as any new file; a replaced one keeps its permission bits and,
/// where allowed, its owner. Removed by the destructor unless commit() renamed it over the
/// target.
class TempFile {
 public:
  TempFile(const std::string& path, const std::string& op) : target_(resolve_target(path, op)), op_(op) {
    static std::atomic<std::uint64_t> counter{0};
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const std::size_t slash = target_.path.rfind('/');
    const std::size_t base_at = slash == std::string::npos ? 0 : slash + 1;
    const long name_max = ::pathconf(directory_of(target_.path).c_str(), _PC_NAME_MAX);
    const std::size_t limit = name_max > 0 ? static_cast<std::size_t>(name_max) : 255;
    constexpr std::size_t kSuffix = 11;  // ".tmp-XXXXXX"
    const std::size_t base_len = std::min(target_.path.size() - base_at, limit > kSuffix ? limit - kSuffix : 0);
    const std::string prefix = target_.path.substr(0, base_at + base_len);
    int err = 0;
    for (int attempt = 0; attempt < 100; ++attempt) {
      // splitmix64 of (time, pid, counter): unique enough; O_EXCL makes it safe.
      std::uint64_t z = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                        (static_cast<std::uint64_t>(::getpid()) << 40) ^ (counter++ * 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      std::string suffix;
      for (int i = 0; i < 6; ++i, z /= 62) suffix += kChars[z % 62];
      name_ = prefix + ".tmp-" + suffix;
      fd_ = ::open(name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) break;
      err = errno;
      if (err != EEXIST) break;
    }
    if (fd_ < 0) throw IoError(fmt::format("{}: cannot open '{}' for writing: {}", op_, name_, errno_str(err)));
    if (target_.exists) {
      // Best effort for the owner (only root may give a file away); the mode must hold.
      if (target_.existing.st_uid != ::geteuid() || target_.existing.st_gid != ::getegid()) {
        (void)::fchown(fd_, target_.existing.st_uid, target_.existing.st_gid);
      }
      if (::fchmod(fd_, target_.existing.st_mode & 07777) != 0) {
        const int err = errno;
        ::close(fd_);  // the destructor does not run for a constructor that throws
        ::unlink(name_.c_str());
        throw IoError(fmt::format("{}: cannot give '{}' the permissions of '{}': {}", op_, name_, target_.path,
                                  errno_str(err)));
      }
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !name_.empty()) ::unlink(name_.c_str());
  }

  void write_all(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IoError(fmt::format("{}: writing '{}' failed: {} (disk full?)", op_, name_, errno_str(errno)));
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  /// fsync, then rename over the target, then fsync the directory so the rename persists.
  void commit() {
    const int fd = fd_;
    fd_ = -1;
    // The data must be on disk before the rename makes it visible under the target's name.
    const int synced = ::fsync(fd);
    const int sync_err = errno;
    const int closed = ::close(fd);
    const int close_err = errno;
    if (synced != 0) throw IoError(fmt::format("{}: flushing '{}' to disk failed: {}", op_, name_, errno_str(sync_err)));
    if (closed != 0) throw IoError(fmt::format("{}: writing '{}' failed: {}", op_, name_, errno_str(close_err)));
    if (std::rename(name_.c_str(), target_.path.c_str()) != 0) {
      throw IoError(fmt::format("{}: cannot move '{}' to '{}': {}", op_, name_, target_.path, errno_str(errno)));
    }
    committed_ = true;
    // Best effort: some filesystems cannot fsync a directory, and the new file is in place.
    const int dir = ::open(directory_of(target_.path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      (void)::fsync(dir);
      ::close(dir);
    }
  }

 private:
  SaveTarget target_;
  std::string op_;
  std::string name_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

namespace detail {

InputFile::InputFile(const std::string& path, const std::string& where) : where_(where) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) fail_io(where, fmt::format("cannot open the file ({})", errno_str(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail_io(where, fmt::format("cannot read the file's status ({})", errno_str(errno)));
  if (!S_ISREG(st.st_mode)) fail_io(where, fmt::format("is {}, not a file written by numpy or microtorch", file_kind(st.st_mode)));
  size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t InputFile::read(char* dst, std::size_t n) {
  for (;;) {
    const ssize_t r = ::read(fd_, dst, n);
    if (r >= 0) return static_cast<std::size_t>(r);
    if (errno != EINTR) fail_io(where_, fmt::format("reading the file failed ({})", errno_str(errno)));
  }
}

}  // namespace detail

using detail::InputFile;

void write_file(const std::string& path, std::string_view bytes, const std::string& op) {
  TempFile tmp(path, op);
  tmp.write_all(bytes);
  tmp.commit();
}

std::string read_file(const std::string& path, const std::string& op) {
  const std::string where = op + ": " + path;
  InputFile file(path, where);
  std::string out(static_cast<std::size_t>(file.size()), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const std::size_t r = file.read(out.data() + got, out.size() - got);
    if (r == 0) fail_io(where, "the file shrank while it was read");
    got += r;
  }
  return out;
}

}  // namespace microtorch
