// Internal: what conv.cpp and conv_depthwise.cpp share: the geometry of one convolution,
// working memory, and the depthwise kernels.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common.hpp"

namespace microtorch::detail {

// Everything the kernels need about one convolution.
struct ConvGeom {
  std::int64_t n = 1, c = 1, h = 1, w = 1;  // input
  std::int64_t o = 1, kh = 1, kw = 1;       // weight
  std::int64_t groups = 1, cg = 1, og = 1;  // channels per group, in and out
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0, ph_end = 0, pw_end = 0, dh = 1, dw = 1;
  std::int64_t oh = 1, ow = 1;  // output
  std::int64_t ohw() const { return oh * ow; }
  std::int64_t taps() const { return cg * kh * kw; }  // a row of W_g, a column of col
};

// Working memory from microtorch's block cache (memory.hpp): a loop of convolutions reuses
// the same blocks instead of faulting fresh pages in every call. Uninitialised unless filled.
template <class T>
struct Scratch {
  Tensor t;
  T* p;
  explicit Scratch(std::int64_t n) : t(Tensor::empty({n}, dtype_of_v<T>)), p(t.data<T>()) {}
  Scratch(std::int64_t n, T fill) : Scratch(n) { std::fill(p, p + n, fill); }
  T* data() { return p; }
  T& operator[](std::int64_t i) { return p[i]; }
};

/// Depthwise convolution (C_g = 1, groups > 1): y = the taps of each output channel over its
/// one input channel, plus b (may be null); conv_depthwise.cpp.
template <class T>
void depthwise_forward(const ConvGeom& g, const T* x, const T* w, const T* b, T* y);
/// Its backward: dx (zeroed by the caller) and dw (accumulated into); either may be null.
template <class T>
void depthwise_backward(const ConvGeom& g, const T* x, const T* w, const T* gy, T* dx, T* dw);

}  // namespace microtorch::detail
