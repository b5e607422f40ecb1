#include "microtorch/random.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"

namespace microtorch {

// 53 random bits scaled to [0, 1).
double Draws::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

// Box-Muller: sqrt(-2 ln u1) cos(2 pi u2), u1 in (0, 1].
double Draws::normal() {
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Rejection sampling: no modulo bias.
std::int64_t Draws::integer(std::int64_t low, std::int64_t high) {
  // high - low in unsigned arithmetic: [INT64_MIN, INT64_MAX) does not fit a signed difference
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  std::uint64_t r;
  do {
    r = engine_();
  } while (r >= limit);
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + r % range);
}

void Generator::manual_seed(std::uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  engine_.seed(seed);
}

// mt19937_64's state is 312 words and an index; its stream operators write them in decimal.
Tensor Generator::get_state() {
  std::ostringstream text;
  locked([&](Draws&) { text << engine_; });
  std::istringstream in(text.str());
  std::vector<std::uint64_t> words;
  for (std::uint64_t w; in >> w;) words.push_back(w);
  Tensor t = Tensor::empty({static_cast<std::int64_t>(words.size())}, Dtype::Int64);
  std::memcpy(t.data<std::int64_t>(), words.data(), words.size() * sizeof(std::uint64_t));  // bits kept
  return t;
}

void Generator::set_state(const Tensor& state) {
  constexpr std::int64_t kWords = std::mt19937_64::state_size + 1;
  if (!state.defined() || state.dtype() != Dtype::Int64 || state.shape() != Shape{kWords}) {
    throw ValueError(fmt::format("Generator::set_state: expects the int64 [{}] tensor get_state() gives, got {}", kWords,
                                 state.defined() ? fmt::format("{} {}", dtype_name(state.dtype()), shape_str(state.shape()))
                                                 : std::string("an undefined tensor")));
  }
  std::ostringstream text;
  for (std::int64_t i = 0; i < kWords; ++i) text << static_cast<std::uint64_t>(state.data<std::int64_t>()[i]) << ' ';
  std::istringstream in(text.str());
  std::mt19937_64 engine;
  in >> engine;
  if (in.fail() || static_cast<std::uint64_t>(state.data<std::int64_t>()[kWords - 1]) > std::mt19937_64::state_size) {
    throw ValueError("Generator::set_state: the tensor is not a generator state (its index is out of range)");
  }
  locked([&](Draws&) { engine_ = engine; });
}

double Generator::uniform() { return locked([](Draws& d) { return d.uniform(); }); }
double Generator::normal() { return locked([](Draws& d) { return d.normal(); }); }
std::int64_t Generator::integer(std::int64_t low, std::int64_t high) {
  return locked([&](Draws& d) { return d.integer(low, high); });
}
std::uint64_t Generator::next() { return locked([](Draws& d) { return d.next(); }); }

namespace {
thread_local Generator* thread_generator = nullptr;  // the innermost GeneratorGuard's
}  // namespace

Generator& default_generator() {
  static Generator g(0);
  return g;
}

Generator& current_generator() { return thread_generator != nullptr ? *thread_generator : default_generator(); }

GeneratorGuard::GeneratorGuard(Generator& g) : previous_(thread_generator) { thread_generator = &g; }
GeneratorGuard::~GeneratorGuard() { thread_generator = previous_; }

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

namespace {

template <class Draw>
Tensor& fill_random(Tensor& t, const char* op, Draw draw) {
  if (!t.is_floating_point()) {
    throw DtypeError(fmt::format("{}: fills floating tensors only, got {}; use randint for integers", op,
                                 dtype_name(t.dtype())));
  }
  NoGradGuard no_grad;  // initialising a parameter is not part of the graph
  if (t.grad_fn()) throw AutogradError(fmt::format("{}: cannot fill a tensor computed by a recorded op", op));
  current_generator().locked([&](Draws& g) {
    visit_dtype(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = t.data<T>();
      for (std::int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(draw(g));
    });
  });
  t.bump_version();
  return t;
}

Tensor with_grad(Tensor t, const Options& o) { return o.requires_grad() ? t.requires_grad_(true) : t; }

}  // namespace

Tensor& Tensor::uniform_(double low, double high) {
  if (!(low <= high)) throw ValueError(fmt::format("uniform_: low {} must not exceed high {}", low, high));
  return fill_random(*this, "uniform_", [&](Draws& g) { return low + (high - low) * g.uniform(); });
}

Tensor& Tensor::normal_(double mean, double std) {
  if (!(std >= 0)) throw ValueError(fmt::format("normal_: std must be >= 0, got {}", std));
  return fill_random(*this, "normal_", [&](Draws& g) { return mean + std * g.normal(); });
}

Tensor rand(const Shape& shape, Options options) {
  Tensor t = empty(shape, options.dtype());
  t.uniform_(0.0, 1.0);
  return with_grad(t, options);
}

Tensor randn(const Shape& shape, Options options) {
  Tensor t = empty(shape, options.dtype());
  t.normal_(0.0, 1.0);
  return with_grad(t, options);
}

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Options options) {
  if (low >= high) throw ValueError(fmt::format("randint: low {} must be below high {}", low, high));
  Tensor t = empty(shape, kInt64);
  std::int64_t* p = t.data<std::int64_t>();
  current_generator().locked([&](Draws& g) {
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = g.integer(low, high);
  });
  return options.dtype() == kInt64 ? t : with_grad(t.to(options.dtype()), options);
}

// Fisher-Yates.
Tensor randperm(std::int64_t n) {
  if (n < 0) throw ValueError(fmt::format("randperm: n must be >= 0, got {}", n));
  Tensor t = arange(0.0, static_cast<double>(n), 1.0, kInt64);
  std::int64_t* p = t.data<std::int64_t>();
  current_generator().locked([&](Draws& g) {
    for (std::int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[g.integer(0, i + 1)]);
  });
  return t;
}

