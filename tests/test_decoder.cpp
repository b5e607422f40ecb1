// Decoder-only models: RMSNorm, RotaryEmbedding, CausalSelfAttention, MultiheadAttention with
// num_kv_heads, DecoderLM (against PyTorch 1.13 references of Hugging Face's Llama modules,
// tools/gen_generation_fixtures.py), the KV cache (incremental decoding equals the full causal
// forward at every position), weight tying, generate and sample_tokens, and their errors.
//
// Tolerances, float32: rtol 1e-5, atol 2e-6 as in tests/test_modules_oracle.cpp, except the
// whole language models (2e-5, 5e-6: two layers of attention, SwiGLU and RMSNorm whose sums
// run in another order than torch's). Incremental decoding against the full forward: 1e-5
// absolute in float32 (the same kernels on fewer rows at a time), 1e-12 in float64.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "helpers.hpp"
#include "microtorch/nn.hpp"

namespace nn = microtorch::nn;
using mt::Tensor;

namespace {

struct Tol {
  double rtol, atol;
};
constexpr Tol kTol{1e-5, 2e-6};
constexpr Tol kTolModel{2e-5, 5e-6};

Tensor gen(const std::string& c, const std::string& member) { return fixture("gen_" + c + "__" + member); }

/// The members param__<name> of case c.
nn::NamedTensors torch_state(const std::string& c) {
  nn::NamedTensors out;
  for (const auto& [member, t] : fixture_case("gen_" + c)) {
    if (member.rfind("param__", 0) == 0) out.emplace_back(member.substr(7), t);
  }
  return out;
}

std::vector<std::string> keys_of(const nn::NamedTensors& tensors) {
  std::vector<std::string> keys;
  for (const auto& [n, _] : tensors) keys.push_back(n);
  std::sort(keys.begin(), keys.end());
  return keys;
}

/// Loads case c's torch state dict into `module` (the key sets must be equal), runs forward
/// on input `x` (float, requires grad) or the token ids `tokens`, compares the output, then
/// every parameter's gradient and x's of sum(out * w).
void check_module(const std::string& c, nn::Module& module, const std::function<Tensor(const Tensor&)>& forward,
                  bool tokens, Tol tol = kTol) {
  INFO("case gen_", c);
  const nn::NamedTensors state = torch_state(c);
  CHECK(keys_of(state) == keys_of(module.state_dict()));
  module.load_state_dict(state);
  module.eval();
  Tensor x = tokens ? gen(c, "tokens") : gen(c, "x").requires_grad_(true);
  const Tensor out = forward(x);
  CHECK_CLOSE(out, gen(c, "out"), tol.rtol, tol.atol);
  mt::sum(out * gen(c, "w")).backward();
  for (const auto& [name, p] : module.named_parameters()) {
    INFO("gradient of ", name);
    REQUIRE(p.grad().defined());
    CHECK_CLOSE(p.grad(), gen(c, "grad__" + name), tol.rtol, tol.atol);
  }
  if (!tokens) CHECK_CLOSE(x.grad(), gen(c, "grad_x"), tol.rtol, tol.atol);
}

nn::DecoderConfig small_config() {
  return {.vocab_size = 17, .d_model = 24, .num_layers = 2, .num_heads = 6, .num_kv_heads = 2,
          .dim_feedforward = 40, .max_seq_len = 64};
}

/// Tokens [N, L] drawn from the vocabulary.
Tensor tokens_of(std::int64_t N, std::int64_t L, std::int64_t vocab) { return mt::randint(0, vocab, {N, L}); }

}  // namespace

