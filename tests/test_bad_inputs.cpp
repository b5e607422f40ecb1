// The bad-input catalogue (docs/bad-inputs.md): one test case per entry that is not
// already proven elsewhere. Each checks the exception type and the parts of the message a
// user needs (the op, the shapes or values, the fix), or, where the input is legal but
// dangerous (a fully masked row, a NaN), the defined result.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>

#include "helpers.hpp"
#include "microtorch/io.hpp"
#include "microtorch/lower/graph.hpp"
#include "microtorch/mask.hpp"
#include "microtorch/nn/attention.hpp"
#include "microtorch/nn/checkpoint.hpp"
#include "microtorch/nn/data.hpp"
#include "microtorch/nn/layers.hpp"
#include "microtorch/nn/loss.hpp"
#include "microtorch/nn/optim.hpp"

using mt::Tensor;
namespace F = mt::nn::functional;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A path under /tmp unique to this process, removed at the end of the test.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string& name) : path("/tmp/microtorch-bad-" + std::to_string(::getpid()) + "-" + name) {}
  ~TempPath() { std::remove(path.c_str()); }
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct TwoLayer : mt::nn::Module {
  std::shared_ptr<mt::nn::Linear> fc1, fc2;
  TwoLayer() {
    fc1 = register_module("fc1", std::make_shared<mt::nn::Linear>(3, 4));
    fc2 = register_module("fc2", std::make_shared<mt::nn::Linear>(4, 2));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(mt::relu(fc1->forward(x))); }
};

}  // namespace

// ---- tensors ------------------------------------------------------------------------------

TEST_CASE("bad input: tensors whose shapes cannot broadcast") {
  CHECK_THROWS_MSG(mt::ones({2, 3}) + mt::ones({4, 5}), mt::ShapeError, "add", "[2, 3]", "[4, 5]");
  CHECK_THROWS_MSG(mt::ones({2, 3}) * mt::ones({2}), mt::ShapeError, "mul", "[2, 3]", "[2]");
}

TEST_CASE("bad input: matmul with inner dimensions that differ suggests a transpose") {
  CHECK_THROWS_MSG(mt::matmul(mt::ones({2, 3}), mt::ones({2, 3})), mt::ShapeError, "matmul", "[2, 3]", "transpose");
}

TEST_CASE("bad input: reshape to a different number of elements") {
  CHECK_THROWS_MSG(mt::ones({2, 3}).reshape({4, 2}), mt::ShapeError, "reshape", "[2, 3]", "[4, 2]");
  CHECK_THROWS_MSG(mt::ones({2, 3}).reshape({-1, -1}), mt::ShapeError, "reshape");
}

TEST_CASE("bad input: a dim out of range lists the valid range") {
  CHECK_THROWS_MSG(mt::sum(mt::ones({2, 3}), {2}), mt::IndexError, "sum", "2");
  CHECK_THROWS_MSG(mt::softmax(mt::ones({2, 3}), -3), mt::IndexError, "softmax", "-3");
}

TEST_CASE("bad input: an element index out of range or with the wrong number of indices") {
  const Tensor x = mt::ones({2, 3});
  CHECK_THROWS_MSG(x.at<float>({2, 0}), mt::IndexError, "at", "index 2", "[2, 3]");
  CHECK_THROWS_MSG(x.at<float>({0}), mt::IndexError, "1 indices", "[2, 3]");
}

TEST_CASE("bad input: item() on a tensor with more than one element") {
  CHECK_THROWS_MSG(mt::ones({3}).item(), mt::ValueError, "item", "[3]", "sum()");
}

TEST_CASE("bad input: reading data with the wrong element type") {
  CHECK_THROWS_MSG(mt::ones({2}).data<double>(), mt::DtypeError, "float32", "float64", ".to(kFloat64)");
}

TEST_CASE("bad input: arithmetic on two bool tensors") {
  const Tensor b = mt::ones({2}) > 0.5;
  CHECK_THROWS_AS(b + b, mt::DtypeError);
  CHECK_THROWS_MSG(mt::ones({2}, mt::kBool).mul_(2.0), mt::DtypeError, "mul_", "bool");
}

TEST_CASE("bad input: using an undefined tensor (an unset grad)") {
  const Tensor w = mt::ones({2}).requires_grad_();
  CHECK_THROWS_MSG(w.grad().shape(), mt::ValueError, "undefined", "defined()");
}