// Per row: inverse transform sampling on the running sums of the weights, u ~ U[0, total).
// Without replacement a drawn category's weight is set to 0 and the sums recomputed.
Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement) {
  if (!probs.is_floating_point()) {
    throw DtypeError(fmt::format("multinomial: probs must be floating (float32 or float64), got {}; convert with "
                                 ".to(kFloat32)",
                                 dtype_name(probs.dtype())));
  }
  if (probs.dim() != 1 && probs.dim() != 2) {
    throw ShapeError(fmt::format("multinomial: probs must be [C] or [N, C], got {}", shape_str(probs.shape())));
  }
  const std::int64_t rows = probs.dim() == 2 ? probs.size(0) : 1, C = probs.size(-1);
  if (num_samples < 1) throw ValueError(fmt::format("multinomial: num_samples must be >= 1, got {}", num_samples));
  const Tensor p = probs.detach().to(kFloat64);
  const double* pp = p.data<double>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* w = pp + r * C;
    double total = 0;
    std::int64_t nonzero = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      if (!(w[c] >= 0) || std::isinf(w[c])) {
        throw ValueError(fmt::format("multinomial: row {} holds {} at category {}; probabilities must be finite and >= "
                                     "0 (check for NaN or overflowing logits before softmax)",
                                     r, w[c], c));
      }
      total += w[c];
      nonzero += w[c] > 0;
    }
    if (!(total > 0)) {
      throw ValueError(fmt::format("multinomial: row {} of probs {} sums to 0; every row needs a category of positive "
                                   "weight",
                                   r, shape_str(probs.shape())));
    }
    if (!replacement && num_samples > nonzero) {
      throw ValueError(fmt::format("multinomial: {} samples without replacement, but row {} has only {} categories of "
                                   "non-zero weight; pass replacement=true or draw fewer",
                                   num_samples, r, nonzero));
    }
  }
  Shape shape = probs.shape();
  shape.back() = num_samples;
  Tensor out = Tensor::empty(shape, kInt64);
  std::int64_t* po = out.data<std::int64_t>();
  std::vector<double> w(static_cast<std::size_t>(C)), sums(static_cast<std::size_t>(C));
  current_generator().locked([&](Draws& g) {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy_n(pp + r * C, C, w.begin());
      for (std::int64_t k = 0; k < num_samples; ++k) {
        if (k == 0 || !replacement) std::partial_sum(w.begin(), w.end(), sums.begin());
        const double u = g.uniform() * sums.back();
        // the first category whose running sum exceeds u (never one of zero weight)
        auto it = std::upper_bound(sums.begin(), sums.end(), u);
        std::int64_t c = std::min<std::int64_t>(it - sums.begin(), C - 1);
        while (w[static_cast<std::size_t>(c)] == 0) --c;  // u rounded onto the end of the sums
        po[r * num_samples + k] = c;
        if (!replacement) w[static_cast<std::size_t>(c)] = 0;
      }
    }
  });
  return out;
}

namespace init {

namespace {

struct Fans {
  double in, out;
};

Fans fans_of(const Tensor& t, const char* op) {
  if (t.dim() < 2) {
    throw ShapeError(fmt::format("{}: fan in and fan out need a tensor with at least 2 dims, got {}", op,
                                 shape_str(t.shape())));
  }
  double receptive = 1;
  for (std::int64_t d = 2; d < t.dim(); ++d) receptive *= static_cast<double>(t.size(d));
  return {static_cast<double>(t.size(1)) * receptive, static_cast<double>(t.size(0)) * receptive};
}

double fan_for(const Tensor& t, std::string_view mode, const char* op) {
  const Fans f = fans_of(t, op);
  if (mode == "fan_in") return f.in;
  if (mode == "fan_out") return f.out;
  throw ValueError(fmt::format("{}: mode must be \"fan_in\" or \"fan_out\", got \"{}\"", op, mode));
}

}  // namespace

double calculate_gain(std::string_view nonlinearity, double a) {
  if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity == "identity") return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + a * a));
  throw ValueError(fmt::format("calculate_gain: unknown nonlinearity \"{}\" (linear, sigmoid, tanh, relu, "
                               "leaky_relu)",
                               nonlinearity));
}

Tensor& uniform_(Tensor& t, double low, double high) { return t.uniform_(low, high); }
Tensor& normal_(Tensor& t, double mean, double std) { return t.normal_(mean, std); }
Tensor& zeros_(Tensor& t) {
  NoGradGuard no_grad;
  return t.fill_(0.0);
}
Tensor& ones_(Tensor& t) {
  NoGradGuard no_grad;
  return t.fill_(1.0);
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  const Fans f = fans_of(t, "xavier_uniform_");
  const double bound = gain * std::sqrt(6.0 / (f.in + f.out));
  return t.uniform_(-bound, bound);
}

Tensor& xavier_normal_(Tensor& t, double gain) {
  const Fans f = fans_of(t, "xavier_normal_");
  return t.normal_(0.0, gain * std::sqrt(2.0 / (f.in + f.out)));
}

Tensor& kaiming_uniform_(Tensor& t, double a, std::string_view mode, std::string_view nonlinearity) {
  const double fan = fan_for(t, mode, "kaiming_uniform_");
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan);
  return t.uniform_(-bound, bound);
}

Tensor& kaiming_normal_(Tensor& t, double a, std::string_view mode, std::string_view nonlinearity) {
  const double fan = fan_for(t, mode, "kaiming_normal_");
  return t.normal_(0.0, calculate_gain(nonlinearity, a) / std::sqrt(fan));
}

}  // namespace init
}  // namespace microtorch