TEST_CASE("RMSNorm, CausalSelfAttention and MultiheadAttention with num_kv_heads match PyTorch references") {
  SUBCASE("RMSNorm (torch.nn.RMSNorm's 'weight')") {
    nn::RMSNorm m({6}, {.eps = 1e-6});
    check_module("rmsnorm_module", m, [&](const Tensor& x) { return m.forward(x); }, false);
  }
  SUBCASE("causal self-attention, 4 query heads over 2 key/value heads, q/k/v biases, half-split RoPE") {
    nn::CausalSelfAttention m(16, 4, {.num_kv_heads = 2, .bias = true});
    check_module("causal_self_attention_gqa_half", m, [&](const Tensor& x) { return m.forward(x); }, false);
  }
  SUBCASE("causal self-attention, interleaved RoPE of base 500") {
    nn::CausalSelfAttention m(12, 3, {.rope_base = 500.0, .rope_interleaved = true});
    check_module("causal_self_attention_interleaved", m, [&](const Tensor& x) { return m.forward(x); }, false);
  }
  SUBCASE("the ScaledDotProductAttention module passes enable_gqa through") {
    nn::ScaledDotProductAttention sdpa;
    const Tensor q = gen("sdpa_gqa_causal", "q"), k = gen("sdpa_gqa_causal", "k"), v = gen("sdpa_gqa_causal", "v");
    CHECK_CLOSE(std::get<0>(sdpa.forward(q, k, v, mt::Mask(), /*is_causal=*/true, /*enable_gqa=*/true)),
                gen("sdpa_gqa_causal", "out"), kTol.rtol, kTol.atol);
  }
  SUBCASE("MultiheadAttention(8, 4) with num_kv_heads = 2: separate projections, one bias") {
    nn::MultiheadAttention m(8, 4, {.batch_first = true, .num_kv_heads = 2});
    CHECK(m.k_proj_weight.shape() == mt::Shape{4, 8});
    CHECK(m.in_proj_bias.shape() == mt::Shape{16});
    check_module("multihead_attention_gqa", m, [&](const Tensor& x) { return std::get<0>(m.forward(x, x, x)); }, false);
  }
}

TEST_CASE("DecoderLM loads Hugging Face Llama-style state dicts and matches logits and gradients") {
  SUBCASE("two layers, grouped-query attention, SwiGLU, untied") {
    nn::DecoderLM m({.vocab_size = 11, .d_model = 16, .num_layers = 2, .num_heads = 4, .num_kv_heads = 2,
                     .dim_feedforward = 24, .max_seq_len = 32});
    check_module("decoder_lm_gqa", m, [&](const Tensor& t) { return m.forward(t); }, true, kTolModel);
  }
  SUBCASE("one key/value head, interleaved RoPE, eps 1e-6, tied embeddings") {
    nn::DecoderLM m({.vocab_size = 13, .d_model = 12, .num_layers = 2, .num_heads = 3, .num_kv_heads = 1,
                     .dim_feedforward = 20, .norm_eps = 1e-6, .rope_interleaved = true, .max_seq_len = 32,
                     .tie_weights = true});
    check_module("decoder_lm_tied_interleaved", m, [&](const Tensor& t) { return m.forward(t); }, true, kTolModel);
  }
}

TEST_CASE("the KV cache: incremental decoding equals the full causal forward at every position") {
  for (bool interleaved : {false, true}) {
    for (mt::Dtype dtype : {mt::kFloat32, mt::kFloat64}) {
      CAPTURE(interleaved);
      CAPTURE(mt::dtype_name(dtype));
      mt::manual_seed(3);
      nn::DecoderConfig config = small_config();
      config.rope_interleaved = interleaved;
      config.dtype = dtype;
      nn::DecoderLM model(config);
      model.eval();
      mt::NoGradGuard no_grad;
      // weights at 3x their initial scale: logits of a few units, attention far from uniform
      for (Tensor& p : model.parameters()) p.mul_(3.0);
      const std::int64_t L = 64;
      const Tensor tokens = tokens_of(2, L, config.vocab_size);
      const Tensor full = model.forward(tokens);  // [2, 64, 17]
      const double atol = dtype == mt::kFloat32 ? 1e-5 : 1e-12;
      SUBCASE("one position at a time after a prompt of 5") {
        nn::KVCache cache = model.make_cache(2);
        std::vector<Tensor> pieces{model.forward(tokens.narrow(1, 0, 5), cache)};
        for (std::int64_t t = 5; t < L; ++t) pieces.push_back(model.forward(tokens.narrow(1, t, 1), cache));
        CHECK(cache.length() == L);
        CHECK_CLOSE(mt::cat(pieces, 1), full, 0.0, atol);
      }
      SUBCASE("a few positions at a time (3, then 7, ...)") {
        nn::KVCache cache = model.make_cache(2, L);
        std::vector<Tensor> pieces;
        for (std::int64_t t = 0, step = 3; t < L; t += step, step = step == 3 ? 7 : 3) {
          pieces.push_back(model.forward(tokens.narrow(1, t, std::min(step, L - t)), cache));
        }
        CHECK_CLOSE(mt::cat(pieces, 1), full, 0.0, atol);
      }
    }
  }
}

