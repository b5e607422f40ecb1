// Every differentiable op against central finite differences (float64), including
// broadcasting and negative dims.
#include "helpers.hpp"

using mt::Tensor;
using mt::TensorList;

namespace {

// gradcheck with the default tolerances; inputs are fresh float64 leaves.
bool grad_ok(const std::function<Tensor(const TensorList&)>& f, const TensorList& inputs) {
  return mt::gradcheck(f, inputs);
}

}  // namespace

TEST_CASE("gradcheck: binary arithmetic with broadcasting") {
  mt::manual_seed(1);
  CHECK(grad_ok([](auto& v) { return v[0] + v[1]; }, {rand64({2, 3, 4}), rand64({3, 1})}));
  CHECK(grad_ok([](auto& v) { return v[0] - v[1]; }, {rand64({3, 1}), rand64({2, 1, 4})}));
  CHECK(grad_ok([](auto& v) { return v[0] * v[1]; }, {rand64({4}), rand64({2, 3, 4})}));
  CHECK(grad_ok([](auto& v) { return v[0] / v[1]; }, {rand64({2, 3}), rand64({3}, 0.5, 2.0)}));
  CHECK(grad_ok([](auto& v) { return mt::pow(v[0], v[1]); }, {rand64({2, 3}, 0.5, 2.0), rand64({1, 3})}));
  CHECK(grad_ok([](auto& v) { return mt::maximum(v[0], v[1]); }, {rand64({2, 3}), rand64({3})}));
  CHECK(grad_ok([](auto& v) { return mt::minimum(v[0], v[1]); }, {rand64({2, 1}), rand64({2, 3})}));
  CHECK(grad_ok([](auto& v) { return 2.0 - v[0] * 3.0 + 1.0 / (v[0] + 4.0); }, {rand64({5})}));
}

TEST_CASE("gradcheck: unary math") {
  mt::manual_seed(2);
  CHECK(grad_ok([](auto& v) { return -v[0]; }, {rand64({3, 2})}));
  CHECK(grad_ok([](auto& v) { return mt::exp(v[0]); }, {rand64({3, 2})}));
  CHECK(grad_ok([](auto& v) { return mt::log(v[0]); }, {rand64({3, 2}, 0.5, 2.0)}));
  CHECK(grad_ok([](auto& v) { return mt::sqrt(v[0]); }, {rand64({3, 2}, 0.5, 2.0)}));
  CHECK(grad_ok([](auto& v) { return mt::rsqrt(v[0]); }, {rand64({3, 2}, 0.5, 2.0)}));
  CHECK(grad_ok([](auto& v) { return mt::pow(v[0], 3.0); }, {rand64({3, 2})}));
  CHECK(grad_ok([](auto& v) { return mt::pow(v[0], -0.5); }, {rand64({3, 2}, 0.5, 2.0)}));
  CHECK(grad_ok([](auto& v) { return mt::abs(v[0]); }, {mt::tensor({-0.7, 0.3, -0.2, 0.9}, mt::kFloat64).requires_grad_()}));
  CHECK(grad_ok([](auto& v) { return mt::tanh(v[0]); }, {rand64({3, 2})}));
  CHECK(grad_ok([](auto& v) { return mt::sigmoid(v[0]); }, {rand64({3, 2})}));
  CHECK(grad_ok([](auto& v) { return mt::relu(v[0]); }, {rand64({3, 2}, 0.1, 1.0)}));
  CHECK(grad_ok([](auto& v) { return mt::relu(v[0]); }, {rand64({3, 2}, -1.0, -0.1)}));
  CHECK(grad_ok([](auto& v) { return mt::gelu(v[0]); }, {rand64({3, 4}, -3.0, 3.0)}));
  CHECK(grad_ok([](auto& v) { return mt::gelu(v[0], "tanh"); }, {rand64({3, 4}, -3.0, 3.0)}));
  // values away from the clamp bounds (the derivative jumps there)
  CHECK(grad_ok([](auto& v) { return mt::clamp(v[0], -0.5, 0.5); }, {mt::tensor({-0.9, -0.2, 0.1, 0.7}, mt::kFloat64).requires_grad_()}));
}

