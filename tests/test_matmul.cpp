// matmul against xtensor-blas's xt::linalg::dot, one matrix at a time, plus PyTorch's
// 1-D and broadcasting rules and its errors.
#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xview.hpp>

#include "helpers.hpp"
#include "microtorch/xtensor.hpp"

using mt::Tensor;

namespace {

// Reference: broadcast the batch dims explicitly, then dot each pair of matrices.
xt::xarray<double> reference_matmul(const Tensor& a, const Tensor& b) {
  const mt::Shape as = a.shape(), bs = b.shape();
  mt::Shape batch = mt::broadcast_shapes(mt::Shape(as.begin(), as.end() - 2), mt::Shape(bs.begin(), bs.end() - 2), "ref");
  mt::Shape ea = batch, eb = batch;
  ea.insert(ea.end(), as.end() - 2, as.end());
  eb.insert(eb.end(), bs.end() - 2, bs.end());
  const Tensor A = a.expand(ea).reshape({-1, as[as.size() - 2], as.back()}).to(mt::kFloat64);
  const Tensor B = b.expand(eb).reshape({-1, bs[bs.size() - 2], bs.back()}).to(mt::kFloat64);
  const auto n = static_cast<std::size_t>(A.size(0));
  xt::xarray<double> out = xt::zeros<double>({n, static_cast<std::size_t>(as[as.size() - 2]),
                                              static_cast<std::size_t>(bs.back())});
  const auto xa = A.to_xarray<double>(), xb = B.to_xarray<double>();
  for (std::size_t i = 0; i < n; ++i) {
    xt::view(out, i) = xt::linalg::dot(xt::xarray<double>(xt::view(xa, i)), xt::xarray<double>(xt::view(xb, i)));
  }
  mt::Shape s = batch;
  s.push_back(as[as.size() - 2]);
  s.push_back(bs.back());
  out.reshape(std::vector<std::size_t>(s.begin(), s.end()));
  return out;
}

}  // namespace