TEST_CASE("the KV cache holds layers of [batch, capacity, Hkv D], resets, and refuses what does not fit") {
  mt::manual_seed(4);
  nn::DecoderLM model(small_config());
  model.eval();
  nn::KVCache cache = model.make_cache(1, 8);
  CHECK(cache.num_layers() == 2);
  CHECK(cache.keys(1).shape() == mt::Shape{1, 8, 2 * 4});
  mt::NoGradGuard no_grad;
  const Tensor t = tokens_of(1, 6, 17);
  const Tensor first = model.forward(t, cache);
  CHECK(cache.length() == 6);
  CHECK_THROWS_MSG(model.forward(tokens_of(1, 3, 17), cache), mt::ValueError, "KVCache", "holds 6 of its 8", "3 more");
  CHECK(cache.length() == 6);  // nothing was written
  cache.reset();
  CHECK(cache.length() == 0);
  CHECK_CLOSE(model.forward(t, cache), first, 0.0, 0.0);
  nn::KVCache wrong_batch = model.make_cache(2, 8);
  CHECK_THROWS_MSG(model.forward(t, wrong_batch), mt::ShapeError, "KVCache", "batch 2");
  nn::KVCache wrong_layers(3, 1, 8, 2, 4);
  CHECK_THROWS_MSG(model.forward(t, wrong_layers), mt::ValueError, "3 layers", "model 2");
  CHECK_THROWS_MSG(wrong_layers.keys(3), mt::IndexError, "layer 3", "3 layers");
  CHECK_THROWS_MSG(nn::KVCache(2, 1, 0, 2, 4), mt::ValueError, "capacity");
}

TEST_CASE("a decode step records rms_norm, rotary_embedding, kv_cache_attention and silu_and_mul for the lowering") {
  mt::manual_seed(5);
  nn::DecoderLM model(small_config());
  model.eval();
  nn::KVCache cache = model.make_cache(1, 16);
  {
    mt::NoGradGuard no_grad;
    model.forward(tokens_of(1, 4, 17), cache);
  }
  mt::NoGradGuard no_grad;
  mt::autograd::TraceGuard trace;
  const Tensor logits = model.forward(tokens_of(1, 1, 17), cache);
  std::map<std::string, int> ops;
  std::set<const mt::autograd::Node*> seen;
  std::vector<const mt::autograd::Node*> stack{logits.grad_fn().get()};
  const mt::autograd::Node* attention = nullptr;
  while (!stack.empty()) {
    const mt::autograd::Node* n = stack.back();
    stack.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    ++ops[n->op];
    if (n->op == "kv_cache_attention") attention = n;
    for (const auto& e : n->inputs) {
      if (e.node) stack.push_back(e.node.get());
    }
  }
  CHECK(ops["rms_norm"] == 5);             // two per layer and the final norm
  CHECK(ops["rotary_embedding"] == 4);     // q and k of each layer
  CHECK(ops["kv_cache_attention"] == 2);
  CHECK(ops["silu_and_mul"] == 2);         // SwiGLU's gate
  CHECK(ops["linear"] == 2 * 7 + 1);       // q, k, v, o, gate, up, down per layer, and lm_head
  REQUIRE(attention != nullptr);
  CHECK(std::get<std::int64_t>(*attention->attr("position")) == 4);
  CHECK(std::get<std::int64_t>(*attention->attr("num_heads")) == 6);
  CHECK(std::get<std::int64_t>(*attention->attr("num_kv_heads")) == 2);
  CHECK(attention->inputs.size() == 5);    // q, k, v, k_cache, v_cache (one new query: no mask)
}

