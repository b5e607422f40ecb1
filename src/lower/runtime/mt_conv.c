/* mt_conv.c - convolutions (mt_conv_<x>_<w>_<y>) and pooling (mt_max_pool_*, mt_avg_pool_*):
 * the lowering's conv family (src/lower/rules/conv.cpp, src/lower/rules/pool.cpp). Direct
 * loops over each output's taps, no im2col buffer; the requantization is the linear layers'
 * (mt_linear_out_* of mt_linear.c). The reference loops here, the targets' variants of the int8
 * ones in mt_conv_arm.c (Armv7E-M, MVE) and mt_conv_rv32.c (rv32imc), included below. Part of
 * mt_kernels.c. */
#include "mt_internal.h"

/* floor(u / d) for d > 0 without a divide instruction: u times the reciprocal of
 * mt_recip_u32 (1/d = r 2^-e, never below it, relative error < 2^-27) gives the quotient or a
 * little more, lowered while q d > u. Exact. */
static uint32_t mt_udiv_u32(uint32_t u, uint32_t d) {
  int e;
  const uint32_t r = mt_recip_u32(d, &e);
  uint32_t q = (uint32_t)(((uint64_t)u * r) >> e);
  while ((uint64_t)q * d > u) --q;
  return q;
}

/* The taps k in [0, kernel) of a window starting at `start` (dilation d) that land inside
 * [0, size): start + k d >= 0 from mt_tap_begin on, start + k d < size before mt_tap_end (no
 * division: Cortex-M0 has no divide instruction; kernels are short). */
static int mt_tap_begin(int start, int d, int kernel) {
  int k = 0;
  while (k < kernel && start + k * d < 0) ++k;
  return k;
}
static int mt_tap_end(int start, int d, int size, int kernel) {
  int k = kernel;
  while (k > 0 && start + (k - 1) * d >= size) --k;
  return k;
}

/* y[n, o, p, q] = max(y_min, y_zero + rq(b[o] + sum over c < C_g and the taps (i, j) inside
 * the input of x[n, g C_g + c, p SH - PH + i DH, q SW - PW + j DW] w[o, c, i, j]))
 * (cross-correlation; the padding is zeros, symmetric x), o = g O_g + k. ACC: int32 for int8
 * x int8 (|x w| <= 2^14: exact up to C_g KH KW = 131071 taps, the lowering's bound), int64
 * otherwise. OUT: mt_linear_out_* (mt_linear.c). VARIANT: a target's variant (MT_NO_VARIANT:
 * none), which returns 1 when it computed the call. */
#define MT_DEFINE_CONV(NAME, XT, WT, YT, BT, ACC, OUT, VARIANT)                                           \
  void NAME(const XT *x, const WT *w, const BT *b, YT *y, const int32_t *g, const int32_t *rq,            \
            int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col) {                            \
    const int N = g[MT_CONV_N], CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W];                   \
    const int OG = g[MT_CONV_OG], KH = g[MT_CONV_KH], KW = g[MT_CONV_KW], OH = g[MT_CONV_OH];             \
    const int OW = g[MT_CONV_OW], SH = g[MT_CONV_SH], SW = g[MT_CONV_SW], PH = g[MT_CONV_PH];             \
    const int PW = g[MT_CONV_PW], DH = g[MT_CONV_DH], DW = g[MT_CONV_DW], G = g[MT_CONV_GROUPS];          \
    const int C = CG * G, O = OG * G;                                                                     \
    int n, grp, t, p, q, c, i, j;                                                                         \
    if (VARIANT(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min, col)) return;                          \
    (void)col;                                                                                            \
    for (n = 0; n < N; ++n)                                                                               \
      for (grp = 0; grp < G; ++grp)                                                                       \
        for (t = 0; t < OG; ++t) {                                                                        \
          const int o = grp * OG + t;                                                                     \
          const XT *xg = x + ((long)n * C + (long)grp * CG) * H * W;                                      \
          const WT *wo = w + (long)o * CG * KH * KW;                                                      \
          const int32_t *r = rq + (rq_per_channel ? 2 * o : 0);                                           \
          YT *yo = y + ((long)n * O + o) * OH * OW;                                                       \
          for (p = 0; p < OH; ++p) {                                                                      \
            const int h0 = p * SH - PH, i0 = mt_tap_begin(h0, DH, KH), i1 = mt_tap_end(h0, DH, H, KH);    \
            for (q = 0; q < OW; ++q) {                                                                    \
              const int w0 = q * SW - PW, j0 = mt_tap_begin(w0, DW, KW), j1 = mt_tap_end(w0, DW, W, KW); \
              ACC acc = 0;                                                                                \
              if (KH == 1 && KW == 1) { /* pointwise: one tap per channel, HW apart (or in the padding) */ \
                const XT *xp = xg + (i0 < i1 && j0 < j1 ? (long)h0 * W + w0 : 0);                         \
                const long hw = (long)H * W;                                                              \
                for (c = 0; i0 < i1 && j0 < j1 && c < CG; ++c) acc += (ACC)xp[c * hw] * wo[c];            \
              } else {                                                                                    \
                for (c = 0; c < CG; ++c)                                                                  \
                  for (i = i0; i < i1; ++i) {                                                             \
                    const XT *xr = xg + ((long)c * H + h0 + i * DH) * W + w0;                             \
                    const WT *wr = wo + ((long)c * KH + i) * KW;                                          \
                    for (j = j0; j < j1; ++j) acc += (ACC)xr[j * DW] * wr[j];                             \
                  }                                                                                       \
              }                                                                                           \
              yo[p * OW + q] = OUT((int64_t)acc + (b ? b[o] : 0), r, y_zero, y_min);                      \
            }                                                                                             \
          }                                                                                               \
        }                                                                                                 \
  }

