// Convolution, pooling and batch normalisation: PyTorch 1.13 oracles (tools/gen_cnn_fixtures.py
// writes tests/fixtures/cnn_<case>.npz), gradcheck in float64 at the edges of stride, padding,
// dilation and groups, the recorded attributes the lowering reads, and the errors.
//
// An oracle case builds the microtorch module with the PyTorch one's hyperparameters, checks
// that the state-dict keys are PyTorch's, loads its state dict with strict = true (buffers
// and the int64 num_batches_tracked included), runs the steps (training mode for BatchNorm's
// training cases, whose running statistics are compared after them), compares the last
// output and the gradients of sum(out * w) for every parameter and the input.
// Tolerance: rtol 1e-5, atol 2e-6 (float32; sums in a different order than PyTorch's).
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "microtorch/nn.hpp"

namespace nn = microtorch::nn;

namespace {

constexpr double kRtol = 1e-5, kAtol = 2e-6;

mt::Tensor cnn(const std::string& c, const std::string& member) { return fixture("cnn_" + c + "__" + member); }

nn::NamedTensors members(const std::string& c, const std::string& prefix) {
  nn::NamedTensors out;
  for (const auto& [m, t] : fixture_case("cnn_" + c)) {
    if (m.compare(0, prefix.size(), prefix) == 0) out.emplace_back(m.substr(prefix.size()), t.clone());
  }
  return out;
}

std::vector<std::string> keys_of(const nn::NamedTensors& ts) {
  std::vector<std::string> k;
  for (const auto& [n, _] : ts) k.push_back(n);
  std::sort(k.begin(), k.end());
  return k;
}

void check_member(const mt::Tensor& actual, const std::string& c, const std::string& member) {
  INFO("fixture cnn_", c, "__", member);
  const mt::Tensor expected = cnn(c, member);
  CHECK(actual.dtype() == expected.dtype());
  CHECK_CLOSE(actual, expected, kRtol, kAtol);
}

void check_oracle(const std::string& c, nn::Module& module) {
  const nn::NamedTensors state = members(c, "param__");
  CHECK(keys_of(state) == keys_of(module.state_dict()));
  module.load_state_dict(state, /*strict=*/true);
  const bool train = cnn(c, "train").item<bool>();
  module.train(train);
  std::vector<std::string> steps;
  if (fixture("cnn_" + c + "__x", false).defined()) {
    steps.push_back("x");
  } else {
    for (int i = 0; fixture("cnn_" + c + "__x" + std::to_string(i), false).defined(); ++i) {
      steps.push_back("x" + std::to_string(i));
    }
  }
  REQUIRE(!steps.empty());
  {
    mt::NoGradGuard no_grad;
    for (std::size_t i = 0; i + 1 < steps.size(); ++i) module.forward(cnn(c, steps[i]));
  }
  mt::Tensor x = cnn(c, steps.back()).requires_grad_(true);
  const mt::Tensor out = module.forward(x);
  check_member(out, c, "out");
  mt::sum(out * cnn(c, "w")).backward();
  for (const auto& [name, p] : module.named_parameters()) {
    INFO("gradient of ", name);
    REQUIRE(p.grad().defined());
    check_member(p.grad(), c, "grad__" + name);
  }
  check_member(x.grad(), c, "grad_x");
  for (const auto& [name, b] : module.named_buffers()) {
    INFO("buffer after the steps: ", name);
    check_member(b, c, "after__" + name);
  }
}

template <class M, class... Args>
void oracle(const std::string& c, Args&&... args) {
  M m(std::forward<Args>(args)...);
  check_oracle(c, m);
}

std::shared_ptr<nn::Sequential> sensor_net() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv1d>(3, 16, 5, nn::Conv1dOptions{.stride = 2, .padding = 2}),
      std::make_shared<nn::BatchNorm1d>(16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Conv1d>(16, 16, 3, nn::Conv1dOptions{.padding = 1, .groups = 16}),
      std::make_shared<nn::Conv1d>(16, 8, 1), std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool1d>(2),
      std::make_shared<nn::AdaptiveAvgPool1d>(1), std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(8, 4)});
}

