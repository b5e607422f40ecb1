// softmax / log_softmax: normalisation, stability, masked rows.
#include <cmath>
#include <limits>

#include "helpers.hpp"

using mt::Tensor;

TEST_CASE("softmax rows sum to one along any dim") {
  mt::manual_seed(3);
  Tensor x = mt::randn({3, 4, 5});
  for (std::int64_t dim : {0, 1, -1}) {
    CAPTURE(dim);
    Tensor s = mt::sum(mt::softmax(x, dim), {dim});
    CHECK_CLOSE(s, mt::ones(s.shape()), 1e-6, 1e-6);
    CHECK_CLOSE(mt::exp(mt::log_softmax(x, dim)), mt::softmax(x, dim), 1e-5, 1e-6);
  }
}

TEST_CASE("softmax is stable for huge logits") {
  Tensor x = mt::tensor({1000.0, 1001.0, -1000.0});
  Tensor s = mt::softmax(x, 0);
  CHECK_FALSE(mt::has_nonfinite(s));
  CHECK(s.at({1}) == doctest::Approx(1.0 / (1.0 + std::exp(-1.0))));
  CHECK(mt::log_softmax(x, 0).at({2}) == doctest::Approx(-2001.0 - std::log1p(std::exp(-1.0))));
}

TEST_CASE("a fully masked (-inf) row gives zeros and zero gradient, never NaN") {
  Tensor x = mt::tensor({{0.5, -INFINITY, 1.0}, {-INFINITY, -INFINITY, -INFINITY}}).requires_grad_();
  Tensor s = mt::softmax(x, -1);
  CHECK_FALSE(mt::has_nonfinite(s));
  CHECK_CLOSE(s.select(0, 1), mt::zeros({3}), 0, 0);
  CHECK(s.at({0, 1}) == 0.0);
  (s * mt::tensor({1.0, 2.0, 3.0})).sum().backward();
  CHECK_FALSE(mt::has_nonfinite(x.grad()));
  CHECK_CLOSE(x.grad().select(0, 1), mt::zeros({3}), 0, 0);
}

TEST_CASE("log_softmax of a fully masked row is -inf with zero gradient") {
  Tensor x = mt::full({1, 3}, -INFINITY).requires_grad_();
  Tensor l = mt::log_softmax(x, -1);
  CHECK(std::isinf(l.at({0, 0})));
  l.backward(mt::ones({1, 3}));
  CHECK_CLOSE(x.grad(), mt::zeros({1, 3}), 0, 0);
}

TEST_CASE("float softmax rows (SIMD exp) match a float64 reference; -inf entries give exact zeros") {
  mt::manual_seed(41);
  for (std::int64_t n : {1, 7, 16, 37, 300}) {
    CAPTURE(n);
    mt::Tensor x = mt::randn({5, n}) * 20.0;  // spans e^-100 .. e^0 after the max shift
    x = mt::masked_fill(x, mt::rand({5, n}) < 0.2, -std::numeric_limits<double>::infinity());
    const mt::Tensor y = mt::softmax(x, -1);
    CHECK_CLOSE(y, mt::softmax(x.to(mt::kFloat64), -1).to(mt::kFloat32), 1e-5, 1e-7);
    const float* px = x.data<float>();
    const float* py = y.data<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      if (std::isinf(px[i])) CHECK(py[i] == 0.0f);
    }
  }
  // A NaN anywhere in a row makes the whole row NaN (as in PyTorch), on the SIMD lanes and the tail.
  for (std::int64_t n : {3, 16, 37}) {
    mt::Tensor x = mt::randn({2, n});
    x.data<float>()[n - 1] = std::numeric_limits<float>::quiet_NaN();
    const mt::Tensor y = mt::softmax(x, -1);
    for (std::int64_t j = 0; j < n; ++j) CHECK(std::isnan(y.at<float>({0, j})));
    CHECK(mt::sum(y.select(0, 1)).item() == doctest::Approx(1.0));
  }
}
