// The depthwise convolutions of conv.cpp (C_g = 1, groups > 1: each output channel reads one
// input channel), as direct loops over the kernel's taps:
//   - stride 1, one output channel per input channel, the output as large as the input: one
//     loop per sample and tap (conv_forward_depthwise_same);
//   - stride 1 otherwise: along the zero-padded plane (conv_forward_depthwise_flat), which is
//     also every stride-1 backward;
//   - strided: along the output rows.
// The tap loops are written in explicit vectors, compiled for each instruction set and chosen
// by get_cpu_capability().
#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "conv_kernels.hpp"
#include "microtorch/parallel.hpp"
#include "simd.hpp"
#include "window.hpp"

namespace microtorch::detail {

namespace {

// Depthwise (C_g = 1) with stride 1, over the input plane copied into a zero-padded one of
// Hp x Wp = (H + ph + ph_end) x (W + pw + pw_end): output (p, q) at flat index k = p Wp + q
// reads tap (i, j) at k + i dh Wp + j dw, so each tap is one contiguous multiply-add over
// k < (OH - 1) Wp + OW (the Wp - OW columns between output rows are computed and dropped).
// Backward runs the same loops on dY laid out with width Wp (zeros in the dropped columns).
struct PaddedPlane {
  std::int64_t hp, wp, count;
  explicit PaddedPlane(const ConvGeom& g)
      : hp(g.h + g.ph + g.ph_end), wp(g.w + g.pw + g.pw_end), count((g.oh - 1) * wp + g.ow) {}
  bool unpadded(const ConvGeom& g) const { return hp == g.h && wp == g.w; }
};

// The tap loops in the vectors of one instruction set (simd.hpp's Avx512, Avx2, Baseline),
// each compiled with its target attribute and chosen by get_cpu_capability(), as the
// attention kernels are. Written with explicit vectors: GCC unrolls and jams a plain
// tap-by-tap loop into scalar code.
//
// a[k] += sum_t w[t] x[k + off[t]] for k < count: blocks of kVecs vectors of outputs stay in
// registers while every tap adds to them.
template <class Isa, class T>
[[gnu::always_inline]] inline void taps_forward_body(T* a, const T* x, const T* w, const std::int64_t* off,
                                                     std::int64_t taps, std::int64_t count) {
  using V = simd::VecOf<Isa, T>;
  constexpr std::int64_t kL = simd::kLanesOf<Isa, T>, kVecs = 4;
  std::int64_t k0 = 0;
  for (; k0 + kVecs * kL <= count; k0 += kVecs * kL) {
    V r[kVecs];
    for (std::int64_t v = 0; v < kVecs; ++v) r[v] = simd::load_vec<V>(a + k0 + v * kL);
    for (std::int64_t t = 0; t < taps; ++t) {
      const V wt = V{} + w[t];
      const T* s = x + off[t] + k0;
      for (std::int64_t v = 0; v < kVecs; ++v) r[v] += wt * simd::load_vec<V>(s + v * kL);
    }
    for (std::int64_t v = 0; v < kVecs; ++v) simd::store_vec(a + k0 + v * kL, r[v]);
  }
  for (; k0 + kL <= count; k0 += kL) {
    V r = simd::load_vec<V>(a + k0);
    for (std::int64_t t = 0; t < taps; ++t) r += (V{} + w[t]) * simd::load_vec<V>(x + off[t] + k0);
    simd::store_vec(a + k0, r);
  }
  for (; k0 < count; ++k0) {
    T r = a[k0];
    for (std::int64_t t = 0; t < taps; ++t) r += w[t] * x[off[t] + k0];
    a[k0] = r;
  }
}

// dw[t] += sum_k g[k] x[k + off[t]] for k < count: up to kGroup taps at a time share each
// vector of g, each tap summing into a vector of partial sums.
template <class Isa, class T>
[[gnu::always_inline]] inline void taps_weight_grad_body(T* dw, const T* g, const T* x, const std::int64_t* off,
                                                         std::int64_t taps, std::int64_t count) {
  using V = simd::VecOf<Isa, T>;
  constexpr std::int64_t kL = simd::kLanesOf<Isa, T>, kGroup = 8;
  const std::int64_t whole = count - count % kL;
  for (std::int64_t t0 = 0; t0 < taps; t0 += kGroup) {
    const std::int64_t nt = std::min(kGroup, taps - t0);
    V part[kGroup] = {};
    for (std::int64_t k = 0; k < whole; k += kL) {
      const V gv = simd::load_vec<V>(g + k);
      for (std::int64_t t = 0; t < nt; ++t) part[t] += gv * simd::load_vec<V>(x + off[t0 + t] + k);
    }
    for (std::int64_t t = 0; t < nt; ++t) {
      T sum = 0;
      for (std::int64_t l = 0; l < kL; ++l) sum += part[t][l];
      const T* s = x + off[t0 + t];
      for (std::int64_t k = whole; k < count; ++k) sum += g[k] * s[k];
      dw[t0 + t] += sum;
    }
  }
}

// y[k] += sum_t wk[t n + k] x[k + off[t]] for k in [lo, hi): the taps' weights as arrays over
// the outputs (0 where a tap reads padding), so that one loop runs over a whole sample's
// channels; blocks of kVecs vectors of y stay in registers while every tap adds to them.
template <class Isa, class T>
[[gnu::always_inline]] inline void taps_weighted_body(T* y, const T* x, const T* wk, const std::int64_t* off,
                                                      std::int64_t taps, std::int64_t n, std::int64_t lo,
                                                      std::int64_t hi) {
  using V = simd::VecOf<Isa, T>;
  constexpr std::int64_t kL = simd::kLanesOf<Isa, T>, kVecs = 4;
  std::int64_t k0 = lo;
  for (; k0 + kVecs * kL <= hi; k0 += kVecs * kL) {
    V r[kVecs];
    for (std::int64_t v = 0; v < kVecs; ++v) r[v] = simd::load_vec<V>(y + k0 + v * kL);
    for (std::int64_t t = 0; t < taps; ++t) {
      const T* s = x + off[t] + k0;
      const T* wt = wk + t * n + k0;
      for (std::int64_t v = 0; v < kVecs; ++v) {
        r[v] += simd::load_vec<V>(wt + v * kL) * simd::load_vec<V>(s + v * kL);
      }
    }
    for (std::int64_t v = 0; v < kVecs; ++v) simd::store_vec(y + k0 + v * kL, r[v]);
  }
  for (; k0 < hi; ++k0) {
    T r = y[k0];
    for (std::int64_t t = 0; t < taps; ++t) r += wk[t * n + k0] * x[off[t] + k0];
    y[k0] = r;
  }
}

template <class T>
struct TapKernels {
  using Fn = void (*)(T*, const T*, const T*, const std::int64_t*, std::int64_t, std::int64_t);
  using WeightedFn = void (*)(T*, const T*, const T*, const std::int64_t*, std::int64_t, std::int64_t, std::int64_t,
                              std::int64_t);
  Fn forward, weight_grad;
  WeightedFn weighted;
};

#define MICROTORCH_CONV_TAPS(NAME, ISA, TARGET)                                                             \
  template <class T>                                                                                       \
  TARGET void NAME##_forward(T* a, const T* x, const T* w, const std::int64_t* o, std::int64_t n,          \
                             std::int64_t c) {                                                             \
    taps_forward_body<ISA, T>(a, x, w, o, n, c);                                                           \
  }                                                                                                        \
  template <class T>                                                                                       \
  TARGET void NAME##_weight_grad(T* dw, const T* g, const T* x, const std::int64_t* o, std::int64_t n,     \
                                 std::int64_t c) {                                                         \
    taps_weight_grad_body<ISA, T>(dw, g, x, o, n, c);                                                      \
  }                                                                                                        \
  template <class T>                                                                                       \
  TARGET void NAME##_weighted(T* y, const T* x, const T* wk, const std::int64_t* o, std::int64_t taps,     \
                              std::int64_t n, std::int64_t lo, std::int64_t hi) {                          \
    taps_weighted_body<ISA, T>(y, x, wk, o, taps, n, lo, hi);                                              \
  }
