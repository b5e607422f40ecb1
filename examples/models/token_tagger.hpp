// examples/models/token_tagger.hpp — a per-token classifier on a 2-layer pre-LN transformer
// encoder, the C++ twin of tools/torch_lowering_models.py's TokenTagger (same parameter
// names, so the PyTorch-trained state dict tests/fixtures/lower_token_tagger.npz loads
// unchanged):
//
//   ids [N, 12] (vocabulary 8) -> Embedding(8, 32) + learned positions
//     -> TransformerEncoder: 2 layers, d_model 32, 4 heads, feed-forward 64, GELU, pre-LN
//        (norm_first), and a final LayerNorm
//     -> head Linear(32, 4) per token: [N, 12, 4]
//
// Trained to tell, per token, how often its token occurs in the sequence (1, 2, 3, 4+).
#pragma once

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

namespace token_tagger {

namespace mt = microtorch;
namespace nn = microtorch::nn;

constexpr std::int64_t kVocab = 8, kLength = 12, kModel = 32, kHeads = 4, kLayers = 2, kClasses = 4;

struct TokenTagger : nn::Module {
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::LearnedPositionalEncoding> pos;
  std::shared_ptr<nn::TransformerEncoder> encoder;
  std::shared_ptr<nn::Linear> head;

  TokenTagger() {
    embed = register_module("embed", std::make_shared<nn::Embedding>(kVocab, kModel));
    pos = register_module("pos", std::make_shared<nn::LearnedPositionalEncoding>(kModel, kLength));
    nn::TransformerEncoderLayerOptions o;
    o.dim_feedforward = 2 * kModel;
    o.activation = "gelu";
    o.batch_first = true;
    o.norm_first = true;
    encoder = register_module("encoder", std::make_shared<nn::TransformerEncoder>(kModel, kHeads, kLayers, o, true));
    head = register_module("head", std::make_shared<nn::Linear>(kModel, kClasses));
  }
  mt::Tensor forward(const mt::Tensor& ids) override {  // ids int64 [N, 12] -> logits [N, 12, 4]
    return head->forward(encoder->forward(pos->forward(embed->forward(ids))));
  }
  std::string type_name() const override { return "TokenTagger"; }
};

}  // namespace token_tagger
