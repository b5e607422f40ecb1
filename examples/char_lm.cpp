// examples/char_lm.cpp — a character-level language model: a decoder-only transformer (RMSNorm,
// rotary positions, grouped-query attention, SwiGLU, tied embeddings; nn::DecoderLM) trained
// with AdamW on the text of the GNU GPL version 3, then asked to continue a prompt, greedily
// and by sampling, through its KV cache.
//
//   build/examples/char_lm [SVG] [STEPS]   (the loss curve, default char_lm_loss.svg; 600 steps)
//
// The last 10% of the text is held out: its cross-entropy (nats per character) is what the
// model has learnt about English legal prose rather than about the paragraphs it has seen.
// Seeds are fixed, so a run prints the same numbers on the same machine (threads split the
// work, not the draws).
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include <fmt/core.h>

#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>
#include <microtorch/plot.hpp>

#include "progress.hpp"

namespace mt = microtorch;
namespace nn = microtorch::nn;
namespace F = microtorch::nn::functional;

namespace {

constexpr const char* kText = "/usr/share/common-licenses/GPL-3";
constexpr std::int64_t kContext = 128, kBatch = 16;
constexpr int kEvalEvery = 50;  // steps between two measurements of the held-out loss

struct Corpus {
  std::string chars;                 // the vocabulary: every character of the text, sorted
  std::map<char, std::int64_t> ids;  // its inverse
  mt::Tensor train, held_out;        // int64 [n] token ids
};

Corpus load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw mt::IoError(fmt::format("char_lm: cannot read {} (Debian's base-files package installs it)", path));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  Corpus c;
  for (char ch : text) c.ids[ch] = 0;
  for (auto& [ch, id] : c.ids) {
    id = static_cast<std::int64_t>(c.chars.size());
    c.chars += ch;
  }
  std::vector<std::int64_t> tokens;
  for (char ch : text) tokens.push_back(c.ids[ch]);
  const auto n = static_cast<std::int64_t>(tokens.size()), split = n * 9 / 10;
  const mt::Tensor all = mt::tensor(tokens, {n});
  c.train = all.narrow(0, 0, split);
  c.held_out = all.narrow(0, split, n - split);
  return c;
}

// The held-out cross-entropy of single-character frequencies (counted on the training text,
// add-one smoothed): what a model that ignores context scores.
double unigram_loss(const Corpus& c) {
  std::vector<double> counts(c.chars.size(), 1.0);
  for (std::int64_t id : c.train.to_vector<std::int64_t>()) counts[static_cast<std::size_t>(id)] += 1;
  const double total = static_cast<double>(c.train.size(0) + static_cast<std::int64_t>(c.chars.size()));
  double loss = 0;
  for (std::int64_t id : c.held_out.to_vector<std::int64_t>()) loss -= std::log(counts[static_cast<std::size_t>(id)] / total);
  return loss / static_cast<double>(c.held_out.size(0));
}

std::string decode(const Corpus& c, const mt::Tensor& ids) {
  std::string s;
  for (std::int64_t id : ids.to_vector<std::int64_t>()) s += c.chars[static_cast<std::size_t>(id)];
  return s;
}

// kBatch windows of kContext + 1 tokens at random offsets: inputs and next-token targets.
std::pair<mt::Tensor, mt::Tensor> batch(const mt::Tensor& data, mt::Generator& g) {
  std::vector<mt::Tensor> rows;
  for (std::int64_t b = 0; b < kBatch; ++b) rows.push_back(data.narrow(0, g.integer(0, data.size(0) - kContext - 1), kContext + 1));
  const mt::Tensor windows = mt::stack(rows);
  return {windows.narrow(1, 0, kContext), windows.narrow(1, 1, kContext)};
}