#if defined(MICROTORCH_ISAS_AVX512)
MICROTORCH_CONV_TAPS(taps_avx512, simd::Avx512, MICROTORCH_TARGET_AVX512)
#endif
#if defined(MICROTORCH_ISAS_AVX2)
MICROTORCH_CONV_TAPS(taps_avx2, simd::Avx2, MICROTORCH_TARGET_AVX2)
#endif
#if defined(MICROTORCH_ISAS_BASELINE)
MICROTORCH_CONV_TAPS(taps_baseline, simd::Baseline, )
#endif
#undef MICROTORCH_CONV_TAPS

template <class T>
TapKernels<T> tap_kernels() {
  const std::string_view isa = get_cpu_capability();
#if defined(MICROTORCH_ISAS_AVX512)
  if (isa == "avx512") return {taps_avx512_forward<T>, taps_avx512_weight_grad<T>, taps_avx512_weighted<T>};
#endif
#if defined(MICROTORCH_ISAS_AVX2)
  if (isa == "avx2") return {taps_avx2_forward<T>, taps_avx2_weight_grad<T>, taps_avx2_weighted<T>};
#endif
#if defined(MICROTORCH_ISAS_BASELINE)
  return {taps_baseline_forward<T>, taps_baseline_weight_grad<T>, taps_baseline_weighted<T>};
#else
  (void)isa;
  std::abort();  // unreachable: get_cpu_capability() names a compiled ISA
#endif
}

