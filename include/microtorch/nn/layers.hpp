// microtorch/nn/layers.hpp — the basic layers: Linear, Embedding, LayerNorm, Dropout,
// activations, Softmax/LogSoftmax, Identity, MeanPool, and the containers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "microtorch/nn/module.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::nn {

struct LinearOptions {
  bool bias = true;
  Dtype dtype = Dtype::Float32;
};

/// y = x W^T + b, weight [out_features, in_features], bias [out_features]. PyTorch's init:
/// W ~ kaiming_uniform(a = sqrt 5) = U(-1/sqrt(in), 1/sqrt(in)), b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, LinearOptions options = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();

  Tensor weight, bias;  // bias is undefined when options.bias is false
  std::int64_t in_features, out_features;
};

/// A lookup table: forward(int64 indices of any shape) -> indices.shape + [embedding_dim].
/// weight ~ N(0, 1) as in PyTorch.
class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, Dtype dtype = Dtype::Float32);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;

  Tensor weight;
  std::int64_t num_embeddings, embedding_dim;
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  Dtype dtype = Dtype::Float32;
};

/// Normalises over the trailing normalized_shape dims; weight = 1, bias = 0 initially.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight, bias;
  Shape normalized_shape;
  LayerNormOptions options;
};

/// Zeroes each element with probability p in training and scales the rest by 1/(1-p);
/// the identity in eval(). Draws from microtorch's seeded generator.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double p;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none") : approximate(std::move(approximate)) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate); }
  std::string extra_repr() const override { return "approximate=" + approximate; }
  std::string approximate;
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};

class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
};

class Softmax : public Module {
 public:
  explicit Softmax(std::int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override { return softmax(x, dim); }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  std::int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(std::int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override { return log_softmax(x, dim); }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  std::int64_t dim;
};

/// Mean over the sequence: [N, L, E] -> [N, E] (dim = 1). forward(x, keep) averages only
/// the positions where the bool keep mask [N, L] is true (padding excluded).
class MeanPool : public Module {
 public:
  explicit MeanPool(std::int64_t dim = 1) : dim(dim) {}
  Tensor forward(const Tensor& x) override { return mean(x, {dim}); }
  Tensor forward(const Tensor& x, const Tensor& keep);
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  std::int64_t dim;
};

/// Runs its children in order; children are named "0", "1", ... as in PyTorch.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  std::size_t size() const { return children().size(); }
  std::shared_ptr<Module> operator[](std::size_t i) const;
};

/// A list of modules registered under "0", "1", ...; it has no forward of its own.
template <class M = Module>
class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<M> module) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(module)));
  }
  std::size_t size() const { return items_.size(); }
  const std::shared_ptr<M>& operator[](std::size_t i) const { return items_.at(i); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

namespace functional {
/// Inverted dropout: x * Bernoulli(1 - p) / (1 - p) when training, x otherwise.
Tensor dropout(const Tensor& x, double p, bool training);
}  // namespace functional

}  // namespace microtorch::nn
