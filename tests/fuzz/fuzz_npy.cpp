// libFuzzer target: the .npy reader on arbitrary bytes, and on headers whose sizes sit at
// the overflow boundaries.
//
// Input starting with 'S' is a size recipe (below); anything else is a .npy file as is.
// decode_npy must either throw IoError or return a tensor; a tensor it returns must survive
// encode_npy -> decode_npy unchanged (shape, dtype and bytes), and the shape ops and
// reductions run on it must give a tensor or throw microtorch::Error. Anything else
// (another exception, a crash, a sanitizer report, a huge allocation) is a bug.
//
// Size recipe: 'S', then a byte whose low 2 bits pick the dtype and bit 2 Fortran order,
// a byte giving the number of dims (mod 6), one byte per dim picking a size from kSizes
// (powers of two around 2^31, 2^32, 2^60 and 2^63, the 64-bit limit, and one past it
// written out in decimal), then the data bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "microtorch/io.hpp"
#include "microtorch/microtorch.hpp"

namespace mt = microtorch;

namespace {

const char* const kSizes[] = {
    "0", "1", "2", "3", "4", "7", "255", "65536", "2147483647", "2147483648", "4294967295", "4294967296",
    "4294967297", "1099511627776", "576460752303423488", "1152921504606846975", "1152921504606846976",
    "1152921504606846977", "2305843009213693952", "4611686018427387904", "9223372036854775807",
    "9223372036854775808", "18446744073709551615", "18446744073709551616", "340282366920938463463374607431768211456"};
const char* const kDescr[] = {"<f4", "<f8", "<i8", "|b1"};

std::string recipe_to_npy(std::string_view r) {
  const auto byte = [&](std::size_t i) { return i < r.size() ? static_cast<unsigned char>(r[i]) : 0u; };
  const unsigned flags = byte(1), ndim = byte(2) % 6;
  std::string dims;
  for (unsigned d = 0; d < ndim; ++d) {
    dims += kSizes[byte(3 + d) % (sizeof kSizes / sizeof kSizes[0])];
    dims += ndim == 1 ? "," : d + 1 < ndim ? ", " : "";
  }
  std::string dict = std::string("{'descr': '") + kDescr[flags & 3] + "', 'fortran_order': " +
                     ((flags & 4) ? "True" : "False") + ", 'shape': (" + dims + "), }";
  dict.resize(((dict.size() + 11 + 63) / 64) * 64 - 11, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  if (r.size() > 3 + ndim) out.append(r.substr(3 + ndim));
  return out;
}

// Shape ops and reductions on whatever was decoded: a result or a microtorch::Error. Only
// for shapes whose non-zero sizes multiply to at most 2^20: the results here are at most 3
// times that, and a result of 2^40 elements is a legitimate request (an OutOfMemoryError in
// a release build) that the sanitizers and libFuzzer's memory limit would report as a crash.
void exercise(const mt::Tensor& t) {
  std::int64_t nonzero = 1;
  for (auto d : t.shape()) nonzero *= d > 0 ? d : 1;  // <= 2^60: decode_npy checked the shape
  if (nonzero > (std::int64_t{1} << 20)) return;
  auto attempt = [](auto&& f) {
    try {
      f();
    } catch (const mt::Error&) {
    }
  };
  attempt([&] { (void)t.reshape({-1}); });
  if (t.dim() == 0) return;
  attempt([&] { (void)mt::sum(t.to(mt::kFloat32), {0}); });
  attempt([&] { (void)mt::sum(t.to(mt::kFloat32), {t.dim() - 1}, true); });
  attempt([&] { (void)t.transpose(0, t.dim() - 1); });
  attempt([&] { (void)mt::cat({t, t}, 0); });
  attempt([&] { (void)t.unsqueeze(0).expand([&] { mt::Shape s = t.shape(); s.insert(s.begin(), 3); return s; }()); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string built;
  if (!bytes.empty() && bytes[0] == 'S') {
    built = recipe_to_npy(bytes);
    bytes = built;
  }
  mt::Tensor t;
  try {
    t = mt::decode_npy(bytes, "fuzz");
  } catch (const mt::IoError&) {
    return 0;
  }
  const mt::Tensor back = mt::decode_npy(mt::encode_npy(t), "round trip");
  if (back.shape() != t.shape() || back.dtype() != t.dtype() || mt::encode_npy(back) != mt::encode_npy(t)) {
    std::fprintf(stderr, "fuzz_npy: the round trip changed a %s tensor of shape %s\n",
                 std::string(mt::dtype_name(t.dtype())).c_str(), mt::shape_str(t.shape()).c_str());
    std::abort();
  }
  exercise(t);
  return 0;
}