// The flat offset of each tap (i, j) in the padded plane.
std::vector<std::int64_t> tap_offsets(const ConvGeom& g, std::int64_t wp) {
  std::vector<std::int64_t> off;
  for (std::int64_t i = 0; i < g.kh; ++i) {
    for (std::int64_t j = 0; j < g.kw; ++j) off.push_back(i * g.dh * wp + j * g.dw);
  }
  return off;
}

// Copies the rows of an H x W plane into the interior of the padded plane (its border stays 0).
template <class T>
void pad_plane(const ConvGeom& g, const PaddedPlane& pp, const T* plane, T* padded) {
  for (std::int64_t r = 0; r < g.h; ++r) {
    const T* src = plane + r * g.w;
    T* dst = padded + (r + g.ph) * pp.wp + g.pw;
    for (std::int64_t q = 0; q < g.w; ++q) dst[q] = src[q];
  }
}

// Depthwise, one output channel per input channel, stride 1, the output as large as the
// input ("same" padding): output k of a sample (k = c H W + p W + q, channels included) reads
// tap (i, j) at k + (i dh - ph) W + (j dw - pw) of the same sample, inside channel c's plane
// wherever the tap does not read padding. So the whole sample is one loop per tap, with the
// tap's weights as an array over k (w[c, i, j], 0 where it would read padding), built once
// per call: no padded copies and no per-plane loop ends.
// The weight arrays take taps x C x H x W elements: up to 16 MiB of float32, else the flat loops.
bool same_size_depthwise(const ConvGeom& g) {
  constexpr std::int64_t kMaxWeightArrays = std::int64_t{1} << 22;
  return g.og == 1 && g.sh == 1 && g.sw == 1 && g.oh == g.h && g.ow == g.w &&
         g.kh * g.kw * g.c * g.h * g.w <= kMaxWeightArrays;
}

template <class T>
void conv_forward_depthwise_same(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  const std::int64_t taps = g.kh * g.kw, hw = g.h * g.w, n = g.c * hw;
  std::vector<std::int64_t> off;
  Scratch<T> wk(taps * n, T(0));
  for (std::int64_t i = 0; i < g.kh; ++i) {
    const Range rows = valid_outputs(i * g.dh - g.ph, 1, g.h, g.oh);
    for (std::int64_t j = 0; j < g.kw; ++j) {
      const Range cs = valid_outputs(j * g.dw - g.pw, 1, g.w, g.ow);
      const std::int64_t t = i * g.kw + j;
      off.push_back((i * g.dh - g.ph) * g.w + (j * g.dw - g.pw));
      for (std::int64_t c = 0; c < g.c; ++c) {
        const T wt = w[c * taps + t];
        T* dst = wk.data() + t * n + c * hw;
        for (std::int64_t p = rows.begin; p < rows.end; ++p) {
          for (std::int64_t q = cs.begin; q < cs.end; ++q) dst[p * g.w + q] = wt;
        }
      }
    }
  }
  // Outputs [lo, hi) read inside the sample for every tap; the few outside go tap by tap.
  std::int64_t lo = 0, hi = n;
  for (auto o : off) lo = std::max(lo, -o), hi = std::min(hi, n - o);
  hi = std::max(hi, lo);
  const auto kernels = tap_kernels<T>();
  for (std::int64_t s = 0; s < g.n; ++s) {
    const T* xs = x + s * n;
    T* ys = y + s * n;
    for (std::int64_t c = 0; c < g.c; ++c) std::fill(ys + c * hw, ys + (c + 1) * hw, b ? b[c] : T(0));
    kernels.weighted(ys, xs, wk.data(), off.data(), taps, n, lo, hi);
    for (std::int64_t t = 0; t < taps; ++t) {  // the edges: only the taps that stay inside the sample
      const T* wt = wk.data() + t * n;
      for (std::int64_t k = 0; k < lo; ++k) {
        if (k + off[static_cast<std::size_t>(t)] >= 0) ys[k] += wt[k] * xs[k + off[static_cast<std::size_t>(t)]];
      }
      for (std::int64_t k = hi; k < n; ++k) {
        if (k + off[static_cast<std::size_t>(t)] < n) ys[k] += wt[k] * xs[k + off[static_cast<std::size_t>(t)]];
      }
    }
  }
}