std::shared_ptr<nn::Sequential> dscnn_block() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(8, 8, 3, nn::Conv2dOptions{.padding = 1, .groups = 8}),
      std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Conv2d>(8, 8, 1),
      std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::ReLU>(), std::make_shared<nn::AvgPool2d>(2),
      std::make_shared<nn::Flatten>()});
}

/// gradcheck of f at float64 inputs.
bool grad_ok(const std::function<mt::Tensor(const mt::TensorList&)>& f, const mt::TensorList& inputs) {
  return mt::gradcheck(f, inputs);
}

}  // namespace

TEST_CASE("conv: Conv1d matches nn.Conv1d at the edges of stride, padding, dilation and groups") {
  using O = nn::Conv1dOptions;
  SUBCASE("basic") { oracle<nn::Conv1d>("conv1d_basic", 3, 4, 3); }
  SUBCASE("stride 2, padding 2") { oracle<nn::Conv1d>("conv1d_stride_pad", 3, 16, 5, O{.stride = 2, .padding = 2}); }
  SUBCASE("dilation 2") { oracle<nn::Conv1d>("conv1d_dilation", 2, 3, 3, O{.padding = 1, .dilation = 2}); }
  SUBCASE("two groups") { oracle<nn::Conv1d>("conv1d_groups", 4, 6, 3, O{.padding = 1, .groups = 2}); }
  SUBCASE("depthwise") { oracle<nn::Conv1d>("conv1d_depthwise", 4, 4, 3, O{.padding = 1, .groups = 4}); }
  SUBCASE("depthwise with a channel multiplier, stride and dilation") {
    oracle<nn::Conv1d>("conv1d_depthwise_multiplier", 3, 6, 4, O{.stride = 2, .padding = 1, .dilation = 2, .groups = 3});
  }
  SUBCASE("pointwise without bias") { oracle<nn::Conv1d>("conv1d_pointwise_no_bias", 4, 5, 1, O{.bias = false}); }
  SUBCASE("same with an even kernel (the extra zero after)") {
    oracle<nn::Conv1d>("conv1d_same_even_kernel", 2, 3, 4, O{.padding = "same"});
  }
  SUBCASE("same, dilated") { oracle<nn::Conv1d>("conv1d_same_dilated", 2, 3, 3, O{.padding = "same", .dilation = 3}); }
  SUBCASE("valid, unbatched input") { oracle<nn::Conv1d>("conv1d_valid_unbatched", 3, 2, 3, O{.padding = "valid"}); }
  SUBCASE("a kernel filling the padded input") { oracle<nn::Conv1d>("conv1d_kernel_fills_padded", 1, 2, 7, O{.padding = 1}); }
  SUBCASE("stride larger than the kernel") { oracle<nn::Conv1d>("conv1d_stride_over_kernel", 2, 2, 2, O{.stride = 3}); }
  SUBCASE("padding larger than the kernel") {
    oracle<nn::Conv1d>("conv1d_wide_padding", 2, 3, 2, O{.stride = 2, .padding = 3});
  }
}

TEST_CASE("conv: Conv2d matches nn.Conv2d: rectangular sizes, depthwise, pointwise, groups, same") {
  using O = nn::Conv2dOptions;
  SUBCASE("basic") { oracle<nn::Conv2d>("conv2d_basic", 3, 4, 3); }
  SUBCASE("rectangular kernel, stride, padding and dilation") {
    oracle<nn::Conv2d>("conv2d_rectangular", 2, 3, mt::Sizes2d{3, 2},
                       O{.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}});
  }
  SUBCASE("depthwise 3x3") { oracle<nn::Conv2d>("conv2d_depthwise", 4, 4, 3, O{.padding = 1, .groups = 4}); }
  SUBCASE("depthwise, stride 2, multiplier 2") {
    oracle<nn::Conv2d>("conv2d_depthwise_stride_multiplier", 4, 8, 3, O{.stride = 2, .padding = 1, .groups = 4});
  }
  SUBCASE("pointwise") { oracle<nn::Conv2d>("conv2d_pointwise", 4, 6, 1); }
  SUBCASE("two groups, padding {0, 1}") { oracle<nn::Conv2d>("conv2d_groups", 6, 4, 3, O{.padding = {0, 1}, .groups = 2}); }
  SUBCASE("same with a 2x3 kernel") { oracle<nn::Conv2d>("conv2d_same", 3, 2, mt::Sizes2d{2, 3}, O{.padding = "same"}); }
  SUBCASE("unbatched input") { oracle<nn::Conv2d>("conv2d_unbatched", 2, 3, 3, O{.padding = 1}); }
}

