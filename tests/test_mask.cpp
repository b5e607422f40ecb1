// One mask vocabulary: polarity, causal alignment, padding, combination, broadcasting,
// and fully masked rows that stay free of NaN.
#include <cmath>

#include "helpers.hpp"

using mt::Mask;
using mt::Tensor;

namespace {
Tensor bools(std::initializer_list<std::initializer_list<int>> rows) {
  std::vector<double> flat;
  std::int64_t cols = 0;
  for (auto r : rows) {
    cols = static_cast<std::int64_t>(r.size());
    for (int v : r) flat.push_back(v);
  }
  Tensor t = mt::empty({static_cast<std::int64_t>(rows.size()), cols}, mt::kFloat64);
  std::copy(flat.begin(), flat.end(), t.data<double>());
  return t.to(mt::kBool);
}
}  // namespace

TEST_CASE("keep and block are the two polarities of the same mask") {
  Tensor blocked = bools({{0, 1, 0}, {1, 0, 0}});
  CHECK(mt::equal(Mask::block(blocked).allowed(), ~blocked));
  CHECK(mt::equal(Mask::keep(blocked).allowed(), blocked));
  CHECK_THROWS_MSG(Mask::keep(mt::ones({2})), mt::DtypeError, "Mask::keep", "true = may attend", "Mask::additive");
  CHECK_THROWS_MSG(Mask::block(mt::ones({2})), mt::DtypeError, "Mask::block", "true = blocked");
  CHECK_THROWS_MSG(Mask::additive(mt::ones({2}) > 0.0), mt::DtypeError, "Mask::additive", "Mask::keep");
}

TEST_CASE("causal masks: square, rectangular top-left (torch's is_causal) and bottom-right") {
  CHECK(mt::equal(Mask::causal(3).allowed(), bools({{1, 0, 0}, {1, 1, 0}, {1, 1, 1}})));
  CHECK(mt::equal(Mask::causal(2, 4).allowed(), bools({{1, 0, 0, 0}, {1, 1, 0, 0}})));
  CHECK(mt::equal(Mask::causal(2, 4, mt::CausalAlign::BottomRight).allowed(), bools({{1, 1, 1, 0}, {1, 1, 1, 1}})));
}

TEST_CASE("key_padding from lengths blocks the padded keys of each sequence") {
  Mask m = Mask::key_padding(mt::tensor({2, 3}, mt::kInt64), 4);
  CHECK(m.shape() == mt::Shape{2, 1, 4});
  CHECK(mt::equal(m.allowed().squeeze(1), bools({{1, 1, 0, 0}, {1, 1, 1, 0}})));
  CHECK_THROWS_MSG(Mask::key_padding(mt::tensor({5}, mt::kInt64), 4), mt::ValueError, "length 5", "[0, 4]");
}

TEST_CASE("masks combine with & and broadcast; additive -inf counts as blocked") {
  Mask pad = Mask::key_padding(mt::tensor({3, 2}, mt::kInt64), 3);  // [2, 1, 3]
  Mask both = pad & Mask::causal(3);                                  // -> [2, 3, 3]
  CHECK(both.shape() == mt::Shape{2, 3, 3});
  Tensor a = both.allowed();
  CHECK(a.at<bool>({1, 2, 1}) == true);
  CHECK(a.at<bool>({1, 2, 2}) == false);  // padded
  CHECK(a.at<bool>({0, 0, 1}) == false);  // future
  Mask bias = Mask::additive(mt::tensor({{0.0, -INFINITY, 0.5}}));
  CHECK(mt::equal(bias.allowed(), bools({{1, 0, 1}})));
  Tensor add = (bias & Mask::keep(bools({{1, 1, 0}}))).as_additive(mt::kFloat32);
  CHECK(add.at({0, 0}) == 0.0);
  CHECK(std::isinf(add.at({0, 1})));
  CHECK(std::isinf(add.at({0, 2})));
  CHECK(Mask().empty());
}

TEST_CASE("a mask that cannot broadcast names both shapes and the expected one") {
  Tensor q = mt::randn({2, 3, 4});
  Tensor k = mt::randn({2, 5, 4});
  CHECK_THROWS_MSG(mt::scaled_dot_product_attention(q, k, k, Mask::causal(3, 4)), mt::ShapeError,
                   "scaled_dot_product_attention", "[3, 4]", "[2, 3, 5]", "[L, S] = [3, 5]");
}

TEST_CASE("a fully masked query row gives zero output and zero gradient, never NaN") {
  mt::manual_seed(9);
  Tensor q = rand64({2, 3, 4}), k = rand64({2, 5, 4}), v = rand64({2, 5, 2});
  // batch 1 has no valid key at all; in batch 0 query row 0 sees nothing either
  Tensor keep = mt::ones({2, 3, 5}).to(mt::kBool);
  bool* p = keep.data<bool>();
  std::fill(p + 15, p + 30, false);  // batch 1: every key blocked
  std::fill(p, p + 5, false);        // batch 0, query 0: every key blocked
  auto [out, w] = mt::scaled_dot_product_attention(q, k, v, Mask::keep(keep));
  CHECK_FALSE(mt::has_nonfinite(out));
  CHECK_CLOSE(out.select(0, 1), mt::zeros({3, 2}, mt::kFloat64), 0, 0);
  CHECK_CLOSE(out.select(0, 0).select(0, 0), mt::zeros({2}, mt::kFloat64), 0, 0);
  CHECK_CLOSE(mt::sum(w, {-1}).select(0, 0).narrow(0, 1, 2), mt::ones({2}, mt::kFloat64), 1e-12, 1e-12);
  out.sum().backward();
  for (const Tensor& t : {q, k, v}) CHECK_FALSE(mt::has_nonfinite(t.grad()));
  CHECK_CLOSE(q.grad().select(0, 1), mt::zeros({3, 4}, mt::kFloat64), 0, 0);
  CHECK(mt::gradcheck([&](auto& in) { return std::get<0>(mt::scaled_dot_product_attention(in[0], in[1], in[2], Mask::keep(keep))); },
                      {q, k, v}));
}
