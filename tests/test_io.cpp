// .npy round trips and the files that must be refused.
#include <cstdio>
#include <fstream>

#include "helpers.hpp"

using mt::Tensor;

namespace {

std::string temp_path(const std::string& name) { return "/tmp/microtorch-test-" + name + ".npy"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("save_npy / load_npy round-trip every dtype and shape") {
  mt::manual_seed(5);
  const std::vector<Tensor> tensors = {mt::randn({2, 3}), mt::randn({4}, mt::kFloat64), mt::arange(6).reshape({1, 2, 3}),
                                       mt::randn({3}) > 0.0, mt::tensor(2.5), mt::zeros({0, 3})};
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    CAPTURE(i);
    const std::string path = temp_path("roundtrip" + std::to_string(i));
    mt::save_npy(tensors[i], path);
    Tensor back = mt::load_npy(path);
    CHECK(mt::equal(back, tensors[i]));
    std::remove(path.c_str());
  }
}

TEST_CASE("load_npy reads files numpy wrote, including Fortran order") {
  // Written by tools/gen_fixtures.py with numpy: np.asfortranarray(np.arange(6.).reshape(2, 3))
  Tensor f = fixture("io_fortran_order");
  CHECK(f.shape() == mt::Shape{2, 3});
  CHECK_CLOSE(f, mt::arange(0.0, 6.0, 1.0, mt::kFloat64).reshape({2, 3}), 0, 0);
}

TEST_CASE("a truncated, corrupt or foreign .npy file gives an IoError naming the file and the problem") {
  const std::string good = temp_path("good");
  mt::save_npy(mt::ones({4, 4}), good);
  const std::string bytes = read_file(good);

  const std::string truncated = temp_path("truncated");
  write_file(truncated, bytes.substr(0, bytes.size() - 10));
  CHECK_THROWS_MSG(mt::load_npy(truncated), mt::IoError, truncated.c_str(), "truncated", "64 bytes");

  const std::string header_cut = temp_path("header_cut");
  write_file(header_cut, bytes.substr(0, 40));
  CHECK_THROWS_MSG(mt::load_npy(header_cut), mt::IoError, "truncated");

  const std::string not_npy = temp_path("not_npy");
  write_file(not_npy, "hello, this is not numpy at all");
  CHECK_THROWS_MSG(mt::load_npy(not_npy), mt::IoError, "not a .npy file", "numpy.save");

  std::string int32 = bytes;
  int32.replace(int32.find("<f4"), 3, "<i4");
  const std::string int32_path = temp_path("int32");
  write_file(int32_path, int32);
  CHECK_THROWS_MSG(mt::load_npy(int32_path), mt::IoError, "unsupported dtype '<i4'", "astype");

  std::string huge = bytes;
  huge.replace(huge.find("(4, 4)"), 6, "(9999999999999, 99999999)");
  const std::string huge_path = temp_path("huge");
  write_file(huge_path, huge);
  CHECK_THROWS_AS(mt::load_npy(huge_path), mt::IoError);

  std::string bad_header = bytes;
  bad_header.replace(bad_header.find("'shape'"), 7, "'shapz'");
  const std::string bad_header_path = temp_path("bad_header");
  write_file(bad_header_path, bad_header);
  CHECK_THROWS_MSG(mt::load_npy(bad_header_path), mt::IoError, "malformed header");

  CHECK_THROWS_MSG(mt::load_npy("/nonexistent/dir/x.npy"), mt::IoError, "cannot open");
  CHECK_THROWS_MSG(mt::save_npy(mt::ones({1}), "/nonexistent/dir/x.npy"), mt::IoError, "save_npy", "cannot open");
  for (const auto& p : {good, truncated, header_cut, not_npy, int32_path, huge_path, bad_header_path}) {
    std::remove(p.c_str());
  }
}

TEST_CASE("load_npy reads numpy's int64 and bool files") {
  Tensor i = fixture("io_int64");
  CHECK(i.dtype() == mt::kInt64);
  CHECK(mt::equal(i, mt::arange(-3.0, 3.0, 1.0).reshape({3, 2})));
  Tensor b = fixture("io_bool");
  CHECK(b.dtype() == mt::kBool);
  CHECK(mt::equal(b, mt::tensor({{1, 0, 1}}).to(mt::kBool)));
}
