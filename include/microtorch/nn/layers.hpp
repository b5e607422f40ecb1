/// \file
/// The basic layers: Linear, Embedding, LayerNorm, RMSNorm, Dropout, activations,
/// Softmax/LogSoftmax, Identity, MeanPool, and the containers Sequential and ModuleList.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "microtorch/nn/module.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::nn {

/// Constructor options of Linear (torch.nn.Linear's keyword arguments).
struct LinearOptions {
  bool bias = true;              ///< learn an additive bias (false: `bias` stays undefined)
  Dtype dtype = Dtype::Float32;  ///< of the parameters: float32 or float64
};

/// A fully connected layer (torch.nn.Linear): `y = x W^T + b`, weight [out_features,
/// in_features], bias [out_features]. PyTorch's init:
/// W ~ kaiming_uniform(a = sqrt 5) = U(-1/sqrt(in), 1/sqrt(in)), b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  /// A layer from in_features to out_features, initialised as in PyTorch; sizes must be
  /// positive (ValueError).
  Linear(std::int64_t in_features, std::int64_t out_features, LinearOptions options = {});
  /// x [..., in_features] -> [..., out_features] (see microtorch::linear).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  /// Draws fresh weights (and bias) from the initial distributions above.
  void reset_parameters();

  Tensor weight;  ///< [out_features, in_features] ("weight")
  Tensor bias;    ///< [out_features] ("bias"); undefined when options.bias is false
  ///@{
  /// The sizes given to the constructor.
  std::int64_t in_features, out_features;
  ///@}
};

/// A lookup table: forward(int64 indices of any shape) -> indices.shape + [embedding_dim].
/// weight ~ N(0, 1) as in PyTorch.
class Embedding : public Module {
 public:
  /// A table of num_embeddings vectors of embedding_dim; sizes must be positive (ValueError).
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, Dtype dtype = Dtype::Float32);
  /// The rows of `weight` at the int64 `indices` (DtypeError for another dtype, IndexError
  /// for an index outside [0, num_embeddings)); gradients add up at repeated indices.
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;

  Tensor weight;  ///< [num_embeddings, embedding_dim] ("weight")
  ///@{
  /// The sizes given to the constructor.
  std::int64_t num_embeddings, embedding_dim;
  ///@}
};

/// Constructor options of LayerNorm (torch.nn.LayerNorm's keyword arguments).
struct LayerNormOptions {
  double eps = 1e-5;               ///< added to the variance before the square root
  bool elementwise_affine = true;  ///< learn `weight` and `bias` (false: both stay undefined)
  Dtype dtype = Dtype::Float32;    ///< of the parameters
};

/// Normalises over the trailing normalized_shape dims; weight = 1, bias = 0 initially.
class LayerNorm : public Module {
 public:
  /// Normalises over trailing dims of this shape (usually {E}); an empty shape throws ValueError.
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
  /// layer_norm(x, normalized_shape, weight, bias, eps): x must end with normalized_shape.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;  ///< normalized_shape, initially 1 ("weight")
  Tensor bias;    ///< normalized_shape, initially 0 ("bias")
  Shape normalized_shape;     ///< the trailing dims normalised over
  LayerNormOptions options;   ///< as given to the constructor
};

/// Constructor options of RMSNorm (torch.nn.RMSNorm's keyword arguments, PyTorch 2.4).
struct RMSNormOptions {
  std::optional<double> eps = std::nullopt;  ///< added to mean(x^2); none = the machine epsilon of x's dtype, as PyTorch
  bool elementwise_affine = true;            ///< learn `weight` (false: it stays undefined)
  Dtype dtype = Dtype::Float32;              ///< of the parameter
};

/// Root-mean-square normalisation over the trailing normalized_shape dims (torch.nn.RMSNorm):
/// y = x / sqrt(mean(x^2) + eps) * weight, weight = 1 initially; no bias. The norm of Llama,
/// Qwen2 and llama2.c (which pass eps = 1e-5 or 1e-6).
class RMSNorm : public Module {
 public:
  /// Normalises over trailing dims of this shape (usually {E}); an empty shape throws ValueError.
  explicit RMSNorm(Shape normalized_shape, RMSNormOptions options = {});
  /// rms_norm(x, normalized_shape, weight, eps): x must end with normalized_shape.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;            ///< normalized_shape, initially 1 ("weight"); undefined without elementwise_affine
  Shape normalized_shape;   ///< the trailing dims normalised over
  RMSNormOptions options;   ///< as given to the constructor
};

/// Zeroes each element with probability p in training and scales the rest by 1/(1-p);
/// the identity in eval(). Draws from microtorch's seeded generator.
class Dropout : public Module {
 public:
  /// p is the probability of zeroing an element, in [0, 1] (ValueError otherwise).
  explicit Dropout(double p = 0.5);
  /// functional::dropout(x, p, is_training()).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double p;  ///< the drop probability
};

/// Module form of relu(x) (torch.nn.ReLU).
class ReLU : public Module {
 public:
  /// relu(x).
  Tensor forward(const Tensor& x) override { return relu(x); }
};

/// Module form of clamp(x, 0, 6) (torch.nn.ReLU6), the activation of MobileNet-style models.
class ReLU6 : public Module {
 public:
  /// clamp(x, 0, 6).
  Tensor forward(const Tensor& x) override { return clamp(x, 0.0, 6.0); }
};

