// examples/models/sequence_classifier.hpp — a causal attention sequence classifier, the C++
// twin of tools/torch_lowering_models.py's SequenceClassifier (same parameter names, so the
// PyTorch-trained state dict tests/fixtures/lower_sequence_classifier.npz loads unchanged):
//
//   ids [N, 16] (vocabulary 6) -> Embedding(6, 32) + learned positions
//     -> h = x + causal MultiheadAttention(32, 4, batch_first)(x)
//     -> h = h + ff2(relu(ff1(norm1(h))))                (32 -> 64 -> 32)
//     -> logits = head(norm2(h[:, -1]))                   (6 classes)
//
// Trained to name the token that occurs most often. The causal mask is a non-persistent
// buffer: not in the state dict, a constant of the lowered model.
#pragma once

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>

namespace sequence_classifier {

namespace mt = microtorch;
namespace nn = microtorch::nn;

constexpr std::int64_t kVocab = 6, kLength = 16, kModel = 32, kHeads = 4, kClasses = 6;

struct SequenceClassifier : nn::Module {
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::LearnedPositionalEncoding> pos;
  std::shared_ptr<nn::MultiheadAttention> attn;
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::Linear> ff1, ff2, head;
  mt::Tensor causal;  // [L, L] bool, true = blocked (PyTorch's attn_mask polarity)

  SequenceClassifier() {
    embed = register_module("embed", std::make_shared<nn::Embedding>(kVocab, kModel));
    pos = register_module("pos", std::make_shared<nn::LearnedPositionalEncoding>(kModel, kLength));
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(
                                       kModel, kHeads, nn::MultiheadAttentionOptions{.batch_first = true}));
    norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(mt::Shape{kModel}));
    ff1 = register_module("ff1", std::make_shared<nn::Linear>(kModel, 2 * kModel));
    ff2 = register_module("ff2", std::make_shared<nn::Linear>(2 * kModel, kModel));
    norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(mt::Shape{kModel}));
    head = register_module("head", std::make_shared<nn::Linear>(kModel, kClasses));
    const mt::Tensor i = mt::arange(kLength);
    causal = register_buffer("causal", i.unsqueeze(0) > i.unsqueeze(1), /*persistent=*/false);
  }
  mt::Tensor forward(const mt::Tensor& ids) override {  // ids int64 [N, 16] -> logits [N, 6]
    const mt::Tensor x = pos->forward(embed->forward(ids));
    const mt::Tensor h = x + std::get<0>(attn->forward(x, x, x, {.need_weights = false, .attn_mask = causal}));
    const mt::Tensor y = h + ff2->forward(mt::relu(ff1->forward(norm1->forward(h))));
    return head->forward(norm2->forward(y.select(1, -1)));
  }
  std::string type_name() const override { return "SequenceClassifier"; }
};

}  // namespace sequence_classifier
