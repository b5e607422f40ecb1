// Shape ops: values, memory sharing, negative dims and clear errors.
#include "helpers.hpp"

using mt::Tensor;

TEST_CASE("reshape and view infer -1 and share memory") {
  Tensor x = grid();
  Tensor r = x.reshape({4, -1});
  CHECK(r.shape() == mt::Shape{4, 6});
  CHECK(r.shares_storage(x));
  CHECK(x.view({-1}).shape() == mt::Shape{24});
  CHECK(x.flatten().shape() == mt::Shape{24});
  CHECK(x.flatten(1).shape() == mt::Shape{2, 12});
  CHECK(x.flatten(0, -2).shape() == mt::Shape{6, 4});
  CHECK_THROWS_MSG(x.reshape({5, -1}), mt::ShapeError, "reshape", "[5, -1]", "[2, 3, 4]");
  CHECK_THROWS_MSG(x.reshape({-1, -1}), mt::ShapeError, "only one size may be -1");
  CHECK_THROWS_MSG(x.view({7, 3}), mt::ShapeError, "view", "21 elements");
}

TEST_CASE("unsqueeze and squeeze with negative dims") {
  Tensor x = mt::zeros({3, 1, 2});
  CHECK(x.unsqueeze(0).shape() == mt::Shape{1, 3, 1, 2});
  CHECK(x.unsqueeze(-1).shape() == mt::Shape{3, 1, 2, 1});
  CHECK(x.squeeze().shape() == mt::Shape{3, 2});
  CHECK(x.squeeze(-2).shape() == mt::Shape{3, 2});
  CHECK(x.squeeze(0).shape() == mt::Shape{3, 1, 2});  // size 3: unchanged, as in PyTorch
  CHECK_THROWS_MSG(x.unsqueeze(4), mt::IndexError, "unsqueeze", "dim 4");
}

TEST_CASE("transpose and permute reorder dims") {
  Tensor x = grid();
  Tensor t = x.transpose(0, -1);
  CHECK(t.shape() == mt::Shape{4, 3, 2});
  CHECK(t.at({3, 2, 1}) == x.at({1, 2, 3}));
  Tensor p = x.permute({1, -1, 0});
  CHECK(p.shape() == mt::Shape{3, 4, 2});
  CHECK(p.at({2, 1, 1}) == x.at({1, 2, 1}));
  CHECK(mt::tensor({{1.0, 2.0}}).t().shape() == mt::Shape{2, 1});
  CHECK_THROWS_MSG(x.permute({0, 1}), mt::ShapeError, "permute", "[2, 3, 4]");
  CHECK_THROWS_MSG(x.permute({0, 1, 1}), mt::IndexError, "permute", "repeats");
  CHECK_THROWS_MSG(x.t(), mt::ShapeError, "transpose(-2, -1)");
}

TEST_CASE("expand broadcasts size-1 dims and adds leading dims") {
  Tensor x = mt::tensor({{1.0}, {2.0}});
  Tensor e = x.expand({3, 2, -1}).expand({3, 2, 4});
  CHECK(e.shape() == mt::Shape{3, 2, 4});
  CHECK(e.at({2, 1, 3}) == 2.0);
  CHECK(mt::broadcast_to(mt::ones({3}), {2, 3}).shape() == mt::Shape{2, 3});
  CHECK_THROWS_MSG(x.expand({3, 3}), mt::ShapeError, "expand", "[2, 1]", "[3, 3]");
}

TEST_CASE("slice, narrow and select follow Python indexing") {
  Tensor x = mt::arange(0.0, 10.0, 1.0, mt::kFloat32);
  CHECK_CLOSE(x.slice(0, 1, 8, 3), mt::tensor({1.0, 4.0, 7.0}), 0, 0);
  CHECK_CLOSE(x.slice(0, -3, 100), mt::tensor({7.0, 8.0, 9.0}), 0, 0);
  CHECK(x.slice(0, 5, 2).numel() == 0);
  CHECK_CLOSE(x.narrow(0, 2, 2), mt::tensor({2.0, 3.0}), 0, 0);
  Tensor g = grid();
  CHECK(g.select(1, -1).shape() == mt::Shape{2, 4});
  CHECK(g.select(1, -1).at({1, 0}) == 20.0);
  CHECK_THROWS_MSG(g.select(1, 3), mt::IndexError, "select", "index 3", "size 3");
  CHECK_THROWS_MSG(x.narrow(0, 8, 5), mt::IndexError, "narrow", "size 10");
  CHECK_THROWS_MSG(x.slice(0, 0, 5, 0), mt::ValueError, "step");
}

