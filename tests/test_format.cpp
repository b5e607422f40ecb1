// Printing looks like PyTorch's.
#include <sstream>

#include "helpers.hpp"

using mt::Tensor;

TEST_CASE("fmt prints a matrix with aligned columns and its shape") {
  Tensor t = mt::tensor({{0.1, -1.2}, {3.0, 4.5}});
  CHECK(fmt::format("{}", t) == "tensor([[ 0.1000, -1.2000],\n        [ 3.0000,  4.5000]], shape=[2, 2])");
}

TEST_CASE("integral floats, ints, bools, scalars and float64 print like PyTorch") {
  CHECK(fmt::format("{}", mt::tensor({1.0, 2.0, -3.0})) == "tensor([ 1.,  2., -3.])");
  CHECK(fmt::format("{}", mt::arange(3)) == "tensor([0, 1, 2])");
  CHECK(fmt::format("{}", mt::tensor({1.0, 0.0}).to(mt::kBool)) == "tensor([ True, False])");
  CHECK(fmt::format("{}", mt::tensor(2.5)) == "tensor(2.5000)");
  CHECK(fmt::format("{}", mt::tensor({0.5}, mt::kFloat64)) == "tensor([0.5000], dtype=float64)");
  CHECK(fmt::format("{}", mt::tensor({1e-6, 1.0})) == "tensor([1.0000e-06, 1.0000e+00])");
}

TEST_CASE("fmt prints a shape as shape_str does, like PyTorch's size, and a dtype by name") {
  CHECK(fmt::format("{}", mt::zeros({2, 3}).shape()) == "[2, 3]");
  CHECK(fmt::format("{}", mt::Shape{}) == "[]");
  CHECK(fmt::format("{}", mt::Shape{7}) == "[7]");
  CHECK(fmt::format("{}", mt::Shape{2, 0, 4}) == mt::shape_str({2, 0, 4}));
  CHECK(fmt::format("{:>8}|", mt::Shape{2, 3}) == "  [2, 3]|");
  CHECK(fmt::format("{} {}", mt::tensor({1.0}).dtype(), mt::kInt64) == "float32 int64");
}

TEST_CASE("a string's format spec lays out tensors, shapes and dtypes; any other spec is an error") {
  const Tensor t = mt::tensor({1.0, 2.0});
  CHECK(fmt::format("{:>20}|", t) == "    tensor([1., 2.])|");
  CHECK(fmt::format("{:*^20}", t) == "**tensor([1., 2.])**");
  CHECK(fmt::format("{:.6}", t) == "tensor");
  CHECK(fmt::format("{:<9}|{:s}", mt::kFloat64, mt::kBool) == "float64  |bool");
  CHECK_THROWS_AS(fmt::format(fmt::runtime("{:d}"), t), fmt::format_error);
  CHECK_THROWS_AS(fmt::format(fmt::runtime("{:>{}}"), mt::Shape{2}, 8), fmt::format_error);
}

TEST_CASE("3-D tensors separate blocks with a blank line") {
  Tensor t = mt::arange(0.0, 8.0, 1.0, mt::kFloat32).reshape({2, 2, 2});
  CHECK(fmt::format("{}", t) ==
        "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]], shape=[2, 2, 2])");
}

TEST_CASE("the trailer shows requires_grad and grad_fn") {
  Tensor w = mt::tensor({1.0}).requires_grad_();
  CHECK(fmt::format("{}", w) == "tensor([1.], requires_grad=True)");
  CHECK(fmt::format("{}", mt::matmul(w.reshape({1, 1}), w.reshape({1, 1}))) ==
        "tensor([[1.]], shape=[1, 1], grad_fn=<MatmulBackward>)");
  std::ostringstream os;
  os << w * 2.0;
  CHECK(os.str() == "tensor([2.], grad_fn=<MulBackward>)");
}

TEST_CASE("large tensors are summarised with ellipses") {
  const std::string s = fmt::format("{}", mt::arange(0.0, 2000.0, 1.0, mt::kFloat32).reshape({2, 1000}));
  CHECK(s.find("...") != std::string::npos);
  CHECK(s.find("shape=[2, 1000]") != std::string::npos);
  CHECK(s.find("1999.") != std::string::npos);
  CHECK(s.size() < 200);
}

TEST_CASE("undefined and empty tensors print without crashing") {
  CHECK(fmt::format("{}", Tensor()) == "tensor(undefined)");
  CHECK(fmt::format("{}", mt::zeros({0, 3})) == "tensor([], shape=[0, 3])");
  CHECK(fmt::format("{}", mt::kFloat64) == "float64");
}
