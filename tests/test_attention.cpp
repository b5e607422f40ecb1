// Attention: the fused SDPA against its composed definition and finite differences, and
// the attention modules' shapes, gradients and errors.
#include <cmath>
#include <cstdlib>
#include <string>

#include "helpers.hpp"
#include "microtorch/nn.hpp"

using mt::Mask;
using mt::Tensor;
namespace nn = microtorch::nn;

namespace {

// softmax(q k^T * scale + bias) v from the basic ops: the definition the fused op must match.
Tensor reference_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, double scale) {
  Tensor s = mt::matmul(q, k.transpose(-2, -1)) * scale;
  if (bias.defined()) s = s + bias;
  return mt::matmul(mt::softmax(s, -1), v);
}

}  // namespace

TEST_CASE("SDPA equals softmax(q k^T / sqrt(D) + mask) v for any number of batch dims") {
  mt::manual_seed(21);
  for (const mt::Shape& batch : {mt::Shape{}, mt::Shape{2, 3}, mt::Shape{2, 3, 3}}) {
    CAPTURE(mt::shape_str(batch));
    auto shape = [&](std::int64_t a, std::int64_t b) {
      mt::Shape s = batch;
      s.push_back(a);
      s.push_back(b);
      return s;
    };
    Tensor q = mt::randn(shape(4, 6)), k = mt::randn(shape(5, 6)), v = mt::randn(shape(5, 3));
    Tensor bias = mt::randn({4, 5});
    auto [out, w] = mt::scaled_dot_product_attention(q, k, v, Mask::additive(bias));
    CHECK_CLOSE(out, reference_sdpa(q, k, v, bias, 1.0 / std::sqrt(6.0)), 1e-5, 1e-6);
    CHECK_CLOSE(mt::sum(w, {-1}), mt::ones(shape(4, 1)).squeeze(-1), 1e-5, 1e-6);
  }
}

TEST_CASE("get_cpu_capability names the kernels' ISA, capped by MICROTORCH_ISA") {
  // make test runs this file again with MICROTORCH_ISA=avx2 and =baseline: those passes
  // test the lesser kernels only if the cap took effect.
  const std::string isa = mt::get_cpu_capability();
  CHECK((isa == "avx512" || isa == "avx2" || isa == "baseline"));
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)  // a build of every ISA (no -march)
  const char* env = std::getenv("MICROTORCH_ISA");
  const std::string cap = env ? env : "";
  if (cap == "baseline") CHECK(isa == "baseline");
  if (cap == "avx2") CHECK(isa == (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "avx2" : "baseline"));
#endif
}

