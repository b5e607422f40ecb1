// The ops generation needs: sort, topk, gather, cumsum, tril/triu, multinomial, silu,
// rms_norm, rotary_embedding and grouped-query attention. Values against PyTorch 1.13
// (tools/gen_generation_fixtures.py writes tests/fixtures/gen_<case>.npz; RoPE, RMSNorm and
// GQA are written out in torch ops there), gradients against the fixtures and gradcheck in
// float64, and the errors of bad input.
//
// Tolerances, float32: rtol 1e-5, atol 2e-6 (as tests/test_modules_oracle.cpp: a few ulp of
// sums accumulated in another order); the ops that only move values (sort, gather, tril)
// must match exactly.
#include <cmath>
#include <limits>
#include <map>

#include "helpers.hpp"
#include "microtorch/nn/attention.hpp"

using mt::Tensor;
using mt::TensorList;

namespace {

constexpr double kRtol = 1e-5, kAtol = 2e-6;

mt::Tensor gen(const std::string& c, const std::string& member) { return fixture("gen_" + c + "__" + member); }

/// Runs an op on case c's inputs (those in `grads` require grad), compares out (and idx when
/// the op returns indices), backpropagates sum(out * w) and compares each input's gradient.
void check_op(const std::string& c, const std::vector<std::string>& grads, const std::vector<std::string>& consts,
              const std::function<TensorList(std::map<std::string, Tensor>&)>& op, double rtol = kRtol,
              double atol = kAtol) {
  INFO("case gen_", c);
  std::map<std::string, Tensor> in;
  for (const auto& n : grads) in[n] = gen(c, n).requires_grad_(true);
  for (const auto& n : consts) in[n] = gen(c, n);
  const TensorList out = op(in);
  CHECK_CLOSE(out[0], gen(c, "out"), rtol, atol);
  if (out.size() > 1) CHECK(mt::equal(out[1], gen(c, "idx")));
  mt::sum(out[0] * gen(c, "w")).backward();
  for (const auto& n : grads) {
    INFO("gradient of ", n);
    REQUIRE(in[n].grad().defined());
    CHECK_CLOSE(in[n].grad(), gen(c, "grad_" + n), rtol, atol);
  }
}

TensorList pair(const std::tuple<Tensor, Tensor>& t) { return {std::get<0>(t), std::get<1>(t)}; }

}  // namespace

TEST_CASE("sort, topk, gather, cumsum, tril and triu match PyTorch, gradients included") {
  check_op("sort_descending", {"x"}, {}, [](auto& in) { return pair(mt::sort(in["x"], -1, true)); }, 0, 0);
  check_op("sort_dim0", {"x"}, {}, [](auto& in) { return pair(mt::sort(in["x"], 0)); }, 0, 0);
  check_op("topk_largest", {"x"}, {}, [](auto& in) { return pair(mt::topk(in["x"], 4)); }, 0, 0);
  check_op("topk_smallest_dim1", {"x"}, {}, [](auto& in) { return pair(mt::topk(in["x"], 2, 1, false)); }, 0, 0);
  check_op("gather_dim1", {"x"}, {"index"}, [](auto& in) { return TensorList{mt::gather(in["x"], 1, in["index"])}; }, 0, 0);
  check_op("gather_dim0_smaller", {"x"}, {"index"},
           [](auto& in) { return TensorList{mt::gather(in["x"], 0, in["index"])}; }, 0, 0);
  check_op("cumsum_last", {"x"}, {}, [](auto& in) { return TensorList{mt::cumsum(in["x"], -1)}; });
  check_op("cumsum_dim0", {"x"}, {}, [](auto& in) { return TensorList{mt::cumsum(in["x"], 0)}; });
  check_op("tril_batched", {"x"}, {}, [](auto& in) { return TensorList{mt::tril(in["x"])}; }, 0, 0);
  check_op("tril_diagonal_neg", {"x"}, {}, [](auto& in) { return TensorList{mt::tril(in["x"], -1)}; }, 0, 0);
  check_op("triu_diagonal", {"x"}, {}, [](auto& in) { return TensorList{mt::triu(in["x"], 1)}; }, 0, 0);
}