/// Module form of clamp(x, min_val, max_val) (torch.nn.Hardtanh).
class Hardtanh : public Module {
 public:
  /// The bounds; forward throws ValueError unless min_val <= max_val.
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0) : min_val(min_val), max_val(max_val) {}
  /// clamp(x, min_val, max_val).
  Tensor forward(const Tensor& x) override { return clamp(x, min_val, max_val); }
  std::string extra_repr() const override;
  double min_val;  ///< the lower bound
  double max_val;  ///< the upper bound
};

/// Module form of gelu(x, approximate) (torch.nn.GELU).
class GELU : public Module {
 public:
  /// "none" (exact, the default) or "tanh"; checked by forward (ValueError).
  explicit GELU(std::string approximate = "none") : approximate(std::move(approximate)) {}
  /// gelu(x, approximate).
  Tensor forward(const Tensor& x) override { return gelu(x, approximate); }
  std::string extra_repr() const override { return "approximate=" + approximate; }
  std::string approximate;  ///< "none" or "tanh"
};

/// Module form of silu(x) (torch.nn.SiLU).
class SiLU : public Module {
 public:
  /// silu(x) = x sigmoid(x).
  Tensor forward(const Tensor& x) override { return silu(x); }
};

/// Module form of tanh(x) (torch.nn.Tanh).
class Tanh : public Module {
 public:
  /// tanh(x).
  Tensor forward(const Tensor& x) override { return tanh(x); }
};

/// Module form of sigmoid(x) (torch.nn.Sigmoid).
class Sigmoid : public Module {
 public:
  /// sigmoid(x).
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};

/// Passes its input through unchanged (torch.nn.Identity): a placeholder in a Sequential.
class Identity : public Module {
 public:
  /// x itself (the same tensor).
  Tensor forward(const Tensor& x) override { return x; }
};

/// Module form of softmax(x, dim) (torch.nn.Softmax).
class Softmax : public Module {
 public:
  /// Softmax over `dim` (negative counts from the end).
  explicit Softmax(std::int64_t dim) : dim(dim) {}
  /// softmax(x, dim).
  Tensor forward(const Tensor& x) override { return softmax(x, dim); }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  std::int64_t dim;  ///< the dim normalised over
};

/// Module form of log_softmax(x, dim) (torch.nn.LogSoftmax).
class LogSoftmax : public Module {
 public:
  /// Log-softmax over `dim` (negative counts from the end).
  explicit LogSoftmax(std::int64_t dim) : dim(dim) {}
  /// log_softmax(x, dim).
  Tensor forward(const Tensor& x) override { return log_softmax(x, dim); }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  std::int64_t dim;  ///< the dim normalised over
};

/// Mean over the sequence: [N, L, E] -> [N, E] (dim = 1). forward(x, keep) averages only
/// the positions where the bool keep mask [N, L] is true (padding excluded).
class MeanPool : public Module {
 public:
  /// Averages over `dim` (the sequence dim of batch-first [N, L, E] by default).
  explicit MeanPool(std::int64_t dim = 1) : dim(dim) {}
  /// mean(x, {dim}).
  Tensor forward(const Tensor& x) override { return mean(x, {dim}); }
  /// The mean over the positions where keep [N, L] is true (a row with none kept gives 0);
  /// keep must be bool and match x along dims 0 and `dim` (ShapeError otherwise).
  Tensor forward(const Tensor& x, const Tensor& keep);
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  std::int64_t dim;  ///< the dim averaged over
};

/// Runs its children in order; children are named "0", "1", ... as in PyTorch.
class Sequential : public Module {
 public:
  /// An empty sequence (forward returns its input).
  Sequential() = default;
  /// `Sequential({std::make_shared<Linear>(4, 16), std::make_shared<ReLU>()})`.
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  /// Appends a module under the next index; a null module throws ValueError.
  void push_back(std::shared_ptr<Module> module);
  /// Each child's single-tensor forward in turn, each output feeding the next.
  Tensor forward(const Tensor& x) override;
  /// The number of modules.
  std::size_t size() const { return children().size(); }
  /// The i-th module; IndexError when i >= size().
  std::shared_ptr<Module> operator[](std::size_t i) const;
};

/// A list of modules registered under "0", "1", ...; it has no forward of its own.
template <class M = Module>
class ModuleList : public Module {
 public:
  /// Appends a module under the next index; a null module throws ValueError.
  void push_back(std::shared_ptr<M> module) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(module)));
  }
  /// The number of modules.
  std::size_t size() const { return items_.size(); }
  /// The i-th module, typed as M; std::out_of_range when i >= size().
  const std::shared_ptr<M>& operator[](std::size_t i) const { return items_.at(i); }
  /// Iteration over the modules in order: `for (auto& layer : *layers)`.
  auto begin() const { return items_.begin(); }
  /// The end of the iteration.
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

/// Functions behind the modules (torch.nn.functional): dropout, the losses, linear
/// attention. Alias it as `namespace F = microtorch::nn::functional;`.
namespace functional {
/// Inverted dropout: x * Bernoulli(1 - p) / (1 - p) when training, x otherwise; p in [0, 1]
/// (ValueError otherwise). Draws from the current generator.
Tensor dropout(const Tensor& x, double p, bool training);
}  // namespace functional

}  // namespace microtorch::nn
