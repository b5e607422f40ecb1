// End to end: a tiny causal decoder learns a task that the causal mask allows, and the
// same model without the mask "cheats" on a task that needs future tokens — so the mask
// demonstrably removes the future.
#include <chrono>

#include "helpers.hpp"
#include "microtorch/nn.hpp"
#include "../examples/models/copy_decoder.hpp"

using mt::Tensor;
namespace nn = microtorch::nn;

using namespace copy_decoder;

TEST_CASE("a causal decoder learns to copy a sequence to >= 99% token accuracy") {
  mt::manual_seed(7);
  TinyDecoder model(10, 32, /*causal=*/true);
  const auto start = std::chrono::steady_clock::now();
  const double acc = train(model, copy_batch, 400);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("copy task: token accuracy " << acc << " after 400 steps in " << seconds << " s");
  CHECK(acc >= 0.99);
}

TEST_CASE("without the causal mask the same model cheats on next-token peeking; with it, it cannot") {
  mt::manual_seed(8);
  TinyDecoder open(10, 32, /*causal=*/false);
  const double cheat = train(open, peek_batch, 300);
  mt::manual_seed(8);
  TinyDecoder masked(10, 32, /*causal=*/true);
  const double honest = train(masked, peek_batch, 300);
  MESSAGE("peek task: without mask " << cheat << ", with causal mask " << honest << " (chance 1/8)");
  CHECK(cheat >= 0.95);
  CHECK(honest <= 0.25);
}