TEST_CASE("SDPA equals its definition on both sides of the fused kernel's block widths") {
  // The tiles hold 6 rows x 4 vectors of 16 floats / 8 doubles (AVX-512; 2 vectors of 8 / 4
  // on AVX2, of 4 / 2 on the baseline), K^T and v^T are packed in 16 x 16 (8 x 8) transposes,
  // and rows shorter than a vector are padded: lengths and widths below, at and above
  // those, with tails in L, S, D and Dv. (Longer rows and blocks: the next case.)
  mt::manual_seed(28);
  using Dims = std::array<std::int64_t, 4>;  // L, S, D, Dv
  for (const mt::Dtype dtype : {mt::kFloat32, mt::kFloat64}) {
    for (const Dims& dims : {Dims{15, 7, 5, 3}, Dims{16, 16, 16, 16}, Dims{17, 24, 20, 33}, Dims{33, 40, 32, 17},
                             Dims{40, 9, 8, 8}}) {
      const auto [L, S, D, Dv] = dims;
      CAPTURE(mt::dtype_name(dtype));
      CAPTURE(mt::shape_str({L, S, D, Dv}));
      const double rtol = dtype == mt::kFloat32 ? 1e-5 : 1e-12, atol = dtype == mt::kFloat32 ? 1e-6 : 1e-13;
      Tensor q = mt::randn({2, L, D}, dtype), k = mt::randn({2, S, D}, dtype), v = mt::randn({2, S, Dv}, dtype);
      const Tensor row = mt::arange(static_cast<double>(L)).reshape({L, 1});
      const Tensor bias = mt::randn({L, S}, dtype).masked_fill(row == 3.0, -INFINITY);  // query 3 sees no key
      for (const Tensor& b : {bias, bias.narrow(0, 0, 1), bias.narrow(1, 0, 1)}) {  // [L, S], [1, S], [L, 1]
        CAPTURE(mt::shape_str(b.shape()));
        auto [out, w] = mt::scaled_dot_product_attention(q, k, v, Mask::additive(b));
        CHECK_CLOSE(out, reference_sdpa(q, k, v, b, 1.0 / std::sqrt(static_cast<double>(D))), rtol, atol);
        CHECK_CLOSE(w, mt::softmax(mt::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(D)) + b, -1),
                    rtol, atol);
      }
      // gradients against the composed definition's, with a mask and with dropout (the
      // returned P = A * M gives M: 0 where dropped, 1 / (1 - p) elsewhere)
      for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
      auto grads_of = [&](const Tensor& y, const Tensor& g) {
        for (Tensor* t : {&q, &k, &v}) t->zero_grad();
        y.backward(g);
        return mt::TensorList{q.grad(), k.grad(), v.grad()};
      };
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      const Tensor g = mt::randn({2, L, Dv}, dtype);
      const mt::TensorList masked = grads_of(std::get<0>(mt::scaled_dot_product_attention(q, k, v, Mask::additive(bias))), g);
      const mt::TensorList masked_ref = grads_of(reference_sdpa(q, k, v, bias, scale), g);
      auto [dropped, p] = mt::scaled_dot_product_attention(q, k, v, Mask(), 0.5);
      const mt::TensorList drop = grads_of(dropped, g);
      const Tensor kept = (p != 0.0).to(dtype) * 2.0;
      const Tensor dropped_ref = mt::matmul(mt::softmax(mt::matmul(q, k.transpose(-2, -1)) * scale, -1) * kept, v);
      CHECK_CLOSE(dropped, dropped_ref, rtol, atol);
      const mt::TensorList drop_ref = grads_of(dropped_ref, g);
      for (std::size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        CHECK_CLOSE(masked[i], masked_ref[i], 10 * rtol, 10 * atol);
        CHECK_CLOSE(drop[i], drop_ref[i], 10 * rtol, 10 * atol);
      }
      mt::NoGradGuard no_grad;
      // a NaN in query row 2 makes output row 2 NaN and leaves the others alone
      const Tensor first = mt::arange(2.0).reshape({2, 1, 1}) == 0.0, column = mt::arange(static_cast<double>(D)) == 0.0;
      const Tensor q_nan = q.masked_fill(first & (row == 2.0).unsqueeze(0) & column, NAN);
      const Tensor out_nan = std::get<0>(mt::scaled_dot_product_attention(q_nan, k, v));
      auto nans = [](const Tensor& t) { return mt::sum((t != t).to(mt::kFloat64)).item(); };
      CHECK(nans(out_nan.narrow(0, 0, 1).narrow(1, 2, 1)) == static_cast<double>(Dv));
      CHECK(nans(out_nan) == static_cast<double>(Dv));
    }
  }
}

TEST_CASE("attention without queries or keys: empty outputs, zero gradients") {
  // L = 0: k and v get no gradient from any row; S = 0: every output row and dq is 0
  // (PyTorch: softmax of an empty row is empty, its product with an empty v is 0), with the
  // weights kept for backward or not.
  using Dims = std::array<std::int64_t, 4>;  // L, S, D, Dv
  for (const Dims& dims : {Dims{0, 5, 8, 4}, Dims{0, 40, 64, 64}, Dims{6, 0, 8, 4}}) {
    for (const mt::Dtype dtype : {mt::kFloat32, mt::kFloat64}) {
      for (const bool need_weights : {true, false}) {
        for (const double dropout_p : {0.0, 0.3}) {
          const auto [L, S, D, Dv] = dims;
          CAPTURE(mt::shape_str({L, S, D, Dv}));
          CAPTURE(mt::dtype_name(dtype));
          CAPTURE(need_weights);
          CAPTURE(dropout_p);
          Tensor q = mt::randn({2, L, D}, dtype).requires_grad_(), k = mt::randn({2, S, D}, dtype).requires_grad_(),
                 v = mt::randn({2, S, Dv}, dtype).requires_grad_();
          auto [out, w] =
              mt::multi_head_attention(q, k, v, 2, {.dropout_p = dropout_p, .need_weights = need_weights});
          CHECK(out.shape() == mt::Shape{2, L, Dv});
          CHECK(mt::sum(mt::abs(out)).item() == 0.0);
          (out * mt::randn({2, L, Dv}, dtype)).sum().backward();
          for (const Tensor* t : {&q, &k, &v}) {
            CHECK(t->grad().shape() == t->shape());
            CHECK(mt::sum(mt::abs(t->grad())).item() == 0.0);
          }
        }
      }
    }
  }
}

