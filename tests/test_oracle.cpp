// PyTorch oracle tests: every differentiable op against torch 1.13 (tools/gen_fixtures.py).
//
// Fixture case <c> holds its inputs (<c>__a.npy, ...), the forward output (<c>__out.npy, or
// out0, out1, ... for split/chunk), a random weight w of the output's shape, and
// <c>__grad_<input>.npy = d/d<input> of sum(out * w). A case loads the inputs, marks the
// float ones requires_grad, runs the microtorch op, compares the output, backpropagates
// sum(out * w) and compares each input's .grad() with torch's.
//
// Tolerances (|got - expected| <= atol + rtol * |expected|):
//   float32: rtol 1e-5, atol 1e-6 — a few ulp of the tiny sums both libraries accumulate in
//            a different order (BLAS vs torch's kernels, pairwise vs sequential sums).
//   float64: rtol 1e-10, atol 1e-12 — the same reasons, at double precision.
// No case needs anything looser.
//
// Regenerate the fixtures with: /usr/bin/python3 tools/gen_fixtures.py
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "helpers.hpp"

namespace {

struct Tol {
  double rtol;
  double atol;
};
constexpr Tol kTol32{1e-5, 1e-6};
constexpr Tol kTol64{1e-10, 1e-12};

using SingleFn = std::function<mt::Tensor(const mt::TensorList&)>;
using MultiFn = std::function<mt::TensorList(const mt::TensorList&)>;

std::string fixture_name(const std::string& c, const std::string& tensor) { return c + "__" + tensor; }

/// Compares `actual` with fixture <c>__<tensor> (dtype and values).
void expect_fixture(const mt::Tensor& actual, const std::string& c, const std::string& tensor, Tol tol) {
  const std::string name = fixture_name(c, tensor);
  INFO("fixture ", name);
  const mt::Tensor expected = fixture(name);
  CHECK_MESSAGE(actual.dtype() == expected.dtype(), "dtype ", mt::dtype_name(actual.dtype()), " != expected ",
                mt::dtype_name(expected.dtype()));
  CHECK_CLOSE(actual, expected, tol.rtol, tol.atol);
}

/// Runs case `c`: loads the named inputs (float ones require grad), applies fn, checks the
/// outputs (out, or out0..outN when fn returns several) and the gradient of every float input
/// for the loss sum_i sum(out_i * w_i).
void check_case_multi(const std::string& c, const std::vector<std::string>& inputs, const MultiFn& fn) {
  mt::TensorList xs;
  for (const auto& n : inputs) {
    mt::Tensor x = fixture(fixture_name(c, n));
    if (x.is_floating_point()) x.requires_grad_(true);
    xs.push_back(x);
  }
  const mt::TensorList outs = fn(xs);
  REQUIRE_FALSE(outs.empty());
  const Tol tol = outs[0].dtype() == mt::kFloat64 ? kTol64 : kTol32;

  mt::Tensor loss;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const std::string suffix = outs.size() == 1 ? "" : std::to_string(i);
    expect_fixture(outs[i], c, "out" + suffix, tol);
    const mt::Tensor term = mt::sum(outs[i] * fixture(fixture_name(c, "w" + suffix)));
    loss = loss.defined() ? loss + term : term;
  }
  loss.backward();

  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].is_floating_point()) continue;
    INFO("gradient of input ", inputs[i]);
    const mt::Tensor g = xs[i].grad();
    CHECK_MESSAGE(g.defined(), "no gradient reached ", inputs[i]);
    if (g.defined()) expect_fixture(g, c, "grad_" + inputs[i], tol);
  }
}

void check_case(const std::string& c, const std::vector<std::string>& inputs, const SingleFn& fn) {
  check_case_multi(c, inputs, [&](const mt::TensorList& xs) { return mt::TensorList{fn(xs)}; });
}

}  // namespace