TEST_CASE("weight tying: one parameter in parameters(), two keys in the state dict, gradients of both uses") {
  mt::manual_seed(6);
  nn::DecoderConfig config = small_config();
  config.tie_weights = true;
  nn::DecoderLM tied(config);
  config.tie_weights = false;
  nn::DecoderLM untied(config);
  CHECK(tied.parameters().size() + 1 == untied.parameters().size());
  CHECK(tied.num_parameters() + 17 * 24 == untied.num_parameters());
  CHECK(tied.lm_head->weight.is_same(tied.model->embed_tokens->weight));
  const auto keys = keys_of(tied.state_dict());
  CHECK(keys == keys_of(untied.state_dict()));
  CHECK(tied.get("lm_head.weight").is_same(tied.get("model.embed_tokens.weight")));
  std::int64_t named = 0;
  for (const auto& [n, p] : tied.named_parameters()) named += n == "model.embed_tokens.weight" || n == "lm_head.weight";
  CHECK(named == 1);
  // the untied model with the same weights everywhere: the tied gradient is the sum of both
  untied.load_state_dict(tied.state_dict());
  const Tensor t = tokens_of(2, 9, 17);
  mt::sum(tied.forward(t) * mt::arange(0.0, 17.0, 1.0, mt::kFloat32)).backward();
  mt::sum(untied.forward(t) * mt::arange(0.0, 17.0, 1.0, mt::kFloat32)).backward();
  CHECK_CLOSE(tied.model->embed_tokens->weight.grad(),
              untied.model->embed_tokens->weight.grad() + untied.lm_head->weight.grad(), 1e-5, 1e-6);
  // AdamW accepts it (a repeated parameter would be refused) and steps it once
  mt::optim::AdamW opt(tied.parameters(), {.lr = 1e-2});
  opt.step();
  CHECK(tied.lm_head->weight.is_same(tied.model->embed_tokens->weight));
  // loading a state dict writes the shared tensor
  tied.load_state_dict(untied.state_dict());
  CHECK(mt::equal(tied.lm_head->weight, untied.lm_head->weight));
  CHECK_THROWS_MSG(tied.lm_head->replace_parameter("weight", mt::zeros({3, 3})), mt::ShapeError, "replace_parameter",
                   "[17, 24]");
  CHECK_THROWS_MSG(tied.lm_head->replace_parameter("bias", mt::zeros({17})), mt::ValueError, "no own parameter");
}

