// A DecoderLM lowered to its step program (lower::lower_decoder): the step's logits against
// the float model's at every position of a sequence, greedy generation in the simulator, and
// the emitted firmware on the host and QEMU Cortex-M4 and M55, bit for bit.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "lower_firmware.hpp"
#include "microtorch/lower/decoder.hpp"
#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/nn.hpp"

namespace nn = microtorch::nn;
namespace lower = microtorch::lower;
using mt::Tensor;

namespace {

nn::DecoderConfig small_config() {
  nn::DecoderConfig c;
  c.vocab_size = 40, c.d_model = 32, c.num_layers = 2, c.num_heads = 4, c.num_kv_heads = 2, c.max_seq_len = 48;
  c.dim_feedforward = 64;
  return c;
}

// A model whose weights are larger than the initialisation's N(0, 0.02), so that its logits
// spread and attention is not uniform.
void widen(nn::DecoderLM& model, double std) {
  mt::manual_seed(7);
  for (auto& [name, p] : model.named_parameters()) {
    if (name.find("norm") != std::string::npos) continue;
    mt::NoGradGuard g;
    p.copy_(mt::randn(p.shape()) * std);
  }
}

struct Agreement {
  double worst = 0;  // the largest |logit error| over the positions, relative to the largest |logit|
  double top1 = 0;   // share of positions whose greedy token is the float model's
};

// Steps the simulator through `tokens` from a reset and compares each step's logits with the
// float model's full causal forward at that position.
Agreement compare(nn::DecoderLM& model, const lower::Program& p, const Tensor& tokens) {
  lower::Simulator sim(p);
  mt::NoGradGuard g;
  const Tensor ref = model.forward(tokens).to(mt::Dtype::Float64).contiguous();  // [1, L, V]
  const std::int64_t L = tokens.size(1), V = model.config.vocab_size;
  const double scale = p.buffer(p.output).scale;
  Agreement a;
  double top = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) top = std::max(top, std::abs(ref.data<double>()[i]));
  std::int64_t same = 0;
  sim.reset();
  for (std::int64_t l = 0; l < L; ++l) {
    const auto q = sim.step(tokens.data<std::int64_t>()[l]);
    REQUIRE(sim.status() == 0);
    const double* f = ref.data<double>() + l * V;
    std::vector<std::int64_t> fq(static_cast<std::size_t>(V));
    for (std::int64_t v = 0; v < V; ++v) {
      a.worst = std::max(a.worst, std::abs(scale * static_cast<double>(q[static_cast<std::size_t>(v)]) - f[v]) / top);
      fq[static_cast<std::size_t>(v)] = static_cast<std::int64_t>(std::lround(f[v] * 1e6));
    }
    same += lower::greedy_token(q) == lower::greedy_token(fq);
  }
  CHECK(sim.position() == L);
  a.top1 = static_cast<double>(same) / static_cast<double>(L);
  return a;
}

}  // namespace

TEST_CASE("lower: a DecoderLM's step program follows the float model at every position") {
  struct Case {
    const char* what;
    void (*adjust)(nn::DecoderConfig&);
    int weight_bits;
    double tol;
    int cache_bits = 16;
  };
  const Case cases[] = {
      {"SwiGLU, half-split RoPE, GQA 4/2, int16 weights", [](nn::DecoderConfig&) {}, 16, 0.01},
      {"interleaved RoPE, q/k/v biases, tied weights", [](nn::DecoderConfig& c) {
         c.rope_interleaved = true, c.attention_bias = true, c.tie_weights = true;
       }, 16, 0.01},
      {"GELU MLP without gate, multi-head (no GQA)", [](nn::DecoderConfig& c) {
         c.activation = "gelu", c.gated = false, c.num_kv_heads = 0;
       }, 16, 0.01},
      {"int8 weights", [](nn::DecoderConfig&) {}, 8, 0.05},
      {"int8 caches, queries and attention output", [](nn::DecoderConfig&) {}, 16, 0.05, 8},
      {"int8 caches and weights, interleaved RoPE, tied weights", [](nn::DecoderConfig& c) {
         c.rope_interleaved = true, c.tie_weights = true;
       }, 8, 0.06, 8},
  };
  for (const Case& k : cases) {
    SUBCASE(k.what) {
      nn::DecoderConfig c = small_config();
      k.adjust(c);
      mt::manual_seed(1);
      nn::DecoderLM model(c);
      widen(model, 0.15);
      const Tensor calibration = mt::randint(0, c.vocab_size, {16, 40});
      const lower::Program p = lower::lower_decoder(model, calibration, {.weight_bits = k.weight_bits, .cache_bits = k.cache_bits, .capacity = 40});
      REQUIRE(p.decoding.has_value());
      const Agreement a = compare(model, p, mt::randint(0, c.vocab_size, {1, 40}));
      MESSAGE(std::string(k.what), ": worst logit error ", a.worst, " of the largest |logit|, greedy agreement ", a.top1);
      CHECK(a.worst < k.tol);
      CHECK(a.top1 >= 0.9);
    }
  }
}