TEST_CASE("add, sub, mul and div match torch values and gradients under broadcasting") {
  const std::vector<std::string> ab{"a", "b"};
  SUBCASE("add [2,3,4] + [3,1]") { check_case("add_bcast", ab, [](auto& x) { return mt::add(x[0], x[1]); }); }
  SUBCASE("add same shape") { check_case("add_same", ab, [](auto& x) { return x[0] + x[1]; }); }
  SUBCASE("add [2,3] + 0-d") { check_case("add_0d", ab, [](auto& x) { return x[0] + x[1]; }); }
  SUBCASE("sub [3,1] - [2,3,4] (left operand broadcasts)") {
    check_case("sub_bcast_left", ab, [](auto& x) { return mt::sub(x[0], x[1]); });
  }
  SUBCASE("sub [2,3,4] - [4]") { check_case("sub_bcast_row", ab, [](auto& x) { return x[0] - x[1]; }); }
  SUBCASE("mul [2,3,4] * [3,1]") { check_case("mul_bcast", ab, [](auto& x) { return mt::mul(x[0], x[1]); }); }
  SUBCASE("mul [2,1,4] * [3,1] (both broadcast)") {
    check_case("mul_bcast_both", ab, [](auto& x) { return x[0] * x[1]; });
  }
  SUBCASE("div [2,3,4] / [3,1]") { check_case("div_bcast", ab, [](auto& x) { return mt::div(x[0], x[1]); }); }
  SUBCASE("div [2,1,4] / [3,1] (both broadcast, negative divisor)") {
    check_case("div_bcast_both", ab, [](auto& x) { return x[0] / x[1]; });
  }
}

TEST_CASE("pow matches torch.pow for scalar and tensor exponents") {
  SUBCASE("x^3 with negative bases") {
    check_case("pow_scalar_int", {"x"}, [](auto& x) { return mt::pow(x[0], 3.0); });
  }
  SUBCASE("x^2.5") { check_case("pow_scalar_frac", {"x"}, [](auto& x) { return mt::pow(x[0], 2.5); }); }
  SUBCASE("x^-0.5") { check_case("pow_scalar_neg", {"x"}, [](auto& x) { return x[0].pow(-0.5); }); }
  SUBCASE("positive [2,3,4] ^ [3,1]") {
    check_case("pow_tensor", {"a", "b"}, [](auto& x) { return mt::pow(x[0], x[1]); });
  }
  SUBCASE("positive [3,4] ^ [3,4]") {
    check_case("pow_tensor_same", {"a", "b"}, [](auto& x) { return mt::pow(x[0], x[1]); });
  }
}

TEST_CASE("maximum and minimum match torch and route the gradient to the chosen operand") {
  const std::vector<std::string> ab{"a", "b"};
  SUBCASE("maximum [2,3,4] with [3,1]") {
    check_case("maximum_bcast", ab, [](auto& x) { return mt::maximum(x[0], x[1]); });
  }
  SUBCASE("maximum [2,3,4] with [4]") {
    check_case("maximum_bcast_row", ab, [](auto& x) { return mt::maximum(x[0], x[1]); });
  }
  SUBCASE("minimum [2,3,4] with [4]") {
    check_case("minimum_bcast", ab, [](auto& x) { return mt::minimum(x[0], x[1]); });
  }
  SUBCASE("minimum [2,3,4] with [3,1]") {
    check_case("minimum_bcast_col", ab, [](auto& x) { return mt::minimum(x[0], x[1]); });
  }
  SUBCASE("maximum same shape") {
    check_case("maximum_same", ab, [](auto& x) { return mt::maximum(x[0], x[1]); });
  }
}

TEST_CASE("unary math ops match torch: neg, exp, log, sqrt, rsqrt, abs, tanh, sigmoid") {
  SUBCASE("neg") { check_case("neg", {"x"}, [](auto& x) { return -x[0]; }); }
  SUBCASE("exp") { check_case("exp", {"x"}, [](auto& x) { return mt::exp(x[0]); }); }
  SUBCASE("log") { check_case("log", {"x"}, [](auto& x) { return mt::log(x[0]); }); }
  SUBCASE("sqrt") { check_case("sqrt", {"x"}, [](auto& x) { return mt::sqrt(x[0]); }); }
  SUBCASE("rsqrt") { check_case("rsqrt", {"x"}, [](auto& x) { return mt::rsqrt(x[0]); }); }
  SUBCASE("abs") { check_case("abs", {"x"}, [](auto& x) { return mt::abs(x[0]); }); }
  SUBCASE("tanh") { check_case("tanh", {"x"}, [](auto& x) { return mt::tanh(x[0]); }); }
  SUBCASE("sigmoid") { check_case("sigmoid", {"x"}, [](auto& x) { return mt::sigmoid(x[0]); }); }
}

TEST_CASE("activations match torch: relu, gelu exact and tanh-approximate, clamp") {
  SUBCASE("relu") { check_case("relu", {"x"}, [](auto& x) { return mt::relu(x[0]); }); }
  SUBCASE("gelu exact (erf)") { check_case("gelu_exact", {"x"}, [](auto& x) { return mt::gelu(x[0]); }); }
  SUBCASE("gelu approximate=tanh") {
    check_case("gelu_tanh", {"x"}, [](auto& x) { return mt::gelu(x[0], "tanh"); });
  }
  SUBCASE("clamp(-0.5, 0.8)") { check_case("clamp", {"x"}, [](auto& x) { return mt::clamp(x[0], -0.5, 0.8); }); }
}

