/// \file
/// Training on the device: a lowered program that also takes training steps. The backward
/// pass and the optimizer step come from the autograd tape the graph was traced from, pruned
/// to the parameters being trained, and run on the same kernels as the simulator.
///
/// \code
///   lower::TrainOptions t;
///   t.parameters = {"head.weight", "head.bias"};   // or {} : the last Linear's weight and bias
///   t.lr = 0.05;
///   t.numeric = lower::Numeric::Float32;           // hard-float cores (the default: Integer, every core)
///   lower::Program p = lower::train_program(graph, calibration, {.name = "iris"}, t);
///   lower::Simulator sim(p);
///   double loss = sim.train_step(x_batch, labels); // one SGD step, bit-exact with the firmware
///   Tensor w = sim.parameter("head.weight");
///   lower::emit_c(p, "out/fw");                    // iris_run, iris_train_step, iris_get_params, ...
/// \endcode
///
/// A training step on `batch` samples runs, for each sample, the forward (keeping what the
/// backward reads), the loss and its gradient, and the backward, which adds each trained
/// parameter's gradient to a buffer of its own; then the gradients are averaged over the
/// samples and each parameter takes one SGD step (PyTorch's torch.optim.SGD: momentum,
/// dampening 0, weight decay). Trained parameters live in RAM (the firmware's
/// `<name>_get_params` / `<name>_set_params` copy them out and in as one blob); frozen ones stay
/// in flash. The arena holds the activations, the saved values and the activation gradients
/// of one sample; the parameters' gradients and momentum are buffers of their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/program.hpp"
#include "microtorch/lower/quantize.hpp"

namespace microtorch::lower {

/// The arithmetic of the training step (and of the program's forward).
enum class Numeric {
  /// Fixed-point training steps (every core, no float arithmetic): the integer inference as the
  /// forward; trains the weight and bias of the linear layer that computes the output and the
  /// biases of the linear layers below it (through relus), with the cross entropy loss
  /// (train_integer.cpp: the scales, the int32 masters, the rounding).
  Integer,
  Float32,  ///< float32 forward and backward (cores with a single-precision FPU); bit-exact with the simulator
};
/// "integer" or "float32".
std::string_view numeric_name(Numeric n);

/// The loss a training step minimises.
enum class LossKind {
  CrossEntropy,  ///< mean cross entropy of the output's rows (logits) against int32 class indices
  Mse,           ///< mean squared error of the output against float targets of its shape
};

/// What to train, how, and in which arithmetic.
struct TrainOptions {
  /// The parameters to train, by their named_parameters() names; an entry may hold `*`
  /// (any run of characters: `"*.bias"`, `"encoder.*"`), or be one of the selectors
  /// `"@biases"` (every parameter a linear layer or a layer norm reads as its bias) and
  /// `"@layer_norms"` (every layer norm's weight and bias). Empty: the last linear layer's
  /// weight and bias. An entry that selects nothing is a ValueError listing the parameters.
  /// A pattern with `*` leaves out the running statistics of batch norms (the state_dict's
  /// running_mean and running_var): they are frozen on the device.
  std::vector<std::string> parameters = {};
  double lr = 0.01;            ///< learning rate
  double momentum = 0.0;       ///< SGD momentum (0: none; the momentum buffers take no bytes)
  double weight_decay = 0.0;   ///< L2 penalty added to the gradient, as torch.optim.SGD's
  LossKind loss = LossKind::CrossEntropy;  ///< the loss of the output
  Numeric numeric = Numeric::Integer;      ///< integer (every core) or float32 (FPU cores)
  std::int64_t batch = 1;      ///< samples per training step (graph inputs; the gradients are averaged)
};

/// The parameters `options` selects in `graph`, in the order of the graph's values.
/// ValueError for an entry that selects nothing (it lists the graph's parameters).
std::vector<std::string> trained_parameters(const Graph& graph, const TrainOptions& options);

/// A program with an inference function and a training step (Program::training): the
/// forward (float32, or the integer inference of `quantize` and `calibration`), plus the
/// training step's forward, loss, backward and update, arena planned over both. ValueError,
/// naming the node, for an op whose backward does not lower in this arithmetic, a loss the
/// output cannot take (cross entropy wants logits [.., C]), a selected parameter the output
/// does not depend on; in Numeric::Integer also for a parameter other than the output
/// layer's weight and the biases its gradient reaches through linear layers and relus
/// (naming the node in the way), the MSE loss, weight decay, and a step whose int32 gradient
/// sums could overflow (from the batch and the input's width).
Program train_program(const Graph& graph, const Calibration& calibration, const QuantOptions& quantize,
                      const TrainOptions& options);

}  // namespace microtorch::lower