TEST_CASE("lower: a DecoderLM's step program refuses what it cannot lower") {
  nn::DecoderConfig c = small_config();
  c.activation = "relu";
  nn::DecoderLM model(c);
  CHECK_THROWS_MSG(lower::lower_decoder(model, mt::randint(0, c.vocab_size, {1, 8})), mt::ValueError, "relu", "silu");
  nn::DecoderLM ok(small_config());
  CHECK_THROWS_MSG(lower::lower_decoder(ok, mt::randint(0, 40, {1, 8}), {.capacity = 100}), mt::ValueError, "capacity");
  CHECK_THROWS_AS(lower::lower_decoder(ok, mt::randint(0, 40, {1, 49})), mt::ShapeError);
  CHECK_THROWS_MSG(lower::lower_decoder(ok, mt::randint(0, 40, {1, 8}), {.weight_bits = 4}), mt::ValueError, "weight_bits");
  CHECK_THROWS_MSG(lower::lower_decoder(ok, mt::randint(0, 40, {1, 8}), {.cache_bits = 32}), mt::ValueError, "cache_bits");
  // the model's mode is given back
  ok.train();
  lower::lower_decoder(ok, mt::randint(0, 40, {1, 8}));
  CHECK(ok.is_training());
}

TEST_CASE("lower: the simulator's step program generates and stops at its capacity") {
  nn::DecoderConfig c = small_config();
  mt::manual_seed(3);
  nn::DecoderLM model(c);
  widen(model, 0.15);
  const lower::Program p = lower::lower_decoder(model, mt::randint(0, c.vocab_size, {4, 16}), {.capacity = 16});
  lower::Simulator sim(p);
  const auto a = lower::greedy_generate(sim, {1, 2, 3}, 10);
  const auto b = lower::greedy_generate(sim, {1, 2, 3}, 10);  // a reset forgets the first sequence
  CHECK(a == b);
  CHECK(a.size() == 13);
  // the host model's greedy continuation agrees on most tokens (int16 rounding may flip a near tie)
  sim.reset();
  for (std::int64_t i = 0; i < 16; ++i) {
    sim.step(1);
    CHECK(sim.status() == 0);
  }
  sim.step(1);  // the 17th position: the cache is full
  CHECK(sim.status() == 1);
  CHECK(sim.position() == 16);
}

