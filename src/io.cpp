// .npy and .npz reading and writing.
//
// .npy: xtensor's xnpy writes the bytes and parses the header dictionary; this layer
// validates everything a hostile or truncated file could get wrong before any data is
// touched. Encoding and decoding work on byte strings; the file functions and the .npz
// members (each one a whole .npy file) share them.
//
// .npz: a zip archive with one `<name>.npy` member per array (numpy/lib/npyio.py _savez),
// read and written with libzip. Writes go to a temporary file in the target's directory,
// which is fsync'ed and then renamed over the target: rename(2) is atomic within a
// filesystem, so readers (and a crash) see the old file or the new one, never a mix.
#include "microtorch/io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"
#include "ops/common.hpp"

namespace microtorch {

namespace {

// `where` names the operation and the source, e.g. "load_npy: w.npy" or
// "load_npz: ckpt.npz: member 'fc.weight.npy'".
[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw IoError(fmt::format("{}: {}", where, what));
}

Dtype dtype_of_descr(const std::string& descr, const std::string& where) {
  if (descr == "<f4") return Dtype::Float32;
  if (descr == "<f8") return Dtype::Float64;
  if (descr == "<i8") return Dtype::Int64;
  if (descr == "|b1") return Dtype::Bool;
  fail(where, fmt::format("unsupported dtype '{}'; microtorch reads float32 '<f4', float64 '<f8', int64 '<i8' and "
                          "bool '|b1' (convert with numpy's astype before saving)",
                          descr));
}

const char* descr_of(Dtype d) {
  switch (d) {
    case Dtype::Float32: return "<f4";
    case Dtype::Float64: return "<f8";
    case Dtype::Int64: return "<i8";
    case Dtype::Bool: break;
  }
  return "|b1";
}

// ---- the .npy header ------------------------------------------------------------------
//
// numpy's format (numpy/lib/format.py): "\x93NUMPY", major and minor version bytes, the
// header length (2 bytes little-endian in version 1, 4 in versions 2 and 3), then the header:
// a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded
// with spaces and ended by '\n', then the raw data. The parser below accepts exactly that:
// the three keys once each, in any order, single- or double-quoted, decimal sizes that fit
// int64, and after the closing brace only the spaces and the one newline of the padding.

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMaxHeader = std::size_t{1} << 16;  // numpy writes under 200 bytes

struct NpyHeader {
  Dtype dtype = Dtype::Float32;
  bool fortran = false;
  Shape shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = quoted("a key");
      skip_space();
      expect(':');
      skip_space();
      auto once = [&](bool& seen) {
        if (seen) bad(fmt::format("the key '{}' appears twice", key));
        seen = true;
      };
      if (key == "descr") {
        once(seen_descr);
        h.dtype = dtype_of_descr(quoted("the dtype"), where_);
      } else if (key == "fortran_order") {
        once(seen_order);
        h.fortran = boolean();
      } else if (key == "shape") {
        once(seen_shape);
        h.shape = tuple();
      } else {
        bad(fmt::format("unknown key '{}' (a .npy header holds 'descr', 'fortran_order' and 'shape')", key));
      }
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}' after a value");
    }
    ++i_;  // '}'
    if (!seen_descr || !seen_order || !seen_shape) {
      bad(fmt::format("the key '{}' is missing", !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape"));
    }
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
    if (i_ < s_.size() && s_[i_] == '\n') ++i_;
    if (i_ != s_.size()) bad("unexpected bytes after the header's dictionary");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    fail(where_, fmt::format("malformed header at byte {}: {}", i_, what));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) bad(fmt::format("expected '{}'", c));
    ++i_;
  }
  std::string quoted(const char* what) {
    const char q = peek();
    if (q != '\'' && q != '"') bad(fmt::format("expected {} in quotes", what));
    const std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        return value;
      }
    }
    bad("fortran_order must be True or False");
  }
  std::int64_t size() {
    if (peek() < '0' || peek() > '9') bad("expected a size (a non-negative decimal integer)");
    std::int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, peek() - '0', &v)) {
        bad("a size does not fit in 64 bits");
      }
      ++i_;
    }
    return v;
  }
  // (), (3,), (2, 3) and (2, 3,)
  Shape tuple() {
    Shape shape;
    expect('(');
    skip_space();
    while (peek() != ')') {
      shape.push_back(size());
      skip_space();
      if (peek() == ',') {
        ++i_;
        skip_space();
      } else if (peek() != ')') {
        bad("expected ',' or ')' in the shape");
      }
    }
    ++i_;
    return shape;
  }

  std::string_view s_;
  const std::string& where_;
  std::size_t i_ = 0;
};

