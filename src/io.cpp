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
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <xtensor/xnpy.hpp>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"

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

Tensor decode_npy_at(std::string_view file, const std::string& where) {
  // Preamble: "\x93NUMPY", major, minor, header length (2 bytes in v1, 4 in v2/v3), little-endian.
  static const char kMagic[] = "\x93NUMPY";
  if (file.size() < 10 || std::memcmp(file.data(), kMagic, 6) != 0) {
    fail(where, "not a .npy file (the magic string \\x93NUMPY is missing); was it written by numpy.save?");
  }
  const auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(file[i])); };
  const std::size_t major = byte(6);
  if (major < 1 || major > 3) fail(where, fmt::format("unsupported .npy format version {}.{}", major, byte(7)));
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (file.size() < 8 + len_bytes) fail(where, "truncated inside the header");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= byte(8 + i) << (8 * i);
  const std::size_t data_start = 8 + len_bytes + header_len;
  if (file.size() < data_start) {
    fail(where, fmt::format("truncated: the header says {} bytes but the file has {}", header_len,
                            file.size() - 8 - len_bytes));
  }

  std::string descr;
  bool fortran = false;
  std::vector<std::size_t> xshape;
  try {
    xt::detail::parse_header(std::string(file.substr(8 + len_bytes, header_len)), descr, &fortran, xshape);
  } catch (const std::exception& e) {
    fail(where, fmt::format("malformed header ({})", e.what()));
  }
  const Dtype dtype = dtype_of_descr(descr, where);

  Shape shape;
  std::size_t count = 1;
  for (std::size_t d : xshape) {
    if (d > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()) ||
        __builtin_mul_overflow(count, d, &count)) {
      fail(where, "the shape in the header is too large");
    }
    shape.push_back(static_cast<std::int64_t>(d));
  }
  std::size_t nbytes = 0;
  if (__builtin_mul_overflow(count, dtype_size(dtype), &nbytes)) fail(where, "the shape in the header is too large");
  if (file.size() - data_start < nbytes) {
    fail(where, fmt::format("truncated: shape {} of {} needs {} bytes of data but the file holds {}", shape_str(shape),
                            dtype_name(dtype), nbytes, file.size() - data_start));
  }
  if (dtype == Dtype::Bool) {
    for (std::size_t i = 0; i < nbytes; ++i) {
      if (byte(data_start + i) > 1) fail(where, fmt::format("bool element {} holds {}, not 0 or 1", i, byte(data_start + i)));
    }
  }

  // Fortran order stores the transpose: read it with the sizes reversed, then reverse the dims.
  Shape stored = shape;
  if (fortran) std::reverse(stored.begin(), stored.end());
  Tensor t = Tensor::empty(stored, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (nbytes > 0) std::memcpy(t.data<T>(), file.data() + data_start, nbytes);
  });
  if (fortran && t.dim() > 1) {
    NoGradGuard no_grad;
    std::vector<std::int64_t> dims(static_cast<std::size_t>(t.dim()));
    std::iota(dims.rbegin(), dims.rend(), 0);
    t = permute(t, dims);
  }
  return t;
}

// ---- atomic file replacement ----------------------------------------------------------

std::string errno_str(int err) { return std::strerror(err); }

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// A new file `<target>.tmp-XXXXXX` next to the target, created with O_EXCL and mode 0666
/// (the umask applies, as for any new file; mkstemp would force 0600). Removed by the
/// destructor unless commit() renamed it over the target.
class TempFile {
 public:
  TempFile(std::string target, const char* op) : target_(std::move(target)), op_(op) {
    static std::atomic<std::uint64_t> counter{0};
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
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
      name_ = target_ + ".tmp-" + suffix;
      fd_ = ::open(name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) return;
      err = errno;
      if (err != EEXIST) break;
    }
    throw IoError(fmt::format("{}: cannot open '{}' for writing: {}", op_, name_, errno_str(err)));
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(name_.c_str());
  }

  const std::string& name() const { return name_; }

  void write_all(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IoError(fmt::format("{}: writing '{}' failed: {} (disk full?)", op_, name_, errno_str(errno)));
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  /// Closes our descriptor (for writers, like libzip, that open the file by name).
  void close_fd() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw IoError(fmt::format("{}: writing '{}' failed: {}", op_, name_, errno_str(errno)));
  }

  /// fsync, then rename over the target, then fsync the directory so the rename persists.
  void commit() {
    const int fd = fd_ >= 0 ? fd_ : ::open(name_.c_str(), O_RDONLY | O_CLOEXEC);
    fd_ = -1;
    if (fd < 0) throw IoError(fmt::format("{}: cannot reopen '{}': {}", op_, name_, errno_str(errno)));
    // The data must be on disk before the rename makes it visible under the target's name.
    const int synced = ::fsync(fd);
    const int sync_err = errno;
    const int closed = ::close(fd);
    const int close_err = errno;
    if (synced != 0) throw IoError(fmt::format("{}: flushing '{}' to disk failed: {}", op_, name_, errno_str(sync_err)));
    if (closed != 0) throw IoError(fmt::format("{}: writing '{}' failed: {}", op_, name_, errno_str(close_err)));
    if (std::rename(name_.c_str(), target_.c_str()) != 0) {
      throw IoError(fmt::format("{}: cannot move '{}' to '{}': {}", op_, name_, target_, errno_str(errno)));
    }
    committed_ = true;
    // Best effort: some filesystems cannot fsync a directory, and the new file is in place.
    const int dir = ::open(directory_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      (void)::fsync(dir);
      ::close(dir);
    }
  }

 private:
  std::string target_;
  const char* op_;
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

