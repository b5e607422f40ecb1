// .npy reading and writing (numpy/lib/format.py): the header is written and parsed here,
// and everything a hostile or truncated file could get wrong is checked before any data is
// touched. Encoding and decoding work on byte strings or a reader; the file functions and
// the .npz members (each one a whole .npy file, npz.cpp) share them.
#include "npy.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "file.hpp"
#include "microtorch/autograd.hpp"
#include "microtorch/io.hpp"
#include "microtorch/ops.hpp"
#include "ops/common.hpp"

namespace microtorch {

namespace detail {

namespace {

Dtype dtype_of_descr(const std::string& descr, const std::string& where) {
  if (descr == "<f4") return Dtype::Float32;
  if (descr == "<f8") return Dtype::Float64;
  if (descr == "<i8") return Dtype::Int64;
  if (descr == "|b1") return Dtype::Bool;
  fail_io(where, fmt::format("unsupported dtype '{}'; microtorch reads float32 '<f4', float64 '<f8', int64 '<i8' and "
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
    fail_io(where_, fmt::format("malformed header at byte {}: {}", i_, what));
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

}  // namespace

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

Tensor read_npy(const ReadBytes& read, std::uint64_t size, const std::string& where) {
  auto read_exactly = [&](char* dst, std::size_t n, const char* what) {
    for (std::size_t got = 0; got < n;) {
      const std::size_t r = read(dst + got, n - got);
      if (r == 0) fail_io(where, fmt::format("truncated inside the {}", what));
      got += r;
    }
  };
  char pre[12];
  if (size < 10) fail_io(where, "not a .npy file (too short for the magic string \\x93NUMPY and a header)");
  read_exactly(pre, 10, "preamble");
  if (std::memcmp(pre, kMagic, 6) != 0) {
    fail_io(where, "not a .npy file (the magic string \\x93NUMPY is missing); was it written by numpy.save?");
  }
  const auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(pre[i])); };
  const std::size_t major = byte(6);
  if (major < 1 || major > 3) fail_io(where, fmt::format("unsupported .npy format version {}.{}", major, byte(7)));
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (len_bytes == 4) read_exactly(pre + 10, 2, "preamble");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= byte(8 + i) << (8 * i);
  const std::uint64_t data_start = 8 + len_bytes + header_len;
  if (header_len > kMaxHeader) fail_io(where, fmt::format("the header claims {} bytes; at most 65536 are read", header_len));
  if (size < data_start) {
    fail_io(where, fmt::format("truncated: the header says {} bytes but the file has {}", header_len, size - 8 - len_bytes));
  }
  std::string text(header_len, '\0');
  read_exactly(text.data(), header_len, "header");
  const NpyHeader h = HeaderParser(text, where).parse();

  std::int64_t count = 0;
  try {
    count = numel_of(h.shape, "npy");
  } catch (const ShapeError& e) {
    fail_io(where, fmt::format("the shape in the header is impossible ({})", e.what()));
  }
  const std::uint64_t nbytes = static_cast<std::uint64_t>(count) * dtype_size(h.dtype);  // <= 2^63: fits
  if (size - data_start != nbytes) {
    fail_io(where, fmt::format("{}: shape {} of {} needs {} bytes of data but {} follow the header",
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
      if (b > 1) fail_io(where, fmt::format("bool element {} holds {}, not 0 or 1", i, b));
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

}  // namespace detail

using detail::InputFile;
using detail::npy_header;
using detail::read_npy;

namespace {

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

}  // namespace

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

}  // namespace microtorch