TEST_CASE("gradcheck: where and masked_fill route gradients around the mask") {
  mt::manual_seed(3);
  Tensor cond = mt::tensor({{1, 0, 1}, {0, 0, 1}}).to(mt::kBool);
  CHECK(grad_ok([&](auto& v) { return mt::where(cond, v[0], v[1]); }, {rand64({2, 3}), rand64({3})}));
  Tensor mask = mt::tensor({1, 0, 0}).to(mt::kBool);
  CHECK(grad_ok([&](auto& v) { return mt::masked_fill(v[0], mask, -2.0); }, {rand64({2, 3})}));
}

TEST_CASE("gradcheck: reductions over dims, keepdim and negative dims") {
  mt::manual_seed(4);
  CHECK(grad_ok([](auto& v) { return mt::sum(v[0]); }, {rand64({2, 3})}));
  CHECK(grad_ok([](auto& v) { return mt::sum(v[0], {-1}); }, {rand64({2, 3, 4})}));
  CHECK(grad_ok([](auto& v) { return mt::sum(v[0], {0, 2}, true); }, {rand64({2, 3, 4})}));
  CHECK(grad_ok([](auto& v) { return mt::mean(v[0], {1}); }, {rand64({2, 3, 4})}));
  CHECK(grad_ok([](auto& v) { return mt::mean(v[0]); }, {rand64({2, 3})}));
  CHECK(grad_ok([](auto& v) { return mt::var(v[0], {-1}); }, {rand64({3, 4})}));
  CHECK(grad_ok([](auto& v) { return mt::var(v[0], {0}, false, true); }, {rand64({3, 4})}));
  CHECK(grad_ok([](auto& v) { return mt::logsumexp(v[0], {-1}); }, {rand64({3, 4})}));
  CHECK(grad_ok([](auto& v) { return mt::logsumexp(v[0], {0, 1}, true); }, {rand64({3, 4})}));
  CHECK(grad_ok([](auto& v) { return std::get<0>(mt::max(v[0], -1)); }, {rand64({3, 4})}));
  CHECK(grad_ok([](auto& v) { return std::get<0>(mt::min(v[0], 0, true)); }, {rand64({3, 4})}));
  CHECK(grad_ok([](auto& v) { return mt::max(v[0]); }, {rand64({3, 4})}));
  CHECK(grad_ok([](auto& v) { return mt::min(v[0]); }, {rand64({3, 4})}));
}

TEST_CASE("gradcheck: softmax and log_softmax along any dim") {
  mt::manual_seed(5);
  for (std::int64_t dim : {0, 1, -1}) {
    CAPTURE(dim);
    CHECK(grad_ok([dim](auto& v) { return mt::softmax(v[0], dim); }, {rand64({3, 4, 2}, -2.0, 2.0)}));
    CHECK(grad_ok([dim](auto& v) { return mt::log_softmax(v[0], dim); }, {rand64({3, 4, 2}, -2.0, 2.0)}));
  }
}

TEST_CASE("gradcheck: matmul for vectors, matrices, batches and broadcast batches") {
  mt::manual_seed(6);
  CHECK(grad_ok([](auto& v) { return mt::matmul(v[0], v[1]); }, {rand64({4}), rand64({4})}));
  CHECK(grad_ok([](auto& v) { return mt::matmul(v[0], v[1]); }, {rand64({4}), rand64({4, 3})}));
  CHECK(grad_ok([](auto& v) { return mt::matmul(v[0], v[1]); }, {rand64({2, 4}), rand64({4})}));
  CHECK(grad_ok([](auto& v) { return mt::matmul(v[0], v[1]); }, {rand64({2, 4}), rand64({4, 3})}));
  CHECK(grad_ok([](auto& v) { return mt::matmul(v[0], v[1]); }, {rand64({2, 2, 4}), rand64({4, 3})}));
  CHECK(grad_ok([](auto& v) { return mt::matmul(v[0], v[1]); }, {rand64({2, 1, 2, 3}), rand64({3, 3, 2})}));
  CHECK(grad_ok([](auto& v) { return mt::matmul(v[0], v[1]); }, {rand64({3}), rand64({2, 3, 2})}));
}

