// Checkpoints: .npz round trips, files numpy wrote, the zip layout numpy reads, hostile
// archives, atomic saves under real write failures, and nn::save / nn::load of modules.
//
// The zip checks use a small reader written here from the zip specification (APPNOTE.TXT)
// rather than libzip, so the layout is verified independently of the library that wrote it.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "helpers.hpp"
#include "microtorch/nn/checkpoint.hpp"

using mt::Tensor;
using Named = std::vector<std::pair<std::string, Tensor>>;

using testing::read_file;
using testing::TempDir;
using testing::write_file;

namespace {

Named fixture_npz(const std::string& name) {
  return mt::load_npz(std::string(MICROTORCH_FIXTURES_DIR) + "/" + name + ".npz");
}

std::vector<std::string> names_of(const Named& tensors) {
  std::vector<std::string> out;
  for (const auto& [n, _] : tensors) out.push_back(n);
  return out;
}

Tensor find(const Named& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  FAIL("no tensor named " << name);
  return {};
}

// ---- a minimal zip writer and reader (stored members only), from APPNOTE.TXT ------------

std::uint32_t crc32(std::string_view data) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put16(std::string& s, std::uint32_t v) {
  s += static_cast<char>(v & 0xFF);
  s += static_cast<char>((v >> 8) & 0xFF);
}
void put32(std::string& s, std::uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}
std::uint32_t get16(std::string_view s, std::size_t at) {
  return static_cast<unsigned char>(s[at]) | (static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 1])) << 8);
}
std::uint32_t get32(std::string_view s, std::size_t at) { return get16(s, at) | (get16(s, at + 2) << 16); }

/// A valid zip archive of stored members, for crafting archives save_npz would never write.
std::string make_zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, central;
  for (const auto& [name, data] : members) {
    const auto offset = static_cast<std::uint32_t>(out.size());
    const std::uint32_t crc = crc32(data);
    const auto size = static_cast<std::uint32_t>(data.size());
    put32(out, 0x04034b50);  // local file header
    for (std::uint32_t v : {20u, 0u, 0u, 0u, 0x21u}) put16(out, v);  // version, flags, method, time, date
    put32(out, crc), put32(out, size), put32(out, size);
    put16(out, static_cast<std::uint32_t>(name.size())), put16(out, 0);
    out += name + data;
    put32(central, 0x02014b50);  // central directory entry
    for (std::uint32_t v : {20u, 20u, 0u, 0u, 0u, 0x21u}) put16(central, v);
    put32(central, crc), put32(central, size), put32(central, size);
    for (std::uint32_t v : {static_cast<std::uint32_t>(name.size()), 0u, 0u, 0u, 0u}) put16(central, v);
    put32(central, 0), put32(central, offset);
    central += name;
  }
  const auto cd_offset = static_cast<std::uint32_t>(out.size());
  out += central;
  put32(out, 0x06054b50);  // end of central directory
  put16(out, 0), put16(out, 0);
  put16(out, static_cast<std::uint32_t>(members.size())), put16(out, static_cast<std::uint32_t>(members.size()));
  put32(out, static_cast<std::uint32_t>(central.size())), put32(out, cd_offset);
  put16(out, 0);
  return out;
}

struct ZipEntry {
  std::string name;
  std::uint32_t flags, method, crc, compressed, size;
  std::string data;  // the stored bytes, found through the entry's local header
};

