// microtorch/random.hpp — seeded random tensors and the nn.init initializers.
//
// Draws come from a Generator (a 64-bit Mersenne Twister): uniform and normal samples are
// derived from its raw 64-bit output by fixed formulas, not by the standard library's
// implementation-defined distributions, so a seed gives the same numbers on every platform.
//
// Threads. As in PyTorch, there is one default generator for the process: manual_seed(s)
// seeds it, and rand/randn/randint/randperm, uniform_/normal_, the initializers (hence
// module construction) and dropout draw from it. A generator locks itself for each draw or
// tensor fill, so threads may share it safely; their draws then interleave in whatever
// order the threads run. A thread that needs its own reproducible stream (two models built
// and trained in two threads, each from its own seed) installs a generator of its own:
//
//   mt::Generator gen(seed);
//   mt::GeneratorGuard use(gen);   // this thread's draws come from gen while `use` lives
//   auto model = std::make_shared<Net>();   // initialised from gen, whatever other threads do
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string_view>

#include "microtorch/tensor.hpp"

namespace microtorch {

/// The draws of a generator: formulas over a raw 64-bit engine (unsynchronised; a Generator
/// hands one out with its lock held).
class Draws {
 public:
  explicit Draws(std::mt19937_64& engine) : engine_(engine) {}
  /// Uniform in [0, 1) with 53 random bits.
  double uniform();
  /// Standard normal (Box-Muller).
  double normal();
  /// Uniform integer in [low, high) (low < high).
  std::int64_t integer(std::int64_t low, std::int64_t high);
  std::uint64_t next() { return engine_(); }

 private:
  std::mt19937_64& engine_;
};

/// A seeded random stream, safe to share between threads (every call locks it).
class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  void manual_seed(std::uint64_t seed);
  /// f(draws) with the generator locked once (a whole tensor's worth of draws).
  template <class F>
  decltype(auto) locked(F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    Draws d(engine_);
    return f(d);
  }
  /// The engine's whole state as an int64 tensor (PyTorch's get_rng_state): save it with a
  /// checkpoint, and set_state() continues the stream exactly where it was.
  Tensor get_state();
  /// Restores a get_state(); anything else throws ValueError.
  void set_state(const Tensor& state);
  /// Single draws, each under the lock.
  double uniform();
  double normal();
  std::int64_t integer(std::int64_t low, std::int64_t high);
  std::uint64_t next();

 private:
  std::mt19937_64 engine_;
  std::mutex mutex_;
};

/// The process-wide default generator (seeded with 0 at start).
Generator& default_generator();
/// The generator this thread draws from: the innermost GeneratorGuard's, else the default.
Generator& current_generator();
/// Seeds the default generator (PyTorch's torch.manual_seed). Draws on a thread inside a
/// GeneratorGuard are not affected.
void manual_seed(std::uint64_t seed);

/// RAII: this thread draws from `g` while the guard lives (guards nest). `g` must outlive it.
class GeneratorGuard {
 public:
  explicit GeneratorGuard(Generator& g);
  ~GeneratorGuard();
  GeneratorGuard(const GeneratorGuard&) = delete;
  GeneratorGuard& operator=(const GeneratorGuard&) = delete;

 private:
  Generator* previous_;
};

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