TEST_CASE("where and masked_fill match torch and send gradients only to the selected elements") {
  SUBCASE("where cond [3,4], a [2,3,4], b [4]") {
    check_case("where_bcast", {"cond", "a", "b"}, [](auto& x) { return mt::where(x[0], x[1], x[2]); });
  }
  SUBCASE("where same shapes") {
    check_case("where_same", {"cond", "a", "b"}, [](auto& x) { return mt::where(x[0], x[1], x[2]); });
  }
  SUBCASE("masked_fill with a [3,1] mask broadcast to [2,3,4]") {
    check_case("masked_fill_bcast", {"x", "mask"}, [](auto& x) { return mt::masked_fill(x[0], x[1], -1.5); });
  }
  SUBCASE("masked_fill same shape") {
    check_case("masked_fill_same", {"x", "mask"}, [](auto& x) { return x[0].masked_fill(x[1], 2.0); });
  }
}

TEST_CASE("sum and mean match torch over all, single, several and negative dims, with and without keepdim") {
  SUBCASE("sum all") { check_case("sum_all", {"x"}, [](auto& x) { return mt::sum(x[0]); }); }
  SUBCASE("sum dim 1") { check_case("sum_dim1", {"x"}, [](auto& x) { return mt::sum(x[0], {1}); }); }
  SUBCASE("sum dim -1 keepdim") {
    check_case("sum_neg_keepdim", {"x"}, [](auto& x) { return mt::sum(x[0], {-1}, true); });
  }
  SUBCASE("sum dims {0, -1}") { check_case("sum_two_dims", {"x"}, [](auto& x) { return x[0].sum({0, -1}); }); }
  SUBCASE("sum dims {0, 2} keepdim") {
    check_case("sum_two_dims_keepdim", {"x"}, [](auto& x) { return mt::sum(x[0], {0, 2}, true); });
  }
  SUBCASE("mean all") { check_case("mean_all", {"x"}, [](auto& x) { return mt::mean(x[0]); }); }
  SUBCASE("mean dim 0") { check_case("mean_dim0", {"x"}, [](auto& x) { return mt::mean(x[0], {0}); }); }
  SUBCASE("mean dim -2 keepdim") {
    check_case("mean_neg_keepdim", {"x"}, [](auto& x) { return mt::mean(x[0], {-2}, true); });
  }
  SUBCASE("mean dims {1, -1}") {
    check_case("mean_two_dims", {"x"}, [](auto& x) { return x[0].mean({1, -1}); });
  }
}

TEST_CASE("var matches torch.var, unbiased (n - 1) and biased (n)") {
  SUBCASE("unbiased over dim 1") {
    check_case("var_unbiased_dim1", {"x"}, [](auto& x) { return mt::var(x[0], {1}, true); });
  }
  SUBCASE("biased over dim -1, keepdim") {
    check_case("var_biased_neg_keepdim", {"x"}, [](auto& x) { return mt::var(x[0], {-1}, false, true); });
  }
  SUBCASE("unbiased over all elements") { check_case("var_all", {"x"}, [](auto& x) { return mt::var(x[0]); }); }
}

TEST_CASE("logsumexp matches torch.logsumexp over one or several dims") {
  SUBCASE("dim -1") { check_case("logsumexp_neg", {"x"}, [](auto& x) { return mt::logsumexp(x[0], {-1}); }); }
  SUBCASE("dim 0 keepdim") {
    check_case("logsumexp_dim0_keepdim", {"x"}, [](auto& x) { return mt::logsumexp(x[0], {0}, true); });
  }
  SUBCASE("dims {0, 2}") {
    check_case("logsumexp_two_dims", {"x"}, [](auto& x) { return x[0].logsumexp({0, 2}); });
  }
}

TEST_CASE("max along a dim matches torch.max values, indices and gradient") {
  mt::Tensor indices;
  std::string c;
  SUBCASE("dim 1") {
    c = "max_dim1";
    check_case(c, {"x"}, [&](auto& x) {
      auto [values, idx] = mt::max(x[0], 1);
      indices = idx;
      return values;
    });
  }
  SUBCASE("dim -1 keepdim") {
    c = "max_neg_keepdim";
    check_case(c, {"x"}, [&](auto& x) {
      auto [values, idx] = x[0].max(-1, true);
      indices = idx;
      return values;
    });
  }
  const mt::Tensor expected = fixture(fixture_name(c, "idx"));
  INFO(fmt::format("indices {} expected {}", indices, expected));
  CHECK(mt::equal(indices, expected));
}