/// The preamble and header of a .npy file holding a tensor of this dtype and shape (C
/// order, version 1.0, padded so the data starts at a multiple of 64 bytes, as numpy does).
std::string npy_header(Dtype dtype, const Shape& shape) {
  std::string dims;
  for (auto d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3,) keeps its comma, (2, 3) does not
  if (shape.size() == 1) dims.pop_back();
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr_of(dtype), dims);
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

/// Reads one .npy of exactly `size` bytes through read(buffer, n) (which returns how many
/// bytes it gave, 0 at the end): preamble and header first, then the data straight into the
/// tensor. Everything is checked before the tensor is allocated: the header's sizes against
/// the bytes the source holds, in both directions.
template <class Read>
Tensor read_npy(Read&& read, std::uint64_t size, const std::string& where) {
  auto read_exactly = [&](char* dst, std::size_t n, const char* what) {
    for (std::size_t got = 0; got < n;) {
      const std::size_t r = read(dst + got, n - got);
      if (r == 0) fail(where, fmt::format("truncated inside the {}", what));
      got += r;
    }
  };
  char pre[12];
  if (size < 10) fail(where, "not a .npy file (too short for the magic string \\x93NUMPY and a header)");
  read_exactly(pre, 10, "preamble");
  if (std::memcmp(pre, kMagic, 6) != 0) {
    fail(where, "not a .npy file (the magic string \\x93NUMPY is missing); was it written by numpy.save?");
  }
  const auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(pre[i])); };
  const std::size_t major = byte(6);
  if (major < 1 || major > 3) fail(where, fmt::format("unsupported .npy format version {}.{}", major, byte(7)));
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (len_bytes == 4) read_exactly(pre + 10, 2, "preamble");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= byte(8 + i) << (8 * i);
  const std::uint64_t data_start = 8 + len_bytes + header_len;
  if (header_len > kMaxHeader) fail(where, fmt::format("the header claims {} bytes; at most 65536 are read", header_len));
  if (size < data_start) {
    fail(where, fmt::format("truncated: the header says {} bytes but the file has {}", header_len, size - 8 - len_bytes));
  }
  std::string text(header_len, '\0');
  read_exactly(text.data(), header_len, "header");
  const NpyHeader h = HeaderParser(text, where).parse();

  std::int64_t count = 0;
  try {
    count = numel_of(h.shape, "npy");
  } catch (const ShapeError& e) {
    fail(where, fmt::format("the shape in the header is impossible ({})", e.what()));
  }
  const std::uint64_t nbytes = static_cast<std::uint64_t>(count) * dtype_size(h.dtype);  // <= 2^63: fits
  if (size - data_start != nbytes) {
    fail(where, fmt::format("{}: shape {} of {} needs {} bytes of data but {} follow the header",
                            size - data_start < nbytes ? "truncated" : "trailing data", shape_str(h.shape),
                            dtype_name(h.dtype), nbytes, size - data_start));
  }

  // Fortran order stores the transpose: read it with the sizes reversed, then reverse the dims.
  Shape stored = h.shape;
  if (h.fortran) std::reverse(stored.begin(), stored.end());
  Tensor t = Tensor::empty(stored, h.dtype);
  char* data = visit_dtype(h.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return reinterpret_cast<char*>(t.data<T>());
  });
  read_exactly(data, static_cast<std::size_t>(nbytes), "data");
  if (h.dtype == Dtype::Bool) {
    for (std::uint64_t i = 0; i < nbytes; ++i) {
      const auto b = static_cast<unsigned char>(data[i]);
      if (b > 1) fail(where, fmt::format("bool element {} holds {}, not 0 or 1", i, b));
    }
  }
  if (h.fortran && t.dim() > 1) {
    NoGradGuard no_grad;
    std::vector<std::int64_t> dims(static_cast<std::size_t>(t.dim()));
    std::iota(dims.rbegin(), dims.rend(), 0);
    t = permute(t, dims);
  }
  return t;
}

