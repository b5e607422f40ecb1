// Losses: values and input gradients against PyTorch 1.13 (tools/gen_training_fixtures.py,
// rtol 1e-5 / atol 1e-6 in float32), gradcheck in float64, and the errors on bad input.
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "microtorch/nn/loss.hpp"

using mt::Tensor;
using mt::TensorList;
namespace F = mt::nn::functional;
using mt::nn::Reduction;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-6;

using Inputs = std::map<std::string, Tensor>;

// Loads loss_<name>__<input> for every input, makes the float ones named in `diff` leaves
// that require grad, runs fn and compares the output and each gradient with the fixtures.
// For reduction "none" cases the gradient is that of (out * w).sum(), w from the fixture.
void check_fixture(const std::string& name, const std::vector<std::string>& inputs, const std::vector<std::string>& diff,
                   const std::function<Tensor(const Inputs&)>& fn, bool none = false) {
  const std::string base = "loss_" + name + "__";
  Inputs in;
  for (const auto& k : inputs) in[k] = fixture(base + k).clone();  // fixture() shares its cached tensor
  for (const auto& k : diff) in[k].requires_grad_();
  const Tensor out = fn(in);
  INFO("case " << name);
  CHECK_CLOSE(out, fixture(base + "out"), kRtol, kAtol);
  if (none) {
    (out * fixture(base + "w")).sum().backward();
  } else {
    out.backward();
  }
  for (const auto& k : diff) {
    INFO("gradient of " << k);
    REQUIRE(in[k].grad().defined());
    CHECK_CLOSE(in[k].grad(), fixture(base + "grad_" + k), kRtol, kAtol);
  }
}

Tensor int64s(std::initializer_list<std::int64_t> values) {
  Tensor t = mt::empty({static_cast<std::int64_t>(values.size())}, mt::kInt64);
  std::copy(values.begin(), values.end(), t.data<std::int64_t>());
  return t;
}

}  // namespace

// ---- against PyTorch -------------------------------------------------------------------------

TEST_CASE("cross_entropy matches PyTorch: plain mean over [N, C]") {
  check_fixture("ce_plain", {"logits", "target"}, {"logits"},
                [](const Inputs& v) { return F::cross_entropy(v.at("logits"), v.at("target")); });
}

TEST_CASE("cross_entropy with ignore_index averages over the kept targets only") {
  check_fixture("ce_ignore", {"logits", "target"}, {"logits"},
                [](const Inputs& v) { return F::cross_entropy(v.at("logits"), v.at("target")); });
  check_fixture("ce_ignore_class", {"logits", "target"}, {"logits"}, [](const Inputs& v) {
    return F::cross_entropy(v.at("logits"), v.at("target"), {.ignore_index = 2});
  });
}

TEST_CASE("cross_entropy with label smoothing matches PyTorch, with ignored targets") {
  check_fixture("ce_smooth", {"logits", "target"}, {"logits"}, [](const Inputs& v) {
    return F::cross_entropy(v.at("logits"), v.at("target"), {.label_smoothing = 0.1});
  });
}

TEST_CASE("cross_entropy with class weights divides by the sum of the kept targets' weights") {
  check_fixture("ce_weight", {"logits", "target", "weight"}, {"logits"}, [](const Inputs& v) {
    return F::cross_entropy(v.at("logits"), v.at("target"), {.weight = v.at("weight")});
  });
  check_fixture("ce_weight_smooth", {"logits", "target", "weight"}, {"logits"}, [](const Inputs& v) {
    return F::cross_entropy(v.at("logits"), v.at("target"), {.weight = v.at("weight"), .label_smoothing = 0.25});
  });
}

TEST_CASE("cross_entropy reductions sum and none match PyTorch") {
  check_fixture("ce_sum", {"logits", "target"}, {"logits"}, [](const Inputs& v) {
    return F::cross_entropy(v.at("logits"), v.at("target"), {.reduction = Reduction::Sum, .label_smoothing = 0.2});
  });
  check_fixture(
      "ce_none", {"logits", "target", "weight"}, {"logits"},
      [](const Inputs& v) {
        return F::cross_entropy(v.at("logits"), v.at("target"),
                                {.weight = v.at("weight"), .reduction = Reduction::None, .label_smoothing = 0.1});
      },
      /*none=*/true);
}