TEST_CASE("attention over several query blocks and key chunks, with and without weights, equals its definition") {
  // Query rows go 96 to a block; without weights the keys go 128 (64 doubles) to a chunk of
  // the online softmax and backward recomputes the weights, with them a chunk is the whole
  // row and backward reads them. Lengths across both, a row whose first chunk is all
  // masked, a fully masked row, a key-broadcast bias and dropout, float and double.
  mt::manual_seed(29);
  const std::int64_t L = 197, S = 300, D = 20, Dv = 12;
  for (const mt::Dtype dtype : {mt::kFloat32, mt::kFloat64}) {
    CAPTURE(mt::dtype_name(dtype));
    const double rtol = dtype == mt::kFloat32 ? 1e-5 : 1e-12, atol = dtype == mt::kFloat32 ? 1e-6 : 1e-13;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    Tensor q = mt::randn({1, L, D}, dtype).requires_grad_(), k = mt::randn({1, S, D}, dtype).requires_grad_(),
           v = mt::randn({1, S, Dv}, dtype).requires_grad_();
    const Tensor row = mt::arange(static_cast<double>(L)).reshape({L, 1});
    const Tensor col = mt::arange(static_cast<double>(S)).reshape({1, S});
    const Tensor bias = mt::randn({L, S}, dtype)
                            .masked_fill((row == 100.0) & (col < 150.0), -INFINITY)  // its first chunks: nothing
                            .masked_fill(row == 7.0, -INFINITY);                     // nothing at all
    const Tensor g = mt::randn({1, L, Dv}, dtype);
    auto grads_of = [&](const Tensor& y) {
      for (Tensor* t : {&q, &k, &v}) t->zero_grad();
      y.backward(g);
      return mt::TensorList{q.grad(), k.grad(), v.grad()};
    };
    for (const Tensor& b : {bias, bias.narrow(1, 0, 1)}) {
      CAPTURE(mt::shape_str(b.shape()));
      const Tensor ref = reference_sdpa(q, k, v, b, scale);
      const mt::TensorList ref_grads = grads_of(ref);
      for (const bool need_weights : {true, false}) {
        CAPTURE(need_weights);
        auto [out, w] = mt::multi_head_attention(q, k, v, 1, {.mask = Mask::additive(b), .need_weights = need_weights});
        CHECK_CLOSE(out, ref, rtol, atol);
        if (need_weights) CHECK_CLOSE(w.squeeze(1), mt::softmax(mt::matmul(q, k.transpose(-2, -1)) * scale + b, -1), rtol, atol);
        const mt::TensorList got = grads_of(out);
        for (std::size_t i = 0; i < 3; ++i) CHECK_CLOSE(got[i], ref_grads[i], 10 * rtol, 10 * atol);
      }
    }
    // dropout: the same draws with and without weights (P = A * M returned with them)
    mt::manual_seed(30);
    auto [dropped, p] = mt::multi_head_attention(q, k, v, 1, {.dropout_p = 0.3, .need_weights = true});
    const mt::TensorList dropped_grads = grads_of(dropped);
    mt::manual_seed(30);
    const Tensor bare = std::get<0>(mt::multi_head_attention(q, k, v, 1, {.dropout_p = 0.3, .need_weights = false}));
    const Tensor kept = (p != 0.0).to(dtype) * (1.0 / 0.7);
    const Tensor ref = mt::matmul(mt::softmax(mt::matmul(q, k.transpose(-2, -1)) * scale, -1) * kept.squeeze(1), v);
    CHECK_CLOSE(dropped, ref, rtol, atol);
    CHECK_CLOSE(bare, ref, rtol, atol);
    const mt::TensorList ref_grads = grads_of(ref), bare_grads = grads_of(bare);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK_CLOSE(dropped_grads[i], ref_grads[i], 10 * rtol, 10 * atol);
      CHECK_CLOSE(bare_grads[i], ref_grads[i], 10 * rtol, 10 * atol);
    }
  }
}

