// TensorDataset and DataLoader: every sample once per epoch, batch shapes, drop_last,
// reproducible seeded shuffles that differ across epochs and leave the global generator alone.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "helpers.hpp"
#include "microtorch/nn/data.hpp"

using mt::Tensor;
namespace data = mt::data;

namespace {

// features[i] = (i, 10 i) as float32 [n, 2]; labels[i] = i as int64 [n].
data::TensorDataset numbered(std::int64_t n) {
  Tensor labels = mt::arange(0, static_cast<double>(n), 1, mt::kInt64);
  Tensor col = mt::arange(0, static_cast<double>(n), 1, mt::kFloat32).unsqueeze(1);
  return data::TensorDataset({mt::cat({col, col * 10.0}, 1), labels});
}

// The labels of one epoch in visiting order; checks each batch's rows belong together.
std::vector<std::int64_t> epoch_labels(data::DataLoader& loader, std::vector<std::int64_t>* batch_sizes = nullptr) {
  std::vector<std::int64_t> seen;
  for (const std::vector<Tensor>& batch : loader) {
    REQUIRE(batch.size() == 2);
    const Tensor& x = batch[0];
    const Tensor& y = batch[1];
    REQUIRE(x.size(0) == y.size(0));
    CHECK(x.size(1) == 2);
    CHECK(y.dtype() == mt::kInt64);
    for (std::int64_t r = 0; r < y.size(0); ++r) {
      const auto label = y.at<std::int64_t>({r});
      CHECK(x.at<double>({r, 0}) == static_cast<double>(label));  // rows stay aligned across tensors
      CHECK(x.at<double>({r, 1}) == 10.0 * static_cast<double>(label));
      seen.push_back(label);
    }
    if (batch_sizes) batch_sizes->push_back(y.size(0));
  }
  return seen;
}

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), std::int64_t{0});
  return v;
}

}  // namespace

TEST_CASE("TensorDataset serves the i-th row of every tensor") {
  const data::TensorDataset ds = numbered(5);
  CHECK(ds.size() == 5);
  const auto sample = ds.get(3);
  REQUIRE(sample.size() == 2);
  CHECK(sample[0].shape() == mt::Shape{2});
  CHECK(sample[0].at<double>({1}) == 30.0);
  CHECK(sample[1].dim() == 0);
  CHECK(sample[1].item<std::int64_t>() == 3);
  CHECK(ds.get(-1)[1].item<std::int64_t>() == 4);
  CHECK_THROWS_MSG(ds.get(5), mt::IndexError, "TensorDataset", "5", "5 samples");
}

TEST_CASE("TensorDataset refuses tensors of different lengths and lists the shapes") {
  CHECK_THROWS_MSG(data::TensorDataset({mt::zeros({4, 3}), mt::zeros({5})}), mt::ShapeError, "TensorDataset",
                   "[4, 3], [5]", "dim 0");
  CHECK_THROWS_MSG(data::TensorDataset({mt::zeros({4}), mt::scalar_tensor(1.0)}), mt::ShapeError, "0-d");
  CHECK_THROWS_MSG(data::TensorDataset({}), mt::ValueError, "at least one tensor");
}

TEST_CASE("DataLoader without shuffle yields the samples in order, the last batch smaller") {
  data::DataLoader loader(numbered(10), {.batch_size = 4});
  CHECK(loader.size() == 3);
  std::vector<std::int64_t> sizes;
  CHECK(epoch_labels(loader, &sizes) == iota(10));
  CHECK(sizes == std::vector<std::int64_t>{4, 4, 2});
}

TEST_CASE("DataLoader with drop_last drops the incomplete last batch") {
  data::DataLoader loader(numbered(10), {.batch_size = 4, .shuffle = true, .drop_last = true, .seed = 3});
  CHECK(loader.size() == 2);
  std::vector<std::int64_t> sizes;
  const auto seen = epoch_labels(loader, &sizes);
  CHECK(sizes == std::vector<std::int64_t>{4, 4});
  CHECK(std::set<std::int64_t>(seen.begin(), seen.end()).size() == 8);  // no repeats
  data::DataLoader exact(numbered(8), {.batch_size = 4, .drop_last = true});
  CHECK(exact.size() == 2);
  data::DataLoader too_small(numbered(3), {.batch_size = 4, .drop_last = true});
  CHECK(too_small.size() == 0);
  CHECK(epoch_labels(too_small).empty());
}