TEST_CASE("conv: pooling layers and Flatten match torch.nn") {
  SUBCASE("MaxPool1d") { oracle<nn::MaxPool1d>("maxpool1d", 3, nn::MaxPool1dOptions{.stride = 2, .padding = 1}); }
  SUBCASE("MaxPool1d, stride defaulting to the kernel") { oracle<nn::MaxPool1d>("maxpool1d_default_stride", 2); }
  SUBCASE("MaxPool2d") {
    oracle<nn::MaxPool2d>("maxpool2d", mt::Sizes2d{3, 2}, nn::MaxPool2dOptions{.stride = {2, 1}, .padding = {1, 1}});
  }
  SUBCASE("MaxPool2d, unbatched") { oracle<nn::MaxPool2d>("maxpool2d_unbatched", 2); }
  SUBCASE("AvgPool1d") { oracle<nn::AvgPool1d>("avgpool1d", 3, nn::AvgPool1dOptions{.stride = 2, .padding = 1}); }
  SUBCASE("AvgPool1d without the padding in the count") {
    oracle<nn::AvgPool1d>("avgpool1d_exclude_pad", 3,
                          nn::AvgPool1dOptions{.stride = 2, .padding = 1, .count_include_pad = false});
  }
  SUBCASE("AvgPool2d") { oracle<nn::AvgPool2d>("avgpool2d", 3, nn::AvgPool2dOptions{.stride = 2, .padding = 1}); }
  SUBCASE("AvgPool2d without the padding in the count") {
    oracle<nn::AvgPool2d>("avgpool2d_exclude_pad", mt::Sizes2d{2, 3},
                          nn::AvgPool2dOptions{.stride = {1, 2}, .padding = {1, 1}, .count_include_pad = false});
  }
  SUBCASE("AdaptiveAvgPool1d, overlapping windows") { oracle<nn::AdaptiveAvgPool1d>("adaptive_avgpool1d", 3); }
  SUBCASE("AdaptiveAvgPool1d, global") { oracle<nn::AdaptiveAvgPool1d>("adaptive_avgpool1d_global", 1); }
  SUBCASE("AdaptiveAvgPool2d") { oracle<nn::AdaptiveAvgPool2d>("adaptive_avgpool2d", mt::Sizes2d{2, 3}); }
  SUBCASE("AdaptiveAvgPool2d larger than its input") { oracle<nn::AdaptiveAvgPool2d>("adaptive_avgpool2d_larger", 4); }
  SUBCASE("Flatten") { oracle<nn::Flatten>("flatten"); }
}

TEST_CASE("conv: BatchNorm matches torch.nn, running statistics after training steps included") {
  SUBCASE("BatchNorm1d on [N, C], three steps") { oracle<nn::BatchNorm1d>("bn1d_train_2d", 4); }
  SUBCASE("BatchNorm1d on [N, C, L], momentum 0.2") {
    oracle<nn::BatchNorm1d>("bn1d_train_3d_momentum", 3, nn::BatchNormOptions{.momentum = 0.2});
  }
  SUBCASE("BatchNorm2d, three steps") { oracle<nn::BatchNorm2d>("bn2d_train", 3); }
  SUBCASE("BatchNorm2d without affine") {
    oracle<nn::BatchNorm2d>("bn2d_train_no_affine", 3, nn::BatchNormOptions{.affine = false});
  }
  SUBCASE("BatchNorm1d, cumulative average (momentum None)") {
    oracle<nn::BatchNorm1d>("bn1d_train_cumulative", 4, nn::BatchNormOptions{.momentum = std::nullopt});
  }
  SUBCASE("BatchNorm2d in eval, eps 1e-3") {
    oracle<nn::BatchNorm2d>("bn2d_eval", 3, nn::BatchNormOptions{.eps = 1e-3});
  }
  SUBCASE("BatchNorm1d in eval on [N, C, L]") { oracle<nn::BatchNorm1d>("bn1d_eval_3d", 3); }
  SUBCASE("BatchNorm2d without running statistics: batch statistics in eval too") {
    oracle<nn::BatchNorm2d>("bn2d_no_tracking_eval", 3, nn::BatchNormOptions{.track_running_stats = false});
  }
}