TEST_CASE("attention without weights keeps nothing L x S for backward, also at S = 4096") {
  // Backward recomputes the weights from two numbers per query row: the graph holds the
  // inputs, the output and those, never an L x S buffer, however long the sequence.
  mt::manual_seed(32);
  const std::int64_t L = 64, S = 4096, H = 2, D = 8;
  Tensor q = mt::randn({1, L, H * D}).requires_grad_(), k = mt::randn({1, S, H * D}).requires_grad_(),
         v = mt::randn({1, S, H * D}).requires_grad_();
  auto [out, none] = mt::multi_head_attention(q, k, v, H, {.need_weights = false});
  CHECK_FALSE(none.defined());
  for (const auto& saved : out.grad_fn()->saved) {
    if (!saved.tensor.defined()) continue;
    CAPTURE(mt::shape_str(saved.tensor.shape()));
    CHECK(saved.tensor.numel() < L * S);
  }
  const Tensor g = mt::randn(out.shape());
  out.backward(g);
  const mt::TensorList grads{q.grad(), k.grad(), v.grad()};
  for (Tensor* t : {&q, &k, &v}) t->zero_grad();
  auto heads = [&](const Tensor& t, std::int64_t len) { return t.reshape({1, len, H, D}).transpose(1, 2); };
  const Tensor ref = reference_sdpa(heads(q, L), heads(k, S), heads(v, S), Tensor(), 1.0 / std::sqrt(double(D)));
  CHECK_CLOSE(out, ref.transpose(1, 2).reshape({1, L, H * D}), 1e-5, 1e-6);
  ref.transpose(1, 2).reshape({1, L, H * D}).backward(g);
  CHECK_CLOSE(grads[0], q.grad(), 1e-4, 1e-5);
  CHECK_CLOSE(grads[1], k.grad(), 1e-4, 1e-5);
  CHECK_CLOSE(grads[2], v.grad(), 1e-4, 1e-5);
}

TEST_CASE("gradcheck: SDPA with masks, causal, L != S, Dv != D, custom scale and broadcast batches") {
  mt::manual_seed(22);
  Tensor q = rand64({2, 3, 4}), k = rand64({2, 5, 4}), v = rand64({2, 5, 3});
  auto sdpa = [](const Mask& m, bool causal, double scale) {
    return [m, causal, scale](const mt::TensorList& in) {
      return std::get<0>(mt::scaled_dot_product_attention(in[0], in[1], in[2], m, 0.0, causal, scale));
    };
  };
  CHECK(mt::gradcheck(sdpa(Mask(), false, 0.0), {q, k, v}));
  CHECK(mt::gradcheck(sdpa(Mask(), true, 0.7), {q, k, v}));
  CHECK(mt::gradcheck(sdpa(Mask::additive(mt::randn({3, 5}, mt::kFloat64)), false, 0.0), {q, k, v}));
  CHECK(mt::gradcheck(sdpa(Mask::key_padding(mt::tensor({4, 2}, mt::kInt64), 5), true, 0.0), {q, k, v}));
  Tensor shared_k = rand64({5, 4}), shared_v = rand64({1, 5, 3});  // broadcast over the batch
  CHECK(mt::gradcheck(sdpa(Mask(), false, 0.0), {q, shared_k, shared_v}));
}

TEST_CASE("SDPA dropout zeroes weights with probability p and rescales the rest") {
  mt::manual_seed(23);
  Tensor q = mt::randn({8, 16, 4}), k = mt::randn({8, 16, 4}), v = mt::randn({8, 16, 4});
  auto [out, w] = mt::scaled_dot_product_attention(q, k, v, Mask(), 0.25);
  const double zero_fraction = mt::mean((w == 0.0).to(mt::kFloat32)).item();
  CHECK(zero_fraction == doctest::Approx(0.25).epsilon(0.1));
  CHECK(mt::mean(mt::sum(w, {-1})).item() == doctest::Approx(1.0).epsilon(0.05));  // 1/(1-p) rescaling
  CHECK_THROWS_MSG(mt::scaled_dot_product_attention(q, k, v, Mask(), 1.0), mt::ValueError, "dropout_p");
}

TEST_CASE("SDPA errors name the shapes") {
  CHECK_THROWS_MSG(mt::scaled_dot_product_attention(mt::ones({2, 3, 4}), mt::ones({2, 5, 3}), mt::ones({2, 5, 3})),
                   mt::ShapeError, "[2, 3, 4]", "[2, 5, 3]", "last dim D");
  CHECK_THROWS_MSG(mt::scaled_dot_product_attention(mt::ones({3, 4}), mt::ones({5, 4}), mt::ones({6, 2})),
                   mt::ShapeError, "same length S");
  CHECK_THROWS_MSG(mt::scaled_dot_product_attention(mt::ones({4}), mt::ones({5, 4}), mt::ones({5, 2})), mt::ShapeError,
                   "at least 2 dims");
}