TEST_CASE("bad input: a negative size") {
  CHECK_THROWS_MSG(mt::zeros({2, -1}), mt::ShapeError, "negative", "[2, -1]");
}

TEST_CASE("bad input: index_select with an out-of-range or a float index") {
  const Tensor x = mt::ones({3, 2});
  CHECK_THROWS_MSG(x.index_select(0, mt::tensor({0, 3}, mt::kInt64)), mt::IndexError, "index_select", "3");
  CHECK_THROWS_MSG(x.index_select(0, mt::tensor({0.0, 1.0})), mt::DtypeError, "index_select", "int64");
}

TEST_CASE("bad input: cat of tensors that differ outside the cat dim") {
  CHECK_THROWS_MSG(mt::cat({mt::ones({2, 3}), mt::ones({2, 4})}, 0), mt::ShapeError, "cat", "[2, 3]", "[2, 4]");
}

TEST_CASE("bad input: expand to a shape the tensor cannot stretch to") {
  CHECK_THROWS_AS(mt::ones({2, 3}).expand({4, 3}), mt::ShapeError);
}

TEST_CASE("bad input: slice with a step of zero") {
  CHECK_THROWS_MSG(mt::ones({4}).slice(0, 0, 4, 0), mt::ValueError, "slice", "step");
}

TEST_CASE("bad input: empty tensors: reductions without elements refuse, sums are zero") {
  const Tensor e = mt::zeros({0, 3});
  CHECK_THROWS_MSG(mt::max(e), mt::ValueError, "max", "[0, 3]", "empty");
  CHECK_THROWS_MSG(mt::mean(e), mt::ValueError, "mean", "[0, 3]");
  CHECK_THROWS_MSG(mt::logsumexp(e, {0}), mt::ValueError, "logsumexp");
  CHECK(mt::sum(e).item() == 0.0);
  CHECK(mt::matmul(mt::ones({2, 0}), mt::ones({0, 3})).shape() == mt::Shape{2, 3});
  CHECK(mt::softmax(e, -1).shape() == mt::Shape{0, 3});
  // Found by fuzz_broadcast: a sum over an empty dim (xtensor walked a null pointer) and
  // the backward of a matmul whose inner size is 0 (reshape could not infer a -1).
  CHECK(mt::equal(mt::sum(mt::zeros({0, 1, 1, 2}), {0}, true), mt::zeros({1, 1, 1, 2})));
  const Tensor a = mt::zeros({1, 1, 0}).requires_grad_(), b = mt::zeros({0}).requires_grad_();
  const Tensor y = mt::matmul(a, b);
  CHECK(y.shape() == mt::Shape{1, 1});
  y.sum().backward();
  CHECK(a.grad().shape() == mt::Shape{1, 1, 0});
  CHECK(b.grad().shape() == mt::Shape{0});
}

// ---- autograd -----------------------------------------------------------------------------

TEST_CASE("bad input: requires_grad on an integer tensor") {
  CHECK_THROWS_MSG(mt::arange(3).requires_grad_(), mt::DtypeError, "int64", "kFloat32");
}

TEST_CASE("bad input: backward with a gradient of the wrong shape") {
  const Tensor x = mt::ones({2, 3}).requires_grad_();
  CHECK_THROWS_MSG((x * 2.0).backward(mt::ones({3, 2})), mt::ShapeError, "[3, 2]", "[2, 3]");
}

TEST_CASE("bad input: an in-place update of a tensor saved for backward (under NoGradGuard)") {
  Tensor w = mt::tensor({1.0, 2.0}).requires_grad_();
  Tensor x = mt::tensor({3.0, 4.0});
  Tensor loss = (w * x).sum();  // d loss / dw = x: mul saved x
  {
    mt::NoGradGuard no_grad;
    x.add_(mt::ones({2}));
  }
  CHECK_THROWS_MSG(loss.backward(), mt::AutogradError, "MulBackward", "input 1", "[2]",
                   "modified by an in-place operation", "version 1, expected 0");
  // A view shares the version: writing through a reshape is caught too.
  Tensor y = mt::exp(w);
  {
    mt::NoGradGuard no_grad;
    y.reshape({2, 1}).mul_(2.0);
  }
  CHECK_THROWS_MSG(y.sum().backward(), mt::AutogradError, "ExpBackward", "its output");
  // Ops whose backward reads no values (add, sum, reshape...) do not mind.
  Tensor z = mt::tensor({1.0, 1.0});
  Tensor s = (w + z).sum();
  {
    mt::NoGradGuard no_grad;
    z.fill_(5.0);
  }
  s.backward();
  CHECK_CLOSE(w.grad(), mt::ones({2}), 0, 0);
}

