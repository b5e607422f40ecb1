/// \file
/// Seeded random tensors, generators, and the nn.init initializers.
///
/// Draws come from a Generator (a 64-bit Mersenne Twister): uniform and normal samples are
/// derived from its raw 64-bit output by fixed formulas, not by the standard library's
/// implementation-defined distributions, so a seed gives the same numbers on every platform.
///
/// Threads. As in PyTorch, there is one default generator for the process: manual_seed(s)
/// seeds it, and rand/randn/randint/randperm, uniform_/normal_, the initializers (hence
/// module construction) and dropout draw from it. A generator locks itself for each draw or
/// tensor fill, so threads may share it safely; their draws then interleave in whatever
/// order the threads run. A thread that needs its own reproducible stream (two models built
/// and trained in two threads, each from its own seed) installs a generator of its own:
///
/// \code
///   mt::Generator gen(seed);
///   mt::GeneratorGuard use(gen);   // this thread's draws come from gen while `use` lives
///   auto model = std::make_shared<Net>();   // initialised from gen, whatever other threads do
/// \endcode
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
  /// Draws from `engine`, which must outlive this object (Generator::locked makes one).
  explicit Draws(std::mt19937_64& engine) : engine_(engine) {}
  /// Uniform in [0, 1) with 53 random bits.
  double uniform();
  /// Standard normal (Box-Muller).
  double normal();
  /// Uniform integer in [low, high) (low < high), by rejection: no modulo bias.
  std::int64_t integer(std::int64_t low, std::int64_t high);
  /// The engine's next raw 64-bit output.
  std::uint64_t next() { return engine_(); }

 private:
  std::mt19937_64& engine_;
};

/// A seeded random stream, safe to share between threads (every call locks it).
class Generator {
 public:
  /// A stream seeded with `seed` (the same seed gives the same draws on every platform).
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
  ///@{
  /// Not copyable (it owns a mutex); save and restore a stream with get_state and set_state.
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ///@}
  /// Restarts the stream from `seed`.
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
  /// Uniform in [0, 1), one draw under the lock (see Draws::uniform).
  double uniform();
  /// Standard normal, one draw under the lock.
  double normal();
  /// Uniform integer in [low, high), one draw under the lock.
  std::int64_t integer(std::int64_t low, std::int64_t high);
  /// The next raw 64-bit output, under the lock.
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
  /// Makes g this thread's generator.
  explicit GeneratorGuard(Generator& g);
  /// Restores the generator the guard found.
  ~GeneratorGuard();
  ///@{
  /// Not copyable: exactly one guard restores the previous generator.
  GeneratorGuard(const GeneratorGuard&) = delete;
  GeneratorGuard& operator=(const GeneratorGuard&) = delete;
  ///@}

 private:
  Generator* previous_;
};

/// A tensor of draws uniform on [0, 1) from the current generator (float32 unless options
/// say otherwise; floating dtypes only).
Tensor rand(const Shape& shape, Options options = {});
/// A tensor of standard normal draws from the current generator (float32 by default).
Tensor randn(const Shape& shape, Options options = {});
/// Uniform integers in [low, high), int64 unless options say otherwise; low >= high throws
/// ValueError.
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Options options = kInt64);
/// A random permutation of 0..n-1 (int64, Fisher-Yates); n < 0 throws ValueError.
Tensor randperm(std::int64_t n);
/// Draws num_samples category indices (int64) per row of `probs`, [C] -> [num_samples] or
/// [N, C] -> [N, num_samples], category c with probability probs[c] / sum(probs) (torch.multinomial:
/// the weights need not add up to 1). Without replacement each row's draws are distinct (a
/// drawn category leaves the row), so a row needs num_samples categories of non-zero weight.
/// Draws from the current generator (use a GeneratorGuard for a stream of your own). probs must
/// be floating (DtypeError) and 1-D or 2-D (ShapeError); a negative, NaN or infinite weight, a
/// row of zeros, num_samples < 1, or too few non-zero categories without replacement throw
/// ValueError naming the row.
Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement = false);

/// The initializers of torch.nn.init: each fills a weight in place (no graph is recorded,
/// so parameters may be filled). Fans follow PyTorch: fan_in = size(1) * receptive field, fan_out = size(0) *
/// receptive field; a tensor with fewer than 2 dims has no fans (ShapeError).
namespace init {
/// Recommended gain for a nonlinearity: "linear"/"sigmoid" 1, "tanh" 5/3, "relu" sqrt(2),
/// "leaky_relu" sqrt(2 / (1 + a^2)); any other name throws ValueError.
double calculate_gain(std::string_view nonlinearity, double a = 0.0);
/// Fills t with U(low, high) draws (t.uniform_(low, high)).
Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0);
/// Fills t with N(mean, std^2) draws (t.normal_(mean, std)).
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
/// Fills t with 0.
Tensor& zeros_(Tensor& t);
/// Fills t with 1.
Tensor& ones_(Tensor& t);
/// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
/// N(0, s), s = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1.0);
/// U(-b, b), b = gain * sqrt(3 / fan), fan = fan_in or fan_out (mode; anything else throws
/// ValueError), gain = calculate_gain(nonlinearity, a).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, std::string_view mode = "fan_in",
                         std::string_view nonlinearity = "leaky_relu");
/// N(0, s), s = gain / sqrt(fan), as kaiming_uniform_.
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, std::string_view mode = "fan_in",
                        std::string_view nonlinearity = "leaky_relu");
}  // namespace init

}  // namespace microtorch