// A 200-token greedy generation from a 3-token prompt, the same on the simulator, the host
// build (and UBSan/ASan) and QEMU Cortex-M4 and M55; then two steps past the cache's end,
// whose status is 1 on every target (the append writes nothing; the logits are the same
// integers everywhere).
TEST_CASE("lower: a DecoderLM's firmware generates the simulator's tokens on the host and QEMU") {
  nn::DecoderConfig c = small_config();
  c.max_seq_len = 208;
  mt::manual_seed(5);
  nn::DecoderLM model(c);
  widen(model, 0.15);
  const std::int64_t capacity = 203;
  const lower::Program p = lower::lower_decoder(model, mt::randint(0, c.vocab_size, {6, 64}),
                                                {.capacity = capacity, .name = "lm"});
  lower::Simulator sim(p);
  const auto tokens = lower::greedy_generate(sim, {4, 8, 15}, 200);
  REQUIRE(tokens.size() == static_cast<std::size_t>(capacity));
  // every step's logits bit for bit: the firmware takes the simulator's greedy tokens in turn,
  // so identical logits at every position are an identical greedy generation
  std::vector<std::vector<std::int64_t>> inputs;
  for (const auto t : tokens) inputs.push_back({t});
  inputs.push_back({1}), inputs.push_back({2});  // past the cache's end: status 1
  sim.reset();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    sim.step(inputs[i][0]);
    CHECK(sim.status() == (i < static_cast<std::size_t>(capacity) ? 0 : 1));
  }
  CHECK(sim.position() == capacity);
  const std::string dir = lower_testing::temp_dir("lm");
  lower::emit_c(p, dir);
  const std::string h = lower_testing::read_file(dir + "/lm.h"), src = lower_testing::read_file(dir + "/lm.c");
  CHECK(h.find("void lm_reset(void);") != std::string::npos);
  CHECK(h.find("int lm_step(int32_t token, int16_t *logits);") != std::string::npos);
  CHECK(h.find("int32_t lm_greedy(const int16_t *logits);") != std::string::npos);
  CHECK(src.find("float") == std::string::npos);
  lower::VerifyOptions o;
  o.cpus = {"cortex-m4", "cortex-m55"};
  o.count_instructions = true;
  const lower::Verification v = lower::verify(p, inputs, dir, o);
  INFO(v.log);
  REQUIRE(v.passed);
  for (const lower::CpuCheck& cpu : v.cpus) CHECK(cpu.identical);
  MESSAGE(v.summary());
  MESSAGE("Cortex-M4 instructions per token (mean over ", inputs.size(), " steps from a reset): ",
          v.instructions("cortex-m4") / static_cast<std::int64_t>(inputs.size()));

  // seeded sampling with the firmware's lm_reset, lm_step and lm_sample (the host build of
  // the emitted C) draws the simulator's tokens
  if (!lower_testing::have_tool("cc")) return;
  std::string main_c = "#include <stdio.h>\n#include \"lm.h\"\nint main(void) {\n  int16_t logits[LM_VOCAB];\n"
                       "  uint32_t seed = 123;\n  int32_t t = 4;\n  int i;\n  lm_reset();\n"
                       "  lm_step(4, logits);\n  lm_step(8, logits);\n  lm_step(15, logits);\n"
                       "  for (i = 0; i < 30; ++i) {\n    t = lm_sample(logits, 8, " +
                       std::to_string(lower::inv_temperature_q16(0.9)) +
                       ", &seed);\n    printf(\" %d\", (int)t);\n    lm_step(t, logits);\n  }\n  printf(\"\\n\");\n"
                       "  return 0;\n}\n";
  {
    std::ofstream f(dir + "/sample_main.c");
    f << main_c;
  }
  const auto built = lower_testing::run(fmt::format("cd {} && cc -std=c99 -O2 -Wall -Wextra -Werror -o sample sample_main.c lm.c "
                                                    "mt_kernels.c && ./sample",
                                                    dir));
  REQUIRE(built.status == 0);
  std::string want;
  std::uint32_t seed = 123;
  sim.reset();
  std::vector<std::int64_t> logits;
  for (const std::int64_t t : {4, 8, 15}) logits = sim.step(t);
  for (int i = 0; i < 30; ++i) {
    const std::int64_t t = lower::sample_token(p, logits, 8, 0.9, seed);
    want += " " + std::to_string(t);
    logits = sim.step(t);
  }
  CHECK(built.out == want + "\n");
}

