/// \file
/// Datasets of tensors and a batching, shuffling loader (torch.utils.data's TensorDataset
/// and DataLoader, minus worker processes).
///
/// \code
///   TensorDataset ds({features, labels});   // all share dim 0 (the sample dim)
///   ds.size();                              // number of samples
///   ds.get(i);                              // {features[i], labels[i]}
///
///   DataLoader loader(ds, {.batch_size = 32, .shuffle = true, .drop_last = false, .seed = 0});
///   for (int epoch = 0; epoch < 10; ++epoch)
///     for (const std::vector<Tensor>& batch : loader) {   // batch[0]: [B, ...], batch[1]: [B]
///       ...
///     }
/// \endcode
///
/// Batches are built with one index_select per tensor per batch (not one copy per row).
/// Each range-for (each call to begin()) is one epoch. With shuffle, epoch e visits the
/// samples in a Fisher-Yates permutation drawn from a private std::mt19937_64 seeded with
/// seed + e, with unbiased integers taken by rejection from the raw 64-bit output: the
/// order is the same on every platform, different across epochs, and the loader never
/// touches microtorch's global generator (so model init and dropout stay reproducible).
/// Every sample appears exactly once per epoch; the last batch is smaller unless
/// drop_last. size() is the number of batches per epoch.
///
/// Starting a new epoch reuses the loader's order buffer: iterators of an earlier epoch
/// must not be used after begin() is called again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "microtorch/tensor.hpp"

/// Datasets and batching (torch.utils.data): TensorDataset and DataLoader.
namespace microtorch::data {

/// Samples are the rows (dim 0) of a few tensors of the same length.
class TensorDataset {
 public:
  /// Throws ValueError for an empty list and ShapeError (listing every shape) when the
  /// tensors do not share their dim-0 size or one of them is 0-d.
  explicit TensorDataset(std::vector<Tensor> tensors);
  /// The number of samples: the tensors' common dim-0 size.
  std::int64_t size() const { return size_; }
  /// The i-th row of every tensor (negative i counts from the end); IndexError when out of range.
  std::vector<Tensor> get(std::int64_t i) const;
  /// Rows picked by a 1-D int64 index tensor: one index_select per tensor.
  std::vector<Tensor> get_batch(const Tensor& indices) const;
  /// The tensors given to the constructor.
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  std::int64_t size_ = 0;
};

/// Options of DataLoader (torch.utils.data.DataLoader's keyword arguments, plus the seed).
struct DataLoaderOptions {
  std::int64_t batch_size = 1;  ///< samples per batch (>= 1)
  bool shuffle = false;         ///< a new permutation every epoch (else dataset order)
  bool drop_last = false;       ///< skip a last batch smaller than batch_size
  std::uint64_t seed = 0;       ///< epoch e shuffles with seed + e (the loader's own stream)
};

/// Iterates over a TensorDataset in batches, one epoch per range-for (see data.hpp).
class DataLoader {
 public:
  /// An input iterator over one epoch's batches.
  class Iterator {
   public:
    ///@{
    /// The standard iterator traits of an input iterator over batches.
    using iterator_category = std::input_iterator_tag;
    using value_type = std::vector<Tensor>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;
    ///@}

    /// A singular iterator (compare it to nothing).
    Iterator() = default;
    /// The current batch: one tensor per dataset tensor, each with batch rows in dim 0.
    reference operator*() const { return batch_; }
    /// The current batch, for `it->size()`.
    pointer operator->() const { return &batch_; }
    /// Moves to the next batch (building it).
    Iterator& operator++();
    /// True at the same batch position.
    bool operator==(const Iterator& o) const { return index_ == o.index_; }
    /// True at different batch positions.
    bool operator!=(const Iterator& o) const { return index_ != o.index_; }

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, std::int64_t index);
    void load();
    const DataLoader* loader_ = nullptr;
    std::int64_t index_ = 0;
    std::vector<Tensor> batch_;
  };

  /// Throws ValueError when batch_size < 1.
  explicit DataLoader(TensorDataset dataset, DataLoaderOptions options = {});

  /// Starts the next epoch (shuffling if asked) and returns its first batch.
  Iterator begin();
  /// The position after the last batch of the epoch.
  Iterator end() const;
  /// Batches per epoch: ceil(n / batch_size), or floor with drop_last.
  std::int64_t size() const;
  /// The epoch the next begin() will start (0 for a fresh loader).
  std::uint64_t epoch() const { return epoch_; }
  /// Makes the next begin() start epoch e (e.g. when resuming training).
  void set_epoch(std::uint64_t e) { epoch_ = e; }
  /// Batch b of the current epoch (0 <= b < size(); IndexError otherwise).
  std::vector<Tensor> batch(std::int64_t b) const;
  /// The sample order of the current epoch (after begin()).
  const std::vector<std::int64_t>& order() const { return order_; }
  /// The dataset batches are drawn from.
  const TensorDataset& dataset() const { return dataset_; }
  /// The options given to the constructor.
  const DataLoaderOptions& options() const { return options_; }

 private:
  TensorDataset dataset_;
  DataLoaderOptions options_;
  std::uint64_t epoch_ = 0;
  std::vector<std::int64_t> order_;
};

}  // namespace microtorch::data
