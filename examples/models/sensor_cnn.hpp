// examples/models/sensor_cnn.hpp — a Conv1d feature extractor in front of self-attention for
// 3-axis sensor windows, the C++ twin of tools/torch_sensor_model.py's SensorCNN (same
// parameter names, so the PyTorch-trained state dict tests/fixtures/lower_sensor_cnn.npz
// loads with strict = true); examples/sensor_pipeline.cpp trains it in microtorch:
//
//   x [N, 3, 128] -> relu(bn(conv(x)))                 Conv1d(3, 16, 5, stride 2, padding 2) -> [N, 16, 64]
//     -> relu(pointwise(depthwise(h)))                 Conv1d(16, 16, 3, padding 1, groups 16), Conv1d(16, 32, 1)
//     -> pool(h).transpose(1, 2)                       MaxPool1d(2) -> [N, 32 steps, 32 channels]
//     -> encoder                                       post-LN TransformerEncoderLayer(32, 4 heads, ff 64, ReLU)
//     -> head(mean over time)                          Linear(32, classes)
#pragma once

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

namespace sensor_cnn {

namespace mt = microtorch;
namespace nn = microtorch::nn;

constexpr std::int64_t kAxes = 3, kWindow = 128, kStem = 16, kModel = 32, kHeads = 4, kFeedForward = 64;

struct SensorCNN : nn::Module {
  std::shared_ptr<nn::Conv1d> conv, depthwise, pointwise;
  std::shared_ptr<nn::BatchNorm1d> bn;
  std::shared_ptr<nn::MaxPool1d> pool;
  std::shared_ptr<nn::TransformerEncoderLayer> encoder;
  std::shared_ptr<nn::Linear> head;

  explicit SensorCNN(std::int64_t classes) {
    conv = register_module("conv", std::make_shared<nn::Conv1d>(kAxes, kStem, 5, nn::Conv1dOptions{.stride = 2, .padding = 2}));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(kStem));
    depthwise = register_module("depthwise", std::make_shared<nn::Conv1d>(
                                                 kStem, kStem, 3, nn::Conv1dOptions{.padding = 1, .groups = kStem}));
    pointwise = register_module("pointwise", std::make_shared<nn::Conv1d>(kStem, kModel, 1));
    pool = register_module("pool", std::make_shared<nn::MaxPool1d>(2));
    encoder = register_module("encoder", std::make_shared<nn::TransformerEncoderLayer>(
                                             kModel, kHeads,
                                             nn::TransformerEncoderLayerOptions{
                                                 .dim_feedforward = kFeedForward, .dropout = 0.0, .batch_first = true}));
    head = register_module("head", std::make_shared<nn::Linear>(kModel, classes));
  }
  mt::Tensor forward(const mt::Tensor& x) override {  // x [N, 3, 128] -> logits [N, classes]
    mt::Tensor h = mt::relu(bn->forward(conv->forward(x)));
    h = mt::relu(pointwise->forward(depthwise->forward(h)));
    h = mt::transpose(pool->forward(h), 1, 2);  // tokens first: [N, 32, 32]
    return head->forward(mt::mean(encoder->forward(h), {1}));
  }
  std::string type_name() const override { return "SensorCNN"; }
};

}  // namespace sensor_cnn