// A model the size of llama2.c's stories260K (random weights), 256 steps from a reset on
// Cortex-M4 and M55: the mean instructions per token over positions 0..255 (attention's
// share grows with the position; its mean is the cost at context 128), and the RAM. Skipped
// by default (a few minutes under QEMU): --no-skip -tc='*stories260K*'.
TEST_CASE("lower bench: a stories260K-sized decoder's step on Cortex-M4 and M55" * doctest::skip()) {
  nn::DecoderConfig c;
  c.vocab_size = 512, c.d_model = 64, c.num_layers = 5, c.num_heads = 8, c.num_kv_heads = 4, c.max_seq_len = 256;
  c.dim_feedforward = 172, c.tie_weights = true;
  for (const auto& [bits, cache_bits] : {std::pair{16, 16}, std::pair{8, 16}, std::pair{16, 8}, std::pair{8, 8}}) {
    mt::manual_seed(11);
    nn::DecoderLM model(c);
    widen(model, 0.1);
    const lower::Program p = lower::lower_decoder(model, mt::randint(0, c.vocab_size, {2, 256}),
                                                  {.weight_bits = bits, .cache_bits = cache_bits, .name = "stories"});
    lower::Simulator sim(p);
    const auto tokens = lower::greedy_generate(sim, {1}, 255);
    std::vector<std::vector<std::int64_t>> inputs;
    for (const auto t : tokens) inputs.push_back({t});
    const std::string dir = lower_testing::temp_dir(fmt::format("stories{}_{}", bits, cache_bits));
    lower::emit_c(p, dir);
    lower::VerifyOptions o;
    // int16 weights (about 590 KB) do not fit the 512 KB of flash of QEMU's Cortex-M55 board
    o.cpus = bits == 16 ? std::vector<std::string>{"cortex-m4"} : std::vector<std::string>{"cortex-m4", "cortex-m55"};
    const lower::Verification v = lower::verify(p, inputs, dir, o);
    INFO(v.log);
    REQUIRE(v.passed);
    const lower::FirmwareSize size = lower::firmware_size(p, dir, "cortex-m4");
    MESSAGE(fmt::format("int16 activations, int{} caches, int{} weights: {} instructions per token on Cortex-M4, {} on M55 (mean over "
                        "positions 0..255); RAM: arena {} + caches {} = {} bytes; flash (text) {} bytes, bss {} bytes",
                        cache_bits, bits, v.instructions("cortex-m4") / 256, v.instructions("cortex-m55") / 256, p.arena_bytes,
                        p.decoding->state_bytes, p.arena_bytes + p.decoding->state_bytes, size.text, size.bss));
  }
}