Tensor decode_npy_at(std::string_view bytes, const std::string& where) {
  std::size_t pos = 0;
  return read_npy(
      [&](char* dst, std::size_t n) {
        const std::size_t r = std::min(n, bytes.size() - pos);
        std::memcpy(dst, bytes.data() + pos, r);
        pos += r;
        return r;
      },
      bytes.size(), where);
}

// ---- files: only regular ones ------------------------------------------------------------

std::string errno_str(int err) { return std::strerror(err); }

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// An open regular file for reading. O_NONBLOCK: opening a FIFO never waits for a writer;
/// anything but a regular file (a directory, a FIFO, /dev/zero) is refused before a read.
class InputFile {
 public:
  InputFile(const std::string& path, const std::string& where) : where_(where) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) fail(where, fmt::format("cannot open the file ({})", errno_str(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail(where, fmt::format("cannot read the file's status ({})", errno_str(errno)));
    if (!S_ISREG(st.st_mode)) fail(where, fmt::format("is {}, not a file written by numpy or microtorch", file_kind(st.st_mode)));
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }
  std::size_t read(char* dst, std::size_t n) {
    for (;;) {
      const ssize_t r = ::read(fd_, dst, n);
      if (r >= 0) return static_cast<std::size_t>(r);
      if (errno != EINTR) fail(where_, fmt::format("reading the file failed ({})", errno_str(errno)));
    }
  }

 private:
  std::string where_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

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

// ---- .npz via libzip ------------------------------------------------------------------

std::string zip_code_str(int code) {
  zip_error_t ze;
  zip_error_init_with_code(&ze, code);
  std::string msg = zip_error_strerror(&ze);
  zip_error_fini(&ze);
  return msg;
}

struct ZipDiscard {
  void operator()(zip_t* za) const { zip_discard(za); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipDiscard>;

/// numpy.savez of nothing: an archive that is only its end-of-central-directory record.
/// (libzip deletes an archive left without entries instead of writing one.)
constexpr char kEmptyZip[22] = {'P', 'K', 5, 6};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Reads member `index` as a .npy. Its uncompressed size, as the archive's directory states
/// it, must be what the member's own header says its shape needs: a member is never
/// inflated beyond that, and one more read checks that it really ends there (reaching the
/// end is also what makes libzip check the CRC).
Tensor read_member(zip_t* za, zip_uint64_t index, const zip_stat_t& st, const std::string& where) {
  if ((st.valid & ZIP_STAT_SIZE) == 0) fail(where, "the archive's directory gives no size for the member");
  zip_file_t* zf = zip_fopen_index(za, index, 0);
  if (zf == nullptr) fail(where, fmt::format("cannot open the member: {}", zip_strerror(za)));
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> file(zf, zip_fclose);
  auto read = [&](char* dst, std::size_t n) -> std::size_t {
    const zip_int64_t r = zip_fread(zf, dst, n);
    if (r < 0) fail(where, fmt::format("corrupt data ({})", zip_file_strerror(zf)));
    return static_cast<std::size_t>(r);
  };
  Tensor t = read_npy(read, st.size, where);
  char extra;
  if (read(&extra, 1) != 0) {
    fail(where, fmt::format("holds more than the {} bytes the archive's directory says", st.size));
  }
  return t;
}

/// Opens an archive from a fresh source (make_source is called once per attempt) and reads
/// every member. `where` is "load_npz: <path>" or "decode_npz: <source>".
template <class MakeSource>
std::vector<std::pair<std::string, Tensor>> read_npz(MakeSource make_source, const std::string& where) {
  auto open = [&](int flags, int& code) -> zip_t* {
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t* src = make_source(&ze);
    zip_t* za = src != nullptr ? zip_open_from_source(src, flags, &ze) : nullptr;
    if (za == nullptr) {
      if (src != nullptr) zip_source_free(src);
      code = zip_error_code_zip(&ze);
      if (code == ZIP_ER_OK) code = ZIP_ER_INTERNAL;
    }
    zip_error_fini(&ze);
    return za;
  };
  int code = ZIP_ER_OK;
  // ZIP_CHECKCONS compares every local header with the central directory.
  ZipPtr za(open(ZIP_RDONLY | ZIP_CHECKCONS, code));
  if (!za && code == ZIP_ER_EXISTS) {
    // Two members share a name: open leniently so the loop below can name it.
    za.reset(open(ZIP_RDONLY, code));
  }
  if (!za) {
    fail(where, fmt::format("not a readable .npz (zip) archive: {}; the file may be truncated, or was not written by "
                            "numpy.savez / save_npz",
                            zip_code_str(code)));
  }

  const zip_int64_t count = zip_get_num_entries(za.get(), 0);
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<std::string> seen;
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za.get(), index, 0, &st) != 0 || (st.valid & ZIP_STAT_NAME) == 0) {
      fail(where, fmt::format("cannot read the directory entry of member {}: {}", i, zip_strerror(za.get())));
    }
    const std::string member = st.name;
    const std::string member_where = fmt::format("{}: member '{}'", where, member);
    if (!ends_with(member, ".npy")) {
      fail(member_where, "not a .npy array (numpy.savez stores each array as '<name>.npy'); is this a checkpoint?");
    }
    std::string name = member.substr(0, member.size() - 4);
    if (name.empty()) fail(member_where, "the array has an empty name");
    if (!seen.insert(name).second) fail(member_where, "appears twice in the archive; names must be unique");
    out.emplace_back(std::move(name), read_member(za.get(), index, st, member_where));
  }
  return out;
}

/// The bytes of a .npz archive of these members, built in memory by libzip: each member is
/// its .npy header followed by the tensor's own bytes (fragments, not copies), stored
/// uncompressed as numpy.savez does.
std::string build_npz(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  if (tensors.empty()) return std::string(kEmptyZip, sizeof kEmptyZip);
  auto failed = [](const std::string& what, zip_error_t* ze) {
    throw IoError(fmt::format("save_npz: building the archive failed: {}: {}", what, zip_error_strerror(ze)));
  };
  zip_error_t ze;
  zip_error_init(&ze);
  std::unique_ptr<zip_error_t, void (*)(zip_error_t*)> ze_guard(&ze, zip_error_fini);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &ze);
  if (buffer == nullptr) failed("an in-memory buffer", &ze);
  std::unique_ptr<zip_source_t, void (*)(zip_source_t*)> buffer_guard(buffer, zip_source_free);
  zip_source_keep(buffer);  // it outlives the archive: the bytes are read from it after zip_close
  ZipPtr za(zip_open_from_source(buffer, ZIP_TRUNCATE, &ze));
  if (!za) {
    zip_source_free(buffer);  // drop the reference zip_open_from_source did not take
    failed("opening it", &ze);
  }
  // libzip reads the fragments only in zip_close, so the headers live until then.
  std::vector<std::string> headers;
  headers.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    headers.push_back(npy_header(t.dtype(), t.shape()));
    const std::size_t nbytes = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
    const zip_buffer_fragment_t fragments[2] = {
        {reinterpret_cast<zip_uint8_t*>(headers.back().data()), headers.back().size()},
        {reinterpret_cast<zip_uint8_t*>(detail::bytes_of(t)), nbytes}};
    zip_source_t* src = zip_source_buffer_fragment_create(fragments, nbytes > 0 ? 2 : 1, 0, &ze);
    if (src == nullptr) failed("member '" + name + ".npy'", &ze);
    const std::string member = name + ".npy";
    const zip_int64_t index = zip_file_add(za.get(), member.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(src);
      failed("member '" + member + "'", zip_get_error(za.get()));
    }
    if (zip_set_file_compression(za.get(), static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) != 0) {
      failed("member '" + member + "'", zip_get_error(za.get()));
    }
  }
  if (zip_close(za.get()) != 0) failed("writing it", zip_get_error(za.get()));
  za.release();  // zip_close freed it
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_source_stat(buffer, &st) != 0 || (st.valid & ZIP_STAT_SIZE) == 0 || zip_source_open(buffer) != 0) {
    failed("reading it back", zip_source_error(buffer));
  }
  std::string bytes(static_cast<std::size_t>(st.size), '\0');
  const zip_int64_t n = zip_source_read(buffer, bytes.data(), bytes.size());
  zip_source_close(buffer);
  if (n != static_cast<zip_int64_t>(bytes.size())) failed("reading it back", zip_source_error(buffer));
  return bytes;
}

}  // namespace