TEST_CASE("silu, rms_norm and rotary_embedding match PyTorch's formulas, gradients included") {
  check_op("silu", {"x"}, {}, [](auto& in) { return TensorList{mt::silu(in["x"])}; });
  check_op("rms_norm", {"x", "weight"}, {}, [](auto& in) { return TensorList{mt::rms_norm(in["x"], {6}, in["weight"], 1e-5)}; });
  // eps omitted: float32's machine epsilon, PyTorch's default
  check_op("rms_norm_2d_default_eps", {"x"}, {}, [](auto& in) { return TensorList{mt::rms_norm(in["x"], {3, 4})}; });
  // x [2, 5, 3, 8] at positions offset.. (tables [5, 1, 4] broadcast over the heads)
  auto rope = [](bool interleaved, std::int64_t offset) {
    return [=](std::map<std::string, Tensor>& in) {
      Tensor c = mt::zeros({5, 1, 4}, mt::kFloat64), s = mt::zeros({5, 1, 4}, mt::kFloat64);
      for (std::int64_t p = 0; p < 5; ++p) {
        for (std::int64_t i = 0; i < 4; ++i) {
          const double angle = static_cast<double>(p + offset) * std::pow(10000.0, -2.0 * static_cast<double>(i) / 8.0);
          c.data<double>()[p * 4 + i] = std::cos(angle);
          s.data<double>()[p * 4 + i] = std::sin(angle);
        }
      }
      return TensorList{mt::rotary_embedding(in["x"], c.to(mt::kFloat32), s.to(mt::kFloat32), interleaved)};
    };
  };
  check_op("rope_half", {"x"}, {}, rope(false, 0));
  check_op("rope_half_offset", {"x"}, {}, rope(false, 9));
  check_op("rope_interleaved", {"x"}, {}, rope(true, 0));
  check_op("rope_interleaved_offset", {"x"}, {}, rope(true, 9));
}

TEST_CASE("grouped-query attention matches repeat_kv in PyTorch: SDPA's enable_gqa and multi_head_attention") {
  check_op("sdpa_gqa_causal", {"q", "k", "v"}, {}, [](auto& in) {
    return TensorList{std::get<0>(
        mt::scaled_dot_product_attention(in["q"], in["k"], in["v"], mt::Mask(), 0.0, true, 0.0, /*enable_gqa=*/true))};
  });
  check_op("mha_heads_gqa", {"q", "k", "v"}, {}, [](auto& in) {
    return TensorList{std::get<0>(mt::multi_head_attention(in["q"], in["k"], in["v"], 6, {.num_kv_heads = 2}))};
  });
}

TEST_CASE("gradcheck: the generation ops in float64") {
  mt::manual_seed(11);
  auto ok = [](const std::function<Tensor(const TensorList&)>& f, const TensorList& in) { return mt::gradcheck(f, in); };
  CHECK(ok([](auto& v) { return std::get<0>(mt::sort(v[0], 1, true)); }, {rand64({3, 5})}));
  CHECK(ok([](auto& v) { return std::get<0>(mt::topk(v[0], 2, 0, false)); }, {rand64({4, 3})}));
  CHECK(ok([](auto& v) { return mt::gather(v[0], 1, mt::tensor(std::vector<std::int64_t>{2, 2, 0, 1, 0, 0}, {2, 3})); },
           {rand64({2, 4})}));
  CHECK(ok([](auto& v) { return mt::cumsum(v[0], 1); }, {rand64({2, 4, 3})}));
  CHECK(ok([](auto& v) { return mt::tril(v[0], 1) + mt::triu(v[0], -1); }, {rand64({2, 3, 4})}));
  CHECK(ok([](auto& v) { return mt::silu(v[0]); }, {rand64({3, 4}, -4, 4)}));
  CHECK(ok([](auto& v) { return mt::silu_and_mul(v[0], v[1]); }, {rand64({3, 5}, -4, 4), rand64({3, 5})}));
  CHECK(ok([](auto& v) { return mt::rms_norm(v[0], {4}, v[1], 1e-5); }, {rand64({2, 3, 4}), rand64({4})}));
  CHECK(ok([](auto& v) { return mt::rms_norm(v[0], {3, 4}); }, {rand64({2, 3, 4})}));
  for (bool interleaved : {false, true}) {
    // x, cos and sin all differentiated; the tables broadcast over batch and heads
    CHECK(ok([interleaved](auto& v) { return mt::rotary_embedding(v[0], v[1], v[2], interleaved); },
             {rand64({2, 3, 2, 6}), rand64({3, 1, 3}), rand64({3, 1, 3})}));
  }
  // GQA: k and v of 2 heads shared by 4 query heads, causal, in both layouts
  CHECK(ok([](auto& v) { return std::get<0>(mt::scaled_dot_product_attention(v[0], v[1], v[2], mt::Mask(), 0.0, true, 0.0, true)); },
           {rand64({1, 4, 3, 2}), rand64({1, 2, 3, 2}), rand64({1, 2, 3, 2})}));
  CHECK(ok([](auto& v) {
    return std::get<0>(mt::multi_head_attention(v[0], v[1], v[2], 4, {.mask = mt::Mask::causal(3), .num_kv_heads = 2}));
  }, {rand64({2, 3, 8}), rand64({2, 3, 4}), rand64({2, 3, 4})}));
  // the cached form: q, k, v of 2 new positions after 3 cached ones
  const Tensor k_cache = mt::randn({1, 6, 4}, mt::kFloat64), v_cache = mt::randn({1, 6, 4}, mt::kFloat64);
  CHECK(ok([&](auto& v) {  // fresh caches each time: the op writes them, and a written cache refuses backward
    return std::get<0>(
        mt::multi_head_attention_cached(v[0], v[1], v[2], k_cache.clone(), v_cache.clone(), 3, 4, {.num_kv_heads = 2}));
  }, {rand64({1, 2, 8}), rand64({1, 2, 4}), rand64({1, 2, 4})}));
}

