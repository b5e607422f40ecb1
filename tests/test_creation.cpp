// Creation functions.
#include "helpers.hpp"

using mt::Tensor;

TEST_CASE("tensor() from nested braces, with dtype and requires_grad options") {
  Tensor t = mt::tensor({{1, 2, 3}, {4, 5, 6}});
  CHECK(t.shape() == mt::Shape{2, 3});
  CHECK(t.dtype() == mt::kFloat32);
  Tensor d = mt::tensor({1.0, 2.0}, mt::Options(mt::kFloat64).requires_grad(true));
  CHECK(d.dtype() == mt::kFloat64);
  CHECK(d.requires_grad());
  CHECK(mt::tensor(3.0).dim() == 0);
  CHECK(mt::tensor({{{1.0, 2.0}}, {{3.0, 4.0}}}).shape() == mt::Shape{2, 1, 2});
}

TEST_CASE("zeros, ones, full, empty and the *_like variants") {
  CHECK(mt::sum(mt::ones({2, 3})).item() == 6.0);
  CHECK(mt::sum(mt::zeros({4})).item() == 0.0);
  CHECK(mt::full({2}, 2.5, mt::kFloat64).at({1}) == 2.5);
  CHECK(mt::empty({3, 0}).numel() == 0);
  Tensor x = mt::ones({2, 2}, mt::kInt64);
  CHECK(mt::zeros_like(x).dtype() == mt::kInt64);
  CHECK(mt::full_like(x, 3).at<std::int64_t>({1, 1}) == 3);
  CHECK(mt::ones_like(x).shape() == x.shape());
  CHECK(mt::empty_like(x).shape() == x.shape());
  CHECK_THROWS_MSG(mt::zeros({2, -1}), mt::ShapeError, "negative", "[2, -1]");
}

TEST_CASE("arange and linspace follow PyTorch's endpoints and dtypes") {
  Tensor a = mt::arange(5);
  CHECK(a.dtype() == mt::kInt64);
  CHECK(a.numel() == 5);
  CHECK(a.at<std::int64_t>({4}) == 4);
  Tensor f = mt::arange(0.0, 1.0, 0.25);
  CHECK(f.dtype() == mt::kFloat32);
  CHECK_CLOSE(f, mt::tensor({0.0, 0.25, 0.5, 0.75}), 0, 0);
  CHECK(mt::arange(5.0, 0.0, -2.0).numel() == 3);
  CHECK_THROWS_MSG(mt::arange(0.0, 1.0, 0.0), mt::ValueError, "step");
  CHECK_THROWS_MSG(mt::arange(0.0, 1.0, -1.0), mt::ValueError, "away from end");
  CHECK_CLOSE(mt::linspace(0, 1, 5), mt::tensor({0.0, 0.25, 0.5, 0.75, 1.0}), 0, 1e-7);
}

TEST_CASE("eye makes square and rectangular identities") {
  CHECK(mt::sum(mt::eye(3)).item() == 3.0);
  Tensor r = mt::eye(2, 3);
  CHECK(r.shape() == mt::Shape{2, 3});
  CHECK(r.at({1, 1}) == 1.0);
  CHECK(r.at({1, 2}) == 0.0);
}