// ---- files ---------------------------------------------------------------------------

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
    if (r == 0) fail(where, "the file shrank while it was read");
    got += r;
  }
  return out;
}

// ---- .npy ---------------------------------------------------------------------------

std::string encode_npy(const Tensor& x) {
  if (!x.defined()) throw ValueError("encode_npy: the tensor is undefined (default-constructed or an unset grad)");
  const std::size_t nbytes = static_cast<std::size_t>(x.numel()) * dtype_size(x.dtype());
  std::string out = npy_header(x.dtype(), x.shape());
  out.append(detail::bytes_of(x), nbytes);
  return out;
}

Tensor decode_npy(std::string_view bytes, const std::string& source) {
  return decode_npy_at(bytes, "decode_npy: " + source);
}

void save_npy(const Tensor& x, const std::string& path) { write_file(path, encode_npy(x), "save_npy"); }

Tensor load_npy(const std::string& path) {
  const std::string where = "load_npy: " + path;
  InputFile file(path, where);
  return read_npy([&](char* dst, std::size_t n) { return file.read(dst, n); }, file.size(), where);
}

// ---- .npz ---------------------------------------------------------------------------

void save_npz(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& path) {
  // Check every argument before touching the disk.
  std::set<std::string> seen;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    if (name.empty()) {
      throw ValueError(fmt::format("save_npz: tensor {} has an empty name; numpy.load finds arrays by name", i));
    }
    if (!seen.insert(name).second) {
      throw ValueError(fmt::format("save_npz: the name \"{}\" appears twice; names in an archive must be unique", name));
    }
    if (!t.defined()) {
      throw ValueError(fmt::format("save_npz: \"{}\" is an undefined tensor (default-constructed or an unset grad)", name));
    }
  }
  write_file(path, build_npz(tensors), "save_npz");
}