TEST_CASE("batched matmul with broadcast batch dims matches per-matrix BLAS dot") {
  mt::manual_seed(11);
  const std::vector<std::pair<mt::Shape, mt::Shape>> cases = {
      {{3, 4}, {4, 5}}, {{2, 3, 4}, {2, 4, 5}}, {{2, 3, 4}, {4, 5}}, {{3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {5, 4, 2}}, {{1, 7, 8}, {3, 8, 1}}, {{2, 3, 2, 3, 4}, {3, 1, 4, 6}}};
  for (const auto& [sa, sb] : cases) {
    CAPTURE(mt::shape_str(sa));
    CAPTURE(mt::shape_str(sb));
    for (mt::Dtype d : {mt::kFloat32, mt::kFloat64}) {
      Tensor a = mt::randn(sa, d), b = mt::randn(sb, d);
      Tensor c = mt::matmul(a, b);
      CHECK_CLOSE(c, Tensor(reference_matmul(a, b)), 1e-5, 1e-5);
    }
  }
}

TEST_CASE("matmul follows PyTorch's rules for 1-D operands") {
  Tensor v = mt::tensor({1.0, 2.0, 3.0});
  Tensor m = mt::tensor({{1.0, 0.0}, {0.0, 1.0}, {1.0, 1.0}});
  Tensor dot = mt::matmul(v, v);
  CHECK(dot.dim() == 0);
  CHECK(dot.item() == 14.0);
  Tensor vm = mt::matmul(v, m);
  CHECK(vm.shape() == mt::Shape{2});
  CHECK_CLOSE(vm, mt::tensor({4.0, 5.0}), 0, 0);
  CHECK_CLOSE(mt::matmul(m.t(), v), mt::tensor({4.0, 5.0}), 0, 0);
  CHECK(mt::matmul(mt::ones({4, 2, 3}), v).shape() == mt::Shape{4, 2});
  CHECK(mt::matmul(v, mt::ones({4, 3, 2})).shape() == mt::Shape{4, 2});
}

TEST_CASE("matmul promotes float dtypes and handles empty dims") {
  CHECK(mt::matmul(mt::ones({2, 3}), mt::ones({3, 2}, mt::kFloat64)).dtype() == mt::kFloat64);
  CHECK_CLOSE(mt::matmul(mt::ones({2, 0}), mt::ones({0, 3})), mt::zeros({2, 3}), 0, 0);
  CHECK(mt::matmul(mt::ones({0, 4}), mt::ones({4, 3})).shape() == mt::Shape{0, 3});
}

TEST_CASE("matmul gradients of a shared weight sum over the batch") {
  // y = x W for a batch of x: dW = sum_b x_b^T dy_b (the batch folds into one GEMM).
  Tensor x = mt::randn({4, 3, 2}, mt::kFloat64);
  Tensor w = mt::randn({2, 5}, mt::kFloat64).requires_grad_();
  mt::matmul(x, w).sum().backward();
  Tensor expected = mt::matmul(x.reshape({-1, 2}).t(), mt::ones({12, 5}, mt::kFloat64));
  CHECK_CLOSE(w.grad(), expected, 1e-12, 1e-12);
}

TEST_CASE("matmul errors name both shapes and suggest the fix") {
  CHECK_THROWS_MSG(mt::matmul(mt::ones({2, 3}), mt::ones({4, 5})), mt::ShapeError, "matmul",
                   "inner dimensions differ", "[2, 3] @ [4, 5]", "transpose(-2, -1)");
  CHECK_THROWS_MSG(mt::matmul(mt::ones({2, 2, 3}), mt::ones({3, 3, 4})), mt::ShapeError, "[2]", "[3]");
  CHECK_THROWS_MSG(mt::matmul(mt::ones({3}), mt::ones({4})), mt::ShapeError, "[3] @ [4]");
  CHECK_THROWS_MSG(mt::matmul(mt::ones({2}, mt::kInt64), mt::ones({2})), mt::DtypeError, "int64", "kFloat32");
  CHECK_THROWS_MSG(mt::matmul(mt::tensor(2.0), mt::ones({2})), mt::ShapeError, "mul()");
}

TEST_CASE("matmuls split over threads equal one BLAS call, rows or columns, transposed or not") {
  // Large enough to be split at 2 and 3 threads: C taller than wide splits its rows, wider
  // than tall its columns; the transposed operands are BLAS flags; K > 384 crosses BLAS's
  // blocking of the inner dimension. Backward runs the transposed products. A part's BLAS
  // call may round a sum differently from the whole product's (its own edge tiles), so float
  // agrees to float rounding, double to double rounding; a misplaced part would be off by O(1).
  struct Case {
    std::int64_t m, k, n;
    bool ta, tb;
  };
  const int before = mt::get_num_threads();
  for (const Case c : {Case{300, 520, 90, false, false}, Case{40, 520, 700, false, true}, Case{310, 200, 130, true, true},
                       Case{70, 130, 650, true, false}}) {
    for (const mt::Dtype dtype : {mt::kFloat32, mt::kFloat64}) {
      INFO(c.m, " x ", c.k, " by ", c.k, " x ", c.n, ", transposed ", c.ta, c.tb, ", ", mt::dtype_name(dtype));
      mt::manual_seed(12);
      Tensor a = (c.ta ? mt::randn({c.k, c.m}, dtype).t() : mt::randn({c.m, c.k}, dtype)).detach().requires_grad_();
      Tensor b = (c.tb ? mt::randn({c.n, c.k}, dtype).t() : mt::randn({c.k, c.n}, dtype)).detach().requires_grad_();
      const Tensor g = mt::randn({c.m, c.n}, dtype);
      auto run = [&](int threads) {
        mt::set_num_threads(threads);
        a.zero_grad(), b.zero_grad();
        Tensor out = mt::matmul(a, b);
        (out * g).sum().backward();
        return std::vector<Tensor>{out.detach(), a.grad(), b.grad()};
      };
      const auto one = run(1);
      const double tol = dtype == mt::kFloat32 ? 1e-4 : 1e-12;
      CHECK_CLOSE(one[0], Tensor(reference_matmul(a.detach(), b.detach())), tol, tol);
      for (int threads : {2, 3}) {
        CAPTURE(threads);
        const auto split = run(threads);
        for (std::size_t i = 0; i < one.size(); ++i) CHECK_CLOSE(split[i], one[i], tol, tol);
      }
    }
  }
  mt::set_num_threads(before);
  CHECK_THROWS_MSG(mt::set_num_threads(0), mt::ValueError, "at least 1 thread");
}
