// Shared test helpers: tolerance checks that print the differing elements, fixtures,
// and error checks that look inside the message.
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>

#include "microtorch/microtorch.hpp"
#include "microtorch/nn/module.hpp"

namespace mt = microtorch;

/// Defined under AddressSanitizer and ThreadSanitizer, whose allocators abort on an
/// impossible size (or an address-space limit) instead of failing the allocation: tests of
/// such failures run in the release suite only.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MT_SANITIZER_ALLOCATOR 1
#endif

namespace testing {

/// |actual - expected| <= atol + rtol * |expected| everywhere, same shape; on failure the
/// message lists up to 10 differing elements with their flat index.
inline std::string close_report(const mt::Tensor& actual, const mt::Tensor& expected, double rtol, double atol) {
  if (actual.shape() != expected.shape()) {
    return fmt::format("shape {} != expected {}", mt::shape_str(actual.shape()), mt::shape_str(expected.shape()));
  }
  const auto a = actual.detach().to(mt::kFloat64);
  const auto e = expected.detach().to(mt::kFloat64);
  std::string report;
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.data<double>()[i], y = e.data<double>()[i];
    const bool same_special = (std::isnan(x) && std::isnan(y)) || (std::isinf(x) && x == y);
    if (!same_special && !(std::fabs(x - y) <= atol + rtol * std::fabs(y))) {
      if (++bad <= 10) report += fmt::format("\n  [{}] got {:.9g}, expected {:.9g} (diff {:.3g})", i, x, y, x - y);
    }
  }
  if (bad == 0) return "";
  return fmt::format("{} of {} elements differ (rtol {}, atol {}):{}", bad, a.numel(), rtol, atol, report);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A fresh directory under /tmp, removed (with its files and empty subdirectories) at the
/// end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/microtorch-test-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() {
    ::chmod(path.c_str(), 0700);
    for (const auto& f : files()) {
      const std::string p = path + "/" + f;
      if (::rmdir(p.c_str()) != 0) std::remove(p.c_str());
    }
    ::rmdir(path.c_str());
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.emplace_back(e->d_name);
      }
      ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

}  // namespace testing

#define CHECK_CLOSE(actual, expected, rtol, atol)                                     \
  do {                                                                                \
    const std::string mt_report_ = testing::close_report((actual), (expected), (rtol), (atol)); \
    INFO(mt_report_);                                                                 \
    CHECK(mt_report_.empty());                                                        \
  } while (0)

/// Checks that `expr` throws exception type E and that its message contains each of the
/// given substrings (the op, the shapes, the fix).
#define CHECK_THROWS_MSG(expr, E, ...)                                                  \
  do {                                                                                  \
    bool mt_thrown_ = false;                                                            \
    try {                                                                               \
      (void)(expr);                                                                     \
    } catch (const E& mt_e_) {                                                          \
      mt_thrown_ = true;                                                                \
      const std::string mt_msg_ = mt_e_.what();                                         \
      for (const char* mt_part_ : std::vector<const char*>{__VA_ARGS__}) {              \
        INFO("message: " << mt_msg_);                                                   \
        CHECK_MESSAGE(mt_msg_.find(mt_part_) != std::string::npos, "missing: ", mt_part_); \
      }                                                                                 \
    }                                                                                   \
    CHECK_MESSAGE(mt_thrown_, #expr " did not throw " #E);                              \
  } while (0)

/// The members of a committed fixture case, tests/fixtures/<case>.npz (written by the
/// tools/gen_*fixtures.py scripts with Debian's torch), loaded once per test run.
inline const mt::nn::NamedTensors& fixture_case(const std::string& c) {
  static std::map<std::string, mt::nn::NamedTensors> cache;
  auto it = cache.find(c);
  if (it == cache.end()) {
    it = cache.emplace(c, mt::load_npz(std::string(MICROTORCH_FIXTURES_DIR) + "/" + c + ".npz")).first;
  }
  return it->second;
}

/// fixture("<case>__<tensor>"): a fresh copy of member <tensor> of <case>.npz, or an
/// undefined tensor when `required` is false and the case has no such member.
inline mt::Tensor fixture(const std::string& name, bool required = true) {
  const auto split = name.find("__");
  if (split == std::string::npos) {  // a plain .npy that numpy wrote (tests/test_io.cpp)
    return mt::load_npy(std::string(MICROTORCH_FIXTURES_DIR) + "/" + name + ".npy");
  }
  const std::string member = name.substr(split + 2);
  for (const auto& [n, t] : fixture_case(name.substr(0, split))) {
    if (n == member) return t.clone();  // a fresh leaf: tests mark it requires_grad and backprop into it
  }
  if (required) throw mt::IoError("fixture " + name + ": no member '" + member + "'; regenerate the fixtures");
  return mt::Tensor();
}

/// float64 leaf with requires_grad, seeded, for gradcheck.
inline mt::Tensor rand64(const mt::Shape& shape, double lo = -1.0, double hi = 1.0) {
  mt::Tensor t = mt::empty(shape, mt::kFloat64);
  t.uniform_(lo, hi);
  return t.requires_grad_(true);
}

/// 0, 1, ..., 23 as float32 [2, 3, 4]: easy to reason about in shape and reduction tests.
inline mt::Tensor grid() { return mt::arange(0.0, 24.0, 1.0, mt::kFloat32).reshape({2, 3, 4}); }