/// Reads the central directory the way Python's zipfile (and so numpy.load) does.
std::vector<ZipEntry> read_zip(std::string_view zip) {
  std::vector<ZipEntry> out;
  REQUIRE(zip.size() >= 22);
  std::size_t eocd = zip.size() - 22;  // no archive comment
  REQUIRE(get32(zip, eocd) == 0x06054b50u);
  const std::uint32_t count = get16(zip, eocd + 10);
  std::size_t at = get32(zip, eocd + 16);
  for (std::uint32_t i = 0; i < count; ++i) {
    REQUIRE(at + 46 <= zip.size());
    REQUIRE(get32(zip, at) == 0x02014b50u);
    ZipEntry e;
    e.flags = get16(zip, at + 8);
    e.method = get16(zip, at + 10);
    e.crc = get32(zip, at + 16);
    e.compressed = get32(zip, at + 20);
    e.size = get32(zip, at + 24);
    const std::uint32_t name_len = get16(zip, at + 28), extra_len = get16(zip, at + 30), comment_len = get16(zip, at + 32);
    const std::uint32_t local = get32(zip, at + 42);
    e.name = std::string(zip.substr(at + 46, name_len));
    REQUIRE(get32(zip, local) == 0x04034b50u);
    REQUIRE(zip.substr(local + 30, get16(zip, local + 26)) == e.name);
    const std::size_t data_at = local + 30 + get16(zip, local + 26) + get16(zip, local + 28);
    REQUIRE(data_at + e.compressed <= zip.size());
    e.data = std::string(zip.substr(data_at, e.compressed));
    out.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

// ---- modules defined here, so these tests do not depend on nn::Linear / nn::LayerNorm ---

struct Affine : mt::nn::Module {
  Tensor weight, bias;
  Affine(std::int64_t in, std::int64_t out)
      : weight(register_parameter("weight", mt::randn({out, in}))), bias(register_parameter("bias", mt::randn({out}))) {}
};

struct Scale : mt::nn::Module {
  Tensor weight, bias;
  explicit Scale(std::int64_t n)
      : weight(register_parameter("weight", mt::randn({n}))), bias(register_parameter("bias", mt::randn({n}))) {}
};

/// proj (a Linear's parameters), norm (a LayerNorm's) and two buffers: int64 and bool.
struct Net : mt::nn::Module {
  std::shared_ptr<Affine> proj;
  std::shared_ptr<Scale> norm;
  Tensor steps, keep;
  Net()
      : proj(register_module("proj", std::make_shared<Affine>(3, 2))),
        norm(register_module("norm", std::make_shared<Scale>(2))),
        steps(register_buffer("steps", mt::randint(0, 100, {}))),
        keep(register_buffer("keep", mt::rand({2}) > 0.5)) {}
};

/// The PyTorch forward of nn.Linear then nn.LayerNorm, from core ops:
/// y = x W^T + b ;  out = (y - mean(y)) / sqrt(var_biased(y) + eps) * gamma + beta.
std::pair<Tensor, Tensor> linear_layernorm(const Tensor& x, const Named& state) {
  const Tensor y = mt::matmul(x, find(state, "proj.weight").t()) + find(state, "proj.bias");
  const Tensor mean = y.mean({-1}, true);
  const Tensor var = y.var({-1}, /*unbiased=*/false, /*keepdim=*/true);
  const Tensor out = (y - mean) / (var + 1e-5).sqrt() * find(state, "norm.weight") + find(state, "norm.bias");
  return {y, out};
}

Named clone_state(const mt::nn::Module& m) {
  Named out;
  for (const auto& [n, t] : m.state_dict()) out.emplace_back(n, t.clone());
  return out;
}

void check_same_state(const Named& actual, const Named& expected) {
  REQUIRE(names_of(actual) == names_of(expected));
  for (std::size_t i = 0; i < actual.size(); ++i) {
    CAPTURE(actual[i].first);
    CHECK(actual[i].second.dtype() == expected[i].second.dtype());
    CHECK(mt::equal(actual[i].second, expected[i].second));
  }
}

/// Sets the soft file-size limit for its lifetime (SIGXFSZ ignored, so an oversized write
/// fails with EFBIG as on a full disk instead of killing the process). Unlike permission
/// tricks, the limit also binds root.
struct FileSizeLimit {
  rlimit old{};
  struct sigaction old_action {};
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    REQUIRE(::sigaction(SIGXFSZ, &ignore, &old_action) == 0);
    rlimit lim = old;
    lim.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::sigaction(SIGXFSZ, &old_action, nullptr);
  }
};

}  // namespace