std::string read_member(zip_t* za, zip_uint64_t index, const zip_stat_t& st, const std::string& where) {
  zip_file_t* zf = zip_fopen_index(za, index, 0);
  if (zf == nullptr) fail(where, fmt::format("cannot open the member: {}", zip_strerror(za)));
  std::string out;
  const bool sized = (st.valid & ZIP_STAT_SIZE) != 0;
  // A hostile directory may claim any size: reserve at most 64 MiB up front, grow as data arrives.
  if (sized) out.reserve(static_cast<std::size_t>(std::min<zip_uint64_t>(st.size, zip_uint64_t{1} << 26)));
  char buf[1 << 16];
  for (;;) {
    // Reading to the end (a 0 return) is what makes libzip check the CRC.
    const zip_int64_t n = zip_fread(zf, buf, sizeof buf);
    if (n < 0) {
      const std::string msg = zip_file_strerror(zf);
      zip_fclose(zf);
      fail(where, fmt::format("corrupt data ({})", msg));
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  zip_fclose(zf);
  if (sized && out.size() != st.size) {
    fail(where, fmt::format("holds {} bytes but the archive's directory says {}", out.size(), st.size));
  }
  return out;
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
    const std::string bytes = read_member(za.get(), index, st, member_where);
    out.emplace_back(std::move(name), decode_npy_at(bytes, member_where));
  }
  return out;
}

}  // namespace

// ---- .npy ---------------------------------------------------------------------------

std::string encode_npy(const Tensor& x) {
  if (!x.defined()) throw ValueError("encode_npy: the tensor is undefined (default-constructed or an unset grad)");
  return visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return xt::dump_npy(x.detach().array<T>());
  });
}

Tensor decode_npy(std::string_view bytes, const std::string& source) {
  return decode_npy_at(bytes, "decode_npy: " + source);
}

void save_npy(const Tensor& x, const std::string& path) {
  const std::string bytes = encode_npy(x);
  TempFile tmp(path, "save_npy");
  tmp.write_all(bytes);
  tmp.commit();
}

Tensor load_npy(const std::string& path) {
  const std::string where = "load_npy: " + path;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(where, fmt::format("cannot open the file ({})", errno_str(errno)));
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(where, "reading the file failed");
  return decode_npy_at(file, where);
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
  // libzip reads the member bytes only in zip_close, so they live until then (the vector
  // never reallocates: the sources point into its strings).
  std::vector<std::string> members;
  members.reserve(tensors.size());
  for (const auto& [_, t] : tensors) members.push_back(encode_npy(t));

  TempFile tmp(path, "save_npz");
  if (tensors.empty()) {
    tmp.write_all(std::string_view(kEmptyZip, sizeof kEmptyZip));
    tmp.commit();
    return;
  }
  tmp.close_fd();

  int code = 0;
  ZipPtr za(zip_open(tmp.name().c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code));
  if (!za) throw IoError(fmt::format("save_npz: cannot create '{}': {}", tmp.name(), zip_code_str(code)));
  auto zip_fail = [&](const std::string& what) {
    throw IoError(fmt::format("save_npz: writing '{}' failed: {}: {}; '{}' was left as it was", path, what,
                              zip_strerror(za.get()), path));
  };
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string member = tensors[i].first + ".npy";
    zip_source_t* src = zip_source_buffer(za.get(), members[i].data(), members[i].size(), 0);
    if (src == nullptr) zip_fail("member '" + member + "'");
    const zip_int64_t index = zip_file_add(za.get(), member.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(src);
      zip_fail("member '" + member + "'");
    }
    // Stored, as numpy.savez writes (numpy.savez_compressed deflates; load_npz reads both).
    if (zip_set_file_compression(za.get(), static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) != 0) {
      zip_fail("member '" + member + "'");
    }
  }
  // zip_close writes the archive (into its own temporary next to tmp, renamed over tmp).
  if (zip_close(za.get()) != 0) zip_fail("closing the archive");
  za.release();  // zip_close freed it
  tmp.commit();
}

std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path) {
  const std::string where = "load_npz: " + path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(where, fmt::format("cannot open the file ({})", errno_str(errno)));
  if (S_ISDIR(st.st_mode)) fail(where, "is a directory, not a .npz file");
  // libzip reads a 0-byte file as an empty archive; for a checkpoint it means an interrupted copy.
  if (st.st_size == 0) {
    fail(where, "the file is empty (0 bytes); even an empty .npz holds a 22-byte zip directory. Was the copy interrupted?");
  }
  return read_npz([&](zip_error_t* ze) { return zip_source_file_create(path.c_str(), 0, 0, ze); }, where);
}

std::vector<std::pair<std::string, Tensor>> decode_npz(std::string_view bytes, const std::string& source) {
  const std::string where = "decode_npz: " + source;
  if (bytes.empty()) fail(where, "no bytes: even an empty .npz holds a 22-byte zip directory");
  return read_npz([&](zip_error_t* ze) { return zip_source_buffer_create(bytes.data(), bytes.size(), 0, ze); }, where);
}

}  // namespace microtorch