TEST_CASE("cross_entropy over [N, C, d...] logits takes [N, d...] targets") {
  check_fixture("ce_nd", {"logits", "target"}, {"logits"}, [](const Inputs& v) {
    return F::cross_entropy(v.at("logits"), v.at("target"), {.label_smoothing = 0.1});
  });
  check_fixture(
      "ce_nd_none", {"logits", "target"}, {"logits"},
      [](const Inputs& v) {
        const Tensor out = F::cross_entropy(v.at("logits"), v.at("target"), {.reduction = Reduction::None});
        CHECK(out.shape() == mt::Shape{2, 2, 3});
        return out;
      },
      true);
}

TEST_CASE("cross_entropy accepts an unbatched [C] input with a 0-d target") {
  check_fixture("ce_unbatched", {"logits", "target"}, {"logits"}, [](const Inputs& v) {
    return F::cross_entropy(v.at("logits"), v.at("target"), {.label_smoothing = 0.1});
  });
}

TEST_CASE("cross_entropy is stable for logits of magnitude 100") {
  check_fixture("ce_large", {"logits", "target"}, {"logits"},
                [](const Inputs& v) { return F::cross_entropy(v.at("logits"), v.at("target")); });
}

TEST_CASE("nll_loss matches PyTorch, with ignore_index and per-element weighted losses") {
  check_fixture("nll_plain", {"log_probs", "target"}, {"log_probs"},
                [](const Inputs& v) { return F::nll_loss(v.at("log_probs"), v.at("target")); });
  check_fixture(
      "nll_weight_none", {"log_probs", "target", "weight"}, {"log_probs"},
      [](const Inputs& v) {
        return F::nll_loss(v.at("log_probs"), v.at("target"), {.weight = v.at("weight"), .reduction = Reduction::None});
      },
      true);
}

TEST_CASE("mse_loss matches PyTorch for every reduction, gradients to input and target") {
  check_fixture("mse_mean", {"input", "target"}, {"input", "target"},
                [](const Inputs& v) { return F::mse_loss(v.at("input"), v.at("target")); });
  check_fixture("mse_sum", {"input", "target"}, {"input", "target"},
                [](const Inputs& v) { return F::mse_loss(v.at("input"), v.at("target"), Reduction::Sum); });
  check_fixture(
      "mse_none", {"input", "target"}, {"input", "target"},
      [](const Inputs& v) { return F::mse_loss(v.at("input"), v.at("target"), Reduction::None); }, true);
}

TEST_CASE("binary_cross_entropy_with_logits matches PyTorch at 0 and at +-40") {
  check_fixture("bce_mean", {"logits", "target"}, {"logits", "target"}, [](const Inputs& v) {
    return F::binary_cross_entropy_with_logits(v.at("logits"), v.at("target"));
  });
  check_fixture("bce_sum", {"logits", "target"}, {"logits", "target"}, [](const Inputs& v) {
    return F::binary_cross_entropy_with_logits(v.at("logits"), v.at("target"), {.reduction = Reduction::Sum});
  });
}

TEST_CASE("binary_cross_entropy_with_logits with pos_weight and weight matches PyTorch") {
  check_fixture("bce_pos_weight", {"logits", "target", "pos_weight"}, {"logits", "target"}, [](const Inputs& v) {
    return F::binary_cross_entropy_with_logits(v.at("logits"), v.at("target"), {.pos_weight = v.at("pos_weight")});
  });
  check_fixture(
      "bce_weight_none", {"logits", "target", "weight", "pos_weight"}, {"logits", "target"},
      [](const Inputs& v) {
        return F::binary_cross_entropy_with_logits(
            v.at("logits"), v.at("target"),
            {.weight = v.at("weight"), .pos_weight = v.at("pos_weight"), .reduction = Reduction::None});
      },
      true);
}