TEST_CASE("lower: the seeded top-k sampler of a decoder's firmware, in integers") {
  nn::DecoderConfig c = small_config();
  mt::manual_seed(9);
  nn::DecoderLM model(c);
  widen(model, 0.3);
  const lower::Program p = lower::lower_decoder(model, mt::randint(0, c.vocab_size, {4, 16}), {.capacity = 16});
  lower::Simulator sim(p);
  sim.reset();
  const auto logits = sim.step(3);
  // top_k = 1 is greedy, whatever the temperature and seed
  std::uint32_t seed = 42;
  CHECK(lower::sample_token(p, logits, 1, 0.7, seed) == lower::greedy_token(logits));
  // the same seed draws the same tokens
  std::uint32_t s1 = 7, s2 = 7;
  for (int i = 0; i < 20; ++i) CHECK(lower::sample_token(p, logits, 5, 1.0, s1) == lower::sample_token(p, logits, 5, 1.0, s2));
  // the draws follow softmax(logits / T) over the top 5 (20,000 draws: within 0.02 of each probability)
  std::vector<std::pair<double, int>> top;
  const double scale = p.buffer(p.output).scale;
  for (std::size_t i = 0; i < logits.size(); ++i) top.emplace_back(static_cast<double>(logits[i]), static_cast<int>(i));
  std::sort(top.begin(), top.end(), [](auto a, auto b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  const double T = 0.8;
  double z = 0;
  for (int k = 0; k < 5; ++k) z += std::exp((top[k].first - top[0].first) * scale / T);
  std::vector<int> count(logits.size(), 0);
  std::uint32_t s = 1;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ++count[static_cast<std::size_t>(lower::sample_token(p, logits, 5, T, s))];
  int inside = 0;
  for (int k = 0; k < 5; ++k) {
    const double want = std::exp((top[k].first - top[0].first) * scale / T) / z;
    inside += count[static_cast<std::size_t>(top[k].second)];
    CHECK(std::abs(count[static_cast<std::size_t>(top[k].second)] / static_cast<double>(draws) - want) < 0.02);
  }
  CHECK(inside == draws);
  CHECK_THROWS_AS(lower::sample_token(p, logits, 5, 0.0, s), mt::ValueError);
}

TEST_CASE("lower: a DecoderLM's firmware with int8 caches and weights generates the simulator's tokens") {
  nn::DecoderConfig c = small_config();
  mt::manual_seed(6);
  nn::DecoderLM model(c);
  widen(model, 0.15);
  const lower::Program p = lower::lower_decoder(model, mt::randint(0, c.vocab_size, {6, 40}),
                                                {.weight_bits = 8, .cache_bits = 8, .capacity = 40, .name = "lm8"});
  lower::Simulator sim(p);
  std::vector<std::vector<std::int64_t>> inputs;
  for (const auto t : lower::greedy_generate(sim, {4, 8, 15}, 37)) inputs.push_back({t});
  const std::string dir = lower_testing::temp_dir("lm8");
  lower::emit_c(p, dir);
  lower::VerifyOptions o;
  o.cpus = {"cortex-m4", "cortex-m55"};
  o.count_instructions = false;
  const lower::Verification v = lower::verify(p, inputs, dir, o);
  INFO(v.log);
  REQUIRE(v.passed);
  for (const lower::CpuCheck& cpu : v.cpus) CHECK(cpu.identical);
  MESSAGE(v.summary());
}

// A character model (2 layers, d_model 64, GQA 4/2, context 64) trained for 400 AdamW steps
// on the GNU GPL v3 (its first 90%; about 10 s), then lowered: next-token agreement with the
// float model and cross-entropy on the held-out 10%, at int16 (targets: agreement >= 99.5%,
// cross entropy within 0.5%), int8 weights, and int8 weights and caches (>= 98%, within 3%).
TEST_CASE("lower: a trained character model's step program agrees with float on held-out text") {
  std::ifstream in("/usr/share/common-licenses/GPL-3", std::ios::binary);
  REQUIRE(in.good());
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::map<char, std::int64_t> ids;
  for (const char ch : text) ids[ch] = 0;
  std::int64_t vocab = 0;
  for (auto& [ch, id] : ids) id = vocab++;
  std::vector<std::int64_t> tokens;
  for (const char ch : text) tokens.push_back(ids[ch]);
  const auto n = static_cast<std::int64_t>(tokens.size()), split = n * 9 / 10;
  const Tensor all = mt::tensor(tokens, {n});
  const Tensor train = all.narrow(0, 0, split), held = all.narrow(0, split, n - split);
  const std::int64_t ctx = 64, batch = 16;
  nn::DecoderConfig c;
  c.vocab_size = vocab, c.d_model = 64, c.num_layers = 2, c.num_heads = 4, c.num_kv_heads = 2, c.max_seq_len = ctx;
  c.dim_feedforward = 172;
  mt::manual_seed(1);
  nn::DecoderLM model(c);
  const int steps = std::getenv("MICROTORCH_CHAR_STEPS") ? std::atoi(std::getenv("MICROTORCH_CHAR_STEPS")) : 400;
  mt::optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  mt::Generator draws(1);
  for (int step = 0; step < steps; ++step) {
    std::vector<Tensor> rows;
    for (std::int64_t b = 0; b < batch; ++b) rows.push_back(train.narrow(0, draws.integer(0, split - ctx - 1), ctx + 1));
    const Tensor w = mt::stack(rows);
    const Tensor logits = model.forward(w.narrow(1, 0, ctx));
    const Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, vocab}), w.narrow(1, 1, ctx).reshape({-1}));
    opt.zero_grad();
    loss.backward();
    mt::optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
  }
  model.eval();
  // calibration: 32 windows of the training text
  std::vector<Tensor> cal;
  for (int b = 0; b < 32; ++b) cal.push_back(train.narrow(0, draws.integer(0, split - ctx), ctx));
  const Tensor calibration = mt::stack(cal);
  // held-out windows: the first 64 (4,096 characters)
  const std::int64_t windows = std::min<std::int64_t>(64, (n - split - 1) / ctx);
  auto log_softmax_at = [](const std::vector<double>& l, std::int64_t y) {
    const double top = *std::max_element(l.begin(), l.end());
    double z = 0;
    for (const double v : l) z += std::exp(v - top);
    return l[static_cast<std::size_t>(y)] - top - std::log(z);
  };
  struct Setting {
    const char* what;
    int weight_bits, cache_bits;
    double agreement, cross_entropy;  // the targets: the least agreement, the most relative excess
  };
  for (const Setting s : {Setting{"int16", 16, 16, 0.995, 0.005}, Setting{"int8 weights", 8, 16, 0.98, 0.03},
                          Setting{"int8 weights and caches", 8, 8, 0.98, 0.03}}) {
    const lower::Program p = lower::lower_decoder(model, calibration, {.weight_bits = s.weight_bits, .cache_bits = s.cache_bits});
    lower::Simulator sim(p);
    const double scale = p.buffer(p.output).scale;
    double ce_f = 0, ce_q = 0;
    std::int64_t same = 0, hits_f = 0, hits_q = 0, count = 0;
    mt::NoGradGuard g;
    for (std::int64_t k = 0; k < windows; ++k) {
      const Tensor x = held.narrow(0, k * ctx, ctx), y = held.narrow(0, k * ctx + 1, ctx);
      const Tensor f = model.forward(x.unsqueeze(0)).reshape({ctx, vocab}).to(mt::Dtype::Float64).contiguous();
      sim.reset();
      for (std::int64_t l = 0; l < ctx; ++l) {
        const auto q = sim.step(x.data<std::int64_t>()[l]);
        std::vector<double> fl(f.data<double>() + l * vocab, f.data<double>() + (l + 1) * vocab), ql;
        for (const auto v : q) ql.push_back(scale * static_cast<double>(v));
        const std::int64_t target = y.data<std::int64_t>()[l];
        ce_f -= log_softmax_at(fl, target), ce_q -= log_softmax_at(ql, target);
        const auto af = std::max_element(fl.begin(), fl.end()) - fl.begin();
        const auto aq = lower::greedy_token(q);
        same += af == aq, hits_f += af == target, hits_q += aq == target, ++count;
      }
    }
    const double cf = ce_f / static_cast<double>(count), cq = ce_q / static_cast<double>(count);
    MESSAGE(fmt::format("{} steps; {}: next-token agreement with float {:.2f}% over {} held-out characters; cross "
                        "entropy {:.4f} (float {:.4f}, {:+.2f}%); accuracy {:.2f}% (float {:.2f}%); RAM {} bytes",
                        steps, s.what, 100.0 * static_cast<double>(same) / static_cast<double>(count), count, cq, cf,
                        100.0 * (cq - cf) / cf, 100.0 * static_cast<double>(hits_q) / static_cast<double>(count),
                        100.0 * static_cast<double>(hits_f) / static_cast<double>(count),
                        p.arena_bytes + p.decoding->state_bytes));
    CHECK(static_cast<double>(same) / static_cast<double>(count) >= s.agreement);
    CHECK(std::abs(cq - cf) / cf <= s.cross_entropy);
  }
}