TEST_CASE("MultiheadAttention: shapes for batch_first, seq-first, unbatched, kdim/vdim and weights") {
  mt::manual_seed(24);
  nn::MultiheadAttention mha(8, 2, {.batch_first = true});
  Tensor x = mt::randn({3, 5, 8});
  auto [out, w] = mha.forward(x, x, x);
  CHECK(out.shape() == mt::Shape{3, 5, 8});
  CHECK(w.shape() == mt::Shape{3, 5, 5});
  auto [o2, w2] = mha.forward(x, x, x, {.average_attn_weights = false});
  CHECK(w2.shape() == mt::Shape{3, 2, 5, 5});
  CHECK_CLOSE(mt::mean(w2, {1}), w, 1e-6, 1e-7);
  auto [o3, w3] = mha.forward(x, x, x, {.need_weights = false});
  CHECK_FALSE(w3.defined());
  auto [u, uw] = mha.forward(x.select(0, 0), x.select(0, 0), x.select(0, 0));
  CHECK_CLOSE(u, out.select(0, 0), 1e-5, 1e-6);
  CHECK(uw.shape() == mt::Shape{5, 5});

  nn::MultiheadAttention seq_first(8, 2);
  seq_first.load_state_dict(mha.state_dict());
  CHECK_CLOSE(std::get<0>(seq_first.forward(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))).transpose(0, 1),
              out, 1e-5, 1e-6);

  nn::MultiheadAttention cross(8, 4, {.kdim = 3, .vdim = 5, .batch_first = true});
  auto names = cross.state_dict();
  CHECK(names[0].first == "q_proj_weight");
  CHECK(cross.k_proj_weight.shape() == mt::Shape{8, 3});
  auto [c, cw] = cross.forward(x, mt::randn({3, 7, 3}), mt::randn({3, 7, 5}));
  CHECK(c.shape() == mt::Shape{3, 5, 8});
  CHECK(cw.shape() == mt::Shape{3, 5, 7});
}

TEST_CASE("MultiheadAttention: PyTorch-polarity masks agree with microtorch Masks") {
  mt::manual_seed(25);
  nn::MultiheadAttention mha(8, 2, {.batch_first = true});
  Tensor x = mt::randn({2, 4, 8});
  Tensor padded = mt::tensor({{0, 0, 0, 1}, {0, 0, 1, 1}}).to(mt::kBool);  // true = padding (PyTorch)
  auto [a, wa] = mha.forward(x, x, x, {.key_padding_mask = padded, .is_causal = true});
  Mask same = Mask::key_padding(mt::tensor({3, 2}, mt::kInt64), 4).unsqueeze(1) & Mask::causal(4);
  auto [b, wb] = mha.forward(x, x, x, {.mask = same});
  CHECK_CLOSE(a, b, 1e-6, 1e-7);
  CHECK(wa.at({1, 3, 2}) == 0.0);  // padded key
  CHECK(wa.at({0, 0, 1}) == 0.0);  // future key
}

TEST_CASE("gradcheck: MultiheadAttention w.r.t. inputs and packed projection weights") {
  mt::manual_seed(26);
  nn::MultiheadAttention mha(4, 2, {.batch_first = true, .dtype = mt::kFloat64});
  Tensor q = rand64({2, 3, 4}), kv = rand64({2, 5, 4});
  Tensor padded = mt::tensor({{0, 0, 0, 1, 1}, {0, 0, 0, 0, 0}}).to(mt::kBool);
  CHECK(mt::gradcheck(
      [&](auto& in) { return std::get<0>(mha.forward(in[0], in[1], in[1], {.key_padding_mask = padded})); },
      {q, kv, mha.in_proj_weight, mha.out_proj->weight}));
}

