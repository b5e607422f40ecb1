// libFuzzer target: the .npy reader on arbitrary bytes.
//
// decode_npy must either throw IoError or return a tensor; a tensor it returns must
// survive encode_npy -> decode_npy unchanged (shape, dtype and bytes). Anything else
// (another exception, a crash, a sanitizer report, a huge allocation) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "microtorch/io.hpp"
#include "microtorch/microtorch.hpp"

namespace mt = microtorch;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
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
  return 0;
}