TEST_CASE("bad input: an optimizer step between forward and backward") {
  mt::manual_seed(3);
  mt::nn::Linear fc(3, 2);
  mt::optim::SGD opt(fc.parameters(), {.lr = 0.1});
  const Tensor x = mt::ones({4, 3});
  Tensor loss = fc.forward(x).pow(2.0).sum();
  loss.backward({}, /*retain_graph=*/true);
  opt.step();
  const std::uint64_t v = fc.weight.version();
  CHECK(v >= 1);
  CHECK_THROWS_MSG(loss.backward(), mt::AutogradError, "LinearBackward", "modified by an in-place operation",
                   "optimizer step");
  // The usual order (forward, backward, step, then a new forward) is fine.
  opt.zero_grad();
  fc.forward(x).pow(2.0).sum().backward();
  opt.step();
}

TEST_CASE("bad input: anomaly mode names the op whose forward made a NaN or Inf, with shapes and origin") {
  mt::DetectAnomalyGuard anomaly;
  const Tensor w = mt::tensor({1.0, -2.0, 3.0}).requires_grad_();
  const Tensor h = w * 2.0;
  CHECK_THROWS_MSG(mt::log(h), mt::AnomalyError, "anomaly", "log#", "NaN at [1]", "[3]", "mul#", "leaf [3]");
  CHECK_THROWS_MSG(mt::exp(h * 400.0), mt::AnomalyError, "exp#", "inf at [0]");
  // Infinities an op was asked to write, or that came in, are not anomalies.
  const Tensor blocked = mt::masked_fill(h, h < 0.0, -kInf);
  const Tensor shifted = blocked + 1.0;
  CHECK(std::isinf(shifted.at<float>({1})));
  CHECK(mt::is_anomaly_enabled());
}

TEST_CASE("bad input: anomaly mode names the backward that made a NaN or Inf") {
  const Tensor w = mt::tensor({0.0, 4.0}).requires_grad_();
  {
    mt::DetectAnomalyGuard anomaly;
    const Tensor y = mt::sqrt(w).sum();  // d sqrt(x) / dx = 1 / (2 sqrt x): inf at 0
    CHECK_THROWS_MSG(y.backward(), mt::AnomalyError, "SqrtBackward", "inf at [0]", "input 0", "[2]", "sqrt#",
                     "leaf [2]");
  }
  // Without anomaly mode the inf arrives silently, as in PyTorch.
  mt::sqrt(w).sum().backward();
  CHECK(std::isinf(w.grad().at<float>({0})));
  CHECK_FALSE(mt::is_anomaly_enabled());
}

TEST_CASE("bad input: NaN in the input data, found by anomaly mode at the first op that uses it") {
  const Tensor w = mt::ones({2}).requires_grad_();
  mt::set_detect_anomaly(true);
  const Tensor x = mt::tensor({1.0, kNaN});  // making it is not an error, using it is
  CHECK_THROWS_MSG(w * x, mt::AnomalyError, "input 1 of mul", "already holds NaN at [1]", "data [2]", "has_nonfinite");
  mt::set_detect_anomaly(false);
  // Without it, NaN travels like in PyTorch.
  CHECK(std::isnan((w * x).sum().item()));
}

TEST_CASE("bad input: gradcheck on float32 inputs") {
  const Tensor a = mt::ones({2}).requires_grad_();
  CHECK_THROWS_MSG(mt::gradcheck([](const mt::TensorList& in) { return in[0] * 2.0; }, {a}), mt::DtypeError,
                   "gradcheck", "float64");
}

// ---- modules, losses, optimizers, data ----------------------------------------------------

TEST_CASE("bad input: Linear given the wrong number of input features") {
  mt::nn::Linear fc(3, 2);
  CHECK_THROWS_MSG(fc.forward(mt::ones({4, 5})), mt::ShapeError, "linear", "[4, 5]", "3");
}

TEST_CASE("bad input: Linear given int64 input") {
  mt::nn::Linear fc(3, 2);
  CHECK_THROWS_MSG(fc.forward(mt::ones({4, 3}, mt::kInt64)), mt::DtypeError, "linear", "int64");
}

