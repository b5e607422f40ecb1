// Elementwise ops: values, broadcasting, promotion, comparisons and logic.
#include <cmath>

#include "helpers.hpp"

using mt::Tensor;

TEST_CASE("arithmetic broadcasts NumPy-style") {
  Tensor a = mt::tensor({{1.0}, {2.0}});     // [2, 1]
  Tensor b = mt::tensor({10.0, 20.0, 30.0});  // [3]
  Tensor s = a + b;
  CHECK(s.shape() == mt::Shape{2, 3});
  CHECK_CLOSE(s, mt::tensor({{11.0, 21.0, 31.0}, {12.0, 22.0, 32.0}}), 0, 0);
  CHECK_CLOSE(b - a, mt::tensor({{9.0, 19.0, 29.0}, {8.0, 18.0, 28.0}}), 0, 0);
  CHECK_CLOSE(a * b, mt::tensor({{10.0, 20.0, 30.0}, {20.0, 40.0, 60.0}}), 0, 0);
  CHECK_CLOSE(b / a, mt::tensor({{10.0, 20.0, 30.0}, {5.0, 10.0, 15.0}}), 0, 0);
  CHECK(mt::add(mt::ones({4, 1, 3}), mt::ones({2, 1})).shape() == mt::Shape{4, 2, 3});
}

TEST_CASE("scalars work on both sides and adopt the tensor's dtype") {
  Tensor x = mt::tensor({1.0, 2.0}, mt::kFloat64);
  CHECK((x + 1.0).dtype() == mt::kFloat64);
  CHECK_CLOSE(2.0 - x, mt::tensor({1.0, 0.0}), 0, 0);
  CHECK_CLOSE(6.0 / x, mt::tensor({6.0, 3.0}), 0, 0);
  CHECK_CLOSE(x * 3.0, mt::tensor({3.0, 6.0}), 0, 0);
  CHECK_CLOSE(-x, mt::tensor({-1.0, -2.0}), 0, 0);
  Tensor i = mt::tensor({1.0, 2.0}, mt::kInt64);
  CHECK((i + 1.0).dtype() == mt::kInt64);
  CHECK((i * 0.5).dtype() == mt::kFloat32);
  CHECK((i / 2.0).dtype() == mt::kFloat32);  // true division
  CHECK((i / i).dtype() == mt::kFloat32);
}

TEST_CASE("dtypes promote bool < int64 < float32 < float64") {
  Tensor b = mt::tensor({1.0, 0.0}).to(mt::kBool);
  Tensor i = mt::tensor({2.0, 3.0}, mt::kInt64);
  Tensor f = mt::tensor({0.5, 0.5});
  Tensor d = mt::tensor({0.25, 0.25}, mt::kFloat64);
  CHECK((b * i).dtype() == mt::kInt64);
  CHECK((i + f).dtype() == mt::kFloat32);
  CHECK((f + d).dtype() == mt::kFloat64);
  CHECK_CLOSE(b * f, mt::tensor({0.5, 0.0}), 0, 0);
  CHECK_THROWS_MSG(b + b, mt::DtypeError, "add", "bool", "logical_or");
}

TEST_CASE("unary math matches the standard library") {
  Tensor x = mt::tensor({0.5, 1.0, 2.0}, mt::kFloat64);
  for (std::int64_t k = 0; k < 3; ++k) {
    const double v = x.at({k});
    CHECK(mt::exp(x).at({k}) == doctest::Approx(std::exp(v)));
    CHECK(mt::log(x).at({k}) == doctest::Approx(std::log(v)));
    CHECK(mt::sqrt(x).at({k}) == doctest::Approx(std::sqrt(v)));
    CHECK(mt::rsqrt(x).at({k}) == doctest::Approx(1 / std::sqrt(v)));
    CHECK(mt::tanh(x).at({k}) == doctest::Approx(std::tanh(v)));
    CHECK(mt::sigmoid(x).at({k}) == doctest::Approx(1 / (1 + std::exp(-v))));
    CHECK(mt::pow(x, 2.5).at({k}) == doctest::Approx(std::pow(v, 2.5)));
    CHECK(mt::gelu(x).at({k}) == doctest::Approx(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))));
  }
  CHECK_CLOSE(mt::abs(mt::tensor({-2.0, 3.0})), mt::tensor({2.0, 3.0}), 0, 0);
  CHECK_CLOSE(mt::relu(mt::tensor({-2.0, 3.0})), mt::tensor({0.0, 3.0}), 0, 0);
  CHECK_CLOSE(mt::clamp(mt::tensor({-2.0, 0.3, 3.0}), -1, 1), mt::tensor({-1.0, 0.3, 1.0}), 0, 0);
  CHECK_CLOSE(mt::clamp_min(mt::tensor({-2.0, 3.0}), 0), mt::tensor({0.0, 3.0}), 0, 0);
  CHECK(mt::exp(mt::tensor({1.0}, mt::kInt64)).dtype() == mt::kFloat32);
  CHECK(mt::relu(mt::tensor({-1.0, 4.0}, mt::kInt64)).at<std::int64_t>({1}) == 4);
  CHECK_THROWS_MSG(mt::clamp(mt::ones({1}), 1, 0), mt::ValueError, "clamp", "min 1");
  CHECK_THROWS_MSG(mt::gelu(mt::ones({1}), "fast"), mt::ValueError, "gelu", "tanh");
}

TEST_CASE("gelu's tanh approximation stays within 1e-3 of the exact form") {
  Tensor x = mt::linspace(-4, 4, 81, mt::kFloat64);
  CHECK(mt::max(mt::abs(mt::gelu(x) - mt::gelu(x, "tanh"))).item() < 1e-3);
}