TEST_CASE("conv: a sensor network and a DS-CNN block match PyTorch in eval and in training") {
  SUBCASE("sensor network, eval") { check_oracle("sensor_net_eval", *sensor_net()); }
  SUBCASE("sensor network, two training steps") { check_oracle("sensor_net_train", *sensor_net()); }
  SUBCASE("DS-CNN block, two training steps") { check_oracle("dscnn_block_train", *dscnn_block()); }
}

TEST_CASE("conv: gradcheck of conv1d and conv2d in float64 at the edges") {
  mt::manual_seed(3);
  struct C1 {
    std::int64_t c_in, c_out, k, l, stride;
    mt::ConvPadding padding;
    std::int64_t dilation, groups;
  };
  const std::vector<C1> cases1{{2, 3, 3, 7, 1, 0, 1, 1},      {2, 3, 3, 8, 2, 1, 1, 1},   {2, 2, 3, 9, 1, 2, 2, 1},
                               {4, 6, 3, 6, 1, 1, 1, 2},      {3, 3, 3, 6, 2, 1, 1, 3},   {3, 6, 2, 7, 3, 3, 2, 3},
                               {2, 3, 4, 5, 1, "same", 1, 1}, {2, 2, 5, 5, 1, 2, 1, 1},   {2, 2, 1, 4, 1, 0, 1, 1},
                               {3, 3, 4, 7, 1, "same", 2, 3}, {2, 2, 2, 6, 1, "same", 1, 2}};
  for (const auto& c : cases1) {
    CAPTURE(c.k);
    CAPTURE(c.stride);
    CAPTURE(c.groups);
    auto x = rand64({2, c.c_in, c.l});
    auto w = rand64({c.c_out, c.c_in / c.groups, c.k});
    auto b = rand64({c.c_out});
    CHECK(grad_ok([&](const mt::TensorList& t) {
      return mt::conv1d(t[0], t[1], t[2], c.stride, c.padding, c.dilation, c.groups);
    }, {x, w, b}));
  }
  struct C2 {
    std::int64_t c_in, c_out;
    mt::Sizes2d k;
    std::int64_t h, w;
    mt::Sizes2d stride;
    mt::ConvPadding padding;
    mt::Sizes2d dilation;
    std::int64_t groups;
  };
  const std::vector<C2> cases2{{2, 3, 3, 5, 4, 1, 0, 1, 1},
                               {2, 2, {3, 2}, 6, 5, {2, 1}, {1, 0}, {1, 2}, 1},
                               {3, 3, 3, 5, 5, 1, 1, 1, 3},
                               {2, 4, 3, 6, 5, 2, 1, 1, 2},
                               {4, 4, 3, 5, 4, {1, 2}, {1, 1}, {2, 1}, 4},
                               {2, 3, {2, 3}, 4, 4, 1, "same", 1, 1},
                               {3, 3, {2, 2}, 4, 5, 1, "same", 1, 3},
                               {3, 3, {3, 2}, 5, 4, 1, "same", {2, 3}, 3},
                               {3, 2, 1, 3, 3, 1, 0, 1, 1}};
  for (const auto& c : cases2) {
    CAPTURE(c.groups);
    auto x = rand64({2, c.c_in, c.h, c.w});
    auto w = rand64({c.c_out, c.c_in / c.groups, c.k.h, c.k.w});
    auto b = rand64({c.c_out});
    CHECK(grad_ok([&](const mt::TensorList& t) {
      return mt::conv2d(t[0], t[1], t[2], c.stride, c.padding, c.dilation, c.groups);
    }, {x, w, b}));
  }
  SUBCASE("without bias, unbatched") {
    auto x = rand64({2, 6});
    auto w = rand64({3, 2, 3});
    CHECK(grad_ok([](const mt::TensorList& t) { return mt::conv1d(t[0], t[1], mt::Tensor(), 1, 1); }, {x, w}));
  }
}