/* The targets' variants, chosen at build time by the feature macros of mt_internal.h: each
 * returns 1 when it computed the call, else the reference loop above does. */
#include "mt_conv_arm.c"
#include "mt_conv_rv32.c"
#if MT_DSP
#define MT_CONV_VARIANT_S8 mt_conv_dsp_s8_s8_s8
#define MT_CONV_VARIANT_S16 mt_conv_dsp_s8_s8_s16
#elif MT_RV32
#define MT_CONV_VARIANT_S8 mt_conv_rv_s8_s8_s8
#define MT_CONV_VARIANT_S16 mt_conv_rv_s8_s8_s16
#else
#define MT_CONV_VARIANT_S8 MT_NO_VARIANT
#define MT_CONV_VARIANT_S16 MT_NO_VARIANT
#endif

MT_DEFINE_CONV(mt_conv_s8_s8_s8, int8_t, int8_t, int8_t, int32_t, int32_t, mt_linear_out_s8, MT_CONV_VARIANT_S8)
MT_DEFINE_CONV(mt_conv_s8_s8_s16, int8_t, int8_t, int16_t, int32_t, int32_t, mt_linear_out_s16, MT_CONV_VARIANT_S16)
MT_DEFINE_CONV(mt_conv_s8_s16_s8, int8_t, int16_t, int8_t, int32_t, int64_t, mt_linear_out_s8, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s8_s16_s16, int8_t, int16_t, int16_t, int32_t, int64_t, mt_linear_out_s16, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s16_s8_s8, int16_t, int8_t, int8_t, int64_t, int64_t, mt_linear_out_s8, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s16_s8_s16, int16_t, int8_t, int16_t, int64_t, int64_t, mt_linear_out_s16, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s16_s16_s8, int16_t, int16_t, int8_t, int64_t, int64_t, mt_linear_out_s8, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s16_s16_s16, int16_t, int16_t, int16_t, int64_t, int64_t, mt_linear_out_s16, MT_NO_VARIANT)

/* The window of output (p, q) of a pooling with table g, clipped to the input: rows
 * [*h0, *h1), columns [*w0, *w1); MT_POOL_MODE 2: adaptive, [floor(p H / OH), ceil((p + 1) H
 * / OH)), else the window at (p SH - PH, q SW - PW) of KH x KW. */
static void mt_pool_window(const int32_t *g, int p, int q, int *h0, int *h1, int *w0, int *w1) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W];
  if (g[MT_POOL_MODE] == 2) {
    const int OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
    *h0 = (int)mt_udiv_u32((uint32_t)(p * H), (uint32_t)OH);
    *h1 = (int)mt_udiv_u32((uint32_t)((p + 1) * H + OH - 1), (uint32_t)OH);
    *w0 = (int)mt_udiv_u32((uint32_t)(q * W), (uint32_t)OW);
    *w1 = (int)mt_udiv_u32((uint32_t)((q + 1) * W + OW - 1), (uint32_t)OW);
  } else {
    const int hs = p * g[MT_POOL_SH] - g[MT_POOL_PH], ws = q * g[MT_POOL_SW] - g[MT_POOL_PW];
    const int he = hs + g[MT_POOL_KH], we = ws + g[MT_POOL_KW];
    *h0 = hs < 0 ? 0 : hs, *h1 = he < H ? he : H;
    *w0 = ws < 0 ? 0 : ws, *w1 = we < W ? we : W;
  }
}