TEST_CASE("multi_head_attention equals SDPA on transposed heads, packed or not, on 1 and 2 threads") {
  mt::manual_seed(27);
  const std::int64_t N = 4, L = 64, S = 48, H = 4, D = 16;  // big enough to run in parallel
  auto heads = [&](const Tensor& t, std::int64_t len, std::int64_t d) { return t.reshape({N, len, H, d}).transpose(1, 2); };
  auto merge = [&](const Tensor& t) { return t.transpose(1, 2).reshape({N, L, -1}); };
  const Tensor lengths = mt::tensor({45, 48, 1, 0}, mt::kInt64);  // sequence 3 sees nothing
  const Mask mask = Mask::key_padding(lengths, S).unsqueeze(1) & Mask::additive(mt::randn({L, S}));
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    mt::set_num_threads(threads);
    Tensor q = mt::randn({N, L, H * D}).requires_grad_(), k = mt::randn({N, S, H * D}).requires_grad_(),
           v = mt::randn({N, S, H * 8}).requires_grad_();
    auto [out, w] = mt::multi_head_attention(q, k, v, H, {.mask = mask});
    auto [ref, ref_w] = mt::scaled_dot_product_attention(heads(q, L, D), heads(k, S, D), heads(v, S, 8), mask);
    CHECK_CLOSE(out, merge(ref), 1e-5, 1e-6);
    CHECK_CLOSE(w, ref_w, 1e-5, 1e-6);
    const Tensor g = mt::randn(out.shape());
    mt::TensorList grads;
    for (const Tensor& y : {out, merge(ref)}) {
      for (Tensor* t : {&q, &k, &v}) t->zero_grad();
      y.backward(g);
      for (Tensor* t : {&q, &k, &v}) grads.push_back(t->grad());
    }
    for (std::size_t i = 0; i < 3; ++i) CHECK_CLOSE(grads[i], grads[i + 3], 1e-4, 1e-5);

    Tensor qkv = mt::randn({N, L, 3 * H * D}).requires_grad_();
    auto [packed, packed_w] = mt::multi_head_attention_packed(qkv, H, {.mask = Mask::causal(L)});
    const Tensor g2 = mt::randn(packed.shape());
    packed.backward(g2);
    const Tensor packed_grad = qkv.grad();
    qkv.zero_grad();
    const mt::TensorList parts = mt::chunk(qkv, 3, -1);
    auto [sep, sep_w] = mt::multi_head_attention(parts[0], parts[1], parts[2], H, {.mask = Mask::causal(L)});
    sep.backward(g2);
    CHECK_CLOSE(packed, sep, 1e-6, 1e-7);
    CHECK_CLOSE(packed_grad, qkv.grad(), 1e-6, 1e-7);

    mt::NoGradGuard no_grad;  // no graph: averaged weights without a per-head buffer
    auto [avg_out, avg_w] = mt::multi_head_attention(q, k, v, H, {.mask = mask, .average_weights = true});
    CHECK_CLOSE(avg_out, out, 1e-6, 1e-7);
    CHECK_CLOSE(avg_w, mt::mean(w, {1}), 1e-6, 1e-7);
    auto [bare_out, none] = mt::multi_head_attention(q, k, v, H, {.mask = mask, .need_weights = false});
    CHECK_CLOSE(bare_out, out, 1e-6, 1e-7);
    CHECK_FALSE(none.defined());
  }
  mt::set_num_threads(1);
}

TEST_CASE("attention on 2 and 3 threads gives the bits of 1 thread when the matrices do not split evenly") {
  // One batch element with averaged weights is one group of heads, 3 elements are 3 groups:
  // the forward then shares each group's query rows out over the threads.
  mt::manual_seed(28);
  const std::int64_t L = 301, S = 170, H = 2, D = 16;  // above the size that runs serially
  const Mask mask = Mask::causal(L, S) & Mask::additive(mt::randn({L, S}));
  for (std::int64_t N : {1, 3}) {
    CAPTURE(N);
    const Tensor q0 = mt::randn({N, L, H * D}), k0 = mt::randn({N, S, H * D}), v0 = mt::randn({N, S, H * 8});
    const Tensor g = mt::randn({N, L, H * 8});
    const Tensor q1 = mt::randn({1, L, D}), k1 = mt::randn({1, S, D}), v1 = mt::randn({1, S, 8});  // one matrix
    std::vector<mt::TensorList> runs;
    for (int threads : {1, 2, 3}) {
      CAPTURE(threads);
      mt::set_num_threads(threads);
      Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
      auto [avg, avg_w] = mt::multi_head_attention(q, k, v, H, {.mask = mask, .average_weights = true});
      auto [bare, none] = mt::multi_head_attention(q, k, v, H, {.mask = mask, .need_weights = false});
      auto [single, single_w] = mt::scaled_dot_product_attention(q1, k1, v1, mask);
      (avg * g).sum().backward();
      runs.push_back(mt::TensorList{avg, avg_w, bare, single, single_w, q.grad(), k.grad(), v.grad()});
      CHECK_CLOSE(avg, bare, 1e-5, 1e-6);  // whole rows vs key chunks: rounding differs
    }
    for (std::size_t t = 1; t < runs.size(); ++t) {
      for (std::size_t i = 0; i < runs[0].size(); ++i) {
        CAPTURE(t);
        CAPTURE(i);
        CHECK(mt::equal(runs[t][i], runs[0][i]));
      }
    }
  }
  mt::set_num_threads(1);
}