TEST_CASE("conv: gradcheck of pooling and batch_norm in float64") {
  mt::manual_seed(4);
  auto x1 = rand64({2, 3, 9});
  auto x2 = rand64({2, 2, 6, 5});
  CHECK(grad_ok([](const mt::TensorList& t) { return mt::max_pool1d(t[0], 3, 2, 1); }, {x1}));
  CHECK(grad_ok([](const mt::TensorList& t) { return mt::max_pool2d(t[0], {3, 2}, {2, 1}, {1, 1}); }, {x2}));
  CHECK(grad_ok([](const mt::TensorList& t) { return mt::avg_pool1d(t[0], 3, 2, 1); }, {x1}));
  CHECK(grad_ok([](const mt::TensorList& t) { return mt::avg_pool1d(t[0], 4, 3, 2, false); }, {x1}));
  CHECK(grad_ok([](const mt::TensorList& t) { return mt::avg_pool2d(t[0], 3, 2, 1, false); }, {x2}));
  CHECK(grad_ok([](const mt::TensorList& t) { return mt::adaptive_avg_pool1d(t[0], 4); }, {x1}));
  CHECK(grad_ok([](const mt::TensorList& t) { return mt::adaptive_avg_pool2d(t[0], {4, 3}); }, {x2}));
  auto w = rand64({2}), b = rand64({2});
  for (bool training : {true, false}) {
    CAPTURE(training);
    mt::Tensor rm = mt::zeros({2}, mt::kFloat64), rv = mt::ones({2}, mt::kFloat64);
    CHECK(grad_ok([&](const mt::TensorList& t) { return mt::batch_norm(t[0], rm, rv, t[1], t[2], training); },
                  {x2, w, b}));
  }
  auto x3 = rand64({5, 3});
  CHECK(grad_ok([](const mt::TensorList& t) { return mt::batch_norm(t[0], {}, {}, {}, {}, true); }, {x3}));
}

TEST_CASE("conv: the im2col path agrees with the depthwise path and across sample chunks") {
  mt::manual_seed(5);
  SUBCASE("depthwise (direct) equals each channel convolved alone (im2col + GEMM)") {
    const mt::Tensor x = mt::randn({3, 4, 9, 7}), w = mt::randn({4, 1, 3, 3}), b = mt::randn({4});
    const mt::Tensor y = mt::conv2d(x, w, b, {2, 1}, {1, 2}, {1, 2}, 4);
    mt::TensorList parts;
    for (std::int64_t c = 0; c < 4; ++c) {
      // one channel with groups = 1 goes through im2col (C_g = 1 only when groups = C_in > 1 ... and here C_in = 1):
      // widen it to two channels, the second with zero weights, to force the GEMM path.
      const mt::Tensor xc = mt::cat({mt::narrow(x, 1, c, 1), mt::zeros({3, 1, 9, 7})}, 1);
      const mt::Tensor wc = mt::cat({mt::narrow(w, 0, c, 1), mt::zeros({1, 1, 3, 3})}, 1);
      parts.push_back(mt::conv2d(xc, wc, mt::narrow(b, 0, c, 1), {2, 1}, {1, 2}, {1, 2}, 1));
    }
    CHECK_CLOSE(y, mt::cat(parts, 1), 1e-5, 1e-5);
  }
  SUBCASE("depthwise with the output as large as the input (one loop per sample) equals the GEMM path") {
    for (const mt::Sizes2d k : {mt::Sizes2d{3, 3}, mt::Sizes2d{2, 4}, mt::Sizes2d{1, 5}}) {
      CAPTURE(k.h);
      CAPTURE(k.w);
      const mt::Tensor x = mt::randn({3, 4, 6, 5}), w = mt::randn({4, 1, k.h, k.w}), b = mt::randn({4});
      const mt::Tensor y = mt::conv2d(x, w, b, 1, "same", {2, 1}, 4);
      mt::TensorList parts;
      for (std::int64_t c = 0; c < 4; ++c) {
        const mt::Tensor xc = mt::cat({mt::narrow(x, 1, c, 1), mt::zeros({3, 1, 6, 5})}, 1);
        const mt::Tensor wc = mt::cat({mt::narrow(w, 0, c, 1), mt::zeros({1, 1, k.h, k.w})}, 1);
        parts.push_back(mt::conv2d(xc, wc, mt::narrow(b, 0, c, 1), 1, "same", {2, 1}, 1));
      }
      CHECK_CLOSE(y, mt::cat(parts, 1), 1e-5, 1e-5);
    }
  }
  SUBCASE("a depthwise layer too large for the per-sample weight arrays (the padded-plane loops) agrees") {
    const mt::Tensor x = mt::randn({1, 80, 80, 80}), w = mt::randn({80, 1, 3, 3}), b = mt::randn({80});
    const mt::Tensor y = mt::conv2d(x, w, b, 1, 1, 1, 80);  // 9 x 80 x 80 x 80 weights: over 2^22
    const mt::Tensor part = mt::conv2d(mt::narrow(x, 1, 0, 4), mt::narrow(w, 0, 0, 4), mt::narrow(b, 0, 0, 4), 1, 1, 1, 4);
    CHECK_CLOSE(mt::narrow(y, 1, 0, 4), part, 1e-5, 1e-5);
  }
  SUBCASE("a batch whose im2col exceeds one chunk equals its samples run alone") {
    const mt::Tensor x = mt::randn({33, 16, 32, 32}), w = mt::randn({8, 16, 3, 3});
    const mt::Tensor y = mt::conv2d(x, w, {}, 1, 1);
    for (std::int64_t n : {0, 27, 28, 32}) {
      CAPTURE(n);
      CHECK_CLOSE(mt::narrow(y, 0, n, 1), mt::conv2d(mt::narrow(x, 0, n, 1), w, {}, 1, 1), 1e-5, 1e-4);
    }
  }
}