/* y = the largest x of each window (the padding never wins); y in x's format. Exact. */
#define MT_DEFINE_MAX_POOL(NAME, T)                                                                         \
  void NAME(const T *x, T *y, const int32_t *g) {                                                           \
    const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];                   \
    int t, p, q, i, j, h0, h1, w0, w1;                                                                      \
    for (t = 0; t < g[MT_POOL_PLANES]; ++t) {                                                               \
      const T *xp = x + (long)t * H * W;                                                                    \
      T *yp = y + (long)t * OH * OW;                                                                        \
      for (p = 0; p < OH; ++p)                                                                              \
        for (q = 0; q < OW; ++q) {                                                                          \
          T best;                                                                                           \
          mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);                                                      \
          best = xp[h0 * W + w0];                                                                           \
          for (i = h0; i < h1; ++i)                                                                         \
            for (j = w0; j < w1; ++j) best = xp[i * W + j] > best ? xp[i * W + j] : best;                   \
          yp[p * OW + q] = best;                                                                            \
        }                                                                                                   \
    }                                                                                                       \
  }
MT_DEFINE_MAX_POOL(mt_max_pool_s8, int8_t)
MT_DEFINE_MAX_POOL(mt_max_pool_s16, int16_t)

/* y = zero + round(sum of (x - zero) over the window / d), to nearest with ties away from zero,
 * d = KH KW (MT_POOL_MODE 0: the padding counts as zeros) or the window's area inside the
 * input (modes 1 and 2); y in x's format. The sum in int32: windows of at most 65535
 * elements (the lowering's bound). Exact. */
#define MT_DEFINE_AVG_POOL(NAME, T, OUT)                                                                    \
  void NAME(const T *x, T *y, const int32_t *g, int32_t zero) {                                             \
    const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];                   \
    int t, p, q, i, j, h0, h1, w0, w1;                                                                      \
    for (t = 0; t < g[MT_POOL_PLANES]; ++t) {                                                               \
      const T *xp = x + (long)t * H * W;                                                                    \
      T *yp = y + (long)t * OH * OW;                                                                        \
      for (p = 0; p < OH; ++p)                                                                              \
        for (q = 0; q < OW; ++q) {                                                                          \
          int32_t s = 0, d, m;                                                                              \
          mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);                                                      \
          for (i = h0; i < h1; ++i)                                                                         \
            for (j = w0; j < w1; ++j) s += (int32_t)xp[i * W + j] - zero;                                   \
          d = g[MT_POOL_MODE] == 0 ? g[MT_POOL_KH] * g[MT_POOL_KW] : (h1 - h0) * (w1 - w0);                 \
          m = (int32_t)mt_udiv_u32(mt_mag32(s) + ((uint32_t)d >> 1), (uint32_t)d);                          \
          yp[p * OW + q] = OUT(s < 0 ? -m : m, zero);                                                       \
        }                                                                                                   \
    }                                                                                                       \
  }
MT_DEFINE_AVG_POOL(mt_avg_pool_s8, int8_t, mt_out_s8)
MT_DEFINE_AVG_POOL(mt_avg_pool_s16, int16_t, mt_out_s16)

#if MT_F32
/* ==================================================================================== */
/* Float32 (training in float): convolution and pooling, and their backward             */
/* ==================================================================================== */
/* The same geometry tables as the integer kernels (MT_CONV_*, MT_POOL_*); every output one
 * sum in the order mt_kernels.h states. */

/* Output position p reads input row p S - P + i D for tap i: for input row h and tap i, the
 * p with p S = h + P - i D when there is one in [0, O), else -1. */
static int mt_conv_source(int h, int i, int S, int P, int D, int O) {
  const int t = h + P - i * D;
  int p;
  if (t < 0) return -1;
  p = (int)mt_udiv_u32((uint32_t)t, (uint32_t)S);
  return p * S == t && p < O ? p : -1;
}