TEST_CASE("binary_cross_entropy_with_logits has gradient sigmoid(x) - y at x = 0") {
  Tensor x = mt::zeros({3}).requires_grad_();
  const Tensor y = mt::tensor({0.0, 0.25, 1.0});
  F::binary_cross_entropy_with_logits(x, y, {.reduction = Reduction::Sum}).backward();
  CHECK_CLOSE(x.grad(), mt::tensor({0.5, 0.25, -0.5}), 1e-6, 1e-7);
}

// ---- gradcheck (float64) -----------------------------------------------------------------------

TEST_CASE("gradcheck: cross_entropy with ignore_index, label smoothing, weights and [N, C, d]") {
  mt::manual_seed(11);
  const Tensor target = int64s({0, 3, -100, 2, 1});
  const Tensor weight = mt::tensor({0.5, 1.0, 2.0, 1.5}, mt::kFloat64);
  CHECK(mt::gradcheck([&](const TensorList& v) { return F::cross_entropy(v[0], target); }, {rand64({5, 4}, -2, 2)}));
  CHECK(mt::gradcheck(
      [&](const TensorList& v) { return F::cross_entropy(v[0], target, {.label_smoothing = 0.3}); },
      {rand64({5, 4}, -2, 2)}));
  CHECK(mt::gradcheck(
      [&](const TensorList& v) {
        return F::cross_entropy(v[0], target, {.weight = weight, .reduction = Reduction::None, .label_smoothing = 0.2});
      },
      {rand64({5, 4}, -2, 2)}));
  CHECK(mt::gradcheck(
      [&](const TensorList& v) {
        return F::cross_entropy(v[0], int64s({3, 0, 3, 2, 1}), {.weight = weight, .ignore_index = 3, .label_smoothing = 0.1});
      },
      {rand64({5, 4}, -2, 2)}));
  const Tensor target_nd = fixture("loss_ce_nd__target");  // [3, 5] with two ignored
  CHECK(mt::gradcheck([&](const TensorList& v) { return F::cross_entropy(v[0], target_nd, {.label_smoothing = 0.1}); },
                      {rand64({3, 4, 5}, -2, 2)}));
}

TEST_CASE("gradcheck: nll_loss, mse_loss and binary_cross_entropy_with_logits") {
  mt::manual_seed(12);
  const Tensor target = int64s({2, -100, 0, 1});
  CHECK(mt::gradcheck([&](const TensorList& v) { return F::nll_loss(v[0], target, {.reduction = Reduction::Sum}); },
                      {rand64({4, 3})}));
  CHECK(mt::gradcheck([](const TensorList& v) { return F::mse_loss(v[0], v[1]); }, {rand64({3, 4}), rand64({3, 4})}));
  CHECK(mt::gradcheck([](const TensorList& v) { return F::mse_loss(v[0], v[1], Reduction::None); },
                      {rand64({2, 3}), rand64({2, 3})}));
  Tensor x = mt::tensor({{0.0, 3.0, -2.0}, {0.5, -0.1, 8.0}}, mt::kFloat64).requires_grad_();
  const Tensor pos_weight = mt::tensor({2.0, 0.5, 1.0}, mt::kFloat64);
  const Tensor weight = mt::tensor({{1.5}, {0.5}}, mt::kFloat64);
  CHECK(mt::gradcheck(
      [&](const TensorList& v) {
        return F::binary_cross_entropy_with_logits(v[0], v[1], {.weight = weight, .pos_weight = pos_weight});
      },
      {x, rand64({2, 3}, 0, 1)}));
}

// ---- documented edge cases ---------------------------------------------------------------------

TEST_CASE("cross_entropy with every target ignored gives a zero loss and a zero gradient, not NaN") {
  Tensor logits = mt::randn({3, 4}).requires_grad_();
  const Tensor target = int64s({-100, -100, -100});
  for (double eps : {0.0, 0.1}) {
    Tensor loss = F::cross_entropy(logits, target, {.label_smoothing = eps});
    CHECK(loss.item() == 0.0);
    loss.backward();
    CHECK_FALSE(mt::has_nonfinite(logits.grad()));
    CHECK_CLOSE(logits.grad(), mt::zeros({3, 4}), 0, 0);
    logits.zero_grad();
  }
  const Tensor none = F::cross_entropy(logits, target, {.reduction = Reduction::None});
  CHECK_CLOSE(none, mt::zeros({3}), 0, 0);
  none.sum().backward();
  CHECK_CLOSE(logits.grad(), mt::zeros({3, 4}), 0, 0);
}