TEST_CASE("RotaryEmbedding: offsets and position tensors agree, and q.k depends only on the distance") {
  mt::manual_seed(7);
  for (bool interleaved : {false, true}) {
    nn::RotaryEmbedding rope(8, {.interleaved = interleaved, .max_seq_len = 32});
    const Tensor x = mt::randn({2, 12, 3, 8});
    const Tensor all = rope.forward(x);
    CHECK_CLOSE(rope.forward(x.narrow(1, 5, 7), 5), all.narrow(1, 5, 7), 0.0, 0.0);
    CHECK_CLOSE(rope.forward(x, mt::arange(0.0, 12.0)), all, 0.0, 0.0);
    const Tensor per_row = mt::stack({mt::arange(0.0, 12.0), mt::arange(3.0, 15.0)});
    CHECK_CLOSE(rope.forward(x, per_row).select(0, 1), rope.forward(x.narrow(0, 1, 1), 3).select(0, 0), 0.0, 0.0);
    // position 0 turns nothing; rotations keep norms
    CHECK_CLOSE(all.narrow(1, 0, 1), x.narrow(1, 0, 1), 0.0, 0.0);
    CHECK_CLOSE(mt::sum(all * all, {-1}), mt::sum(x * x, {-1}), 1e-5, 1e-5);
    // rope(q, m) . rope(k, n) is a function of m - n
    const Tensor q = mt::randn({1, 1, 1, 8}), k = mt::randn({1, 1, 1, 8});
    auto dot = [&](std::int64_t m, std::int64_t n) {
      return mt::sum(rope.forward(q, m) * rope.forward(k, n)).item();
    };
    CHECK(dot(7, 3) == doctest::Approx(dot(20, 16)).epsilon(1e-5));
    CHECK(dot(2, 9) == doctest::Approx(dot(11, 18)).epsilon(1e-5));
  }
  nn::RotaryEmbedding rope(8, {.max_seq_len = 16});
  CHECK(rope.state_dict().empty());  // the tables are not state
  CHECK(rope.named_buffers().size() == 2);
  CHECK_THROWS_MSG(rope.forward(mt::ones({1, 4, 2, 8}), 14), mt::ValueError, "14 .. 17", "max_seq_len 16");
  CHECK_THROWS_MSG(rope.forward(mt::ones({1, 4, 2, 6})), mt::ShapeError, "[N, L, H, 8]");
  CHECK_THROWS_MSG(rope.forward(mt::ones({1, 2, 2, 8}), mt::tensor(std::vector<std::int64_t>{0, 16}, {2})),
                   mt::ValueError, "position 16");
  CHECK_THROWS_MSG(nn::RotaryEmbedding(7), mt::ValueError, "even");
}

TEST_CASE("generate: greedy and seeded sampling, the same tokens with and without the cache") {
  mt::manual_seed(8);
  nn::DecoderLM model(small_config());
  model.eval();
  const Tensor prompt = tokens_of(2, 5, 17);
  const Tensor greedy = nn::generate(model, prompt, {.max_new_tokens = 20, .temperature = 0.0});
  CHECK(greedy.shape() == mt::Shape{2, 25});
  CHECK(mt::equal(greedy.narrow(1, 0, 5), prompt));
  CHECK(mt::equal(nn::generate(model, prompt, {.max_new_tokens = 20, .temperature = 0.0, .use_cache = false}), greedy));
  // greedy is the argmax of the full forward at every step
  {
    mt::NoGradGuard no_grad;
    const Tensor logits = model.forward(greedy.narrow(1, 0, 24));
    const Tensor predicted = mt::argmax(logits.narrow(1, 4, 20), -1);
    CHECK(mt::equal(predicted, greedy.narrow(1, 5, 20)));
  }
  // top_k = 1 samples the argmax
  CHECK(mt::equal(nn::generate(model, prompt, {.max_new_tokens = 20, .top_k = 1, .seed = 1}), greedy));
  const nn::GenerateOptions sampled{.max_new_tokens = 20, .temperature = 1.5, .top_k = 8, .top_p = 0.9, .seed = 42};
  const Tensor a = nn::generate(model, prompt, sampled);
  CHECK(mt::equal(nn::generate(model, prompt, sampled), a));  // seeded: repeatable
  nn::GenerateOptions no_cache = sampled;
  no_cache.use_cache = false;
  CHECK(mt::equal(nn::generate(model, prompt, no_cache), a));
  nn::GenerateOptions other = sampled;
  other.seed = 43;
  CHECK(!mt::equal(nn::generate(model, prompt, other), a));
  // a 1-D prompt gives a 1-D result; eos stops every sequence once each has produced it
  const Tensor one = nn::generate(model, prompt.select(0, 0), {.max_new_tokens = 20, .temperature = 0.0});
  CHECK(mt::equal(one, greedy.select(0, 0)));
  const std::int64_t eos = greedy.at<std::int64_t>({0, 7});
  const Tensor stopped = nn::generate(model, prompt.narrow(0, 0, 1), {.max_new_tokens = 20, .temperature = 0.0, .eos_token_id = eos});
  CHECK(stopped.size(1) <= 8);
  CHECK(stopped.at<std::int64_t>({0, stopped.size(1) - 1}) == eos);
}