// The mean cross-entropy of every held-out character predicted from up to kContext before it
// (consecutive windows; the first position of each sees only itself, as in training) and the
// share predicted exactly.
std::pair<double, double> evaluate(nn::DecoderLM& model, const mt::Tensor& data) {
  mt::NoGradGuard no_grad;
  const bool training = model.is_training();
  model.eval();
  double loss = 0, hits = 0;
  std::int64_t count = 0;
  for (std::int64_t start = 0; start + 1 < data.size(0); start += kContext) {
    const std::int64_t len = std::min(kContext, data.size(0) - 1 - start);
    const mt::Tensor x = data.narrow(0, start, len).unsqueeze(0), y = data.narrow(0, start + 1, len);
    const mt::Tensor logits = model.forward(x).reshape({len, -1});
    loss += F::cross_entropy(logits, y).item() * static_cast<double>(len);
    hits += mt::sum(mt::argmax(logits, 1) == y).item();
    count += len;
  }
  model.train(training);
  return {loss / static_cast<double>(count), hits / static_cast<double>(count)};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string svg_path = argc > 1 ? argv[1] : "char_lm_loss.svg";
  const int steps = argc > 2 ? std::stoi(argv[2]) : 600;
  const Corpus corpus = load(kText);
  mt::manual_seed(0);
  nn::DecoderLM model({.vocab_size = static_cast<std::int64_t>(corpus.chars.size()),
                       .d_model = 128,
                       .num_layers = 4,
                       .num_heads = 4,
                       .num_kv_heads = 2,
                       .dim_feedforward = 352,  // SwiGLU: about 8/3 d_model, as Llama's
                       .max_seq_len = kContext,  // RoPE's tables; generation stays within the trained positions
                       .tie_weights = true,
                       .dropout = 0.2});
  fmt::print("char_lm: {} characters of {} ({} train, {} held out), a vocabulary of {}; {} parameters, "
             "{} threads\n",
             corpus.train.size(0) + corpus.held_out.size(0), kText, corpus.train.size(0), corpus.held_out.size(0),
             corpus.chars.size(), model.num_parameters(), mt::get_num_threads());
  fmt::print("model: {}\n", model.extra_repr());

  mt::optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  mt::optim::CosineWithWarmup schedule(opt, steps / 20, steps, 3e-4);
  mt::Generator draws(1);  // batches: their own stream
  const int rounds = (steps + kEvalEvery - 1) / kEvalEvery;
  Progress progress(rounds, kEvalEvery, kBatch * kContext, 1);
  std::vector<double> train_curve, held_out_curve;
  double running = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; ++step) {
    const auto [x, y] = batch(corpus.train, draws);
    const mt::Tensor logits = model.forward(x);
    const mt::Tensor loss = F::cross_entropy(logits.reshape({-1, logits.size(2)}), y.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    mt::optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    schedule.step();
    running += loss.item();
    progress.batch(step / kEvalEvery, step % kEvalEvery, loss.item());
    if ((step + 1) % kEvalEvery == 0 || step + 1 == steps) {
      const int in_round = step % kEvalEvery + 1;
      train_curve.push_back(running / in_round);
      running = 0;
      const auto [held_out, accuracy] = evaluate(model, corpus.held_out);
      held_out_curve.push_back(held_out);
      progress.epoch(step / kEvalEvery, accuracy);  // the accuracy column: held-out next-character accuracy
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  model.eval();
  const auto [held_out, accuracy] = evaluate(model, corpus.held_out);
  fmt::print("trained {} steps of {} x {} characters in {:.0f} s ({:.0f} characters/s)\n", steps, kBatch, kContext,
             seconds, steps * kBatch * kContext / seconds);
  const double unigram = unigram_loss(corpus);
  fmt::print("held-out loss {:.3f} nats/char ({:.2f} bits/char), next-character accuracy {:.1f}% (character "
             "frequencies alone: {:.3f} nats; uniform guessing: {:.3f})\n",
             held_out, held_out / std::log(2.0), 100 * accuracy, unigram,
             std::log(static_cast<double>(corpus.chars.size())));

  std::string curve;
  for (std::size_t i = 0; i < held_out_curve.size(); ++i) {
    curve += fmt::format("{}{}: {:.3f}", i ? ", " : "", std::min<std::size_t>((i + 1) * kEvalEvery, steps), held_out_curve[i]);
  }
  fmt::print("held-out loss after each {} steps: {}\n", kEvalEvery, curve);
  mt::display::LineChart chart{.title = "char_lm: GPL-3, 4 x 128 decoder", .x_label = "steps (x 50)",
                               .y_label = "cross-entropy (nats/char)"};
  chart.series = {{"training (mean of the last 50 steps)", train_curve}, {"held out (last 10%)", held_out_curve}};
  mt::write_file(svg_path, chart.svg());
  fmt::print("loss curve: {}\n", svg_path);

  // Continuations of a prompt, through the KV cache: greedy, then sampled.
  const std::string prompt = "The GNU General Public License ";
  const std::int64_t kNew = kContext - static_cast<std::int64_t>(prompt.size());  // up to the last trained position
  std::vector<std::int64_t> ids;
  for (char ch : prompt) ids.push_back(corpus.ids.at(ch));
  const mt::Tensor p = mt::tensor(ids, {static_cast<std::int64_t>(ids.size())});
  const auto t0 = std::chrono::steady_clock::now();
  const mt::Tensor greedy = nn::generate(model, p, {.max_new_tokens = kNew, .temperature = 0.0});
  const double decode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const mt::Tensor sampled = nn::generate(model, p, {.max_new_tokens = kNew, .temperature = 0.8, .top_k = 20, .seed = 7});
  fmt::print("\n--- greedy ({:.0f} tokens/s with the cache) ---\n{}\n", kNew / decode_s, decode(corpus, greedy));
  fmt::print("\n--- sampled (temperature 0.8, top-k 20, seed 7) ---\n{}\n", decode(corpus, sampled));

  // The cache must not change what the model says.
  const bool same = mt::equal(nn::generate(model, p, {.max_new_tokens = 40, .temperature = 0.0, .use_cache = false}),
                              greedy.narrow(0, 0, static_cast<std::int64_t>(ids.size()) + 40));
  fmt::print("\ngreedy decoding with and without the KV cache: {}\n", same ? "the same tokens" : "DIFFERENT tokens");
  return same && held_out < unigram - 1.0 ? 0 : 1;  // context must be worth a nat per character at least
}
