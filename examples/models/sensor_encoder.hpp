// examples/models/sensor_encoder.hpp — a gesture classifier on raw 3-axis sensor windows with
// a 2-layer post-LN transformer encoder, the C++ twin of tools/torch_lowering_raw_inputs.py's
// SensorEncoder (same parameter names, so the PyTorch-trained state dict
// tests/fixtures/lower_sensor_encoder.npz loads unchanged):
//
//   x [N, 32, 3] (raw readings: per-window offsets up to +-1.5 per axis, bumps up to +-3,
//   axes of gains 1, 0.5, 2) -> embed Linear(3, 32) + learned positions
//     -> TransformerEncoder: 2 layers, d_model 32, 4 heads, feed-forward 64, ReLU, post-LN
//     -> mean over the 32 samples -> head Linear(32, 4): [N, 4]
//
// Trained to tell four gestures apart: a sine on x, a sine on y, a step on z, a double pulse
// on x and z.
#pragma once

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

namespace sensor_encoder {

namespace mt = microtorch;
namespace nn = microtorch::nn;

constexpr std::int64_t kWindow = 32, kAxes = 3, kModel = 32, kHeads = 4, kLayers = 2, kClasses = 4;

struct SensorEncoder : nn::Module {
  std::shared_ptr<nn::Linear> embed, head;
  std::shared_ptr<nn::LearnedPositionalEncoding> pos;
  std::shared_ptr<nn::TransformerEncoder> encoder;

  SensorEncoder() {
    embed = register_module("embed", std::make_shared<nn::Linear>(kAxes, kModel));
    pos = register_module("pos", std::make_shared<nn::LearnedPositionalEncoding>(kModel, kWindow));
    nn::TransformerEncoderLayerOptions o;
    o.dim_feedforward = 2 * kModel;
    o.dropout = 0.0;
    o.batch_first = true;
    encoder = register_module("encoder", std::make_shared<nn::TransformerEncoder>(kModel, kHeads, kLayers, o, false));
    head = register_module("head", std::make_shared<nn::Linear>(kModel, kClasses));
  }
  mt::Tensor forward(const mt::Tensor& x) override {  // x [N, 32, 3] -> logits [N, 4]
    return head->forward(mt::mean(encoder->forward(pos->forward(embed->forward(x))), {1}));
  }
  std::string type_name() const override { return "SensorEncoder"; }
};

}  // namespace sensor_encoder