// ---- .npz round trips and numpy's files ---------------------------------------------

TEST_CASE("save_npz / load_npz round-trip every dtype and shape, in order, with dotted names") {
  mt::manual_seed(11);
  const Named tensors = {{"out_proj.weight", mt::randn({3, 4})},
                         {"layers.0.self_attn.in_proj_bias", mt::randn({5}, mt::kFloat64)},
                         {"bn.num_batches_tracked", mt::tensor(7.0).to(mt::kInt64)},
                         {"ids", mt::arange(-3, 3).reshape({2, 3})},
                         {"mask", mt::randn({2, 2}) > 0.0},
                         {"empty", mt::zeros({0, 3})},
                         {"a", mt::tensor(2.5)}};
  TempDir dir;
  const std::string path = dir / "ckpt.npz";
  mt::save_npz(tensors, path);
  const Named back = mt::load_npz(path);
  check_same_state(back, tensors);
  CHECK(back[0].second.shape() == mt::Shape{3, 4});
  CHECK(back[2].second.shape() == mt::Shape{});
  CHECK(back[5].second.shape() == mt::Shape{0, 3});
  // Saving again replaces the file; the same bytes also decode from memory.
  mt::save_npz({{"only", mt::ones({2})}}, path);
  CHECK(names_of(mt::decode_npz(read_file(path))) == std::vector<std::string>{"only"});
  CHECK(dir.files() == std::vector<std::string>{"ckpt.npz"});  // no temporary file left behind
}

TEST_CASE("save_npz of nothing writes the empty archive numpy writes, and load_npz reads it") {
  TempDir dir;
  mt::save_npz({}, dir / "empty.npz");
  CHECK(read_file(dir / "empty.npz") == std::string("PK\x05\x06", 4) + std::string(18, '\0'));
  CHECK(mt::load_npz(dir / "empty.npz").empty());
}

TEST_CASE("load_npz reads archives numpy wrote: np.savez (stored, zip64 headers) and np.savez_compressed") {
  // tools/state_dict_npz.py fixtures: np.savez_compressed of every dtype microtorch reads.
  const Named dtypes = fixture_npz("ckpt_numpy_dtypes");
  CHECK(names_of(dtypes) ==
        std::vector<std::string>{"encoder.layers.0.weight", "f64", "steps", "mask", "scalar", "empty"});
  CHECK(mt::equal(find(dtypes, "encoder.layers.0.weight"), mt::arange(6).reshape({2, 3}).to(mt::kFloat32) / 4.0));
  const Tensor f64 = find(dtypes, "f64");
  CHECK(f64.dtype() == mt::kFloat64);
  CHECK(f64.at<double>({2}) == 1e300);
  CHECK(mt::equal(find(dtypes, "steps"), mt::tensor({{-3.0, 0.0}, {7.0, 1099511627776.0}}, mt::kFloat64).to(mt::kInt64)));
  CHECK(mt::equal(find(dtypes, "mask"), mt::tensor({1, 0, 1}).to(mt::kBool)));
  CHECK(find(dtypes, "scalar").shape() == mt::Shape{});
  CHECK(find(dtypes, "scalar").item() == 2.5);
  CHECK(find(dtypes, "empty").shape() == mt::Shape{0, 3});

  // np.savez (uncompressed; numpy forces zip64 local headers).
  const Named forward = fixture_npz("ckpt_torch_forward");
  CHECK(names_of(forward) == std::vector<std::string>{"x", "linear", "out"});
  CHECK(find(forward, "x").shape() == mt::Shape{4, 3});
}