void mt_conv_f32(const float *x, const float *w, const float *b, float *y, const int32_t *g) {
  const int CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W], OG = g[MT_CONV_OG], KH = g[MT_CONV_KH];
  const int KW = g[MT_CONV_KW], OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS];
  const int C = CG * G, O = OG * G;
  int n, o, p, q, c, i, j;
  for (n = 0; n < g[MT_CONV_N]; ++n)
    for (o = 0; o < O; ++o) {
      const float *xg = x + (long)(n * C + (o / OG) * CG) * H * W, *wo = w + (long)o * CG * KH * KW;
      for (p = 0; p < OH; ++p)
        for (q = 0; q < OW; ++q) {
          float s = b ? b[o] : 0.0f;
          for (c = 0; c < CG; ++c)
            for (i = 0; i < KH; ++i) {
              const int h = p * g[MT_CONV_SH] - g[MT_CONV_PH] + i * g[MT_CONV_DH];
              if (h < 0 || h >= H) continue;
              for (j = 0; j < KW; ++j) {
                const int v = q * g[MT_CONV_SW] - g[MT_CONV_PW] + j * g[MT_CONV_DW];
                if (v >= 0 && v < W) s += xg[(long)(c * H + h) * W + v] * wo[(c * KH + i) * KW + j];
              }
            }
          y[((long)(n * O + o) * OH + p) * OW + q] = s;
        }
    }
}

void mt_conv_backward_f32(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                          const int32_t *g, int acc) {
  const int N = g[MT_CONV_N], CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W], OG = g[MT_CONV_OG];
  const int KH = g[MT_CONV_KH], KW = g[MT_CONV_KW], OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS];
  const int SH = g[MT_CONV_SH], SW = g[MT_CONV_SW], PH = g[MT_CONV_PH], PW = g[MT_CONV_PW];
  const int DH = g[MT_CONV_DH], DW = g[MT_CONV_DW], C = CG * G, O = OG * G;
  int n, o, c, h, v, t, i, j, p, q;
  if (dx) /* dx[n, c, h, v] = sum over t, i, j of dy[n, o, p, q] w[o, c mod CG, i, j], o = (c / CG) OG + t */
    for (n = 0; n < N; ++n)
      for (c = 0; c < C; ++c)
        for (h = 0; h < H; ++h)
          for (v = 0; v < W; ++v) {
            float s = 0.0f;
            for (t = 0; t < OG; ++t) {
              o = (c / CG) * OG + t;
              for (i = 0; i < KH; ++i) {
                p = mt_conv_source(h, i, SH, PH, DH, OH);
                if (p < 0) continue;
                for (j = 0; j < KW; ++j) {
                  q = mt_conv_source(v, j, SW, PW, DW, OW);
                  if (q >= 0)
                    s += dy[((long)(n * O + o) * OH + p) * OW + q] * w[((long)(o * CG + c % CG) * KH + i) * KW + j];
                }
              }
            }
            mt_put_f32(dx + ((long)(n * C + c) * H + h) * W + v, s, acc & 1);
          }
  if (dw) /* dw[o, c, i, j] = sum over n, p, q of dy[n, o, p, q] x[n, (o / OG) CG + c, p SH - PH + i DH, q SW - PW + j DW] */
    for (o = 0; o < O; ++o)
      for (c = 0; c < CG; ++c)
        for (i = 0; i < KH; ++i)
          for (j = 0; j < KW; ++j) {
            float s = 0.0f;
            for (n = 0; n < N; ++n) {
              const float *xc = x + (long)(n * C + (o / OG) * CG + c) * H * W, *dyo = dy + (long)(n * O + o) * OH * OW;
              for (p = 0; p < OH; ++p) {
                h = p * SH - PH + i * DH;
                if (h < 0 || h >= H) continue;
                for (q = 0; q < OW; ++q) {
                  v = q * SW - PW + j * DW;
                  if (v >= 0 && v < W) s += dyo[p * OW + q] * xc[h * W + v];
                }
              }
            }
            mt_put_f32(dw + ((long)(o * CG + c) * KH + i) * KW + j, s, acc & 2);
          }
  if (db) /* db[o] = sum over n, p, q of dy[n, o, p, q] */
    for (o = 0; o < O; ++o) {
      float s = 0.0f;
      for (n = 0; n < N; ++n) s = mt_sumf(s, dy + (long)(n * O + o) * OH * OW, 1, OH * OW);
      mt_put_f32(db + o, s, acc & 2);
    }
}

void mt_max_pool_f32(const float *x, float *y, int32_t *idx, const int32_t *g) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
  int t, p, q, i, j, h0, h1, w0, w1;
  for (t = 0; t < g[MT_POOL_PLANES]; ++t) {
    const float *xp = x + (long)t * H * W;
    for (p = 0; p < OH; ++p)
      for (q = 0; q < OW; ++q) {
        int at;
        mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);
        at = h0 * W + w0;
        for (i = h0; i < h1; ++i)
          for (j = w0; j < w1; ++j)
            if (xp[i * W + j] > xp[at]) at = i * W + j; /* strictly greater: the first maximum stays */
        y[(long)t * OH * OW + p * OW + q] = xp[at];
        if (idx) idx[(long)t * OH * OW + p * OW + q] = at;
      }
  }
}

