// examples/pytorch_interop.cpp — a model trained in PyTorch, run and lowered by microtorch.
//
//   /usr/bin/python3 tools/torch_iris_transformer.py      # (optional) retrain in PyTorch, re-export
//   build/examples/pytorch_interop [OUTPUT_DIR]          # default interop-output
//
// tools/torch_iris_transformer.py trains the Iris transformer with torch.nn.MultiheadAttention
// and writes its state dict as examples/data/iris_transformer_torch.npz (PyTorch's names:
// embed.weight, attn.in_proj_weight, attn.out_proj.bias, ...), plus the test flowers and
// PyTorch's logits for them. Here the C++ IrisTransformer loads the state dict (strict:
// every key, shape and dtype must match), must reproduce PyTorch's logits, and is then
// lowered to int8 firmware like any microtorch-trained model.
#include <fmt/core.h>

#include <microtorch/io.hpp>
#include <microtorch/lower/emit.hpp>
#include <microtorch/lower/quantize.hpp>
#include <microtorch/nn.hpp>

#include "models/iris_transformer.hpp"

namespace mt = microtorch;
namespace lower = microtorch::lower;

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "interop-output";
  const std::string data = std::string(MICROTORCH_SOURCE_DIR) + "/examples/data/";
  iris_transformer::IrisTransformer model;
  mt::nn::load(model, data + "iris_transformer_torch.npz");
  model.eval();

  mt::Tensor x, y, torch_logits;
  for (const auto& [name, t] : mt::load_npz(data + "iris_transformer_torch_check.npz")) {
    if (name == "x") x = t;
    if (name == "y") y = t;
    if (name == "logits") torch_logits = t;
  }
  mt::NoGradGuard no_grad;
  const mt::Tensor logits = model.forward(x);
  const double diff = mt::max(mt::abs(logits - torch_logits)).item();
  const double acc = (logits.argmax(1) == y).to(mt::kFloat32).mean().item();
  fmt::print("PyTorch state dict loaded: {} parameters; max |microtorch - PyTorch| logit difference {:.2e} on {} flowers; "
             "test accuracy {:.1f}%\n",
             model.num_parameters(), diff, x.size(0), 100 * acc);

  // Lower: calibrate on the test flowers' range (the training set stays in PyTorch's script).
  const lower::Graph g = lower::trace(model, {1, 4});
  lower::QuantOptions o;
  o.activation_bits = 8;
  o.name = "iris_torch";
  const lower::Program p = lower::quantize(g, lower::calibrate(g, x), o);
  lower::Simulator sim(p);
  std::int64_t agree = 0;
  for (std::int64_t i = 0; i < x.size(0); ++i) {
    agree += mt::argmax(sim.forward(x.slice(0, i, i + 1))).item<std::int64_t>() == logits.argmax(1).at({i});
  }
  lower::emit_c(p, out);
  fmt::print("int8 firmware in {}/: {} B of weights, {} B arena; argmax agrees with PyTorch on {}/{} flowers\n", out,
             p.weight_bytes(), p.arena_bytes, agree, x.size(0));
  return diff < 1e-4 && agree == x.size(0) ? 0 : 1;
}