TEST_CASE("conv: the recorded ops carry PyTorch's argument names for the lowering") {
  const mt::Tensor x = mt::randn({1, 4, 10}).requires_grad_(true);
  nn::Conv1d conv(4, 4, 3, nn::Conv1dOptions{.stride = 1, .padding = "same", .dilation = 2, .groups = 4});
  const mt::Tensor y = conv.forward(x);
  const auto* node = y.grad_fn().get();
  REQUIRE(node != nullptr);
  CHECK(node->op == "conv1d");
  CHECK(std::get<mt::Shape>(*node->attr("stride")) == mt::Shape{1});
  CHECK(std::get<mt::Shape>(*node->attr("padding")) == mt::Shape{2});
  CHECK(std::get<mt::Shape>(*node->attr("padding_end")) == mt::Shape{2});
  CHECK(std::get<mt::Shape>(*node->attr("dilation")) == mt::Shape{2});
  CHECK(std::get<std::int64_t>(*node->attr("groups")) == 4);
  CHECK(node->inputs.size() == 3);

  nn::Conv2d conv2(2, 2, {2, 3}, nn::Conv2dOptions{.padding = "same", .bias = false});
  const mt::Tensor y2 = conv2.forward(mt::randn({1, 2, 5, 5}).requires_grad_(true));
  CHECK(y2.grad_fn()->op == "conv2d");
  CHECK(std::get<mt::Shape>(*y2.grad_fn()->attr("padding")) == mt::Shape{0, 1});
  CHECK(std::get<mt::Shape>(*y2.grad_fn()->attr("padding_end")) == mt::Shape{1, 1});
  CHECK(y2.grad_fn()->inputs.size() == 3);  // x, weight, and an empty edge for the missing bias

  nn::BatchNorm2d bn(2);
  bn.eval();
  const mt::Tensor z = bn.forward(mt::randn({2, 2, 3, 3}).requires_grad_(true));
  CHECK(z.grad_fn()->op == "batch_norm");
  CHECK(z.grad_fn()->inputs.size() == 5);  // x, running_mean, running_var, weight, bias
  CHECK(std::get<bool>(*z.grad_fn()->attr("training")) == false);
  CHECK(std::get<double>(*z.grad_fn()->attr("eps")) == 1e-5);

  const mt::Tensor p = mt::max_pool2d(mt::randn({1, 2, 4, 4}).requires_grad_(true), 2);
  CHECK(p.grad_fn()->op == "max_pool2d");
  CHECK(std::get<mt::Shape>(*p.grad_fn()->attr("stride")) == mt::Shape{2, 2});
  CHECK(std::get<mt::Shape>(*p.grad_fn()->attr("kernel_size")) == mt::Shape{2, 2});
}