TEST_CASE("averaged weights under autograd: backward reads each head's kept A, the gradients of recomputing it") {
  // With the weights averaged over the heads and a graph recorded, the forward keeps each
  // head's A for backward (which then sums rowsum(dA A) from it); without weights backward
  // recomputes A from the row statistics. Both are the same gradients up to rounding.
  mt::manual_seed(30);
  const std::int64_t N = 2, L = 37, S = 45, H = 3, D = 16;
  const Mask mask = Mask::additive(mt::randn({L, S})) & Mask::key_padding(mt::tensor({45, 20}, mt::kInt64), S).unsqueeze(1);
  const Tensor q0 = mt::randn({N, L, H * D}), k0 = mt::randn({N, S, H * D}), v0 = mt::randn({N, S, H * 8});
  const Tensor g = mt::randn({N, L, H * 8});
  std::vector<mt::TensorList> runs;
  for (int path = 0; path < 3; ++path) {  // averaged weights, per-head weights, no weights
    CAPTURE(path);
    Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
    auto [out, w] = mt::multi_head_attention(q, k, v, H,
                                             {.mask = mask, .need_weights = path != 2, .average_weights = path == 0});
    if (path == 0) {
      mt::NoGradGuard no_grad;
      auto [per_head_out, per_head] = mt::multi_head_attention(q0, k0, v0, H, {.mask = mask});
      CHECK_CLOSE(w, mt::mean(per_head, {1}), 1e-6, 1e-7);
    }
    (out * g).sum().backward();
    runs.push_back(mt::TensorList{out, q.grad(), k.grad(), v.grad()});
  }
  for (std::size_t t = 1; t < runs.size(); ++t) {
    for (std::size_t i = 0; i < runs[0].size(); ++i) {
      CAPTURE(t);
      CAPTURE(i);
      CHECK_CLOSE(runs[t][i], runs[0][i], 1e-5, 1e-6);
    }
  }
}

TEST_CASE("gradcheck: multi_head_attention, packed self-attention and MultiheadAttention's fused path") {
  mt::manual_seed(29);
  Tensor q = rand64({2, 3, 4}), k = rand64({2, 5, 4}), v = rand64({2, 5, 6}), qkv = rand64({2, 3, 12});
  const Mask mask = Mask::key_padding(mt::tensor({3, 0}, mt::kInt64), 5).unsqueeze(1);
  CHECK(mt::gradcheck([&](auto& in) { return std::get<0>(mt::multi_head_attention(in[0], in[1], in[2], 2, {.mask = mask})); },
                      {q, k, v}));
  CHECK(mt::gradcheck(
      [&](auto& in) { return std::get<0>(mt::multi_head_attention(in[0], in[1], in[2], 2, {.mask = mask, .average_weights = true})); },
      {q, k, v}));
  CHECK(mt::gradcheck([](auto& in) { return std::get<0>(mt::multi_head_attention_packed(in[0], 2, {.scale = 0.3})); },
                      {qkv}));
  nn::MultiheadAttention mha(4, 2, {.batch_first = true, .dtype = mt::kFloat64});
  Tensor x = rand64({2, 3, 4});
  CHECK(mt::gradcheck([&](auto& in) { return std::get<0>(mha.forward(in[0], in[0], in[0], {.is_causal = true})); },
                      {x, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj->weight}));
}

TEST_CASE("MultiheadAttention errors: heads, feature sizes, lengths and masks") {
  CHECK_THROWS_MSG(nn::MultiheadAttention(10, 3), mt::ValueError, "embed_dim 10", "num_heads 3");
  nn::MultiheadAttention mha(8, 2, {.kdim = 3, .batch_first = true});
  Tensor x = mt::randn({2, 4, 8});
  CHECK_THROWS_MSG(mha.forward(x, mt::randn({2, 4, 8}), x), mt::ShapeError, "kdim", "[2, 4, 8]");
  nn::MultiheadAttention self(8, 2, {.batch_first = true});
  CHECK_THROWS_MSG(self.forward(x, mt::randn({2, 5, 8}), mt::randn({2, 6, 8})), mt::ShapeError, "same batch and length");
  CHECK_THROWS_MSG(self.forward(x, x, x, {.key_padding_mask = mt::zeros({2, 3}).to(mt::kBool)}), mt::ShapeError,
                   "key_padding_mask", "[N, S] = [2, 4]", "[2, 3]");
  CHECK_THROWS_MSG(self.forward(x, x, x, {.attn_mask = mt::zeros({3, 4})}), mt::ShapeError, "attn_mask", "[4, 4]",
                   "[3, 4]");
  CHECK_THROWS_MSG(self.forward(x, x, x, {.attn_mask = mt::zeros({4, 4}, mt::kInt64)}), mt::DtypeError, "attn_mask",
                   "bool");
}