TEST_CASE("a PyTorch Linear + LayerNorm state dict exported by the tools script computes torch's output") {
  // tools/state_dict_npz.py fixtures: torch.save(state_dict) -> `export` -> this file.
  const Named state = fixture_npz("ckpt_torch_state");
  CHECK(names_of(state) == std::vector<std::string>{"proj.weight", "proj.bias", "norm.weight", "norm.bias"});
  CHECK(find(state, "proj.weight").shape() == mt::Shape{2, 3});  // PyTorch's [out, in]
  const Named forward = fixture_npz("ckpt_torch_forward");
  const auto [linear, out] = linear_layernorm(find(forward, "x"), state);
  CHECK_CLOSE(linear, find(forward, "linear"), 1e-5, 1e-6);
  CHECK_CLOSE(out, find(forward, "out"), 1e-5, 1e-6);

  // The same file through nn::load into a module with the same names.
  mt::manual_seed(3);
  Net net;
  mt::nn::load(net, std::string(MICROTORCH_FIXTURES_DIR) + "/ckpt_torch_state.npz", /*strict=*/false);
  CHECK(mt::equal(net.proj->weight, find(state, "proj.weight")));
  CHECK(mt::equal(net.norm->bias, find(state, "norm.bias")));
}

TEST_CASE("save_npz writes the zip layout numpy.load reads: stored '<name>.npy' members holding .npy files") {
  mt::manual_seed(12);
  const Named tensors = {{"out_proj.weight", mt::randn({2, 3})}, {"steps", mt::arange(4)}, {"mask", mt::ones({3}) > 0.0}};
  TempDir dir;
  mt::save_npz(tensors, dir / "layout.npz");
  const std::string zip = read_file(dir / "layout.npz");
  const std::vector<ZipEntry> entries = read_zip(zip);
  REQUIRE(entries.size() == 3);
  const char* descr[] = {"'descr': '<f4'", "'descr': '<i8'", "'descr': '|b1'"};
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const ZipEntry& e = entries[i];
    const Tensor& t = tensors[i].second;
    CAPTURE(e.name);
    CHECK(e.name == tensors[i].first + ".npy");
    CHECK(e.method == 0);          // stored, as numpy.savez writes
    CHECK((e.flags & 1u) == 0);    // not encrypted
    CHECK(e.compressed == e.size);
    CHECK(e.crc == crc32(e.data));
    // The member is a whole .npy file: magic, version 1.0, a header numpy parses, the data.
    REQUIRE(e.data.size() >= 10);
    CHECK(e.data.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) == 0);
    const std::size_t header_len = get16(e.data, 8);
    const std::string header = e.data.substr(10, header_len);
    CHECK((10 + header_len) % 16 == 0);  // numpy aligns the data
    CHECK(header.find(descr[i]) != std::string::npos);
    CHECK(header.find("'fortran_order': False") != std::string::npos);
    CHECK(header.back() == '\n');
    const std::size_t nbytes = static_cast<std::size_t>(t.numel()) * mt::dtype_size(t.dtype());
    REQUIRE(e.data.size() == 10 + header_len + nbytes);
    mt::visit_dtype(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      CHECK(std::memcmp(e.data.data() + 10 + header_len, t.data<T>(), nbytes) == 0);
    });
    CHECK(mt::equal(mt::decode_npy(e.data), t));
  }
  CHECK(entries[0].data.find("'shape': (2, 3)") != std::string::npos);
}

// ---- files that must be refused ------------------------------------------------------

