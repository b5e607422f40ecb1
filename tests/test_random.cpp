// Seeded random tensors and initializers.
#include <cmath>

#include "helpers.hpp"

using mt::Tensor;

TEST_CASE("manual_seed makes draws reproducible") {
  mt::manual_seed(42);
  Tensor a = mt::randn({8});
  Tensor b = mt::rand({8});
  mt::manual_seed(42);
  CHECK(mt::equal(a, mt::randn({8})));
  CHECK(mt::equal(b, mt::rand({8})));
  CHECK_FALSE(mt::equal(a, mt::randn({8})));
}

TEST_CASE("rand, randn and randint have the right ranges and moments") {
  mt::manual_seed(1);
  Tensor u = mt::rand({20000}, mt::kFloat64);
  CHECK(mt::min(u).item() >= 0.0);
  CHECK(mt::max(u).item() < 1.0);
  CHECK(mt::mean(u).item() == doctest::Approx(0.5).epsilon(0.01));
  Tensor n = mt::randn({20000}, mt::kFloat64);
  CHECK(mt::mean(n).item() == doctest::Approx(0.0).epsilon(0.03));
  CHECK(mt::var(n).item() == doctest::Approx(1.0).epsilon(0.03));
  Tensor i = mt::randint(-2, 3, {1000});
  CHECK(i.dtype() == mt::kInt64);
  CHECK(mt::min(i).item() == -2.0);
  CHECK(mt::max(i).item() == 2.0);
  CHECK_THROWS_MSG(mt::randint(3, 3, {1}), mt::ValueError, "randint");
  Tensor p = mt::randperm(10);
  // a permutation: each of 0..9 appears exactly once
  Tensor counts = mt::sum(mt::eq(p.unsqueeze(0), mt::arange(10).unsqueeze(1)), {1});
  CHECK(mt::equal(counts, mt::ones({10}, mt::kInt64)));
  CHECK(mt::sum(p).item() == 45.0);
}

TEST_CASE("uniform_ and normal_ fill in place with the requested parameters") {
  mt::manual_seed(2);
  Tensor t = mt::empty({10000}, mt::kFloat64);
  t.uniform_(-3.0, -1.0);
  CHECK(mt::min(t).item() >= -3.0);
  CHECK(mt::max(t).item() < -1.0);
  t.normal_(5.0, 0.5);
  CHECK(mt::mean(t).item() == doctest::Approx(5.0).epsilon(0.01));
  CHECK(std::sqrt(mt::var(t).item()) == doctest::Approx(0.5).epsilon(0.03));
  Tensor i = mt::zeros({2}, mt::kInt64);
  CHECK_THROWS_MSG(i.uniform_(), mt::DtypeError, "uniform_", "randint");
}

TEST_CASE("xavier and kaiming initializers use PyTorch's fans and gains") {
  mt::manual_seed(3);
  Tensor w = mt::empty({200, 300}, mt::kFloat64).requires_grad_();
  mt::init::xavier_uniform_(w);
  const double bound = std::sqrt(6.0 / 500.0);
  CHECK(mt::max(mt::abs(w)).item() <= bound);
  CHECK(mt::max(mt::abs(w)).item() > 0.95 * bound);
  CHECK(w.is_leaf());
  mt::init::kaiming_normal_(w, 0.0, "fan_in", "relu");
  CHECK(std::sqrt(mt::var(w).item()) == doctest::Approx(std::sqrt(2.0 / 300.0)).epsilon(0.03));
  mt::init::kaiming_uniform_(w, std::sqrt(5.0));  // nn.Linear's default
  CHECK(mt::max(mt::abs(w)).item() <= 1.0 / std::sqrt(300.0));
  mt::init::xavier_normal_(w, 2.0);
  CHECK(std::sqrt(mt::var(w).item()) == doctest::Approx(2.0 * std::sqrt(2.0 / 500.0)).epsilon(0.03));
  CHECK(mt::init::calculate_gain("tanh") == doctest::Approx(5.0 / 3.0));
  Tensor v = mt::empty({3});
  CHECK_THROWS_MSG(mt::init::xavier_uniform_(v), mt::ShapeError, "at least 2 dims", "[3]");
  CHECK_THROWS_MSG(mt::init::kaiming_uniform_(w, 0.0, "fan_avg"), mt::ValueError, "fan_in");
}

TEST_CASE("a generator's state saved with get_state continues the stream exactly after set_state") {
  mt::Generator gen(123);
  gen.uniform();
  const Tensor state = gen.get_state();
  CHECK(state.dtype() == mt::kInt64);
  CHECK(state.shape() == mt::Shape{313});
  std::vector<double> first;
  for (int i = 0; i < 5; ++i) first.push_back(gen.normal());
  mt::Generator other(999);
  other.set_state(state);
  for (int i = 0; i < 5; ++i) CHECK(other.normal() == first[static_cast<std::size_t>(i)]);
  CHECK_THROWS_MSG(other.set_state(mt::zeros({3})), mt::ValueError, "set_state", "[313]");
  Tensor bad = state.clone();
  bad.data<std::int64_t>()[312] = 100000;
  CHECK_THROWS_MSG(other.set_state(bad), mt::ValueError, "not a generator state");
}