TEST_CASE("silu_and_mul equals silu(gate) * up in values and gradients, in float32 vectors and their tails") {
  mt::manual_seed(12);
  for (std::int64_t n : {1, 15, 16, 37, 352}) {  // below, at and past one vector of 16 lanes
    const Tensor gate = (mt::randn({3, n}) * 4.0).requires_grad_(), up = mt::randn({3, n}).requires_grad_();
    const Tensor g0 = gate.detach().clone().requires_grad_(), u0 = up.detach().clone().requires_grad_();
    const Tensor w = mt::randn({3, n});
    const Tensor fused = mt::silu_and_mul(gate, up), composed = mt::silu(g0) * u0;
    CHECK_CLOSE(fused, composed, 1e-6, 1e-7);
    mt::sum(fused * w).backward();
    mt::sum(composed * w).backward();
    CHECK_CLOSE(gate.grad(), g0.grad(), 1e-5, 1e-6);
    CHECK_CLOSE(up.grad(), u0.grad(), 1e-6, 1e-7);
  }
  CHECK_THROWS_MSG(mt::silu_and_mul(mt::ones({2, 3}), mt::ones({3})), mt::ShapeError, "silu_and_mul", "[2, 3]", "[3]");
  CHECK_THROWS_MSG(mt::silu_and_mul(mt::ones({3}), mt::ones({3}, mt::kFloat64)), mt::DtypeError, "silu_and_mul");
}

TEST_CASE("rms_norm in float32 vectors and their tails agrees with float64, gradients included") {
  mt::manual_seed(13);
  for (std::int64_t n : {1, 15, 16, 37, 128}) {
    const Tensor x = mt::randn({4, n}) * 3.0, w = mt::randn({n}), gy = mt::randn({4, n});
    const Tensor x32 = x.clone().requires_grad_(), w32 = w.clone().requires_grad_();
    const Tensor x64 = x.to(mt::kFloat64).requires_grad_(), w64 = w.to(mt::kFloat64).requires_grad_();
    const Tensor y32 = mt::rms_norm(x32, {n}, w32, 1e-5), y64 = mt::rms_norm(x64, {n}, w64, 1e-5);
    CHECK_CLOSE(y32, y64, 1e-5, 1e-6);
    mt::sum(y32 * gy).backward();
    mt::sum(y64 * gy.to(mt::kFloat64)).backward();
    CHECK_CLOSE(x32.grad(), x64.grad(), 1e-4, 1e-5);
    CHECK_CLOSE(w32.grad(), w64.grad(), 1e-4, 1e-5);
  }
}

TEST_CASE("sort is stable and puts NaN last ascending, first descending; topk breaks ties by index") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = mt::tensor({3.0, nan, 1.0, 3.0, 1.0});
  auto [asc, ia] = mt::sort(x);
  CHECK(ia.to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 4, 0, 3, 1});
  CHECK(std::isnan(asc.to_vector<double>()[4]));
  auto [desc, id] = mt::sort(x, 0, true);
  CHECK(id.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 3, 2, 4});
  auto [top, it] = mt::topk(mt::tensor({2.0, 5.0, 2.0, 5.0}), 3);
  CHECK(it.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 3, 0});
  CHECK(top.to_vector<double>() == std::vector<double>{5, 5, 2});
  auto [none, in] = mt::topk(x, 0);
  CHECK(none.shape() == mt::Shape{0});
  // integer tensors sort too; a 0-d tensor is its own sort
  CHECK(std::get<1>(mt::sort(mt::tensor(std::vector<std::int64_t>{4, -1, 2}, {3}))).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, 2, 0});
  CHECK(std::get<0>(mt::sort(mt::scalar_tensor(2.5))).item() == 2.5);
}

