/// \file
/// Which query/key pairs may attend, with one polarity: the Mask type.
///
/// Masks are where attention code usually goes wrong: PyTorch's bool masks mean "blocked"
/// in nn.MultiheadAttention but "may attend" in scaled_dot_product_attention, and additive
/// masks built with -1e9 quietly leak. A Mask is built only through named constructors,
/// so its meaning is in the code that makes it:
///
///     Mask::keep(allowed)        bool, true = may attend
///     Mask::block(blocked)       bool, true = blocked (PyTorch MHA's key_padding_mask / attn_mask)
///     Mask::additive(bias)       float added to the scores; -inf blocks; differentiable: a bias that
///                                requires grad (a learned relative-position bias) gets dL/dscores
///     Mask::causal(L, S)         query i may attend keys j <= i (top-left aligned, as torch's is_causal)
///     Mask::key_padding(len, S)  key j of sequence n may be attended iff j < len[n]; shape [N, 1, S]
///     a & b                      allowed by both (additive parts add up)
///
/// Shapes broadcast against the scores N.. x L x S. Blocked scores become -inf (never a
/// large finite number), and a query row with every key blocked gets zero attention
/// weights, hence zero output and zero gradient: no NaN in forward or backward.
#pragma once

#include <cstdint>

#include "microtorch/tensor.hpp"

namespace microtorch {

/// Alignment of a rectangular (L != S) causal mask.
enum class CausalAlign {
  TopLeft,     ///< query i sees keys 0..i (torch.ones(L, S).tril(), torch's is_causal)
  BottomRight  ///< query i sees keys 0..i + S - L (the last query sees every key: decoding with a cache)
};

/// Which query/key pairs may attend: a bool part (true = may attend) and an additive float
/// part, built only through the named constructors below (see mask.hpp). A Mask is a cheap
/// value: copies share the tensors.
///
/// \code
///   Mask m = Mask::causal(L) & Mask::key_padding(lengths, L).unsqueeze(1);  // [N, 1, L, L]
///   auto [out, w] = scaled_dot_product_attention(q, k, v, m);
/// \endcode
class Mask {
 public:
  /// No masking: every pair may attend.
  Mask() = default;

  /// From a bool tensor where true means "may attend" (scaled_dot_product_attention's
  /// polarity). Any other dtype throws DtypeError.
  static Mask keep(const Tensor& allowed);
  /// From a bool tensor where true means "blocked" (nn.MultiheadAttention's key_padding_mask
  /// and attn_mask polarity). Any other dtype throws DtypeError.
  static Mask block(const Tensor& blocked);
  /// From a float tensor added to the scores; -inf blocks. Not detached: a bias that requires
  /// grad (a learned relative-position bias) receives dL/dscores. A non-float dtype throws
  /// DtypeError.
  static Mask additive(const Tensor& bias);
  /// Causal mask [L, S] (S = L when omitted): with CausalAlign::TopLeft query i may attend keys
  /// j <= i, with BottomRight keys j <= i + S - L. L < 0 throws ValueError.
  static Mask causal(std::int64_t L, std::int64_t S = -1, CausalAlign align = CausalAlign::TopLeft);
  /// Key j of sequence n may be attended iff j < lengths[n]; lengths is a 1-D int64 tensor
  /// [N] (DtypeError otherwise) whose values lie in [0, S] (ValueError otherwise). The
  /// result has shape [N, 1, S] (unsqueeze(1) it for N x H x L x S scores).
  static Mask key_padding(const Tensor& lengths, std::int64_t S);

  /// Allowed by both masks; additive parts add; shapes broadcast.
  Mask operator&(const Mask& other) const;

  /// True for Mask(): nothing is masked.
  bool empty() const { return !keep_.defined() && !additive_.defined(); }
  /// The broadcast shape of the mask ([] when empty).
  Shape shape() const;
  /// The same mask with a size-1 dim inserted (e.g. the head dim of multi-head scores).
  Mask unsqueeze(std::int64_t dim) const;
  /// The same mask with its values seen in another shape (same number of elements).
  Mask reshape(const Shape& shape) const;
  /// Bool tensor, true = may attend (an additive -inf counts as blocked); undefined when empty().
  Tensor allowed() const;
  /// The mask as one additive float tensor of `dtype`: 0 or the additive bias where allowed,
  /// -inf where blocked; undefined when empty(). This is what attention adds to its scores;
  /// it carries the additive part's graph, so its gradient reaches a bias that requires grad
  /// (zero where blocked).
  Tensor as_additive(Dtype dtype) const;
  /// Checks that the mask broadcasts to `scores` (N.. x L x S); the error names `op`, both
  /// shapes and the shapes that would work.
  void check_broadcast(const Shape& scores, const char* op) const;

 private:
  Tensor keep_;      // bool, true = may attend; undefined = all allowed
  Tensor additive_;  // float bias added to the scores; undefined = none
};

}  // namespace microtorch