/* The windows (p, q) of table g that hold input element (h, v): within [*p0, *p1) x [*q0, *q1)
 * (a superset for the adaptive mode: the caller tests each with mt_pool_window). */
static void mt_pool_span(const int32_t *g, int h, int v, int *p0, int *p1, int *q0, int *q1) {
  if (g[MT_POOL_MODE] == 2) {
    *p0 = 0, *p1 = g[MT_POOL_OH], *q0 = 0, *q1 = g[MT_POOL_OW];
    return;
  }
  /* window p holds rows [p SH - PH, p SH - PH + KH): p SH in (h + PH - KH, h + PH] */
  {
    const int th = h + g[MT_POOL_PH], tv = v + g[MT_POOL_PW];
    const int lh = th - g[MT_POOL_KH] + 1, lv = tv - g[MT_POOL_KW] + 1;
    *p1 = (int)mt_udiv_u32((uint32_t)th, (uint32_t)g[MT_POOL_SH]) + 1;
    *q1 = (int)mt_udiv_u32((uint32_t)tv, (uint32_t)g[MT_POOL_SW]) + 1;
    *p0 = lh <= 0 ? 0 : (int)mt_udiv_u32((uint32_t)(lh + g[MT_POOL_SH] - 1), (uint32_t)g[MT_POOL_SH]);
    *q0 = lv <= 0 ? 0 : (int)mt_udiv_u32((uint32_t)(lv + g[MT_POOL_SW] - 1), (uint32_t)g[MT_POOL_SW]);
    if (*p1 > g[MT_POOL_OH]) *p1 = g[MT_POOL_OH];
    if (*q1 > g[MT_POOL_OW]) *q1 = g[MT_POOL_OW];
  }
}

void mt_max_pool_backward_f32(const int32_t *idx, const float *dy, float *dx, const int32_t *g, int acc) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
  int t, h, v, p, q, p0, p1, q0, q1;
  for (t = 0; t < g[MT_POOL_PLANES]; ++t)
    for (h = 0; h < H; ++h)
      for (v = 0; v < W; ++v) {
        float s = 0.0f;
        mt_pool_span(g, h, v, &p0, &p1, &q0, &q1);
        for (p = p0; p < p1; ++p)
          for (q = q0; q < q1; ++q)
            if (idx[(long)t * OH * OW + p * OW + q] == h * W + v) s += dy[(long)t * OH * OW + p * OW + q];
        mt_put_f32(dx + (long)t * H * W + h * W + v, s, acc & 1);
      }
}

void mt_avg_pool_f32(const float *x, float *y, const int32_t *g) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
  int t, p, q, i, h0, h1, w0, w1;
  for (t = 0; t < g[MT_POOL_PLANES]; ++t) {
    const float *xp = x + (long)t * H * W;
    for (p = 0; p < OH; ++p)
      for (q = 0; q < OW; ++q) {
        float s = 0.0f;
        int d;
        mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);
        for (i = h0; i < h1; ++i) s = mt_sumf(s, xp + i * W + w0, 1, w1 - w0);
        d = g[MT_POOL_MODE] == 0 ? g[MT_POOL_KH] * g[MT_POOL_KW] : (h1 - h0) * (w1 - w0);
        y[(long)t * OH * OW + p * OW + q] = s / (float)d;
      }
  }
}

void mt_avg_pool_backward_f32(const float *dy, float *dx, const int32_t *g, int acc) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
  int t, h, v, p, q, p0, p1, q0, q1, h0, h1, w0, w1;
  for (t = 0; t < g[MT_POOL_PLANES]; ++t)
    for (h = 0; h < H; ++h)
      for (v = 0; v < W; ++v) {
        float s = 0.0f;
        mt_pool_span(g, h, v, &p0, &p1, &q0, &q1);
        for (p = p0; p < p1; ++p)
          for (q = q0; q < q1; ++q) {
            int d;
            mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);
            if (h < h0 || h >= h1 || v < w0 || v >= w1) continue;
            d = g[MT_POOL_MODE] == 0 ? g[MT_POOL_KH] * g[MT_POOL_KW] : (h1 - h0) * (w1 - w0);
            s += dy[(long)t * OH * OW + p * OW + q] / (float)d;
          }
        mt_put_f32(dx + (long)t * H * W + h * W + v, s, acc & 1);
      }
}
#endif