TEST_CASE("bad input: Embedding given an out-of-range or a float index") {
  mt::nn::Embedding emb(5, 2);
  CHECK_THROWS_MSG(emb.forward(mt::tensor({1, 5}, mt::kInt64)), mt::IndexError, "Embedding", "index 5", "0 .. 4");
  CHECK_THROWS_MSG(emb.forward(mt::tensor({1, -1}, mt::kInt64)), mt::IndexError, "Embedding", "index -1");
  CHECK_THROWS_MSG(emb.forward(mt::tensor({1.0, 2.0})), mt::DtypeError, "Embedding", "int64", ".to(kInt64)");
}

TEST_CASE("bad input: MultiheadAttention with embed_dim not divisible by num_heads") {
  CHECK_THROWS_MSG(mt::nn::MultiheadAttention(10, 3), mt::ValueError, "embed_dim 10", "num_heads 3");
}

TEST_CASE("bad input: LayerNorm over a shape the input does not end with") {
  mt::nn::LayerNorm ln({4});
  CHECK_THROWS_MSG(ln.forward(mt::ones({2, 3})), mt::ShapeError, "layer_norm", "[2, 3]", "[4]");
}

TEST_CASE("bad input: a dropout probability outside [0, 1]") {
  CHECK_THROWS_MSG(mt::nn::Dropout(1.5), mt::ValueError, "Dropout", "[0, 1]", "1.5");
}

TEST_CASE("bad input: an optimizer without a learning rate") {
  mt::nn::Linear fc(3, 2);
  CHECK_THROWS_MSG(mt::optim::SGD(fc.parameters(), {}), mt::ValueError, "SGD", "lr");
}

TEST_CASE("bad input: a float padding mask where MeanPool expects a bool one") {
  mt::nn::MeanPool pool;
  CHECK_THROWS_MSG(pool.forward(mt::ones({2, 3, 4}), mt::ones({2, 3})), mt::ShapeError, "MeanPool", "bool [N, L]",
                   "float32 [2, 3]");
}

// ---- masks --------------------------------------------------------------------------------

TEST_CASE("bad input: a float tensor where a bool mask is expected, and the reverse") {
  CHECK_THROWS_MSG(mt::Mask::keep(mt::ones({2, 2})), mt::DtypeError, "Mask::keep", "bool", "additive");
  CHECK_THROWS_MSG(mt::Mask::block(mt::ones({2, 2})), mt::DtypeError, "Mask::block", "bool");
  CHECK_THROWS_MSG(mt::Mask::additive(mt::ones({2, 2}) > 0.0), mt::DtypeError, "Mask::additive", "float");
}

TEST_CASE("bad input: key_padding lengths outside [0, S] or of the wrong dtype") {
  CHECK_THROWS_MSG(mt::Mask::key_padding(mt::tensor({2, 7}, mt::kInt64), 5), mt::ValueError, "length 7", "[0, 5]");
  CHECK_THROWS_MSG(mt::Mask::key_padding(mt::tensor({2, -1}, mt::kInt64), 5), mt::ValueError, "length -1");
  CHECK_THROWS_MSG(mt::Mask::key_padding(mt::tensor({2.0, 3.0}), 5), mt::DtypeError, "int64");
}

TEST_CASE("bad input: a causal mask with a negative length") {
  CHECK_THROWS_MSG(mt::Mask::causal(-1), mt::ValueError, "Mask::causal", "-1");
}

TEST_CASE("bad input: MultiheadAttention masks of the wrong dtype") {
  mt::nn::MultiheadAttention mha(4, 2, {.batch_first = true});
  const Tensor x = mt::ones({2, 3, 4});
  CHECK_THROWS_MSG(mha.forward(x, x, x, {.key_padding_mask = mt::zeros({2, 3}, mt::kInt64)}), mt::DtypeError,
                   "key_padding_mask", "bool");
}

TEST_CASE("bad input: every key of every query masked: zero output, zero gradient, no NaN") {
  mt::manual_seed(4);
  mt::nn::MultiheadAttention mha(4, 2, {.batch_first = true});
  const Tensor x = mt::randn({2, 3, 4}).requires_grad_();
  const Tensor padded = mt::ones({2, 3}, mt::kBool);  // PyTorch polarity: every key is padding
  auto [out, w] = mha.forward(x, x, x, {.key_padding_mask = padded});
  CHECK_FALSE(mt::has_nonfinite(out));
  CHECK_FALSE(mt::has_nonfinite(w));
  CHECK(mt::sum(mt::abs(w)).item() == 0.0);
  out.sum().backward();
  CHECK_FALSE(mt::has_nonfinite(x.grad()));
  CHECK(mt::sum(mt::abs(x.grad())).item() == 0.0);
}