TEST_CASE("LinearAttention equals its quadratic form and is trainable") {
  mt::manual_seed(27);
  Tensor q = rand64({2, 4, 3}), k = rand64({2, 6, 3}), v = rand64({2, 6, 2});
  Tensor fq = mt::relu(q), fk = mt::relu(k);
  Tensor a = mt::matmul(fq, fk.transpose(-2, -1));  // L x S, only in the reference
  Tensor expected = mt::matmul(a, v) / (mt::sum(a, {-1}, true) + 1e-6);
  CHECK_CLOSE(nn::functional::linear_attention(q, k, v), expected, 1e-10, 1e-12);
  CHECK(mt::gradcheck([](auto& in) { return nn::functional::linear_attention(in[0], in[1], in[2]); }, {q, k, v}));
  CHECK(mt::gradcheck([](auto& in) { return nn::functional::linear_attention(in[0], in[1], in[2], false); }, {q, k, v}));
  nn::LinearAttention la(8, 2, {.dtype = mt::kFloat64});
  Tensor x = rand64({2, 5, 8});
  CHECK(la.forward(x).shape() == mt::Shape{2, 5, 8});
  CHECK(mt::gradcheck([&](auto& in) { return la.forward(in[0]); }, {x, la.q_proj->weight}));
}

TEST_CASE("gradcheck: TransformerEncoderLayer pre-LN and post-LN with masks") {
  for (bool norm_first : {false, true}) {
    CAPTURE(norm_first);
    mt::manual_seed(28);
    nn::TransformerEncoderLayer layer(4, 2, {.dim_feedforward = 6, .dropout = 0.0, .activation = "gelu",
                                             .batch_first = true, .norm_first = norm_first, .dtype = mt::kFloat64});
    Tensor x = rand64({2, 3, 4});
    Tensor pad = mt::tensor({{0, 0, 1}, {0, 0, 0}}).to(mt::kBool);
    CHECK(mt::gradcheck([&](auto& in) { return layer.forward(in[0], {.src_key_padding_mask = pad, .is_causal = true}); },
                        {x, layer.linear1->weight, layer.norm1->weight}));
  }
}

TEST_CASE("gradcheck: Linear, LayerNorm, Embedding and masked MeanPool") {
  mt::manual_seed(29);
  nn::Linear lin(3, 2, {.dtype = mt::kFloat64});
  Tensor x = rand64({4, 3});
  CHECK(mt::gradcheck([&](auto& in) { return lin.forward(in[0]); }, {x, lin.weight, lin.bias}));
  nn::LayerNorm ln({2, 3}, {.dtype = mt::kFloat64});
  Tensor y = rand64({4, 2, 3});
  CHECK(mt::gradcheck([&](auto& in) { return ln.forward(in[0]); }, {y, ln.weight, ln.bias}));
  nn::Embedding emb(5, 3, mt::kFloat64);
  Tensor idx = mt::tensor({{1, 4}, {1, 0}}, mt::kInt64);
  CHECK(emb.forward(idx).shape() == mt::Shape{2, 2, 3});
  CHECK(mt::gradcheck([&](auto&) { return emb.forward(idx); }, {emb.weight}));
  CHECK_THROWS_MSG(emb.forward(mt::tensor({5}, mt::kInt64)), mt::IndexError, "index 5", "5 embeddings");
  CHECK_THROWS_MSG(emb.forward(mt::tensor({1.0})), mt::DtypeError, "int64");
  nn::MeanPool pool;
  Tensor keep = mt::tensor({{1, 1, 0}, {1, 0, 0}}).to(mt::kBool);
  Tensor s = rand64({2, 3, 4});
  CHECK_CLOSE(pool.forward(s, keep).select(0, 1), s.select(0, 1).select(0, 0), 1e-12, 1e-12);
  CHECK(mt::gradcheck([&](auto& in) { return pool.forward(in[0], keep); }, {s}));
  CHECK_THROWS_MSG(lin.forward(rand64({2, 4})), mt::ShapeError, "linear", "[2, 4]", "in_features");
}

TEST_CASE("MultiheadAttention: a key_padding_mask laid out the other way round suggests batch_first") {
  mt::nn::MultiheadAttention mha(8, 2);  // PyTorch's default layout: [L, N, E]
  const Tensor x = mt::randn({3, 5, 8});  // meant as [N = 3, L = 5, E = 8]
  const Tensor padding = mt::zeros({3, 5}, mt::kBool);
  CHECK_THROWS_MSG(mha.forward(x, x, x, {.key_padding_mask = padding}), mt::ShapeError, "[N, S] = [5, 3]",
                   "construct it with {.batch_first = true}");
  mt::nn::MultiheadAttention first(8, 2, {.batch_first = true});
  const Tensor lnx = mt::randn({5, 3, 8});  // meant as [L = 5, N = 3, E]
  CHECK_THROWS_MSG(first.forward(lnx, lnx, lnx, {.key_padding_mask = mt::zeros({3, 5}, mt::kBool)}), mt::ShapeError,
                   "batch_first = true", "are yours [L, N, E]?");
}