TEST_CASE("cross_entropy of an empty batch is zero") {
  const Tensor loss = F::cross_entropy(mt::zeros({0, 4}), mt::zeros({0}, mt::kInt64));
  CHECK(loss.item() == 0.0);
}

TEST_CASE("cross_entropy of a confident correct prediction is near zero, of a uniform one log(C)") {
  const Tensor target = int64s({1, 0});
  CHECK(F::cross_entropy(mt::tensor({{-20.0, 20.0, -20.0}, {20.0, -20.0, -20.0}}), target).item() ==
        doctest::Approx(0.0).epsilon(1e-6));
  CHECK(F::cross_entropy(mt::zeros({2, 3}), target).item() == doctest::Approx(std::log(3.0)));
}

TEST_CASE("accuracy counts argmax over dim 1 equal to the target") {
  const Tensor logits = mt::tensor({{0.1, 0.9, 0.0}, {0.8, 0.1, 0.1}, {0.2, 0.3, 0.5}, {0.0, 0.0, 1.0}});
  CHECK(F::accuracy(logits, int64s({1, 0, 0, 2})) == doctest::Approx(0.75));
  CHECK(F::accuracy(logits, int64s({1, 0, 2, 2})) == doctest::Approx(1.0));
  // [N, C, d]: argmax over the class dim 1
  const Tensor seq = mt::tensor({{{1.0, 0.0}, {0.0, 1.0}}});  // [1, 2, 2]
  Tensor t = mt::zeros({1, 2}, mt::kInt64);
  t.data<std::int64_t>()[1] = 1;
  CHECK(F::accuracy(seq, t) == doctest::Approx(1.0));
  CHECK_THROWS_MSG(F::accuracy(logits, int64s({1, 0})), mt::ShapeError, "accuracy", "[2]", "[4, 3]", "[4]");
}

// ---- errors ---------------------------------------------------------------------------------

TEST_CASE("cross_entropy refuses a target outside [0, C) and names the value and C") {
  const Tensor logits = mt::randn({3, 5});
  CHECK_THROWS_MSG(F::cross_entropy(logits, int64s({0, 7, 1})), mt::IndexError, "cross_entropy", "target value 7",
                   "5 classes", "position 1");
  CHECK_THROWS_MSG(F::cross_entropy(logits, int64s({0, 5, 1})), mt::IndexError, "1-based");
  CHECK_THROWS_MSG(F::cross_entropy(logits, int64s({-1, 0, 1})), mt::IndexError, "-1", "ignore_index = -1");
  CHECK_NOTHROW(F::cross_entropy(logits, int64s({-1, 0, 1}), {.ignore_index = -1}));
  CHECK_THROWS_MSG(F::nll_loss(logits, int64s({0, 1, 9})), mt::IndexError, "nll_loss", "9", "5 classes");
}

TEST_CASE("cross_entropy refuses float targets and suggests .to(kInt64)") {
  CHECK_THROWS_MSG(F::cross_entropy(mt::randn({3, 5}), mt::tensor({0.0, 1.0, 2.0})), mt::DtypeError, "cross_entropy",
                   "int64", "float32", "to(kInt64)");
  CHECK_THROWS_MSG(F::cross_entropy(mt::zeros({3, 5}, mt::kInt64), int64s({0, 1, 2})), mt::DtypeError, "logits",
                   "to(kFloat32)");
}

