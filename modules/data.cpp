// TensorDataset and DataLoader: batches by index_select, seeded Fisher-Yates shuffles.
#include "microtorch/nn/data.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "microtorch/ops.hpp"

namespace microtorch::data {

namespace {

std::string shapes_str(const std::vector<Tensor>& tensors) {
  std::string out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (i) out += ", ";
    out += shape_str(tensors[i].shape());
  }
  return out;
}

// Uniform integer in [0, bound) from the raw 64-bit output, by rejection (no modulo bias,
// no implementation-defined std::uniform_int_distribution): identical on every platform.
std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t bound) {
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % bound;
  std::uint64_t r;
  do {
    r = engine();
  } while (r >= limit);
  return r % bound;
}

}  // namespace

// ---- TensorDataset -------------------------------------------------------------------------

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  if (tensors_.empty()) {
    throw ValueError("TensorDataset: needs at least one tensor, e.g. TensorDataset({features, labels})");
  }
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].defined()) throw ValueError(fmt::format("TensorDataset: tensor {} is undefined", i));
    if (tensors_[i].dim() == 0) {
      throw ShapeError(fmt::format("TensorDataset: tensor {} is 0-d; every tensor needs a sample dim 0 (shapes: {})",
                                   i, shapes_str(tensors_)));
    }
  }
  size_ = tensors_[0].size(0);
  for (std::size_t i = 1; i < tensors_.size(); ++i) {
    if (tensors_[i].size(0) != size_) {
      throw ShapeError(fmt::format("TensorDataset: all tensors must have the same size in dim 0 (one row per sample), "
                                   "got shapes {}: tensor {} has {} rows but tensor 0 has {}",
                                   shapes_str(tensors_), i, tensors_[i].size(0), size_));
    }
  }
}

std::vector<Tensor> TensorDataset::get(std::int64_t i) const {
  if (i < -size_ || i >= size_) {
    throw IndexError(fmt::format("TensorDataset: sample index {} is out of range for a dataset of {} samples", i,
                                 size_));
  }
  if (i < 0) i += size_;
  std::vector<Tensor> out;
  out.reserve(tensors_.size());
  for (const Tensor& t : tensors_) out.push_back(select(t, 0, i));
  return out;
}

std::vector<Tensor> TensorDataset::get_batch(const Tensor& indices) const {
  std::vector<Tensor> out;
  out.reserve(tensors_.size());
  for (const Tensor& t : tensors_) out.push_back(index_select(t, 0, indices));
  return out;
}

// ---- DataLoader ----------------------------------------------------------------------------

DataLoader::DataLoader(TensorDataset dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options), order_(static_cast<std::size_t>(dataset_.size())) {
  if (options_.batch_size < 1) {
    throw ValueError(fmt::format("DataLoader: batch_size must be >= 1, got {}", options_.batch_size));
  }
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
}

std::int64_t DataLoader::size() const {
  const std::int64_t n = dataset_.size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

DataLoader::Iterator DataLoader::begin() {
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
  if (options_.shuffle) {
    // Fisher-Yates: for i = n-1 .. 1, swap order[i] with order[j], j uniform in [0, i].
    std::mt19937_64 engine(options_.seed + epoch_);
    for (std::size_t i = order_.size(); i > 1; --i) {
      const std::uint64_t j = uniform_below(engine, i);
      std::swap(order_[i - 1], order_[j]);
    }
  }
  ++epoch_;
  return Iterator(this, 0);
}

DataLoader::Iterator DataLoader::end() const { return Iterator(nullptr, size()); }

std::vector<Tensor> DataLoader::batch(std::int64_t b) const {
  if (b < 0 || b >= size()) {
    throw IndexError(fmt::format("DataLoader: batch {} is out of range for {} batches per epoch", b, size()));
  }
  const std::int64_t start = b * options_.batch_size;
  const std::int64_t stop = std::min(start + options_.batch_size, dataset_.size());
  Tensor idx = Tensor::empty({stop - start}, kInt64);
  std::copy(order_.begin() + start, order_.begin() + stop, idx.data<std::int64_t>());
  return dataset_.get_batch(idx);
}

DataLoader::Iterator::Iterator(const DataLoader* loader, std::int64_t index) : loader_(loader), index_(index) {
  load();
}

void DataLoader::Iterator::load() {
  batch_.clear();
  if (loader_ && index_ < loader_->size()) batch_ = loader_->batch(index_);
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++index_;
  load();
  return *this;
}

}  // namespace microtorch::data