TEST_CASE("maximum and minimum pick elementwise and broadcast") {
  Tensor a = mt::tensor({1.0, 5.0, 3.0});
  Tensor b = mt::tensor({{2.0}, {4.0}});
  CHECK_CLOSE(mt::maximum(a, b), mt::tensor({{2.0, 5.0, 3.0}, {4.0, 5.0, 4.0}}), 0, 0);
  CHECK_CLOSE(mt::minimum(a, b), mt::tensor({{1.0, 2.0, 2.0}, {1.0, 4.0, 3.0}}), 0, 0);
}

TEST_CASE("ties in maximum share the gradient evenly, as in PyTorch") {
  Tensor a = mt::tensor({1.0, 2.0}).requires_grad_();
  Tensor b = mt::tensor({1.0, 0.0}).requires_grad_();
  mt::maximum(a, b).sum().backward();
  CHECK_CLOSE(a.grad(), mt::tensor({0.5, 1.0}), 0, 0);
  CHECK_CLOSE(b.grad(), mt::tensor({0.5, 0.0}), 0, 0);
}

TEST_CASE("comparisons produce bool and broadcast") {
  Tensor x = mt::tensor({1.0, 2.0, 3.0});
  Tensor gt = x > 1.5;
  CHECK(gt.dtype() == mt::kBool);
  CHECK(mt::equal(gt, mt::tensor({0.0, 1.0, 1.0}).to(mt::kBool)));
  CHECK(mt::equal(x == 2.0, mt::tensor({0.0, 1.0, 0.0}).to(mt::kBool)));
  CHECK(mt::equal(x != 2.0, mt::tensor({1.0, 0.0, 1.0}).to(mt::kBool)));
  CHECK(mt::equal(x <= 2.0, mt::tensor({1.0, 1.0, 0.0}).to(mt::kBool)));
  CHECK(mt::equal(x >= 2.0, mt::tensor({0.0, 1.0, 1.0}).to(mt::kBool)));
  CHECK(mt::equal(x < mt::tensor({{2.0}, {4.0}}), mt::tensor({{1.0, 0.0, 0.0}, {1.0, 1.0, 1.0}}).to(mt::kBool)));
  Tensor b = mt::tensor({1.0, 0.0}).to(mt::kBool);
  CHECK(mt::equal(b > mt::tensor({0.0, 0.0}).to(mt::kBool), b));
}

TEST_CASE("logical ops on bool masks") {
  Tensor p = mt::tensor({1.0, 1.0, 0.0, 0.0}).to(mt::kBool);
  Tensor q = mt::tensor({1.0, 0.0, 1.0, 0.0}).to(mt::kBool);
  CHECK(mt::equal(p & q, mt::tensor({1.0, 0.0, 0.0, 0.0}).to(mt::kBool)));
  CHECK(mt::equal(p | q, mt::tensor({1.0, 1.0, 1.0, 0.0}).to(mt::kBool)));
  CHECK(mt::equal(p ^ q, mt::tensor({0.0, 1.0, 1.0, 0.0}).to(mt::kBool)));
  CHECK(mt::equal(~p, mt::tensor({0.0, 0.0, 1.0, 1.0}).to(mt::kBool)));
  CHECK(mt::equal(mt::logical_and(mt::tensor({2.0, 0.0}), mt::tensor({1.0, 1.0})), mt::tensor({1.0, 0.0}).to(mt::kBool)));
  CHECK_THROWS_MSG(mt::ones({2}) & p, mt::DtypeError, "&", "bool", "float32");
}

TEST_CASE("where and masked_fill select by a bool mask") {
  Tensor c = mt::tensor({1.0, 0.0, 1.0}).to(mt::kBool);
  CHECK_CLOSE(mt::where(c, mt::ones({3}), mt::zeros({2, 1})), mt::tensor({{1.0, 0.0, 1.0}, {1.0, 0.0, 1.0}}), 0, 0);
  Tensor x = mt::arange(0.0, 6.0, 1.0, mt::kFloat32).reshape({2, 3});
  Tensor filled = mt::masked_fill(x, c, -1.0);
  CHECK_CLOSE(filled, mt::tensor({{-1.0, 1.0, -1.0}, {-1.0, 4.0, -1.0}}), 0, 0);
  Tensor neg_inf = mt::masked_fill(x, c, -INFINITY);
  CHECK(std::isinf(neg_inf.at({0, 0})));
  CHECK(mt::equal(mt::where(c, c, ~c), mt::ones({3}).to(mt::kBool)));
  CHECK_THROWS_MSG(mt::masked_fill(x, mt::ones({3}), 0.0), mt::DtypeError, "masked_fill", "bool");
  CHECK_THROWS_MSG(mt::masked_fill(mt::ones({3}), mt::ones({2, 3}).to(mt::kBool), 0.0), mt::ShapeError,
                   "masked_fill", "[2, 3]", "[3]");
}

TEST_CASE("allclose, equal and has_nonfinite") {
  CHECK(mt::allclose(mt::tensor({1.0, 2.0}), mt::tensor({1.0, 2.0 + 1e-7})));
  CHECK_FALSE(mt::allclose(mt::tensor({1.0}), mt::tensor({1.1})));
  CHECK_FALSE(mt::equal(mt::ones({2}), mt::ones({2}, mt::kFloat64)));
  CHECK(mt::has_nonfinite(mt::log(mt::tensor({0.0, 1.0}))));
  CHECK_FALSE(mt::has_nonfinite(mt::ones({3})));
}
