// The block cache behind tensor storage (microtorch/memory.hpp).
#include "helpers.hpp"

#include <microtorch/nn.hpp>

namespace memory = microtorch::memory;
using mt::Tensor;

namespace {

// Restores the default limit and an empty cache whatever a case did.
struct CacheScope {
  std::size_t limit = memory::cache_limit();
  CacheScope() { memory::empty_cache(); }
  ~CacheScope() {
    memory::set_cache_limit(limit);
    memory::empty_cache();
  }
};

constexpr std::int64_t kLarge = 1 << 16;  // floats: 256 KiB, above kCachedMinBytes

}  // namespace

TEST_CASE("a large block freed by a tensor serves the next tensor of its size") {
  CacheScope scope;
  const float* first = nullptr;
  {
    Tensor a = Tensor::empty({kLarge}, mt::kFloat32);
    first = a.data<float>();
  }
  CHECK(memory::stats().cached_bytes == kLarge * sizeof(float));
  const auto before = memory::stats();
  Tensor b = Tensor::empty({4, kLarge / 4}, mt::kFloat32);  // same bytes, other shape
  CHECK(b.data<float>() == first);
  CHECK(memory::stats().hits == before.hits + 1);
  CHECK(memory::stats().cached_bytes == 0);
  Tensor c = Tensor::empty({kLarge + 4096}, mt::kFloat32);  // another size: from the system
  CHECK(memory::stats().misses == before.misses + 1);
  CHECK(reinterpret_cast<std::uintptr_t>(c.data<float>()) % memory::kAlignment == 0);
}

TEST_CASE("a reused block holds no stale values where the op defines them") {
  CacheScope scope;
  {
    Tensor a = mt::full({kLarge}, 7.0);
  }
  const Tensor z = mt::zeros({kLarge});
  CHECK(mt::sum(z).item<float>() == 0.0f);
  {
    Tensor a = mt::full({kLarge}, 7.0);
  }
  const Tensor x = mt::ones({kLarge});
  const Tensor y = mt::exp(x);  // an xtensor expression evaluated into a cached block
  CHECK(y.at<float>({kLarge - 1}) == doctest::Approx(std::exp(1.0)));
}

TEST_CASE("small blocks are left to malloc; the limit bounds the cache, oldest out first") {
  CacheScope scope;
  { Tensor small = mt::zeros({16}); }
  CHECK(memory::stats().cached_blocks == 0);

  memory::set_cache_limit(3 * kLarge * sizeof(float));
  {
    Tensor a = mt::zeros({kLarge}), b = mt::zeros({2 * kLarge}), c = mt::zeros({kLarge + 1024});
  }  // freed a, b, c in reverse order of declaration: c, b, a; c is the oldest
  const auto s = memory::stats();
  CHECK(s.cached_bytes <= 3 * kLarge * sizeof(float));
  CHECK(s.cached_blocks == 2);  // b and a: c was dropped to stay within the limit

  memory::set_cache_limit(0);  // no caching at all
  CHECK(memory::stats().cached_bytes == 0);
  { Tensor d = mt::zeros({kLarge}); }
  CHECK(memory::stats().cached_blocks == 0);
}

TEST_CASE("empty_cache returns every block") {
  CacheScope scope;
  {
    Tensor a = mt::zeros({kLarge}), b = mt::zeros({3 * kLarge});
  }
  CHECK(memory::stats().cached_blocks == 2);
  memory::empty_cache();
  CHECK(memory::stats().cached_bytes == 0);
  CHECK(memory::stats().cached_blocks == 0);
}

TEST_CASE("training through the cache gives the same result as without it") {
  CacheScope scope;
  auto train = [] {
    mt::manual_seed(3);
    mt::nn::MultiheadAttention mha(64, 4, mt::nn::MultiheadAttentionOptions{.batch_first = true});
    mt::optim::Adam opt(mha.parameters(), {.lr = 1e-2});
    const Tensor x = mt::randn({4, 32, 64});
    float loss = 0;
    for (int i = 0; i < 5; ++i) {
      Tensor l = mt::mean(mt::pow(std::get<0>(mha.forward(x, x, x)), 2.0));
      opt.zero_grad();
      l.backward();
      opt.step();
      loss = l.item<float>();
    }
    return loss;
  };
  memory::set_cache_limit(0);
  const float uncached = train();
  memory::set_cache_limit(scope.limit);
  const auto before = memory::stats();
  const float cached = train();
  CHECK(cached == uncached);  // bit for bit
  CHECK(memory::stats().hits > before.hits);
}

#if !defined(MT_SANITIZER_ALLOCATOR)
TEST_CASE("bad input: a tensor too large to allocate is an Error naming the bytes and the shape") {
  CHECK_THROWS_WITH_AS(Tensor::empty({std::int64_t{1} << 48}, mt::kFloat32),
                       doctest::Contains("cannot allocate 1125899906842624 bytes for a float32 tensor of shape [281474976710656]"),
                       mt::Error);
}
#endif
