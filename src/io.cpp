// .npy reading and writing. xtensor's xnpy parses the header dictionary and writes the
// files; this layer validates everything a hostile or truncated file could get wrong
// before any data is touched.
#include "microtorch/io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#include <xtensor/xnpy.hpp>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"

namespace microtorch {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw IoError(fmt::format("load_npy: {}: {}", path, what));
}

Dtype dtype_of_descr(const std::string& descr, const std::string& path) {
  if (descr == "<f4") return Dtype::Float32;
  if (descr == "<f8") return Dtype::Float64;
  if (descr == "<i8") return Dtype::Int64;
  if (descr == "|b1") return Dtype::Bool;
  fail(path, fmt::format("unsupported dtype '{}'; microtorch reads float32 '<f4', float64 '<f8', int64 '<i8' and "
                         "bool '|b1' (convert with numpy's astype before saving)",
                         descr));
}

}  // namespace

void save_npy(const Tensor& x, const std::string& path) {
  const std::string bytes = visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return xt::dump_npy(x.detach().array<T>());
  });
  // Written to a temporary file and renamed, so a failure never leaves half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError(fmt::format("save_npy: cannot open '{}' for writing: {}", tmp, std::strerror(errno)));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw IoError(fmt::format("save_npy: writing '{}' failed (disk full?)", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw IoError(fmt::format("save_npy: cannot move '{}' to '{}': {}", tmp, path, std::strerror(errno)));
  }
}

Tensor load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, fmt::format("cannot open the file ({})", std::strerror(errno)));
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  // Preamble: "\x93NUMPY", major, minor, header length (2 bytes in v1, 4 in v2/v3), little-endian.
  static const char kMagic[] = "\x93NUMPY";
  if (file.size() < 10 || std::memcmp(file.data(), kMagic, 6) != 0) {
    fail(path, "not a .npy file (the magic string \\x93NUMPY is missing); was it written by numpy.save?");
  }
  const auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(file[i])); };
  const std::size_t major = byte(6);
  if (major < 1 || major > 3) fail(path, fmt::format("unsupported .npy format version {}.{}", major, byte(7)));
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (file.size() < 8 + len_bytes) fail(path, "truncated inside the header");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= byte(8 + i) << (8 * i);
  const std::size_t data_start = 8 + len_bytes + header_len;
  if (file.size() < data_start) {
    fail(path, fmt::format("truncated: the header says {} bytes but the file has {}", header_len,
                           file.size() - 8 - len_bytes));
  }

  std::string descr;
  bool fortran = false;
  std::vector<std::size_t> xshape;
  try {
    xt::detail::parse_header(file.substr(8 + len_bytes, header_len), descr, &fortran, xshape);
  } catch (const std::exception& e) {
    fail(path, fmt::format("malformed header ({})", e.what()));
  }
  const Dtype dtype = dtype_of_descr(descr, path);

  Shape shape;
  std::size_t count = 1;
  for (std::size_t d : xshape) {
    if (d > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()) ||
        __builtin_mul_overflow(count, d, &count)) {
      fail(path, "the shape in the header is too large");
    }
    shape.push_back(static_cast<std::int64_t>(d));
  }
  std::size_t nbytes = 0;
  if (__builtin_mul_overflow(count, dtype_size(dtype), &nbytes)) fail(path, "the shape in the header is too large");
  if (file.size() - data_start < nbytes) {
    fail(path, fmt::format("truncated: shape {} of {} needs {} bytes of data but the file holds {}", shape_str(shape),
                           dtype_name(dtype), nbytes, file.size() - data_start));
  }
  if (dtype == Dtype::Bool) {
    for (std::size_t i = 0; i < nbytes; ++i) {
      if (byte(data_start + i) > 1) fail(path, fmt::format("bool element {} holds {}, not 0 or 1", i, byte(data_start + i)));
    }
  }

  // Fortran order stores the transpose: read it with the sizes reversed, then reverse the dims.
  Shape stored = shape;
  if (fortran) std::reverse(stored.begin(), stored.end());
  Tensor t = Tensor::empty(stored, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::memcpy(t.data<T>(), file.data() + data_start, nbytes);
  });
  if (fortran && t.dim() > 1) {
    NoGradGuard no_grad;
    std::vector<std::int64_t> dims(static_cast<std::size_t>(t.dim()));
    std::iota(dims.rbegin(), dims.rend(), 0);
    t = permute(t, dims);
  }
  return t;
}

}  // namespace microtorch
