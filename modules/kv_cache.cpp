#include <fmt/format.h>

#include "microtorch/nn/decoder.hpp"

namespace microtorch::nn {

KVCache::KVCache(std::int64_t num_layers, std::int64_t batch, std::int64_t capacity, std::int64_t num_kv_heads,
                 std::int64_t head_dim, Dtype dtype)
    : batch_(batch), capacity_(capacity), num_kv_heads_(num_kv_heads), head_dim_(head_dim) {
  if (num_layers <= 0 || batch <= 0 || capacity <= 0 || num_kv_heads <= 0 || head_dim <= 0) {
    throw ValueError(fmt::format("KVCache: num_layers, batch, capacity, num_kv_heads and head_dim must be positive, got "
                                 "{}, {}, {}, {}, {}",
                                 num_layers, batch, capacity, num_kv_heads, head_dim));
  }
  for (std::int64_t i = 0; i < num_layers; ++i) {
    layers_.push_back({zeros({batch, capacity, num_kv_heads * head_dim}, dtype),
                       zeros({batch, capacity, num_kv_heads * head_dim}, dtype), 0});
  }
}

const KVCache::Layer& KVCache::at(std::int64_t layer) const {
  if (layer < 0 || layer >= num_layers()) {
    throw IndexError(fmt::format("KVCache: layer {} is out of range: the cache was made for {} layers (0 .. {}); make "
                                 "it with the model's make_cache()",
                                 layer, num_layers(), num_layers() - 1));
  }
  return layers_[static_cast<std::size_t>(layer)];
}

std::int64_t KVCache::length() const { return layers_.back().length; }
std::int64_t KVCache::length(std::int64_t layer) const { return at(layer).length; }
const Tensor& KVCache::keys(std::int64_t layer) const { return at(layer).keys; }
const Tensor& KVCache::values(std::int64_t layer) const { return at(layer).values; }

void KVCache::reset() {
  for (Layer& l : layers_) l.length = 0;
}

std::tuple<Tensor, Tensor> KVCache::attend(std::int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v,
                                           std::int64_t num_heads, const AttentionHeadsOptions& options) {
  const Layer& l = at(layer);
  const std::int64_t width = num_kv_heads_ * head_dim_;
  const std::int64_t Hkv = options.num_kv_heads == 0 ? num_heads : options.num_kv_heads;
  if (k.dim() != 3 || v.dim() != 3 || k.size(0) != batch_ || k.size(2) != width || v.shape() != k.shape() ||
      Hkv != num_kv_heads_) {
    throw ShapeError(fmt::format("KVCache: made for batch {} x {} key/value heads of {} features ([N, L, {}]), got k {} "
                                 "and v {} of {} key/value heads",
                                 batch_, num_kv_heads_, head_dim_, width, shape_str(k.shape()), shape_str(v.shape()),
                                 Hkv));
  }
  const std::int64_t L = k.size(1);
  if (l.length + L > capacity_) {
    throw ValueError(fmt::format("KVCache: layer {} holds {} of its {} positions; {} more do not fit. Make the cache "
                                 "with a larger capacity (make_cache(batch, capacity)) or reset() it",
                                 layer, l.length, capacity_, L));
  }
  auto result = multi_head_attention_cached(q, k, v, l.keys, l.values, l.length, num_heads, options);
  layers_[static_cast<std::size_t>(layer)].length += L;
  return result;
}

}  // namespace microtorch::nn