std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path) {
  const std::string where = "load_npz: " + path;
  InputFile file(path, where);
  // libzip reads a 0-byte file as an empty archive; for a checkpoint it means an interrupted copy.
  if (file.size() == 0) {
    fail(where, "the file is empty (0 bytes); even an empty .npz holds a 22-byte zip directory. Was the copy interrupted?");
  }
  return read_npz(
      [&](zip_error_t* ze) -> zip_source_t* {
        // Each attempt reads through its own descriptor of the one file checked above.
        const int fd = ::fcntl(file.fd(), F_DUPFD_CLOEXEC, 0);
        FILE* f = fd >= 0 ? ::fdopen(fd, "rb") : nullptr;
        if (f == nullptr) {
          if (fd >= 0) ::close(fd);
          zip_error_set(ze, ZIP_ER_OPEN, errno);
          return nullptr;
        }
        zip_source_t* src = zip_source_filep_create(f, 0, -1, ze);
        if (src == nullptr) std::fclose(f);
        return src;
      },
      where);
}

std::vector<std::pair<std::string, Tensor>> decode_npz(std::string_view bytes, const std::string& source) {
  const std::string where = "decode_npz: " + source;
  if (bytes.empty()) fail(where, "no bytes: even an empty .npz holds a 22-byte zip directory");
  return read_npz([&](zip_error_t* ze) { return zip_source_buffer_create(bytes.data(), bytes.size(), 0, ze); }, where);
}

}  // namespace microtorch