TEST_CASE("a shuffled DataLoader covers every sample exactly once per epoch, in a new order each epoch") {
  data::DataLoader loader(numbered(23), {.batch_size = 5, .shuffle = true, .seed = 7});
  CHECK(loader.size() == 5);
  std::set<std::vector<std::int64_t>> orders;
  for (int epoch = 0; epoch < 4; ++epoch) {
    auto seen = epoch_labels(loader);
    CHECK(seen != iota(23));
    orders.insert(seen);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == iota(23));
  }
  CHECK(orders.size() == 4);
  CHECK(loader.epoch() == 4);
}

TEST_CASE("shuffles are reproducible from the seed and differ between seeds") {
  data::DataLoader a(numbered(16), {.batch_size = 3, .shuffle = true, .seed = 42});
  data::DataLoader b(numbered(16), {.batch_size = 3, .shuffle = true, .seed = 42});
  data::DataLoader c(numbered(16), {.batch_size = 3, .shuffle = true, .seed = 43});
  for (int epoch = 0; epoch < 3; ++epoch) {
    const auto sa = epoch_labels(a), sb = epoch_labels(b), sc = epoch_labels(c);
    CHECK(sa == sb);
    CHECK(sa != sc);
  }
  // set_epoch replays an epoch (resuming training).
  data::DataLoader d(numbered(16), {.batch_size = 3, .shuffle = true, .seed = 42});
  const auto first = epoch_labels(d);
  const auto second = epoch_labels(d);
  d.set_epoch(1);
  CHECK(epoch_labels(d) == second);
  d.set_epoch(0);
  CHECK(epoch_labels(d) == first);
}

TEST_CASE("the shuffle order is pinned: mt19937_64(seed + epoch) with rejection-sampled Fisher-Yates") {
  // The same on every platform: no std::uniform_int_distribution involved.
  data::DataLoader loader(numbered(8), {.batch_size = 8, .shuffle = true, .seed = 0});
  loader.begin();
  const std::vector<std::int64_t> order = loader.order();
  std::mt19937_64 engine(0);
  std::vector<std::int64_t> expected = iota(8);
  for (std::uint64_t i = 8; i > 1; --i) {
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % i;
    std::uint64_t r;
    do r = engine(); while (r >= limit);
    std::swap(expected[i - 1], expected[r % i]);
  }
  CHECK(order == expected);
}

TEST_CASE("shuffling does not disturb microtorch's global generator") {
  mt::manual_seed(5);
  const Tensor expected = mt::rand({4});
  mt::manual_seed(5);
  data::DataLoader loader(numbered(50), {.batch_size = 7, .shuffle = true, .seed = 1});
  epoch_labels(loader);
  CHECK_CLOSE(mt::rand({4}), expected, 0, 0);
}

TEST_CASE("batches have [B, ...] shapes, do not require grad, and can be fetched by number") {
  data::DataLoader loader(numbered(6), {.batch_size = 4, .shuffle = true, .seed = 9});
  auto it = loader.begin();
  const std::vector<Tensor>& batch = *it;
  CHECK(batch[0].shape() == mt::Shape{4, 2});
  CHECK(batch[1].shape() == mt::Shape{4});
  CHECK_FALSE(batch[0].requires_grad());
  CHECK(loader.batch(1)[0].shape() == mt::Shape{2, 2});
  CHECK_THROWS_MSG(loader.batch(2), mt::IndexError, "DataLoader", "batch 2", "2 batches");
}

TEST_CASE("DataLoader refuses a batch size below 1") {
  CHECK_THROWS_MSG(data::DataLoader(numbered(4), {.batch_size = 0}), mt::ValueError, "DataLoader", "batch_size", "0");
}