TEST_CASE("softmax and log_softmax match torch along the last, first and a middle dim") {
  SUBCASE("softmax dim -1") { check_case("softmax_last", {"x"}, [](auto& x) { return mt::softmax(x[0], -1); }); }
  SUBCASE("softmax dim 0") { check_case("softmax_dim0", {"x"}, [](auto& x) { return mt::softmax(x[0], 0); }); }
  SUBCASE("softmax 3-D dim 1") {
    check_case("softmax_3d_dim1", {"x"}, [](auto& x) { return x[0].softmax(1); });
  }
  SUBCASE("log_softmax dim -1") {
    check_case("log_softmax_last", {"x"}, [](auto& x) { return mt::log_softmax(x[0], -1); });
  }
  SUBCASE("log_softmax dim 0") {
    check_case("log_softmax_dim0", {"x"}, [](auto& x) { return mt::log_softmax(x[0], 0); });
  }
  SUBCASE("log_softmax 3-D dim 1") {
    check_case("log_softmax_3d_dim1", {"x"}, [](auto& x) { return x[0].log_softmax(1); });
  }
}

TEST_CASE("matmul matches torch.matmul values and gradients for 1-D, batched and broadcast operands") {
  const auto mm = [](const mt::TensorList& x) { return mt::matmul(x[0], x[1]); };
  const std::vector<std::string> ab{"a", "b"};
  SUBCASE("[4] @ [4] (dot, 0-d result)") { check_case("matmul_1d_1d", ab, mm); }
  SUBCASE("[4] @ [4,3]") { check_case("matmul_1d_2d", ab, mm); }
  SUBCASE("[3,4] @ [4]") { check_case("matmul_2d_1d", ab, mm); }
  SUBCASE("[3,4] @ [4,5]") { check_case("matmul_2d_2d", ab, mm); }
  SUBCASE("[2,3,4] @ [2,4,5]") { check_case("matmul_batched", ab, mm); }
  SUBCASE("[2,1,3,4] @ [5,4,2] (batch dims broadcast)") { check_case("matmul_batched_bcast", ab, mm); }
  SUBCASE("[2,3,4] @ [4,5]") {
    check_case("matmul_3d_2d", ab, [](auto& x) { return x[0].matmul(x[1]); });
  }
  SUBCASE("[4] @ [2,4,3]") { check_case("matmul_1d_3d", ab, mm); }
  SUBCASE("[2,3,4] @ [4]") { check_case("matmul_3d_1d", ab, mm); }
}

TEST_CASE("reshape, transpose, permute and expand match torch and route gradients back") {
  SUBCASE("reshape [2,3,4] -> [4,-1]") {
    check_case("reshape", {"x"}, [](auto& x) { return mt::reshape(x[0], {4, -1}); });
  }
  SUBCASE("reshape [6,4] -> [2,-1,3]") {
    check_case("reshape_3d", {"x"}, [](auto& x) { return x[0].reshape({2, -1, 3}); });
  }
  SUBCASE("transpose(-2, -1)") {
    check_case("transpose_last2", {"x"}, [](auto& x) { return mt::transpose(x[0], -2, -1); });
  }
  SUBCASE("transpose(0, 2)") {
    check_case("transpose_0_2", {"x"}, [](auto& x) { return x[0].transpose(0, 2); });
  }
  SUBCASE("permute {2, 0, 1}") {
    check_case("permute", {"x"}, [](auto& x) { return mt::permute(x[0], {2, 0, 1}); });
  }
  SUBCASE("permute {-1, -3, -2}") {
    check_case("permute_neg", {"x"}, [](auto& x) { return x[0].permute({-1, -3, -2}); });
  }
  SUBCASE("expand [3,1] -> [2,3,4]") {
    check_case("expand", {"x"}, [](auto& x) { return mt::expand(x[0], {2, 3, 4}); });
  }
  SUBCASE("expand [1,3,1] -> [2,-1,4]") {
    check_case("expand_keep", {"x"}, [](auto& x) { return x[0].expand({2, -1, 4}); });
  }
}