TEST_CASE("cumsum of int64 and bool gives int64; tril and triu keep bool masks and extreme diagonals") {
  const Tensor b = mt::tensor({1.0, 0.0, 1.0, 1.0}) > 0.5;
  const Tensor c = mt::cumsum(b, 0);
  CHECK(c.dtype() == mt::kInt64);
  CHECK(c.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1, 2, 3});
  const Tensor causal = mt::tril(mt::ones({3, 3}, mt::kBool));
  CHECK(mt::equal(causal, mt::Mask::causal(3).allowed()));
  CHECK(mt::equal(mt::triu(mt::ones({2, 3}), std::numeric_limits<std::int64_t>::max()), mt::zeros({2, 3})));
  CHECK(mt::equal(mt::tril(mt::ones({2, 3}), std::numeric_limits<std::int64_t>::max()), mt::ones({2, 3})));
  CHECK(mt::equal(mt::tril(mt::ones({2, 3}), std::numeric_limits<std::int64_t>::min()), mt::zeros({2, 3})));
}

TEST_CASE("multinomial draws each category in proportion to its weight, seeded and repeatable") {
  mt::Generator g(5);
  mt::GeneratorGuard use(g);
  const Tensor w = mt::tensor({{1.0, 0.0, 3.0}, {0.0, 0.0, 2.0}});
  const Tensor draws = mt::multinomial(w, 4000, /*replacement=*/true);
  CHECK(draws.shape() == mt::Shape{2, 4000});
  const auto d = draws.to_vector<std::int64_t>();
  std::int64_t zeros = 0, ones = 0;
  for (std::int64_t i = 0; i < 4000; ++i) zeros += d[static_cast<std::size_t>(i)] == 0, ones += d[static_cast<std::size_t>(i)] == 1;
  CHECK(ones == 0);                          // weight 0: never drawn
  CHECK(std::abs(zeros - 1000) < 100);       // 1/4 of 4000, within 3.7 standard deviations
  for (std::int64_t i = 4000; i < 8000; ++i) CHECK(d[static_cast<std::size_t>(i)] == 2);
  // without replacement: every category of non-zero weight once
  auto once = mt::multinomial(mt::tensor({0.2, 0.0, 0.5, 0.3}), 3).to_vector<std::int64_t>();
  std::sort(once.begin(), once.end());
  CHECK(once == std::vector<std::int64_t>{0, 2, 3});
  // the same seed, the same draws
  mt::Generator a(9), b(9);
  Tensor da, db;
  {
    mt::GeneratorGuard ua(a);
    da = mt::multinomial(mt::tensor({0.1, 0.2, 0.3, 0.4}), 20, true);
  }
  {
    mt::GeneratorGuard ub(b);
    db = mt::multinomial(mt::tensor({0.1, 0.2, 0.3, 0.4}), 20, true);
  }
  CHECK(mt::equal(da, db));
}

TEST_CASE("bad input: sort, topk, gather, cumsum, tril and multinomial name the problem") {
  const Tensor x = mt::randn({2, 5});
  CHECK_THROWS_MSG(mt::topk(x, 6), mt::ValueError, "topk: k = 6", "dim 1 of size 5", "[0, 5]");
  CHECK_THROWS_MSG(mt::topk(x, -1), mt::ValueError, "k = -1");
  CHECK_THROWS_MSG(mt::sort(x, 2), mt::IndexError, "sort");
  CHECK_THROWS_MSG(mt::gather(x, 1, mt::zeros({2, 3})), mt::DtypeError, "gather", "int64");
  CHECK_THROWS_MSG(mt::gather(x, 1, mt::zeros({2}, mt::kInt64)), mt::ShapeError, "gather", "[2]", "[2, 5]");
  CHECK_THROWS_MSG(mt::gather(x, 1, mt::zeros({3, 2}, mt::kInt64)), mt::ShapeError, "no larger");
  CHECK_THROWS_MSG(mt::gather(x, 1, mt::full({2, 1}, 5, mt::kInt64)), mt::IndexError, "index 5", "size 5");
  CHECK_THROWS_MSG(mt::gather(x, 1, mt::full({2, 1}, -1, mt::kInt64)), mt::IndexError, "index -1");
  CHECK_THROWS_MSG(mt::cumsum(x, -3), mt::IndexError, "cumsum");
  CHECK_THROWS_MSG(mt::tril(mt::ones({4})), mt::ShapeError, "tril", "at least 2 dims", "[4]");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_MSG(mt::multinomial(mt::tensor({0.5, -0.1}), 1), mt::ValueError, "multinomial", "row 0", "-0.1",
                   ">= 0");
  CHECK_THROWS_MSG(mt::multinomial(mt::tensor({{0.5, 0.5}, {nan, 0.1}}), 1), mt::ValueError, "row 1", "nan");
  CHECK_THROWS_MSG(mt::multinomial(mt::tensor({{0.5, 0.5}, {0.0, 0.0}}), 1), mt::ValueError, "row 1", "sums to 0");
  CHECK_THROWS_MSG(mt::multinomial(mt::tensor({0.5, 0.0, 0.5}), 3), mt::ValueError, "without replacement", "only 2");
  CHECK_THROWS_MSG(mt::multinomial(mt::tensor({0.5, 0.5}), 0), mt::ValueError, "num_samples");
  CHECK_THROWS_MSG(mt::multinomial(mt::ones({2, 2, 2}), 1), mt::ShapeError, "[C] or [N, C]");
  CHECK_THROWS_MSG(mt::multinomial(mt::ones({2}, mt::kInt64), 1), mt::DtypeError, "floating");
}

