// Reductions: values, dims, keepdim and extrema with indices.
#include <cmath>
#include <limits>

#include "helpers.hpp"

using mt::Tensor;

TEST_CASE("sum and mean over all dims, one dim, several dims, with keepdim") {
  Tensor x = grid();
  CHECK(mt::sum(x).item() == 276.0);
  CHECK(mt::mean(x).item() == 11.5);
  CHECK(mt::sum(x, {-1}).shape() == mt::Shape{2, 3});
  CHECK(mt::sum(x, {0, 2}).shape() == mt::Shape{3});
  CHECK(mt::sum(x, {0, 2}, true).shape() == mt::Shape{1, 3, 1});
  CHECK_CLOSE(mt::sum(x, {0, 2}), mt::tensor({60.0, 92.0, 124.0}), 0, 0);
  CHECK_CLOSE(mt::mean(x, {1}), mt::tensor({{4.0, 5.0, 6.0, 7.0}, {16.0, 17.0, 18.0, 19.0}}), 0, 0);
  CHECK(mt::sum(mt::ones({3}, mt::kInt64)).dtype() == mt::kInt64);
  CHECK(mt::sum((x > 10.0)).item() == 13.0);
  CHECK_THROWS_MSG(mt::sum(x, {0, -3}), mt::IndexError, "sum", "more than once");
  CHECK_THROWS_MSG(mt::mean(mt::zeros({0})), mt::ValueError, "mean");
}

TEST_CASE("a float sum over trailing dims keeps partial sums: 10^6 values of 0.1 within 1e-5, rows alike") {
  // The exact sum of the float32 values 0.1f; one sequential float32 chain is off by 1%.
  const double exact = 1e6 * static_cast<double>(0.1f);
  Tensor x = mt::full({1000, 1000}, 0.1);
  CHECK(std::abs(mt::sum(x).item() - exact) / exact < 1e-5);
  CHECK(std::abs(mt::mean(x).item() - 0.1) < 1e-6);
  Tensor rows = mt::sum(mt::full({3, 250000}, 0.1), {1});  // each row through the same path
  for (std::int64_t r = 0; r < 3; ++r) CHECK(std::abs(rows.at<float>({r}) - 25000.0) < 0.5);
  // A length that is not a multiple of the lanes or of a block, NaN and inf propagate.
  Tensor odd = mt::arange(0.0, 4099.0, 1.0);
  CHECK(mt::sum(odd).item() == 4099.0 * 4098.0 / 2);
  Tensor bad = mt::ones({5000});
  bad.data<float>()[4321] = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(mt::sum(bad).item()));
  CHECK(std::isinf(mt::sum(mt::full({33}, std::numeric_limits<double>::infinity())).item()));
}

TEST_CASE("var is unbiased by default, biased on request") {
  Tensor x = mt::tensor({1.0, 2.0, 3.0, 4.0}, mt::kFloat64);
  CHECK(mt::var(x).item() == doctest::Approx(5.0 / 3.0));
  CHECK(mt::var(x, {0}, false).item() == doctest::Approx(1.25));
  CHECK(mt::var(grid(), {-1}, true, true).shape() == mt::Shape{2, 3, 1});
  CHECK_THROWS_MSG(mt::var(mt::ones({1})), mt::ValueError, "var", "unbiased=false");
}

TEST_CASE("logsumexp does not overflow and keeps -inf rows finite-free of NaN") {
  Tensor x = mt::tensor({{1000.0, 1000.0}, {-INFINITY, -INFINITY}}, mt::kFloat64);
  Tensor l = mt::logsumexp(x, {-1});
  CHECK(l.at({0}) == doctest::Approx(1000.0 + std::log(2.0)));
  CHECK(std::isinf(l.at({1})));
  CHECK(l.at({1}) < 0);
  CHECK(mt::logsumexp(x, {-1}, true).shape() == mt::Shape{2, 1});
}

TEST_CASE("max and min along a dim return values and first indices") {
  Tensor x = mt::tensor({{3.0, 7.0, 7.0}, {-1.0, -5.0, 0.0}});
  auto [v, i] = mt::max(x, 1);
  CHECK_CLOSE(v, mt::tensor({7.0, 0.0}), 0, 0);
  CHECK(mt::equal(i, mt::tensor({1.0, 2.0}, mt::kInt64)));
  auto [mv, mi] = x.min(-1, true);
  CHECK(mv.shape() == mt::Shape{2, 1});
  CHECK(mi.at<std::int64_t>({1, 0}) == 1);
  CHECK(mt::max(x).item() == 7.0);
  CHECK(mt::min(x).item() == -5.0);
  CHECK(mt::argmax(x).item<std::int64_t>() == 1);
  CHECK(mt::equal(mt::argmax(x, 0), mt::tensor({0.0, 0.0, 0.0}, mt::kInt64)));
  CHECK(mt::equal(mt::argmin(x, 0), mt::tensor({1.0, 1.0, 1.0}, mt::kInt64)));
  CHECK_THROWS_MSG(mt::max(mt::zeros({0})), mt::ValueError, "max", "empty");
}

TEST_CASE("max propagates NaN like PyTorch") {
  Tensor x = mt::tensor({1.0, NAN, 3.0});
  CHECK(std::isnan(mt::max(x).item()));
  CHECK(mt::argmax(x).item<std::int64_t>() == 1);
}

TEST_CASE("the gradient of a full max is shared between ties") {
  Tensor x = mt::tensor({1.0, 4.0, 4.0}).requires_grad_();
  mt::max(x).backward();
  CHECK_CLOSE(x.grad(), mt::tensor({0.0, 0.5, 0.5}), 0, 0);
}
