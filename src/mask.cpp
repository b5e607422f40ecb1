#include "microtorch/mask.hpp"

#include <limits>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"

namespace microtorch {

Mask Mask::keep(const Tensor& allowed) {
  if (allowed.dtype() != Dtype::Bool) {
    throw DtypeError(fmt::format("Mask::keep: expects a bool tensor (true = may attend), got {}; for float masks use "
                                 "Mask::additive",
                                 dtype_name(allowed.dtype())));
  }
  Mask m;
  m.keep_ = allowed.detach();
  return m;
}

Mask Mask::block(const Tensor& blocked) {
  if (blocked.dtype() != Dtype::Bool) {
    throw DtypeError(fmt::format("Mask::block: expects a bool tensor (true = blocked), got {}; for float masks use "
                                 "Mask::additive",
                                 dtype_name(blocked.dtype())));
  }
  return keep(logical_not(blocked));
}

Mask Mask::additive(const Tensor& bias) {
  if (!bias.is_floating_point()) {
    throw DtypeError(fmt::format("Mask::additive: expects a float tensor added to the scores (-inf blocks), got {}; "
                                 "for bool masks use Mask::keep or Mask::block",
                                 dtype_name(bias.dtype())));
  }
  Mask m;
  m.additive_ = bias;  // not detached: a learned bias (relative positions, ALiBi slopes) gets dS as its gradient
  return m;
}

Mask Mask::causal(std::int64_t L, std::int64_t S, CausalAlign align) {
  if (S < 0) S = L;
  if (L < 0) throw ValueError(fmt::format("Mask::causal: L must be >= 0, got {}", L));
  const std::int64_t shift = align == CausalAlign::TopLeft ? 0 : S - L;
  Tensor allowed = Tensor::empty({L, S}, Dtype::Bool);
  bool* p = allowed.data<bool>();
  for (std::int64_t i = 0; i < L; ++i) {
    for (std::int64_t j = 0; j < S; ++j) p[i * S + j] = j <= i + shift;
  }
  return keep(allowed);
}

Mask Mask::key_padding(const Tensor& lengths, std::int64_t S) {
  if (lengths.dtype() != Dtype::Int64 || lengths.dim() != 1) {
    throw DtypeError(fmt::format("Mask::key_padding: lengths must be a 1-D int64 tensor [N], got {} {}",
                                 dtype_name(lengths.dtype()), shape_str(lengths.shape())));
  }
  const std::int64_t n = lengths.size(0);
  Tensor allowed = Tensor::empty({n, 1, S}, Dtype::Bool);
  const std::int64_t* len = lengths.data<std::int64_t>();
  bool* p = allowed.data<bool>();
  for (std::int64_t b = 0; b < n; ++b) {
    if (len[b] < 0 || len[b] > S) {
      throw ValueError(fmt::format("Mask::key_padding: length {} of sequence {} is outside [0, {}]", len[b], b, S));
    }
    for (std::int64_t j = 0; j < S; ++j) p[b * S + j] = j < len[b];
  }
  return keep(allowed);
}

Mask Mask::operator&(const Mask& o) const {
  Mask m;
  m.keep_ = !keep_.defined() ? o.keep_ : !o.keep_.defined() ? keep_ : logical_and(keep_, o.keep_);
  if (!additive_.defined()) {
    m.additive_ = o.additive_;
  } else if (!o.additive_.defined()) {
    m.additive_ = additive_;
  } else {
    m.additive_ = add(additive_, o.additive_);
  }
  return m;
}

Shape Mask::shape() const {
  if (empty()) return {};
  if (!keep_.defined()) return additive_.shape();
  if (!additive_.defined()) return keep_.shape();
  return broadcast_shapes(keep_.shape(), additive_.shape(), "Mask");
}

Mask Mask::unsqueeze(std::int64_t dim) const {
  Mask m = *this;
  const std::int64_t nd = static_cast<std::int64_t>(shape().size());
  const std::int64_t d = dim < 0 ? dim + nd + 1 : dim;  // counted on the mask's own dims
  auto up = [&](const Tensor& t) {
    if (!t.defined()) return t;
    // align each part on the right with the full mask shape before inserting
    Shape s = t.shape();
    s.insert(s.begin(), static_cast<std::size_t>(nd - t.dim()), 1);
    return t.reshape(s).unsqueeze(d);
  };
  m.keep_ = up(keep_);
  m.additive_ = up(additive_);
  return m;
}

Mask Mask::reshape(const Shape& s) const {
  Mask m;
  const Shape full = shape();
  if (keep_.defined()) m.keep_ = keep_.expand(full).reshape(s);
  if (additive_.defined()) m.additive_ = additive_.expand(full).reshape(s);
  return m;
}

Tensor Mask::allowed() const {
  if (empty()) return Tensor();
  NoGradGuard no_grad;
  Tensor a = keep_.defined() ? keep_ : ones(additive_.shape(), Dtype::Bool);
  if (additive_.defined()) a = logical_and(a, gt(additive_, full({}, -std::numeric_limits<double>::infinity(), additive_.dtype())));
  return a;
}

Tensor Mask::as_additive(Dtype dtype) const {
  if (empty()) return Tensor();
  Tensor bias = additive_.defined() ? additive_.to(dtype) : zeros(keep_.shape(), dtype);
  if (keep_.defined()) {
    bias = masked_fill(expand(bias, shape()), logical_not(keep_), -std::numeric_limits<double>::infinity());
  }
  return bias;
}

void Mask::check_broadcast(const Shape& scores, const char* op) const {
  if (empty()) return;
  const Shape m = shape();
  bool ok = m.size() <= scores.size();
  for (std::size_t i = 0; ok && i < m.size(); ++i) {
    const auto have = m[m.size() - 1 - i], want = scores[scores.size() - 1 - i];
    ok = have == want || have == 1;
  }
  if (!ok) {
    const std::size_t n = scores.size();
    throw ShapeError(fmt::format(
        "{}: mask of shape {} cannot broadcast to the attention scores {} (N.. x L x S); expected [L, S] = [{}, {}], "
        "{} or any shape whose dims are equal to those or 1",
        op, shape_str(m), shape_str(scores), scores[n - 2], scores[n - 1], shape_str(scores)));
  }
}

}  // namespace microtorch