TEST_CASE("sample_tokens: temperature 0 is the argmax; top_k and top_p keep only the likeliest tokens") {
  const Tensor logits = mt::tensor({{0.0, 3.0, 1.0, -1.0}, {2.0, 2.0, 0.0, 5.0}});
  CHECK(nn::sample_tokens(logits, 0.0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 3});
  mt::Generator g(3);
  mt::GeneratorGuard use(g);
  std::set<std::int64_t> first_row, nucleus;
  for (int i = 0; i < 200; ++i) {
    first_row.insert(nn::sample_tokens(logits, 2.0, 2).at<std::int64_t>({0}));
    // p = softmax([0, 3, 1, -1]) = [.04, .84, .11, .02]: top_p 0.9 keeps tokens 1 and 2
    nucleus.insert(nn::sample_tokens(logits, 1.0, 0, 0.9).at<std::int64_t>({0}));
  }
  CHECK(first_row == std::set<std::int64_t>{1, 2});
  CHECK(nucleus == std::set<std::int64_t>{1, 2});
  CHECK(nn::sample_tokens(logits, 1.0, 0, 0.5).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 3});
}

TEST_CASE("bad input: decoder modules, caches and generate name the problem") {
  CHECK_THROWS_MSG(nn::CausalSelfAttention(16, 4, {.num_kv_heads = 3}), mt::ValueError, "num_kv_heads = 3",
                   "divide num_heads = 4");
  CHECK_THROWS_MSG(nn::MultiheadAttention(8, 4, {.num_kv_heads = 3}), mt::ValueError, "num_kv_heads = 3");
  CHECK_THROWS_MSG(nn::DecoderLM(nn::DecoderConfig{}), mt::ValueError, "vocab_size 0");
  CHECK_THROWS_MSG(nn::DecoderMLP(4, 8, {.activation = "swish"}), mt::ValueError, "\"swish\"");
  mt::manual_seed(9);
  nn::DecoderLM model(small_config());
  model.eval();
  const Tensor prompt = tokens_of(1, 4, 17);
  CHECK_THROWS_MSG(nn::generate(model, prompt, {.max_new_tokens = 61}), mt::ValueError, "4 prompt tokens and 61",
                   "max_seq_len 64");
  CHECK_THROWS_MSG(nn::generate(model, prompt, {.temperature = -1.0}), mt::ValueError, "temperature");
  CHECK_THROWS_MSG(nn::generate(model, prompt, {.top_k = -2}), mt::ValueError, "top_k");
  CHECK_THROWS_MSG(nn::generate(model, prompt, {.top_p = 0.0}), mt::ValueError, "top_p");
  CHECK_THROWS_MSG(nn::generate(model, prompt.to(mt::kFloat32)), mt::DtypeError, "int64");
  CHECK_THROWS_MSG(nn::generate(model, mt::zeros({1, 0}, mt::kInt64)), mt::ShapeError, "P >= 1");
  CHECK_THROWS_MSG(nn::generate(model, mt::full({1, 2}, 17, mt::kInt64)), mt::IndexError, "index 17");
  CHECK_THROWS_MSG(model.forward(tokens_of(1, 65, 17)), mt::ValueError, "beyond max_seq_len 64");
  CHECK_THROWS_MSG(nn::sample_tokens(mt::ones({4})), mt::ShapeError, "[N, V]");
}
