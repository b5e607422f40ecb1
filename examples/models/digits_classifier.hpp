// examples/models/digits_classifier.hpp — scikit-learn's 8x8 handwritten digits read as 8 rows
// of 8 pixels by a 3-layer pre-LN GELU transformer encoder, the C++ twin of
// tools/torch_lowering_raw_inputs.py's DigitsClassifier (same parameter names, so the
// PyTorch-trained state dict tests/fixtures/lower_digits_classifier.npz loads unchanged):
//
//   x [N, 8, 8] (pixels / 16, in [0, 1]) -> embed Linear(8, 32) + learned positions
//     -> TransformerEncoder: 3 layers, d_model 32, 4 heads, feed-forward 64, GELU, pre-LN
//        (norm_first), and a final LayerNorm
//     -> mean over the 8 rows -> head Linear(32, 10): [N, 10]
#pragma once

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

namespace digits_classifier {

namespace mt = microtorch;
namespace nn = microtorch::nn;

constexpr std::int64_t kRows = 8, kModel = 32, kHeads = 4, kLayers = 3, kClasses = 10;

struct DigitsClassifier : nn::Module {
  std::shared_ptr<nn::Linear> embed, head;
  std::shared_ptr<nn::LearnedPositionalEncoding> pos;
  std::shared_ptr<nn::TransformerEncoder> encoder;

  DigitsClassifier() {
    embed = register_module("embed", std::make_shared<nn::Linear>(kRows, kModel));
    pos = register_module("pos", std::make_shared<nn::LearnedPositionalEncoding>(kModel, kRows));
    nn::TransformerEncoderLayerOptions o;
    o.dim_feedforward = 2 * kModel;
    o.activation = "gelu";
    o.batch_first = true;
    o.norm_first = true;
    encoder = register_module("encoder", std::make_shared<nn::TransformerEncoder>(kModel, kHeads, kLayers, o, true));
    head = register_module("head", std::make_shared<nn::Linear>(kModel, kClasses));
  }
  mt::Tensor forward(const mt::Tensor& x) override {  // x [N, 8, 8] -> logits [N, 10]
    return head->forward(mt::mean(encoder->forward(pos->forward(embed->forward(x))), {1}));
  }
  std::string type_name() const override { return "DigitsClassifier"; }
};

}  // namespace digits_classifier
