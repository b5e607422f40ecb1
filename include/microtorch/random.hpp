// microtorch/random.hpp — seeded random tensors and the nn.init initializers.
//
// One global generator (a 64-bit Mersenne Twister). manual_seed(s) makes every later
// draw reproducible across runs and platforms: uniform and normal samples are derived
// from the raw 64-bit output by fixed formulas, not by the standard library's
// implementation-defined distributions.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>

#include "microtorch/tensor.hpp"

namespace microtorch {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
  void manual_seed(std::uint64_t seed) { engine_.seed(seed); }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform();
  /// Standard normal (Box-Muller).
  double normal();
  /// Uniform integer in [low, high).
  std::int64_t integer(std::int64_t low, std::int64_t high);
  std::uint64_t next() { return engine_(); }

 private:
  std::mt19937_64 engine_;
};

/// The generator used by rand/randn/randint/uniform_/normal_ and the initializers.
Generator& default_generator();
void manual_seed(std::uint64_t seed);

/// Uniform on [0, 1).
Tensor rand(const Shape& shape, Options options = {});
/// Standard normal.
Tensor randn(const Shape& shape, Options options = {});
/// Uniform integers in [low, high), int64 unless options say otherwise.
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Options options = kInt64);
/// A random permutation of 0..n-1 (int64).
Tensor randperm(std::int64_t n);

/// torch.nn.init: fill a weight in place (no graph is recorded). Fans follow PyTorch:
/// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field.
namespace init {
/// Recommended gain for a nonlinearity: "linear"/"sigmoid" 1, "tanh" 5/3, "relu" sqrt(2),
/// "leaky_relu" sqrt(2 / (1 + a^2)).
double calculate_gain(std::string_view nonlinearity, double a = 0.0);
Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
/// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
/// N(0, s), s = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1.0);
/// U(-b, b), b = gain * sqrt(3 / fan), fan = fan_in or fan_out (mode).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, std::string_view mode = "fan_in",
                         std::string_view nonlinearity = "leaky_relu");
/// N(0, s), s = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, std::string_view mode = "fan_in",
                        std::string_view nonlinearity = "leaky_relu");
}  // namespace init

}  // namespace microtorch