TEST_CASE("slice, select and index_select match torch indexing and scatter gradients back") {
  SUBCASE("x[:, 0:5:2]") {
    check_case("slice_step", {"x"}, [](auto& x) { return mt::slice(x[0], 1, 0, 5, 2); });
  }
  SUBCASE("x[:, 1:100:3] (end clamped)") {
    check_case("slice_neg_dim_clamped", {"x"}, [](auto& x) { return x[0].slice(-1, 1, 100, 3); });
  }
  SUBCASE("x[-4:-1]") { check_case("slice_neg_start", {"x"}, [](auto& x) { return mt::slice(x[0], 0, -4, -1); }); }
  SUBCASE("select(1, 2)") { check_case("select", {"x"}, [](auto& x) { return mt::select(x[0], 1, 2); }); }
  SUBCASE("select(-1, -1)") { check_case("select_neg", {"x"}, [](auto& x) { return x[0].select(-1, -1); }); }
  SUBCASE("index_select dim 0 with repeats") {
    check_case("index_select_dim0", {"x", "index"}, [](auto& x) { return mt::index_select(x[0], 0, x[1]); });
  }
  SUBCASE("index_select dim -1 with repeats") {
    check_case("index_select_neg", {"x", "index"}, [](auto& x) { return x[0].index_select(-1, x[1]); });
  }
}

TEST_CASE("cat and stack match torch and split the gradient back to each input") {
  SUBCASE("cat three tensors along dim 1") {
    check_case("cat_dim1", {"a", "b", "c"}, [](auto& x) { return mt::cat({x[0], x[1], x[2]}, 1); });
  }
  SUBCASE("cat along dim -1") { check_case("cat_neg", {"a", "b"}, [](auto& x) { return mt::cat({x[0], x[1]}, -1); }); }
  SUBCASE("stack three tensors along dim -1") {
    check_case("stack_last", {"a", "b", "c"}, [](auto& x) { return mt::stack({x[0], x[1], x[2]}, -1); });
  }
  SUBCASE("stack along dim 0") {
    check_case("stack_dim0", {"a", "b"}, [](auto& x) { return mt::stack({x[0], x[1]}, 0); });
  }
}

TEST_CASE("split and chunk match torch.split and torch.chunk pieces and gradients") {
  SUBCASE("split size 2 along dim 1 of 5 -> 2, 2, 1") {
    check_case_multi("split_size", {"x"}, [](auto& x) { return mt::split(x[0], 2, 1); });
  }
  SUBCASE("split sizes {1, 3} along dim -1") {
    check_case_multi("split_sizes_neg", {"x"},
                     [](auto& x) { return mt::split(x[0], std::vector<std::int64_t>{1, 3}, -1); });
  }
  SUBCASE("chunk 3 of 5 rows -> 2, 2, 1") {
    check_case_multi("chunk_uneven", {"x"}, [](auto& x) { return mt::chunk(x[0], 3, 0); });
  }
  SUBCASE("chunk 3 of 4 columns -> two chunks of 2, as torch does") {
    check_case_multi("chunk_fewer", {"x"}, [](auto& x) { return x[0].chunk(3, -1); });
  }
}

TEST_CASE("float64 ops match torch to double precision") {
  SUBCASE("mul [2,3,4] * [3,1]") { check_case("f64_mul_bcast", {"a", "b"}, [](auto& x) { return x[0] * x[1]; }); }
  SUBCASE("div [2,3,4] / [4]") { check_case("f64_div_bcast", {"a", "b"}, [](auto& x) { return x[0] / x[1]; }); }
  SUBCASE("matmul [2,1,3,4] @ [5,4,2]") {
    check_case("f64_matmul_batched_bcast", {"a", "b"}, [](auto& x) { return mt::matmul(x[0], x[1]); });
  }
  SUBCASE("softmax 3-D dim 1") {
    check_case("f64_softmax_3d_dim1", {"x"}, [](auto& x) { return mt::softmax(x[0], 1); });
  }
  SUBCASE("log_softmax dim -1") {
    check_case("f64_log_softmax_last", {"x"}, [](auto& x) { return mt::log_softmax(x[0], -1); });
  }
  SUBCASE("var unbiased dim 1") { check_case("f64_var_unbiased", {"x"}, [](auto& x) { return mt::var(x[0], {1}); }); }
  SUBCASE("logsumexp dim -1") {
    check_case("f64_logsumexp", {"x"}, [](auto& x) { return mt::logsumexp(x[0], {-1}); });
  }
  SUBCASE("gelu exact") { check_case("f64_gelu_exact", {"x"}, [](auto& x) { return mt::gelu(x[0]); }); }
  SUBCASE("gelu tanh") { check_case("f64_gelu_tanh", {"x"}, [](auto& x) { return mt::gelu(x[0], "tanh"); }); }
}