TEST_CASE("gradcheck: shape ops") {
  mt::manual_seed(7);
  CHECK(grad_ok([](auto& v) { return v[0].reshape({3, -1}) * 2.0; }, {rand64({2, 3, 2})}));
  CHECK(grad_ok([](auto& v) { return v[0].flatten(1) * 2.0; }, {rand64({2, 3, 2})}));
  CHECK(grad_ok([](auto& v) { return v[0].transpose(0, -1) * 2.0; }, {rand64({2, 3, 4})}));
  CHECK(grad_ok([](auto& v) { return v[0].permute({2, 0, 1}) * 2.0; }, {rand64({2, 3, 4})}));
  CHECK(grad_ok([](auto& v) { return v[0].unsqueeze(-1).squeeze(2) * 2.0; }, {rand64({2, 3})}));
  CHECK(grad_ok([](auto& v) { return v[0].expand({2, 3, 4}) * 2.0; }, {rand64({3, 1})}));
  CHECK(grad_ok([](auto& v) { return v[0].slice(1, 1, 5, 2) * 2.0; }, {rand64({2, 5})}));
  CHECK(grad_ok([](auto& v) { return v[0].narrow(-1, 1, 2) * 2.0; }, {rand64({2, 5})}));
  CHECK(grad_ok([](auto& v) { return v[0].select(0, -1) * 2.0; }, {rand64({3, 2})}));
  Tensor idx = mt::tensor({2, 0, 2}, mt::kInt64);
  CHECK(grad_ok([&](auto& v) { return v[0].index_select(-1, idx) * 2.0; }, {rand64({2, 3})}));
  CHECK(grad_ok([](auto& v) { return mt::cat({v[0], v[1]}, -1) * 2.0; }, {rand64({2, 1}), rand64({2, 3})}));
  CHECK(grad_ok([](auto& v) { return mt::stack({v[0], v[1]}, 1) * 2.0; }, {rand64({2, 3}), rand64({2, 3})}));
  CHECK(grad_ok([](auto& v) { return v[0].chunk(2, 1)[1] * 3.0 + v[0].split(1, 1)[0].sum(); }, {rand64({2, 4})}));
  CHECK(grad_ok([](auto& v) { return v[0].clone() * v[0].to(mt::kFloat64); }, {rand64({3})}));
}

TEST_CASE("gradcheck: a composite expression reusing inputs") {
  mt::manual_seed(8);
  CHECK(grad_ok(
      [](auto& v) {
        Tensor h = mt::tanh(mt::matmul(v[0], v[1]) + v[2]);
        return mt::log_softmax(h * h, -1).sum({0}) + mt::mean(v[0]);
      },
      {rand64({3, 4}), rand64({4, 2}), rand64({2})}));
}

TEST_CASE("gradcheck reports the differing Jacobian entries of a wrong backward") {
  // A deliberately wrong op: forward 2x, backward claims 3 dy.
  auto wrong = [](const TensorList& v) {
    Tensor y = (v[0] * 2.0).detach();
    return mt::autograd::record(y, "wrong", {v[0]}, [](const Tensor& g) { return TensorList{g * 3.0}; });
  };
  CHECK_THROWS_MSG(mt::gradcheck(wrong, {rand64({2})}), mt::AutogradError, "analytic 3", "numerical 2");
  CHECK_THROWS_MSG(mt::gradcheck(wrong, {mt::ones({2}).requires_grad_()}), mt::DtypeError, "float64");
}