TEST_CASE("cross_entropy refuses a batch size mismatch and shows both shapes") {
  CHECK_THROWS_MSG(F::cross_entropy(mt::randn({4, 3}), int64s({0, 1, 2, 0, 1})), mt::ShapeError, "cross_entropy",
                   "[5]", "[4, 3]", "batch sizes differ");
  CHECK_THROWS_MSG(F::cross_entropy(mt::randn({4, 3}), mt::zeros({4, 1}, mt::kInt64)), mt::ShapeError, "squeeze(1)");
  CHECK_THROWS_MSG(F::cross_entropy(mt::randn({4, 3}), mt::zeros({4, 3}, mt::kInt64)), mt::ShapeError, "argmax(1)");
  CHECK_THROWS_MSG(F::cross_entropy(mt::randn({2, 3, 4}), mt::zeros({2, 5}, mt::kInt64)), mt::ShapeError, "[2, 4]",
                   "[2, 5]");
  CHECK_THROWS_MSG(F::nll_loss(mt::randn({4, 3}), int64s({0, 1})), mt::ShapeError, "nll_loss", "[2]", "[4, 3]");
}

TEST_CASE("cross_entropy refuses a weight of the wrong size and a label_smoothing outside [0, 1]") {
  const Tensor logits = mt::randn({2, 3});
  const Tensor target = int64s({0, 1});
  CHECK_THROWS_MSG(F::cross_entropy(logits, target, {.weight = mt::ones({4})}), mt::ShapeError, "weight", "[3]", "[4]");
  CHECK_THROWS_MSG(F::cross_entropy(logits, target, {.label_smoothing = 1.5}), mt::ValueError, "label_smoothing",
                   "1.5");
}

TEST_CASE("mse_loss and bce refuse different shapes instead of broadcasting") {
  CHECK_THROWS_MSG(F::mse_loss(mt::randn({4, 1}), mt::randn({4})), mt::ShapeError, "mse_loss", "[4, 1]", "[4]",
                   "reshape");
  CHECK_THROWS_MSG(F::binary_cross_entropy_with_logits(mt::randn({4}), mt::rand({3})), mt::ShapeError,
                   "binary_cross_entropy_with_logits", "[3]", "[4]");
  CHECK_THROWS_MSG(F::binary_cross_entropy_with_logits(mt::randn({2}), int64s({0, 1})), mt::DtypeError, "float",
                   "to(kFloat32)");
  CHECK_THROWS_MSG(F::binary_cross_entropy_with_logits(mt::randn({2, 3}), mt::rand({2, 3}), {.pos_weight = mt::ones({2})}),
                   mt::ShapeError, "pos_weight", "[2]", "[2, 3]");
}

// ---- modules ---------------------------------------------------------------------------------

TEST_CASE("loss modules call their functions and keep class weights as buffers") {
  const Tensor logits = fixture("loss_ce_weight__logits");
  const Tensor target = fixture("loss_ce_weight__target");
  mt::nn::CrossEntropyLoss ce({.weight = fixture("loss_ce_weight__weight")});
  CHECK_CLOSE(ce(logits, target), fixture("loss_ce_weight__out"), kRtol, kAtol);
  const auto state = ce.state_dict();
  REQUIRE(state.size() == 1);
  CHECK(state[0].first == "weight");
  CHECK(ce.num_parameters() == 0);
  CHECK(ce.summary().find("CrossEntropyLoss") != std::string::npos);
  CHECK(ce.extra_repr().find("ignore_index=-100") != std::string::npos);
  CHECK_THROWS_AS(ce.forward(logits), mt::ValueError);  // a loss needs a target

  mt::nn::MSELoss mse(Reduction::Sum);
  CHECK_CLOSE(mse(fixture("loss_mse_sum__input"), fixture("loss_mse_sum__target")), fixture("loss_mse_sum__out"),
              kRtol, kAtol);
  mt::nn::NLLLoss nll;
  CHECK_CLOSE(nll(fixture("loss_nll_plain__log_probs"), fixture("loss_nll_plain__target")),
              fixture("loss_nll_plain__out"), kRtol, kAtol);
  mt::nn::BCEWithLogitsLoss bce({.pos_weight = fixture("loss_bce_pos_weight__pos_weight")});
  CHECK_CLOSE(bce(fixture("loss_bce_pos_weight__logits"), fixture("loss_bce_pos_weight__target")),
              fixture("loss_bce_pos_weight__out"), kRtol, kAtol);
  CHECK(bce.state_dict().size() == 1);
}