TEST_CASE("lower: rms_norm in a traced model, int16 and int8 (mt_rmsnorm_s16)") {
  mt::manual_seed(21);
  auto norm = std::make_shared<nn::RMSNorm>(mt::Shape{16}, nn::RMSNormOptions{1e-5});
  {
    mt::NoGradGuard g;
    norm->weight.copy_(mt::rand({16}) + 0.5);
  }
  nn::Sequential model({std::make_shared<nn::Linear>(4, 16), norm, std::make_shared<nn::Linear>(16, 3)});
  model.eval();
  const Tensor x = mt::randn({64, 4});
  const lower::Graph g = lower::trace(model, {1, 4});
  const lower::Calibration cal = lower::calibrate(g, x);
  Tensor ref;
  {
    mt::NoGradGuard ng;
    ref = model.forward(x).to(mt::Dtype::Float64);
  }
  const double range = mt::max(ref).item() - mt::min(ref).item();
  for (const int bits : {16, 8}) {
    const lower::Program p = lower::quantize(g, cal, {.activation_bits = bits, .name = "rms"});
    CHECK(p.to_string().find("mt_rmsnorm_s16") != std::string::npos);
    lower::Simulator sim(p);
    const Tensor y = sim.forward(x).to(mt::Dtype::Float64);
    const double err = mt::max(mt::abs(y - ref)).item() / range;
    MESSAGE("rms_norm model at int", bits, ": max error ", err, " of the output range");
    CHECK(err < (bits == 16 ? 0.002 : 0.03));
    // the emitted C on the host and under UBSan/ASan
    const std::string dir = lower_testing::temp_dir(fmt::format("rms{}", bits));
    lower::emit_c(p, dir);
    lower::VerifyOptions o;
    o.cpus = {};
    o.count_instructions = false;
    std::vector<std::vector<std::int64_t>> inputs;
    for (int i = 0; i < 8; ++i) inputs.push_back(lower::quantize_input(p, x.slice(0, i, i + 1)));
    const lower::Verification v = lower::verify(p, inputs, dir, o);
    INFO(v.log);
    CHECK(v.passed);
  }
}
