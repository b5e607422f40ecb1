// Bad input across the core: every error is a microtorch::Error subclass whose message
// names the op, the shapes and a fix.
#include "helpers.hpp"

using mt::Tensor;

TEST_CASE("shapes that cannot broadcast name the op, both shapes and the dim") {
  CHECK_THROWS_MSG(mt::ones({2, 3}) + mt::ones({4}), mt::ShapeError, "add", "[2, 3]", "[4]", "sizes 3 and 4",
                   "unsqueeze");
  CHECK_THROWS_MSG(mt::ones({2, 3}) * mt::ones({3, 2}), mt::ShapeError, "mul", "[2, 3]", "[3, 2]");
  CHECK_THROWS_MSG(mt::where(mt::ones({2}) > 0.0, mt::ones({3}), mt::ones({1})), mt::ShapeError, "where");
  CHECK_THROWS_MSG(mt::ones({2, 3}) < mt::ones({2}), mt::ShapeError, "lt");
}

TEST_CASE("dims out of range list the valid range") {
  Tensor x = mt::ones({2, 3});
  CHECK_THROWS_MSG(mt::softmax(x, 2), mt::IndexError, "softmax", "dim 2", "-2 .. 1");
  CHECK_THROWS_MSG(mt::sum(x, {-3}), mt::IndexError, "sum", "dim -3");
  CHECK_THROWS_MSG(x.transpose(0, 5), mt::IndexError, "transpose");
  CHECK_THROWS_MSG(mt::cat({x, x}, 3), mt::IndexError, "cat");
  CHECK_THROWS_MSG(mt::max(x, 2), mt::IndexError, "max");
}

TEST_CASE("dtype misuse says which dtype was expected and how to convert") {
  Tensor i = mt::ones({2}, mt::kInt64);
  Tensor b = mt::ones({2}).to(mt::kBool);
  CHECK_THROWS_MSG(i.requires_grad_(), mt::DtypeError, "requires_grad_", "int64", ".to(kFloat32)");
  CHECK_THROWS_MSG(b - b, mt::DtypeError, "sub", "bool");
  CHECK_THROWS_MSG(-b, mt::DtypeError, "neg", "logical_not");
  CHECK_THROWS_MSG(mt::matmul(i, i), mt::DtypeError, "matmul", "int64");
  CHECK_THROWS_MSG(mt::where(i, i, i), mt::DtypeError, "where", "bool");
  CHECK_THROWS_MSG(i.data<float>(), mt::DtypeError, "int64", "float32");
  CHECK_THROWS_MSG(mt::logsumexp(i, {0}), mt::DtypeError, "logsumexp", "int64");
}

TEST_CASE("every error is catchable as microtorch::Error") {
  CHECK_THROWS_AS(mt::ones({2}) + mt::ones({3}), mt::Error);
  CHECK_THROWS_AS(mt::load_npy("/nonexistent.npy"), mt::Error);
  CHECK_THROWS_AS(mt::ones({2}).sum({1}), mt::Error);
  CHECK_THROWS_AS((mt::ones({2}).requires_grad_() * 2.0).backward(), mt::Error);
}
