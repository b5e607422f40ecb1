// .npz reading and writing: a zip archive with one `<name>.npy` member per array
// (numpy/lib/npyio.py _savez), read and written with libzip; each member is a .npy file
// (npy.cpp). Saves are atomic (write_file, file.cpp).
#include <fcntl.h>
#include <unistd.h>
#include <zip.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "file.hpp"
#include "microtorch/file.hpp"
#include "microtorch/io.hpp"
#include "npy.hpp"
#include "ops/common.hpp"

namespace microtorch {

namespace {

using detail::fail_io;
using detail::npy_header;
using detail::read_npy;

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
  if ((st.valid & ZIP_STAT_SIZE) == 0) fail_io(where, "the archive's directory gives no size for the member");
  zip_file_t* zf = zip_fopen_index(za, index, 0);
  if (zf == nullptr) fail_io(where, fmt::format("cannot open the member: {}", zip_strerror(za)));
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> file(zf, zip_fclose);
  auto read = [&](char* dst, std::size_t n) -> std::size_t {
    const zip_int64_t r = zip_fread(zf, dst, n);
    if (r < 0) fail_io(where, fmt::format("corrupt data ({})", zip_file_strerror(zf)));
    return static_cast<std::size_t>(r);
  };
  Tensor t = read_npy(read, st.size, where);
  char extra;
  if (read(&extra, 1) != 0) {
    fail_io(where, fmt::format("holds more than the {} bytes the archive's directory says", st.size));
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
    fail_io(where, fmt::format("not a readable .npz (zip) archive: {}; the file may be truncated, or was not written by "
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
      fail_io(where, fmt::format("cannot read the directory entry of member {}: {}", i, zip_strerror(za.get())));
    }
    const std::string member = st.name;
    const std::string member_where = fmt::format("{}: member '{}'", where, member);
    if (!ends_with(member, ".npy")) {
      fail_io(member_where, "not a .npy array (numpy.savez stores each array as '<name>.npy'); is this a checkpoint?");
    }
    std::string name = member.substr(0, member.size() - 4);
    if (name.empty()) fail_io(member_where, "the array has an empty name");
    if (!seen.insert(name).second) fail_io(member_where, "appears twice in the archive; names must be unique");
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

using detail::InputFile;

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
    fail_io(where, "the file is empty (0 bytes); even an empty .npz holds a 22-byte zip directory. Was the copy interrupted?");
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
  if (bytes.empty()) fail_io(where, "no bytes: even an empty .npz holds a 22-byte zip directory");
  return read_npz([&](zip_error_t* ze) { return zip_source_buffer_create(bytes.data(), bytes.size(), 0, ze); }, where);
}

}  // namespace microtorch