// ---- checkpoints and files ----------------------------------------------------------------

TEST_CASE("bad input: loading a checkpoint that does not exist") {
  TwoLayer net;
  CHECK_THROWS_MSG(mt::nn::load(net, "/nonexistent/dir/model.npz"), mt::IoError, "load_npz", "/nonexistent/dir/model.npz",
                   "No such file");
  CHECK_THROWS_MSG(mt::load_npy("/nonexistent.npy"), mt::IoError, "load_npy", "cannot open");
}

TEST_CASE("bad input: a checkpoint with an integer array for a float parameter changes nothing") {
  TempPath file("dtype.npz");
  TwoLayer net;
  auto state = net.state_dict();
  const Tensor before = net.fc1->weight.clone();
  for (auto& [name, t] : state) {
    if (name == "fc2.bias") t = mt::zeros(t.shape(), mt::kInt64);
  }
  mt::save_npz(state, file.path);
  CHECK_THROWS_MSG(mt::nn::load(net, file.path), mt::ValueError, "fc2.bias", "int64", "float32");
  CHECK(mt::equal(net.fc1->weight, before));
}

TEST_CASE("bad input: a .npy whose header claims more data than the file holds, or an absurd shape") {
  TempPath file("huge.npy");
  std::string bytes = mt::encode_npy(mt::ones({4}));
  bytes.resize(bytes.size() - 3);  // truncated
  CHECK_THROWS_MSG(mt::decode_npy(bytes), mt::IoError, "truncated", "[4]");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }";
  header.resize(118, ' ');
  header += '\n';
  std::string npy = std::string("\x93NUMPY\x01\x00", 8) + std::string(1, char(header.size() & 0xff)) +
                    std::string(1, char(header.size() >> 8)) + header;
  write_bytes(file.path, npy);
  CHECK_THROWS_MSG(mt::load_npy(file.path), mt::IoError, file.path.c_str(), "impossible",
                   "[4611686018427387904, 4611686018427387904]");
}

TEST_CASE("bad input: a .npy of a dtype microtorch does not hold") {
  std::string header = "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }";
  header.resize(118, ' ');
  header += '\n';
  const std::string npy = std::string("\x93NUMPY\x01\x00", 8) + std::string(1, char(header.size())) + std::string(1, '\0') +
                          header + std::string(4, '\0');
  CHECK_THROWS_MSG(mt::decode_npy(npy, "h.npy"), mt::IoError, "h.npy", "unsupported dtype '<i2'", "astype");
}

TEST_CASE("bad input: a .npz whose member is a text file, not an array") {
  TempPath file("text.npz");
  mt::save_npz({{"w", mt::ones({2})}}, file.path);
  std::ifstream in(file.path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Overwrite the member's .npy magic (inside the stored data) without touching the zip
  // structure: the CRC no longer matches, so the archive is refused before the array is read.
  const auto at = bytes.find("\x93NUMPY");
  REQUIRE(at != std::string::npos);
  bytes.replace(at, 6, "hello!");
  CHECK_THROWS_MSG(mt::decode_npz(bytes, "text.npz"), mt::IoError, "text.npz", "w.npy");
}

// ---- lowering -----------------------------------------------------------------------------

TEST_CASE("bad input: tracing a function whose output does not depend on its input or a parameter") {
  CHECK_THROWS_MSG(mt::lower::trace([](const Tensor&) { return mt::ones({2}) * 2.0; }, mt::ones({2})),
                   mt::ValueError, "trace", "does not depend");
}

TEST_CASE("bad input: loading a lowered graph that is missing, not JSON, or not a microtorch graph") {
  TempPath json("graph.json");
  TempPath npz("graph.npz");
  const std::string prefix = json.path.substr(0, json.path.size() - 5);
  const std::string json_path = prefix + ".json";
  CHECK_THROWS_MSG(mt::lower::load(prefix), mt::IoError, "load", json_path.c_str());
  write_bytes(json.path, "{\"format\": ");
  CHECK_THROWS_MSG(mt::lower::load(prefix), mt::IoError, "not valid JSON");
  write_bytes(json.path, "{\"format\": \"something-else\", \"version\": 1}");
  mt::save_npz({}, npz.path);
  CHECK_THROWS_MSG(mt::lower::load(prefix), mt::Error, "not a microtorch graph");
}