template <class T>
void conv_forward_depthwise_flat(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  const PaddedPlane pp(g);
  const auto off = tap_offsets(g, pp.wp);
  const auto kernels = tap_kernels<T>();
  const std::int64_t taps = g.kh * g.kw, ohw = g.ohw();
  const bool direct_out = pp.wp == g.ow || g.oh == 1;  // no dropped columns: accumulate into y itself
  Scratch<T> xp(pp.unpadded(g) ? 0 : pp.hp * pp.wp, T(0)), acc(direct_out ? 0 : pp.count);
  for (std::int64_t s = 0; s < g.n; ++s) {
    for (std::int64_t c = 0; c < g.c; ++c) {
      const T* plane = x + (s * g.c + c) * g.h * g.w;
      const T* src = plane;
      if (!pp.unpadded(g)) pad_plane(g, pp, plane, xp.data()), src = xp.data();
      for (std::int64_t m = 0; m < g.og; ++m) {
        const std::int64_t o = c * g.og + m;
        T* yo = y + (s * g.o + o) * ohw;
        T* a = direct_out ? yo : acc.data();
        std::fill(a, a + pp.count, b ? b[o] : T(0));
        kernels.forward(a, src, w + o * taps, off.data(), taps, pp.count);
        if (!direct_out) {
          for (std::int64_t p = 0; p < g.oh; ++p) {
            for (std::int64_t q = 0; q < g.ow; ++q) yo[p * g.ow + q] = a[p * pp.wp + q];
          }
        }
      }
    }
  }
}

// Backward: dY is laid out with width Wp behind `front` = the largest tap offset of zeros
// (gz), so that dx_padded[m] = sum_t w[t] dY[m - off[t]] = sum_t w[t] gz[m + front - off[t]]
// is the forward's loop with the offsets flipped; dw[t] = sum_k dY[k] x_padded[k + off[t]].
template <class T>
void conv_backward_depthwise_flat(const ConvGeom& g, const T* x, const T* w, const T* gy, T* dx, T* dw) {
  const PaddedPlane pp(g);
  const auto off = tap_offsets(g, pp.wp);
  const auto kernels = tap_kernels<T>();
  const std::int64_t taps = g.kh * g.kw, ohw = g.ohw(), plane_size = pp.hp * pp.wp, front = off.back();
  std::vector<std::int64_t> flipped(off.size());
  for (std::size_t t = 0; t < off.size(); ++t) flipped[t] = front - off[t];
  // dx is needed only at the input's rows [ph, ph + H) of the padded plane.
  const std::int64_t first = g.ph * pp.wp, rows = g.h * pp.wp;
  Scratch<T> xp(pp.unpadded(g) ? 0 : plane_size, T(0)), dxp(rows), gz(front + plane_size, T(0));
  T* gk = gz.data() + front;
  for (std::int64_t s = 0; s < g.n; ++s) {
    for (std::int64_t c = 0; c < g.c; ++c) {
      const T* plane = x + (s * g.c + c) * g.h * g.w;
      const T* src = plane;
      if (dw && !pp.unpadded(g)) pad_plane(g, pp, plane, xp.data()), src = xp.data();
      if (dx) std::fill(dxp.data(), dxp.data() + rows, T(0));
      for (std::int64_t m = 0; m < g.og; ++m) {
        const std::int64_t o = c * g.og + m;
        const T* go = gy + (s * g.o + o) * ohw;
        for (std::int64_t p = 0; p < g.oh; ++p) {  // the dropped columns stay 0
          for (std::int64_t q = 0; q < g.ow; ++q) gk[p * pp.wp + q] = go[p * g.ow + q];
        }
        if (dw) kernels.weight_grad(dw + o * taps, gk, src, off.data(), taps, pp.count);
        if (dx) kernels.forward(dxp.data(), gz.data() + first, w + o * taps, flipped.data(), taps, rows);
      }
      if (dx) {
        T* dplane = dx + (s * g.c + c) * g.h * g.w;
        for (std::int64_t r = 0; r < g.h; ++r) {
          const T* row = dxp.data() + r * pp.wp + g.pw;
          for (std::int64_t q = 0; q < g.w; ++q) dplane[r * g.w + q] = row[q];
        }
      }
    }
  }
}

