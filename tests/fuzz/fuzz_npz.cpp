// libFuzzer target: the .npz (zip) reader on arbitrary bytes.
//
// decode_npz must either throw IoError or return named tensors with unique, non-empty
// names, each of which survives a .npy round trip. Anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "microtorch/io.hpp"
#include "microtorch/microtorch.hpp"

namespace mt = microtorch;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, mt::Tensor>> named;
  try {
    named = mt::decode_npz(bytes, "fuzz");
  } catch (const mt::IoError&) {
    return 0;
  }
  std::set<std::string> names;
  for (const auto& [name, t] : named) {
    if (name.empty() || !names.insert(name).second) {
      std::fprintf(stderr, "fuzz_npz: empty or duplicate name '%s' accepted\n", name.c_str());
      std::abort();
    }
    const std::string npy = mt::encode_npy(t);
    if (mt::encode_npy(mt::decode_npy(npy, name)) != npy) {
      std::fprintf(stderr, "fuzz_npz: member '%s' changed in a .npy round trip\n", name.c_str());
      std::abort();
    }
  }
  return 0;
}