TEST_CASE("bad input: rms_norm, rotary_embedding and grouped-query attention name the problem") {
  CHECK_THROWS_MSG(mt::rms_norm(mt::ones({2, 3}), {4}), mt::ShapeError, "rms_norm", "[2, 3]", "[4]");
  CHECK_THROWS_MSG(mt::rms_norm(mt::ones({2, 3}), {3}, mt::ones({2})), mt::ShapeError, "weight", "[3]");
  CHECK_THROWS_MSG(mt::rms_norm(mt::ones({2, 3}), {3}, Tensor(), -1.0), mt::ValueError, "eps");
  const Tensor t = mt::ones({3, 1, 2});
  CHECK_THROWS_MSG(mt::rotary_embedding(mt::ones({1, 3, 2, 5}), t, t), mt::ShapeError, "even", "[1, 3, 2, 5]");
  CHECK_THROWS_MSG(mt::rotary_embedding(mt::ones({1, 4, 2, 4}), t, t), mt::ShapeError, "cos [3, 1, 2]",
                   "broadcasts to [1, 4, 2, 2]");
  CHECK_THROWS_MSG(mt::rotary_embedding(mt::ones({1, 3, 2, 4}), t, t.to(mt::kFloat64)), mt::DtypeError, "one floating dtype");
  // kv heads that do not divide the query heads
  CHECK_THROWS_MSG(mt::scaled_dot_product_attention(mt::ones({1, 4, 2, 3}), mt::ones({1, 3, 2, 3}), mt::ones({1, 3, 2, 3}),
                                                    mt::Mask(), 0.0, false, 0.0, true),
                   mt::ShapeError, "enable_gqa", "dividing the 4 heads");
  CHECK_THROWS_MSG(mt::multi_head_attention(mt::ones({1, 2, 8}), mt::ones({1, 2, 6}), mt::ones({1, 2, 6}), 4,
                                            {.num_kv_heads = 3}),
                   mt::ShapeError, "num_kv_heads = 3 must divide num_heads = 4");
  CHECK_THROWS_MSG(mt::multi_head_attention(mt::ones({1, 2, 8}), mt::ones({1, 2, 8}), mt::ones({1, 2, 8}), 4,
                                            {.num_kv_heads = 2}),
                   mt::ShapeError, "Hkv D", "Hkv = 2", "[1, 2, 8]");
  CHECK_THROWS_MSG(mt::multi_head_attention_packed(mt::ones({1, 2, 24}), 4, {.num_kv_heads = 2}), mt::ShapeError,
                   "num_kv_heads = 2");
  // a cache beyond its capacity, and a cache that requires grad
  const Tensor kc = mt::zeros({1, 4, 4}), vc = mt::zeros({1, 4, 4});
  CHECK_THROWS_MSG(mt::multi_head_attention_cached(mt::ones({1, 2, 8}), mt::ones({1, 2, 4}), mt::ones({1, 2, 4}), kc, vc,
                                                   3, 4, {.num_kv_heads = 2}),
                   mt::ValueError, "2 new positions after 3 cached", "capacity of 4");
  CHECK_THROWS_MSG(mt::multi_head_attention_cached(mt::ones({1, 1, 8}), mt::ones({1, 1, 4}), mt::ones({1, 1, 4}),
                                                   mt::zeros({1, 4, 4}).requires_grad_(), vc, 0, 4, {.num_kv_heads = 2}),
                   mt::AutogradError, "requires grad");
}