// Depthwise (C_g = 1) with a stride: output channel o reads input channel o / O_g, tap by tap
// along the output rows, over the outputs whose input lies inside the plane.
struct TapRanges {
  std::vector<Range> rows, cols;  // per kernel row i and column j
  explicit TapRanges(const ConvGeom& g) {
    for (std::int64_t i = 0; i < g.kh; ++i) rows.push_back(valid_outputs(i * g.dh - g.ph, g.sh, g.h, g.oh));
    for (std::int64_t j = 0; j < g.kw; ++j) cols.push_back(valid_outputs(j * g.dw - g.pw, g.sw, g.w, g.ow));
  }
};

template <class T>
void conv_forward_depthwise(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  const std::int64_t ohw = g.ohw();
  const TapRanges tr(g);
  for (std::int64_t s = 0; s < g.n; ++s) {
    for (std::int64_t o = 0; o < g.o; ++o) {
      const T* plane = x + (s * g.c + o / g.og) * g.h * g.w;
      const T* wo = w + o * g.kh * g.kw;
      T* yo = y + (s * g.o + o) * ohw;
      std::fill(yo, yo + ohw, b ? b[o] : T(0));
      for (std::int64_t i = 0; i < g.kh; ++i) {
        const Range rows = tr.rows[static_cast<std::size_t>(i)];
        for (std::int64_t j = 0; j < g.kw; ++j) {
          const Range cs = tr.cols[static_cast<std::size_t>(j)];
          const T wt = wo[i * g.kw + j];
          for (std::int64_t p = rows.begin; p < rows.end; ++p) {
            const T* src = plane + (p * g.sh - g.ph + i * g.dh) * g.w + (j * g.dw - g.pw);
            T* d = yo + p * g.ow;
            for (std::int64_t q = cs.begin; q < cs.end; ++q) d[q] += wt * src[q * g.sw];
          }
        }
      }
    }
  }
}

template <class T>
void conv_backward_depthwise(const ConvGeom& g, const T* x, const T* w, const T* gy, T* dx, T* dw) {
  const std::int64_t ohw = g.ohw();
  const TapRanges tr(g);
  for (std::int64_t s = 0; s < g.n; ++s) {
    for (std::int64_t o = 0; o < g.o; ++o) {
      const std::int64_t in_offset = (s * g.c + o / g.og) * g.h * g.w;
      const T* go = gy + (s * g.o + o) * ohw;
      for (std::int64_t i = 0; i < g.kh; ++i) {
        const Range rows = tr.rows[static_cast<std::size_t>(i)];
        for (std::int64_t j = 0; j < g.kw; ++j) {
          const Range cs = tr.cols[static_cast<std::size_t>(j)];
          const std::int64_t tap = o * g.kh * g.kw + i * g.kw + j;
          const T wt = w[tap];
          T acc = 0;
          for (std::int64_t p = rows.begin; p < rows.end; ++p) {
            const std::int64_t at = in_offset + (p * g.sh - g.ph + i * g.dh) * g.w + (j * g.dw - g.pw);
            const T* gr = go + p * g.ow;
            if (dw) {
              const T* src = x + at;
              for (std::int64_t q = cs.begin; q < cs.end; ++q) acc += gr[q] * src[q * g.sw];
            }
            if (dx) {
              T* d = dx + at;
              for (std::int64_t q = cs.begin; q < cs.end; ++q) d[q * g.sw] += wt * gr[q];
            }
          }
          if (dw) dw[tap] += acc;
        }
      }
    }
  }
}

// Stride 1 runs the flat loops (any kernel, 1-D or 2-D); strides the row loops.
bool flat_depthwise(const ConvGeom& g) { return g.sh == 1 && g.sw == 1; }

}  // namespace

template <class T>
void depthwise_forward(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  if (same_size_depthwise(g)) return conv_forward_depthwise_same(g, x, w, b, y);
  if (flat_depthwise(g)) return conv_forward_depthwise_flat(g, x, w, b, y);
  conv_forward_depthwise(g, x, w, b, y);
}

template <class T>
void depthwise_backward(const ConvGeom& g, const T* x, const T* w, const T* gy, T* dx, T* dw) {
  if (flat_depthwise(g)) return conv_backward_depthwise_flat(g, x, w, gy, dx, dw);
  conv_backward_depthwise(g, x, w, gy, dx, dw);
}

template void depthwise_forward<float>(const ConvGeom&, const float*, const float*, const float*, float*);
template void depthwise_forward<double>(const ConvGeom&, const double*, const double*, const double*, double*);
template void depthwise_backward<float>(const ConvGeom&, const float*, const float*, const float*, float*, float*);
template void depthwise_backward<double>(const ConvGeom&, const double*, const double*, const double*, double*,
                                         double*);

}  // namespace microtorch::detail