TEST_CASE("a missing, empty, truncated or foreign .npz gives an IoError naming the file") {
  TempDir dir;
  const std::string good = dir / "good.npz";
  mt::save_npz({{"w", mt::ones({8, 8})}, {"b", mt::zeros({8})}}, good);
  const std::string bytes = read_file(good);

  CHECK_THROWS_MSG(mt::load_npz(dir / "missing.npz"), mt::IoError, "load_npz", "missing.npz", "cannot open the file");
  write_file(dir / "empty.npz", "");
  CHECK_THROWS_MSG(mt::load_npz(dir / "empty.npz"), mt::IoError, "empty.npz", "empty (0 bytes)");
  CHECK_THROWS_MSG(mt::load_npz(dir.path), mt::IoError, "is a directory");

  const std::string half = dir / "half.npz";
  write_file(half, bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_MSG(mt::load_npz(half), mt::IoError, half.c_str(), "not a readable .npz", "truncated");

  // Every cut refuses cleanly: never a crash, never a silent partial load.
  for (std::size_t cut = 1; cut < bytes.size(); cut += 7) {
    CAPTURE(cut);
    CHECK_THROWS_AS(mt::decode_npz(std::string_view(bytes).substr(0, cut)), mt::IoError);
  }

  mt::save_npy(mt::ones({2}), dir / "plain.npy");
  CHECK_THROWS_MSG(mt::load_npz(dir / "plain.npy"), mt::IoError, "plain.npy", "not a readable .npz");
  CHECK_THROWS_MSG(mt::decode_npz(""), mt::IoError, "decode_npz");
}

TEST_CASE("a corrupt member, a non-.npy member, a duplicate or an unsupported dtype names the file and the member") {
  TempDir dir;
  const std::string w_npy = mt::encode_npy(mt::ones({4}));

  // A flipped byte in the data: libzip's CRC check catches it.
  mt::save_npz({{"w", mt::ones({64})}, {"b", mt::zeros({4})}}, dir / "flipped.npz");
  std::string flipped = read_file(dir / "flipped.npz");
  const std::size_t data_at = flipped.find("\x93NUMPY") + 200;  // inside w's float data
  flipped[data_at] = static_cast<char>(flipped[data_at] ^ 0x40);
  write_file(dir / "flipped.npz", flipped);
  CHECK_THROWS_MSG(mt::load_npz(dir / "flipped.npz"), mt::IoError, "flipped.npz", "member 'w.npy'", "CRC");

  write_file(dir / "foreign.npz", make_zip({{"w.npy", w_npy}, {"README.txt", "hello"}}));
  CHECK_THROWS_MSG(mt::load_npz(dir / "foreign.npz"), mt::IoError, "foreign.npz", "member 'README.txt'",
                   "not a .npy array");

  write_file(dir / "garbage.npz", make_zip({{"w.npy", "this is not a numpy array"}}));
  CHECK_THROWS_MSG(mt::load_npz(dir / "garbage.npz"), mt::IoError, "garbage.npz", "member 'w.npy'", "not a .npy file");

  write_file(dir / "short.npz", make_zip({{"w.npy", w_npy.substr(0, w_npy.size() - 3)}}));
  CHECK_THROWS_MSG(mt::load_npz(dir / "short.npz"), mt::IoError, "member 'w.npy'", "truncated");

  std::string int32 = w_npy;
  int32.replace(int32.find("<f4"), 3, "<i4");
  write_file(dir / "int32.npz", make_zip({{"w.npy", int32}}));
  CHECK_THROWS_MSG(mt::load_npz(dir / "int32.npz"), mt::IoError, "int32.npz", "member 'w.npy'",
                   "unsupported dtype '<i4'");

  write_file(dir / "twice.npz", make_zip({{"w.npy", w_npy}, {"w.npy", w_npy}}));
  CHECK_THROWS_MSG(mt::load_npz(dir / "twice.npz"), mt::IoError, "twice.npz", "member 'w.npy'", "appears twice");

  // The crafting is sound: the same writer with good members loads.
  write_file(dir / "crafted.npz", make_zip({{"a.b.npy", w_npy}}));
  CHECK(names_of(mt::load_npz(dir / "crafted.npz")) == std::vector<std::string>{"a.b"});
}

TEST_CASE("save_npz refuses empty, duplicate and undefined entries before touching the disk") {
  TempDir dir;
  const std::string path = dir / "bad.npz";
  CHECK_THROWS_MSG(mt::save_npz({{"", mt::ones({1})}}, path), mt::ValueError, "save_npz", "empty name");
  CHECK_THROWS_MSG(mt::save_npz({{"w", mt::ones({1})}, {"w", mt::ones({1})}}, path), mt::ValueError, "\"w\"",
                   "appears twice");
  CHECK_THROWS_MSG(mt::save_npz({{"g", Tensor()}}, path), mt::ValueError, "\"g\"", "undefined");
  CHECK(dir.files().empty());
  CHECK_THROWS_MSG(mt::save_npz({{"w", mt::ones({1})}}, "/nonexistent/dir/ckpt.npz"), mt::IoError, "save_npz",
                   "/nonexistent/dir/ckpt.npz", "No such file or directory");
}

// ---- atomic saves: a failure leaves the previous checkpoint intact --------------------

TEST_CASE("a save that fails half-way (file size limit, as on a full disk) leaves the previous checkpoint intact") {
  TempDir dir;
  const std::string path = dir / "ckpt.npz";
  const Named first = {{"w", mt::arange(10).to(mt::kFloat32)}};
  mt::save_npz(first, path);
  const std::string before = read_file(path);
  REQUIRE(before.size() < 4096);

  // 64 KiB of data cannot be written under a 4 KiB limit: the kernel refuses the write
  // part-way through the archive (EFBIG) and libzip's zip_close fails.
  std::string error;
  {
    FileSizeLimit limit(4096);
    try {
      mt::save_npz({{"w", mt::ones({16384})}, {"b", mt::ones({8})}}, path);
    } catch (const mt::IoError& e) {
      error = e.what();
    }
  }  // limit lifted before any check can print
  CHECK(error.find("save_npz") != std::string::npos);
  CHECK(error.find(path) != std::string::npos);
  CHECK(error.find("File too large") != std::string::npos);  // libzip's message, from errno EFBIG
  INFO("error: " << error);
  CHECK(read_file(path) == before);
  check_same_state(mt::load_npz(path), first);
  CHECK(dir.files() == std::vector<std::string>{"ckpt.npz"});  // the temporary files are gone

  // A module checkpoint the same way.
  mt::manual_seed(21);
  Net net;
  mt::nn::save(net, path);
  const std::string module_before = read_file(path);
  net.proj->weight.detach().fill_(0.0);
  {
    FileSizeLimit limit(module_before.size() / 2);
    CHECK_THROWS_AS(mt::nn::save(net, path), mt::IoError);
  }
  CHECK(read_file(path) == module_before);
  CHECK(dir.files() == std::vector<std::string>{"ckpt.npz"});

  // save_npy shares the temporary-file writer: its write(2) fails with EFBIG.
  const std::string npy = dir / "w.npy";
  mt::save_npy(mt::ones({4}), npy);
  const std::string npy_before = read_file(npy);
  {
    FileSizeLimit limit(1024);
    try {
      mt::save_npy(mt::zeros({4096}), npy);
      error.clear();
    } catch (const mt::IoError& e) {
      error = e.what();
    }
  }
  CHECK(error.find("save_npy: writing") != std::string::npos);
  CHECK(error.find("File too large") != std::string::npos);
  CHECK(read_file(npy) == npy_before);
  CHECK(dir.files() == std::vector<std::string>{"ckpt.npz", "w.npy"});
}

TEST_CASE("a save onto a directory is refused before anything is written, and leaves no temporary file") {
  TempDir dir;
  const std::string target = dir / "ckpt.npz";
  REQUIRE(::mkdir(target.c_str(), 0700) == 0);
  write_file(target + "/keep", "x");
  CHECK_THROWS_MSG(mt::save_npz({{"w", mt::ones({4})}}, target), mt::IoError, "save_npz", "is a directory",
                   target.c_str());
  CHECK_THROWS_MSG(mt::save_npy(mt::ones({4}), target), mt::IoError, "save_npy", "is a directory");
  CHECK(dir.files() == std::vector<std::string>{"ckpt.npz"});
  CHECK(read_file(target + "/keep") == "x");
  std::remove((target + "/keep").c_str());
}

TEST_CASE("a save into a read-only directory fails and leaves the previous checkpoint (not as root)") {
  if (::geteuid() == 0) {
    MESSAGE("skipped: root ignores directory permissions; the file-size-limit test covers this path");
    return;
  }
  TempDir dir;
  const std::string path = dir / "ckpt.npz";
  mt::save_npz({{"w", mt::ones({2})}}, path);
  const std::string before = read_file(path);
  REQUIRE(::chmod(dir.path.c_str(), 0500) == 0);
  CHECK_THROWS_MSG(mt::save_npz({{"w", mt::zeros({2})}}, path), mt::IoError, "save_npz", "Permission denied");
  ::chmod(dir.path.c_str(), 0700);
  CHECK(read_file(path) == before);
}

// ---- modules ------------------------------------------------------------------------

TEST_CASE("nn::save / nn::load restore a module's parameters, buffers and children") {
  mt::manual_seed(31);
  Net saved;
  mt::manual_seed(32);
  Net loaded;
  REQUIRE_FALSE(mt::equal(saved.proj->weight, loaded.proj->weight));
  TempDir dir;
  mt::nn::save(saved, dir / "net.npz");
  CHECK(names_of(mt::load_npz(dir / "net.npz")) ==
        std::vector<std::string>{"steps", "keep", "proj.weight", "proj.bias", "norm.weight", "norm.bias"});  // PyTorch's order

  const Tensor weight_handle = loaded.proj->weight;
  mt::nn::load(loaded, dir / "net.npz");
  check_same_state(clone_state(loaded), clone_state(saved));
  CHECK(loaded.proj->weight.is_same(weight_handle));  // loaded in place: optimizers keep their handles
  CHECK(loaded.proj->weight.requires_grad());
  CHECK(loaded.steps.dtype() == mt::kInt64);
  CHECK(loaded.keep.dtype() == mt::kBool);
}

TEST_CASE("nn::load refuses missing, unexpected and mis-shaped keys, lists them all and changes nothing") {
  mt::manual_seed(41);
  Net net;
  const Named before = clone_state(net);
  TempDir dir;
  const std::string path = dir / "bad.npz";
  mt::save_npz({{"proj.weight", mt::zeros({3, 3})},   // wrong shape
                {"proj.bias", mt::zeros({2})},        // fine: must not be written either
                {"norm.weight", mt::zeros({2})},
                {"steps", mt::zeros({})},             // float where the module holds int64
                {"keep", mt::zeros({2}) > 1.0},
                {"extra.weight", mt::zeros({1})}},    // unexpected; norm.bias is missing
               path);
  CHECK_THROWS_MSG(mt::nn::load(net, path), mt::ValueError, "nn::load", path.c_str(), "missing keys: norm.bias",
                   "unexpected keys: extra.weight", "proj.weight: checkpoint [3, 3] vs module [2, 3]", "steps",
                   "dtype");
  check_same_state(clone_state(net), before);

  // Non-strict loading still refuses shape and dtype mismatches ...
  CHECK_THROWS_MSG(mt::nn::load(net, path, /*strict=*/false), mt::ValueError, "proj.weight");
  check_same_state(clone_state(net), before);

  // ... and skips only missing and unexpected keys.
  mt::save_npz({{"proj.bias", mt::full({2}, 3.0)}, {"extra", mt::zeros({1})}}, path);
  CHECK_THROWS_MSG(mt::nn::load(net, path), mt::ValueError, "missing keys: ", "proj.weight", "unexpected keys: extra",
                   "strict=false");
  mt::nn::load(net, path, /*strict=*/false);
  CHECK(mt::equal(net.proj->bias, mt::full({2}, 3.0)));
  CHECK(mt::equal(net.proj->weight, find(before, "proj.weight")));

  // A corrupt file: IoError, module untouched.
  write_file(path, "PK\x03\x04 not really");
  const Named now = clone_state(net);
  CHECK_THROWS_MSG(mt::nn::load(net, path), mt::IoError, "load_npz", path.c_str());
  check_same_state(clone_state(net), now);
}
