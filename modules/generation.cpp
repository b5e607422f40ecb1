#include "microtorch/nn/generation.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/random.hpp"

namespace microtorch::nn {

namespace {

void check_sampling(double temperature, std::int64_t top_k, double top_p, const char* op) {
  if (!(temperature >= 0) || std::isinf(temperature)) {
    throw ValueError(fmt::format("{}: temperature must be >= 0 and finite (0 = greedy), got {}", op, temperature));
  }
  if (top_k < 0) throw ValueError(fmt::format("{}: top_k must be >= 0 (0 = every token), got {}", op, top_k));
  if (!(top_p > 0 && top_p <= 1)) throw ValueError(fmt::format("{}: top_p must be in (0, 1] (1 = every token), got {}", op, top_p));
}

}  // namespace

// softmax(logits / T) with every token outside the top k and outside the nucleus set to -inf:
// the nucleus of a row is its most likely tokens, in order, up to and including the first
// whose running probability reaches top_p (Holtzman et al., 2020).
Tensor sample_tokens(const Tensor& logits, double temperature, std::int64_t top_k, double top_p) {
  check_sampling(temperature, top_k, top_p, "sample_tokens");
  if (!logits.is_floating_point()) {
    throw DtypeError(fmt::format("sample_tokens: logits must be floating, got {}", dtype_name(logits.dtype())));
  }
  if (logits.dim() != 2 || logits.size(1) == 0) {
    throw ShapeError(fmt::format("sample_tokens: expects logits [N, V] with V >= 1, got {}", shape_str(logits.shape())));
  }
  NoGradGuard no_grad;
  if (temperature == 0) return argmax(logits, 1);
  const std::int64_t V = logits.size(1);
  Tensor scaled = logits.detach().to(kFloat64) / temperature;
  const double inf = std::numeric_limits<double>::infinity();
  if (top_k > 0 && top_k < V) {  // below the k-th largest: out
    const Tensor kth = std::get<0>(topk(scaled, top_k, 1)).narrow(1, top_k - 1, 1);
    scaled = masked_fill(scaled, scaled < kth, -inf);
  }
  if (top_p < 1) {
    auto [sorted, order] = sort(scaled, 1, /*descending=*/true);
    const Tensor probs = softmax(sorted, 1);
    const Tensor before = cumsum(probs, 1) - probs;  // the probability of the better tokens
    // a token stays when the better ones add up to less than top_p (the first always does)
    const Tensor keep_sorted = before < top_p;
    Tensor keep = zeros(scaled.shape(), kBool);
    const bool* ks = keep_sorted.data<bool>();
    const std::int64_t* po = order.data<std::int64_t>();
    bool* pk = keep.data<bool>();
    for (std::int64_t i = 0; i < keep.numel(); ++i) pk[(i / V) * V + po[i]] = ks[i];
    scaled = masked_fill(scaled, ~keep, -inf);
  }
  return multinomial(softmax(scaled, 1), 1).reshape({-1});
}

Tensor generate(DecoderLM& model, const Tensor& prompt_in, const GenerateOptions& o) {
  check_sampling(o.temperature, o.top_k, o.top_p, "generate");
  if (o.max_new_tokens < 0) throw ValueError(fmt::format("generate: max_new_tokens must be >= 0, got {}", o.max_new_tokens));
  if (prompt_in.dtype() != Dtype::Int64) {
    throw DtypeError(fmt::format("generate: the prompt must hold int64 token ids, got {}", dtype_name(prompt_in.dtype())));
  }
  if ((prompt_in.dim() != 1 && prompt_in.dim() != 2) || prompt_in.size(-1) == 0 || prompt_in.numel() == 0) {
    throw ShapeError(fmt::format("generate: expects a prompt [N, P] or [P] with P >= 1 tokens, got {}",
                                 shape_str(prompt_in.shape())));
  }
  const Tensor prompt = prompt_in.dim() == 1 ? prompt_in.unsqueeze(0) : prompt_in;
  const std::int64_t N = prompt.size(0), P = prompt.size(1), max_len = model.config.max_seq_len;
  if (P + o.max_new_tokens > max_len) {
    throw ValueError(fmt::format("generate: {} prompt tokens and {} new ones exceed the model's max_seq_len {}", P,
                                 o.max_new_tokens, max_len));
  }
  NoGradGuard no_grad;
  std::optional<Generator> own;
  std::optional<GeneratorGuard> use;
  if (o.seed) {
    own.emplace(*o.seed);
    use.emplace(*own);
  }
  std::optional<KVCache> cache;
  if (o.use_cache) cache.emplace(model.make_cache(N, P + o.max_new_tokens));
  std::vector<Tensor> pieces{prompt};
  Tensor step_input = prompt;  // with a cache: the tokens not yet seen; without: the whole sequence
  std::vector<bool> done(static_cast<std::size_t>(N), false);
  for (std::int64_t t = 0; t < o.max_new_tokens; ++t) {
    const Tensor logits = cache ? model.forward(step_input, *cache) : model.forward(step_input);
    const Tensor last = logits.select(1, logits.size(1) - 1);  // [N, V]
    Tensor next = sample_tokens(last, o.temperature, o.top_k, o.top_p);
    bool all_done = o.eos_token_id >= 0;
    std::int64_t* pn = next.data<std::int64_t>();
    for (std::int64_t n = 0; n < N; ++n) {
      auto i = static_cast<std::size_t>(n);
      if (done[i]) pn[n] = o.eos_token_id;
      done[i] = done[i] || (o.eos_token_id >= 0 && pn[n] == o.eos_token_id);
      all_done = all_done && done[i];
    }
    next = next.reshape({N, 1});
    pieces.push_back(next);
    step_input = cache ? next : cat(pieces, 1);
    if (all_done) break;
  }
  Tensor out = cat(pieces, 1);
  return prompt_in.dim() == 1 ? out.squeeze(0) : out;
}

}  // namespace microtorch::nn