TEST_CASE("conv: BatchNorm's state dict is PyTorch's, num_batches_tracked an int64 scalar") {
  nn::BatchNorm1d bn(3);
  const auto keys = keys_of(bn.state_dict());
  CHECK(keys == std::vector<std::string>{"bias", "num_batches_tracked", "running_mean", "running_var", "weight"});
  CHECK(bn.num_batches_tracked.dtype() == mt::kInt64);
  CHECK(bn.num_batches_tracked.dim() == 0);
  CHECK(bn.named_parameters().size() == 2);
  bn.forward(mt::randn({4, 3}));
  bn.forward(mt::randn({4, 3}));
  CHECK(bn.num_batches_tracked.item<std::int64_t>() == 2);
  bn.eval();
  const mt::Tensor before = bn.running_mean.clone();
  bn.forward(mt::randn({4, 3}));
  CHECK(mt::equal(before, bn.running_mean));  // eval leaves the statistics alone
  CHECK(bn.num_batches_tracked.item<std::int64_t>() == 2);
  nn::BatchNorm2d plain(3, nn::BatchNormOptions{.affine = false, .track_running_stats = false});
  CHECK(plain.state_dict().empty());
}

TEST_CASE("bad input: convolutions with wrong ranks, channels, groups, kernels or strides") {
  const mt::Tensor x = mt::randn({2, 4, 10}), w = mt::randn({6, 4, 3});
  CHECK_THROWS_MSG(mt::conv1d(mt::randn({2, 4, 5, 5}), w), mt::ShapeError, "conv1d", "[2, 4, 5, 5]", "[N, C_in, L]");
  CHECK_THROWS_MSG(mt::conv1d(x, mt::randn({6, 4})), mt::ShapeError, "conv1d", "weight [6, 4]", "[C_out, C_in / groups, K]");
  CHECK_THROWS_MSG(mt::conv1d(x, mt::randn({6, 3, 3})), mt::ShapeError, "conv1d", "[2, 4, 10]", "4 channels",
                   "weight [6, 3, 3]", "expects 3");
  CHECK_THROWS_MSG(mt::conv1d(x, mt::randn({5, 2, 3}), {}, 1, 0, 1, 2), mt::ShapeError, "5 output channels",
                   "groups=2");
  CHECK_THROWS_MSG(mt::conv1d(x, mt::randn({6, 4, 13}), {}, 1, 1), mt::ShapeError, "conv1d", "kernel spans 13",
                   "padded input's 12", "pad the input");
  CHECK_THROWS_MSG(mt::conv1d(x, w, {}, 1, 0, 6), mt::ShapeError, "kernel spans 13", "dilation 6");
  CHECK_THROWS_MSG(mt::conv1d(x, w, {}, 0), mt::ValueError, "conv1d", "stride must be positive", "0");
  CHECK_THROWS_MSG(mt::conv1d(x, w, {}, 1, -1), mt::ValueError, "padding must be >= 0");
  CHECK_THROWS_MSG(mt::conv1d(x, w, {}, 1, 0, 0), mt::ValueError, "dilation must be positive");
  CHECK_THROWS_MSG(mt::conv1d(x, w, {}, 2, "same"), mt::ValueError, "\"same\" needs stride 1");
  CHECK_THROWS_MSG(mt::conv1d(x, w, {}, 1, "full"), mt::ValueError, "\"same\", \"valid\" or sizes", "full");
  CHECK_THROWS_MSG(mt::conv1d(x, w, mt::randn({5})), mt::ShapeError, "bias [5] must be [6]");
  CHECK_THROWS_MSG(mt::conv1d(x.to(mt::kFloat64), w), mt::DtypeError, "conv1d", "float64", "float32");
  CHECK_THROWS_MSG(mt::conv2d(mt::randn({2, 3, 4, 6}), mt::randn({2, 3, 5, 5})), mt::ShapeError, "conv2d",
                   "kernel spans 5", "height");
  CHECK_THROWS_MSG(mt::conv2d(mt::randn({2, 3, 8, 8}), mt::randn({2, 3, 3, 3}), {}, {1, 0}), mt::ValueError,
                   "stride must be positive", "[1, 0]");
  CHECK_THROWS_MSG(nn::Conv1d(4, 6, 3, nn::Conv1dOptions{.groups = 4}), mt::ValueError, "Conv1d", "groups=4",
                   "out_channels=6");
  CHECK_THROWS_MSG(nn::Conv2d(3, 6, 3, nn::Conv2dOptions{.groups = 2}), mt::ValueError, "groups=2", "in_channels=3");
  CHECK_THROWS_MSG(nn::Conv1d(4, 6, 0), mt::ValueError, "must be positive");
  CHECK_THROWS_MSG(nn::Conv2d(4, 6, 3, nn::Conv2dOptions{.stride = 2, .padding = "same"}), mt::ValueError,
                   "\"same\" needs stride 1");
  nn::Conv2d conv(3, 8, 3);
  CHECK_THROWS_MSG(conv.forward(mt::randn({2, 4, 8, 8})), mt::ShapeError, "conv2d", "4 channels", "expects 3");
}