TEST_CASE("index_select gathers rows with repeats and checks the index") {
  Tensor g = grid();
  Tensor r = g.index_select(-1, mt::tensor({3.0, 0.0, 3.0}, mt::kInt64));
  CHECK(r.shape() == mt::Shape{2, 3, 3});
  CHECK(r.at({1, 2, 0}) == 23.0);
  CHECK(r.at({1, 2, 1}) == 20.0);
  CHECK_THROWS_MSG(g.index_select(0, mt::tensor({2.0}, mt::kInt64)), mt::IndexError, "index_select", "index 2");
  CHECK_THROWS_MSG(g.index_select(0, mt::tensor({0.0})), mt::DtypeError, "int64");
  // A 0-d input keeps its shape []: one index value only (a hostile graph file had two and
  // wrote past the one-element result).
  Tensor s = mt::scalar_tensor(5.0);
  Tensor one = s.index_select(0, mt::tensor({0.0}, mt::kInt64));
  CHECK(one.shape() == mt::Shape{});
  CHECK(one.item() == 5.0);
  CHECK_THROWS_MSG(s.index_select(0, mt::tensor({0.0, 0.0}, mt::kInt64)), mt::IndexError, "index_select", "0-d",
                   "got 2");
  CHECK_THROWS_MSG(s.index_select(0, mt::zeros({0}, mt::kInt64)), mt::IndexError, "index_select", "got 0");
}

TEST_CASE("cat and stack join tensors; mismatches name the offending tensor") {
  Tensor a = mt::ones({2, 1}), b = mt::zeros({2, 3});
  Tensor c = mt::cat({a, b}, -1);
  CHECK(c.shape() == mt::Shape{2, 4});
  CHECK(mt::sum(c).item() == 2.0);
  CHECK(mt::stack({b, b, b}, 1).shape() == mt::Shape{2, 3, 3});
  CHECK(mt::stack({b, b}, -1).shape() == mt::Shape{2, 3, 2});
  CHECK(mt::cat({mt::ones({1}, mt::kInt64), mt::ones({1})}).dtype() == mt::kFloat32);
  CHECK_THROWS_MSG(mt::cat({a, mt::ones({3, 1})}, 1), mt::ShapeError, "cat", "tensor 1", "[3, 1]");
  CHECK_THROWS_MSG(mt::stack({a, b}), mt::ShapeError, "stack", "tensor 1");
  CHECK_THROWS_MSG(mt::cat({}), mt::ValueError, "cat");
}

TEST_CASE("split and chunk cover the dim exactly") {
  Tensor x = mt::arange(0.0, 10.0, 1.0, mt::kFloat32);
  auto parts = x.split(4);
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].numel() == 2);
  auto chunks = x.chunk(3);
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[0].numel() == 4);
  auto sized = mt::split(x, std::vector<std::int64_t>{1, 9});
  CHECK(sized[1].at({0}) == 1.0);
  CHECK_THROWS_MSG(mt::split(x, std::vector<std::int64_t>{1, 2}), mt::ShapeError, "split", "add up to 10");
}

TEST_CASE("shape ops work on bool and int64 tensors") {
  Tensor m = (mt::arange(0.0, 6.0, 1.0, mt::kFloat32) > 2.0).reshape({2, 3});
  CHECK(m.transpose(0, 1).at<bool>({2, 1}) == true);
  CHECK(mt::cat({m, m}, 0).shape() == mt::Shape{4, 3});
  CHECK(mt::arange(6).reshape({3, 2}).select(0, 2).at<std::int64_t>({1}) == 5);
}
