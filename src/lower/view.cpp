// Strided views of lowered buffers (view.hpp).
#include "view.hpp"

#include <algorithm>

namespace microtorch::lower {

Strides packed_strides(const Shape& shape) {
  Strides s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

bool is_packed(const View& v) {
  const Strides want = packed_strides(v.shape);
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] != 1 && v.strides[i] != want[i]) return false;
  }
  return true;
}

std::optional<Strides> reshaped_strides(const View& v, const Shape& shape) {
  Shape os;
  Strides ost;
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] != 1) os.push_back(v.shape[i]), ost.push_back(v.strides[i]);
  }
  Strides out(shape.size(), 0);
  std::size_t o = 0, n = 0;
  while (n < shape.size()) {
    if (shape[n] == 1) {
      out[n] = 1, ++n;
      continue;
    }
    if (o == os.size()) return std::nullopt;
    // One group: old dims [o, o2) and new dims [n, n2) with equal element counts.
    std::size_t o2 = o + 1, n2 = n + 1;
    std::int64_t old_count = os[o], new_count = shape[n];
    while (old_count != new_count) {
      if (old_count < new_count) {
        if (o2 == os.size()) return std::nullopt;
        if (ost[o2 - 1] != ost[o2] * os[o2]) return std::nullopt;  // not contiguous: needs a copy
        old_count *= os[o2++];
      } else {
        if (n2 == shape.size()) return std::nullopt;
        new_count *= shape[n2++];
      }
    }
    std::int64_t stride = ost[o2 - 1];
    for (std::size_t k = n2; k-- > n;) {
      out[k] = stride;
      stride *= shape[k];
    }
    o = o2, n = n2;
  }
  if (o != os.size()) return std::nullopt;
  return out;
}

bool is_dense(const View& v) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, size)
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] != 1) dims.emplace_back(v.strides[i], v.shape[i]);
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t expect = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expect) return false;
    expect *= size;
  }
  return true;
}

std::optional<std::int64_t> row_stride(const View& v) {
  if (is_packed(v)) return 0;
  const std::size_t r = v.shape.size();
  if (r < 2 || (v.strides[r - 1] != 1 && v.shape[r - 1] != 1)) return std::nullopt;
  std::vector<std::pair<std::int64_t, std::int64_t>> lead;  // (size, stride), outermost first
  for (std::size_t i = 0; i + 1 < r; ++i) {
    if (v.shape[i] == 1) continue;
    if (!lead.empty() && lead.back().second == v.strides[i] * v.shape[i]) {
      lead.back() = {lead.back().first * v.shape[i], v.strides[i]};
    } else {
      lead.emplace_back(v.shape[i], v.strides[i]);
    }
  }
  if (lead.size() == 1 && lead[0].second >= v.shape[r - 1]) return lead[0].second;
  return std::nullopt;
}

namespace {

// Marks the elements of the buffer a view covers.
void mark(const View& v, std::vector<char>& marks) {
  Shape idx(v.shape.size(), 0);
  const std::int64_t n = numel_of(v.shape);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t at = v.offset;
    for (std::size_t d = 0; d < idx.size(); ++d) at += idx[d] * v.strides[d];
    marks[static_cast<std::size_t>(at)] = 1;
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

bool overlaps(const View& a, const View& b, std::int64_t size) {
  if (a.buffer != b.buffer) return false;
  std::vector<char> ma(static_cast<std::size_t>(size), 0), mb(static_cast<std::size_t>(size), 0);
  mark(a, ma);
  mark(b, mb);
  for (std::size_t i = 0; i < ma.size(); ++i) {
    if (ma[i] && mb[i]) return true;
  }
  return false;
}

}  // namespace microtorch::lower