TEST_CASE("bad input: pooling and BatchNorm with wrong ranks, sizes or batches") {
  CHECK_THROWS_MSG(mt::max_pool1d(mt::randn({2, 3, 4, 5}), 2), mt::ShapeError, "max_pool1d", "[2, 3, 4, 5]");
  CHECK_THROWS_MSG(mt::max_pool2d(mt::randn({2, 3, 4}), 2, 2, 2), mt::ValueError, "max_pool2d", "at most half");
  CHECK_THROWS_MSG(mt::avg_pool1d(mt::randn({2, 3, 4}), 6), mt::ShapeError, "avg_pool1d", "kernel 6 is larger",
                   "padded input 4");
  CHECK_THROWS_MSG(mt::avg_pool1d(mt::randn({2, 3, 4}), 2, -1), mt::ValueError, "stride must be positive");
  CHECK_THROWS_MSG(mt::max_pool1d(mt::randn({2, 3, 4}), 0), mt::ValueError, "kernel_size must be positive");
  CHECK_THROWS_MSG(mt::adaptive_avg_pool2d(mt::randn({2, 3, 4, 4}), {0, 2}), mt::ValueError, "output_size must be positive");
  CHECK_THROWS_MSG(mt::max_pool1d(mt::randint(0, 3, {2, 3, 4}), 2), mt::DtypeError, "max_pool1d", "int64");
  nn::BatchNorm2d bn2(3);
  CHECK_THROWS_MSG(bn2.forward(mt::randn({2, 3, 4})), mt::ShapeError, "BatchNorm2d", "[2, 3, 4]", "BatchNorm1d");
  nn::BatchNorm1d bn1(3);
  CHECK_THROWS_MSG(bn1.forward(mt::randn({2, 3, 4, 4})), mt::ShapeError, "BatchNorm1d", "[N, C] or [N, C, L]");
  CHECK_THROWS_MSG(bn1.forward(mt::randn({2, 4})), mt::ShapeError, "batch_norm", "[3]", "[2, 4]", "num_features=4");
  CHECK_THROWS_MSG(bn1.forward(mt::randn({1, 3})), mt::ValueError, "more than one value per channel", "eval()");
  CHECK(bn1.num_batches_tracked.item<std::int64_t>() == 0);  // a refused batch changes nothing
  CHECK(mt::equal(bn1.running_mean, mt::zeros({3})));
  bn1.eval();
  CHECK(bn1.forward(mt::randn({1, 3})).shape() == mt::Shape{1, 3});  // eval uses the running statistics
  CHECK_THROWS_MSG(nn::BatchNorm1d(0), mt::ValueError, "num_features must be positive");
}
