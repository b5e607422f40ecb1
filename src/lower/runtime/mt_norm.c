/* mt_norm.c - layer norm over the last dim (the norm family, src/lower/rules/norm.cpp):
 * mt_layernorm_*, with its Armv7E-M variants (#if MT_DSP) beside the portable C. Part of
 * mt_kernels.c. */
#include "mt_internal.h"

/* ==================================================================================== */
/* Layer norm                                                                            */
/* ==================================================================================== */

/* Saturating 64-bit left shift of a magnitude, capped at 2^62. */
static uint64_t mt_lshift_sat_u64(uint64_t m, int n) {
  if (m == 0) return 0;
  if (n >= 62 || (m >> (62 - n)) != 0) return (uint64_t)1 << 62;
  return m << n;
}

/* The mean and x - mean keep G extra fraction bits: 16 for int8 inputs (a row of few levels
 * still has a precise mean), 8 for int16 (|x - mean| 2^G <= 2^24 either way). */
typedef struct {
  uint32_t rn; /* 1/n = rn * 2^-en */
  int en, G;
  int eps_shift; /* eps in units of (x 2^G)^2: eps_q * 2^eps_shift */
  uint32_t eps_q;
} mt_ln_ctx;

static void mt_ln_init(mt_ln_ctx *c, int n, int G, uint32_t eps_q, int eps_frac) {
  c->rn = mt_recip_u32((uint32_t)n, &c->en);
  c->G = G;
  c->eps_q = eps_q;
  c->eps_shift = 2 * G - eps_frac;
}

/* mean of the row in units of x 2^-G from its exact int32 sum */
static int32_t mt_ln_mean(const mt_ln_ctx *c, int32_t sum) {
  return mt_rshift_s64((int64_t)sum * c->rn, c->en - c->G);
}

/* 1/sqrt(var + eps) = *r * 2^-(*er) in units of x 2^-G, from ssq = sum (x - mean)^2 */
static void mt_ln_rsqrt(const mt_ln_ctx *c, uint64_t ssq, uint32_t *r, int *er) {
  uint64_t var = 0, eps;
  if (ssq != 0) { /* var = ssq / n, ssq normalised to 32 significant bits first */
    int b = mt_msb64(ssq), sh = b > 31 ? b - 31 : 0;
    uint64_t s = sh ? mt_rshift_u64(ssq, sh) : ssq; /* <= 2^32 */
    var = mt_rshift_u64(s * c->rn, c->en - sh);     /* en - sh >= 14 for n <= 32767 */
  }
  if (c->eps_shift >= 0)
    eps = mt_lshift_sat_u64(c->eps_q, c->eps_shift);
  else
    eps = c->eps_shift < -63 ? 0 : mt_rshift_u64(c->eps_q, -c->eps_shift);
  *r = mt_rsqrt_u64(var + eps, er); /* both <= 2^62 */
}

/* (xhat g + b 2^bs) 2^-g_shift with xhat = cdev * r * 2^-er in Q20 (|xhat| <= sqrt(n) 2^20),
 * bs = g_shift - b_shift in [0, 32]: |xhat g| < 2^59, b 2^bs of the same size as xhat g.
 * |cdev r| <= 2^24 2^31 < 2^56 always, so xhat takes mt_rshift_within when the shift allows;
 * the output does when the sum is within 2^61 (checked: b's bound is the lowering's). */
static inline int32_t mt_ln_out(int32_t cdev, uint32_t r, int er, int32_t g, int g_shift, int32_t b, int bs) {
  const int64_t p = (int64_t)cdev * r;
  const int32_t xhat = er - 20 >= 26 && er - 20 <= 56 ? mt_rshift_within(p, er - 20, 56) : mt_rshift_s64(p, er - 20);
  const int64_t bb = (int64_t)b * ((int64_t)1 << (bs < 0 ? 0 : bs > 32 ? 32 : bs));
  const int64_t v = (int64_t)xhat * g + bb;
  if (g_shift >= 31 && g_shift <= 61 && (((uint64_t)v + ((uint64_t)1 << 61)) >> 62) == 0) {
    return mt_rshift_within(v, g_shift, 61);
  }
  return mt_rshift_s64(v, g_shift);
}

#if MT_DSP
/* A row's outputs on Armv7E-M when r < 2^31, sh1 = er - 20 is in [26, 56], g_shift in
 * [32, 61] and bs in [1, 30]: xhat = round(d r 2^-sh1) is floor((p - [p < 0] + 2^(sh1-1))
 * 2^-sh1) with p = d r (r > 0: [p < 0] = [d < 0]), one SMLAL from the constant plus d >> 31;
 * |p| < 2^55, so |xhat| <= 2^30 is the low word of the floor shift. Then v = xhat g + b 2^bs
 * (|v| <= 2^62) is rounded as the adds do: A = v + 2^(gs-1) - 1 by two SMLAL, floor((A +
 * [A >= 0]) 2^-gs) from the high word (|result| <= 2^30, as the reference's whichever path),
 * the zero point added, SSAT. The same integers as mt_ln_out and mt_out_*. Returns 0 (the
 * reference takes the row) outside these ranges. */
#define MT_DEFINE_LN_ROW_DSP(NAME, XT, YT, G, BITS)                                                          \
  static int NAME(const XT *xr, YT *yr, int n, int32_t mean, uint32_t r, int er, const int32_t *g,           \
                  int g_shift, const int32_t *b, int bs, int32_t y_zero) {                                   \
    const int sh1 = er - 20;                                                                                 \
    int j;                                                                                                   \
    if (r >= 0x80000000u || sh1 < 26 || sh1 > 56 || g_shift < 32 || g_shift > 61 || bs < 1 || bs > 30)      \
      return 0;                                                                                              \
    {                                                                                                        \
      const int64_t k1 = (int64_t)1 << (sh1 - 1), k2 = ((int64_t)1 << (g_shift - 1)) - 1;                   \
      const int32_t bm = (int32_t)(1u << bs);                                                                \
      const int hs = g_shift - 32;                                                                           \
      for (j = 0; j < n; ++j) {                                                                              \
        const int32_t d = (int32_t)xr[j] * (1 << (G)) - mean;                                                \
        const int64_t pw = mt_smlal(k1 + (d >> 31), d, (int32_t)r);                                          \
        const uint32_t lo = (uint32_t)pw, hi = (uint32_t)((uint64_t)pw >> 32);                               \
        const int32_t xhat = sh1 >= 32 ? (int32_t)hi >> (sh1 - 32) : (int32_t)((lo >> sh1) | (hi << (32 - sh1))); \
        const int64_t A = mt_smlal(mt_smlal(k2, xhat, g[j]), b[j], bm);                                      \
        const uint64_t w = (uint64_t)A + (~(uint32_t)((uint64_t)A >> 32) >> 31);                             \
        yr[j] = (YT)__builtin_arm_ssat(((int32_t)(uint32_t)(w >> 32) >> hs) + y_zero, BITS);                 \
      }                                                                                                      \
    }                                                                                                        \
    return 1;                                                                                                \
  }
MT_DEFINE_LN_ROW_DSP(mt_ln_row_dsp_s8_s8, int8_t, int8_t, 16, 8)
MT_DEFINE_LN_ROW_DSP(mt_ln_row_dsp_s8_s16, int8_t, int16_t, 16, 16)
MT_DEFINE_LN_ROW_DSP(mt_ln_row_dsp_s16_s8, int16_t, int8_t, 8, 8)
MT_DEFINE_LN_ROW_DSP(mt_ln_row_dsp_s16_s16, int16_t, int16_t, 8, 16)
#else
#define mt_ln_row_dsp_s8_s8 MT_NO_VARIANT
#define mt_ln_row_dsp_s8_s16 MT_NO_VARIANT
#define mt_ln_row_dsp_s16_s8 MT_NO_VARIANT
#define mt_ln_row_dsp_s16_s16 MT_NO_VARIANT
#endif

/* A row's sum (exact in int32, n <= 32767) and, on Armv7E-M, its sum of squares in the same
 * pass: per word SMLAD with (1, 1) and SMLALD of the word with itself, two int16 at a time
 * (int8: a word split by SXTB16 into two such); *sq = sum x^2 (< 2^45). The portable C sums
 * only (*sq = 0): its sum of squares is the loop over x - mean. */
#if MT_DSP
static int32_t mt_ln_sums_s16(const int16_t *x, int n, uint64_t *sq) {
  int32_t sum = 0;
  int64_t q = 0;
  int j = 0;
  for (; j + 2 <= n; j += 2) {
    const int32_t w = mt_ld32(x + j);
    sum = __smlad(w, 0x00010001, sum);
    q = __smlald(w, w, q);
  }
  if (j < n) sum += x[j], q += (int32_t)x[j] * x[j];
  *sq = (uint64_t)q;
  return sum;
}
static int32_t mt_ln_sums_s8(const int8_t *x, int n, uint64_t *sq) {
  int32_t sum = 0;
  int64_t q = 0;
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    const int32_t w = mt_ld32(x + j), e = __sxtb16(w), o = mt_odd_bytes(w);
    sum = __smlad(o, 0x00010001, __smlad(e, 0x00010001, sum));
    q = __smlald(o, o, __smlald(e, e, q));
  }
  for (; j < n; ++j) sum += x[j], q += (int32_t)x[j] * x[j];
  *sq = (uint64_t)q;
  return sum;
}
#else
#define MT_DEFINE_LN_SUMS(NAME, XT)                                                                        \
  static int32_t NAME(const XT *x, int n, uint64_t *sq) {                                                  \
    int32_t sum = 0;                                                                                       \
    int j;                                                                                                 \
    for (j = 0; j < n; ++j) sum += x[j];                                                                   \
    *sq = 0;                                                                                               \
    return sum;                                                                                            \
  }
MT_DEFINE_LN_SUMS(mt_ln_sums_s8, int8_t)
MT_DEFINE_LN_SUMS(mt_ln_sums_s16, int16_t)
#endif

/* sum (x 2^G - mean)^2 = 2^2G sum x^2 - 2^(G+1) mean sum x + n mean^2 from sq = sum x^2: each
 * term below 2^62 (|x 2^G| <= 2^23, |mean| <= 2^23, |sum| <= 2^30, n <= 2^15) and the result
 * in [0, 2^63), so the uint64 arithmetic (modulo 2^64) gives the exact integer. */
static uint64_t mt_ln_ssq_of_sums(uint64_t sq, int32_t sum, int32_t mean, int n, int G) {
  return (sq << (2 * G)) - ((uint64_t)((int64_t)mean * sum) << (G + 1)) +
         (uint64_t)n * (uint64_t)((int64_t)mean * mean);
}

/* A row: its sums (SUMS: mt_ln_sums_*), mean, 1/sqrt(var + eps), then its outputs by the target's
 * variant (ROW_DSP: mt_ln_row_dsp_*) or mt_ln_out, saturated by OUT (mt_out_*); G extra fraction
 * bits (above). */
#define MT_DEFINE_LAYERNORM(NAME, XT, YT, G, SUMS, ROW_DSP, OUT)                                            \
  void NAME(const XT *x, YT *y, int rows, int n, uint32_t eps_q, int eps_frac, const int32_t *g,            \
            int g_shift, const int32_t *b, int b_shift, int32_t y_zero) {                                   \
    mt_ln_ctx c;                                                                                            \
    int row, j;                                                                                             \
    if (n <= 0) return;                                                                                     \
    mt_ln_init(&c, n, G, eps_q, eps_frac);                                                                  \
    for (row = 0; row < rows; ++row) {                                                                      \
      const XT *xr = x + row * n;                                                                           \
      YT *yr = y + row * n;                                                                                 \
      uint64_t sq, ssq = 0;                                                                                 \
      const int32_t sum = SUMS(xr, n, &sq), mean = mt_ln_mean(&c, sum);                                     \
      uint32_t r;                                                                                           \
      int er;                                                                                               \
      if (MT_DSP) /* the same integer from the one pass's sums */                                           \
        ssq = mt_ln_ssq_of_sums(sq, sum, mean, n, G);                                                       \
      else                                                                                                  \
        for (j = 0; j < n; ++j) {                                                                           \
          const int32_t d = (int32_t)xr[j] * (1 << (G)) - mean; /* |d| <= 2^24 */                          \
          ssq += (uint64_t)((int64_t)d * d);                                                                \
        }                                                                                                   \
      mt_ln_rsqrt(&c, ssq, &r, &er);                                                                        \
      if (ROW_DSP(xr, yr, n, mean, r, er, g, g_shift, b, g_shift - b_shift, y_zero)) continue;                 \
      for (j = 0; j < n; ++j) {                                                                             \
        const int32_t d = (int32_t)xr[j] * (1 << (G)) - mean;                                               \
        yr[j] = OUT(mt_ln_out(d, r, er, g[j], g_shift, b[j], g_shift - b_shift), y_zero);                 \
      }                                                                                                     \
    }                                                                                                       \
  }
MT_DEFINE_LAYERNORM(mt_layernorm_s8_s8, int8_t, int8_t, 16, mt_ln_sums_s8, mt_ln_row_dsp_s8_s8, mt_out_s8)
MT_DEFINE_LAYERNORM(mt_layernorm_s8_s16, int8_t, int16_t, 16, mt_ln_sums_s8, mt_ln_row_dsp_s8_s16, mt_out_s16)
MT_DEFINE_LAYERNORM(mt_layernorm_s16_s8, int16_t, int8_t, 8, mt_ln_sums_s16, mt_ln_row_dsp_s16_s8, mt_out_s8)
MT_DEFINE_LAYERNORM(mt_layernorm_s16_s16, int16_t, int16_t, 8, mt_ln_sums_s16, mt_ln_row_dsp_s16_s16,
                    mt_out_s16)

#if MT_F32
/* ==================================================================================== */
/* Float32 (training in float): mt_layernorm_f32 and its backward                      */
/* ==================================================================================== */

/* Per row: mean = (x_0 + x_1 + ..) / n, var = ((x_0 - mean)^2 + ..) / n (biased, two passes),
 * rstd = mt_rsqrtf(var + eps), y_j = ((x_j - mean) rstd) g_j + b_j. */
void mt_layernorm_f32(const float *x, const float *g, const float *b, float *y, float *stats, int rows, int n,
                      float eps) {
  int r, j;
  if (n <= 0) return;
  for (r = 0; r < rows; ++r) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    const float mean = mt_sumf(0.0f, xr, 1, n) / (float)n;
    float var = 0.0f, rstd;
    for (j = 0; j < n; ++j) {
      const float d = xr[j] - mean;
      var += d * d;
    }
    rstd = mt_rsqrtf(var / (float)n + eps);
    if (stats) stats[2 * r] = mean, stats[2 * r + 1] = rstd;
    for (j = 0; j < n; ++j) {
      float v = (xr[j] - mean) * rstd;
      if (g) v = v * g[j];
      if (b) v = v + b[j];
      yr[j] = v;
    }
  }
}

/* xhat = (x - mean) rstd from the saved stats; with gdy = g dy (dy when g is NULL),
 * dx_j = rstd ((gdy_j - a) - xhat_j c), a = (sum_k gdy_k) / n, c = (sum_k gdy_k xhat_k) / n
 * (k ascending); dg_j = sum_r dy[r, j] xhat[r, j], db_j = sum_r dy[r, j] (r ascending). */
void mt_layernorm_backward_f32(const float *x, const float *g, const float *stats, const float *dy, float *dx,
                               float *dg, float *db, int rows, int n, int acc) {
  int r, j;
  if (n <= 0) return;
  if (dx)
    for (r = 0; r < rows; ++r) {
      const float *xr = x + r * n, *gr = dy + r * n;
      const float mean = stats[2 * r], rstd = stats[2 * r + 1];
      float sa = 0.0f, sc = 0.0f, a, c;
      for (j = 0; j < n; ++j) {
        const float gdy = g ? g[j] * gr[j] : gr[j];
        sa += gdy;
        sc += gdy * ((xr[j] - mean) * rstd);
      }
      a = sa / (float)n;
      c = sc / (float)n;
      for (j = 0; j < n; ++j) {
        const float gdy = g ? g[j] * gr[j] : gr[j];
        mt_put_f32(dx + r * n + j, rstd * ((gdy - a) - ((xr[j] - mean) * rstd) * c), acc & 1);
      }
    }
  if (dg)
    for (j = 0; j < n; ++j) {
      float s = 0.0f;
      for (r = 0; r < rows; ++r) s += dy[r * n + j] * ((x[r * n + j] - stats[2 * r]) * stats[2 * r + 1]);
      mt_put_f32(dg + j, s, acc & 2);
    }
  if (db)
    for (j = 0; j < n; ++j) mt_put_f32(db + j, mt_sumf(0.0f, dy + j, n, rows), acc & 2);
}

/* Batch norm in eval: the per-channel affine map of the running statistics (mt_kernels.h). */
void mt_batchnorm_f32(const float *x, const float *mean, const float *rstd, const float *g, const float *b, float *y,
                      int n, int c, int inner) {
  int r, k, i;
  for (r = 0; r < n; ++r)
    for (k = 0; k < c; ++k) {
      const long at = ((long)r * c + k) * inner;
      for (i = 0; i < inner; ++i) {
        float v = (x[at + i] - mean[k]) * rstd[k];
        if (g) v = v * g[k];
        if (b) v = v + b[k];
        y[at + i] = v;
      }
    }
}

/* dy/dx = g rstd (the statistics are constants); dg = sum dy xhat, db = sum dy. */
void mt_batchnorm_backward_f32(const float *x, const float *mean, const float *rstd, const float *g, const float *dy,
                               float *dx, float *dg, float *db, int n, int c, int inner, int acc) {
  int r, k, i;
  if (dx)
    for (r = 0; r < n; ++r)
      for (k = 0; k < c; ++k) {
        const long at = ((long)r * c + k) * inner;
        for (i = 0; i < inner; ++i) mt_put_f32(dx + at + i, (g ? g[k] * dy[at + i] : dy[at + i]) * rstd[k], acc & 1);
      }
  for (k = 0; k < c && (dg || db); ++k) {
    float sg = 0.0f, sb = 0.0f;
    for (r = 0; r < n; ++r) {
      const long at = ((long)r * c + k) * inner;
      for (i = 0; i < inner; ++i) {
        sg += dy[at + i] * ((x[at + i] - mean[k]) * rstd[k]);
        sb += dy[at + i];
      }
    }
    if (dg) mt_put_f32(dg + k, sg, acc & 2);
    if (db) mt_put_f32(db + k, sb, acc & 2);
  }
}
#endif

/* ==================================================================================== */
/* RMS norm                                                                              */
/* ==================================================================================== */

/* RMSNorm over the last dim (mt_kernels.h): per row v = 2^8 sum_j x_j^2 + eps_q 2^eps_shift
 * (exact in 64 bits: |x| <= 2^15, n <= 32767), r 2^-e = 1/sqrt(v) (mt_rsqrt_u64), then
 * t_j = round(x_j r 2^-16) (|t| <= 2^30: int32) and y_j = rq(t_j, m_j, s_j + e - 16), the
 * 32-bit requantization (the 64-bit one of x_j r costs four times as many instructions on a
 * Cortex-M4); t keeps at least 15 significant bits for any x_j != 0. */
void mt_rmsnorm_s16(const int16_t *x, int16_t *y, int rows, int n, uint32_t eps_q, int eps_shift,
                    const int32_t *rq) {
  int i, j;
  for (i = 0; i < rows; ++i, x += n, y += n) {
    uint64_t v = 0;
    uint32_t r;
    int e = 0;
    for (j = 0; j < n; ++j) v += (uint64_t)((int32_t)x[j] * (int32_t)x[j]);
    v = (v << 8) + ((uint64_t)eps_q << eps_shift);
    r = mt_rsqrt_u64(v, &e);
    for (j = 0; j < n; ++j) {
      const int32_t t = mt_rshift_s64((int64_t)x[j] * (int64_t)r, 16); /* |x r| <= 2^46 */
      y[j] = mt_sat_s16(mt_rq32(t, rq[2 * j], rq[2 * j + 1] + e - 16));
    }
  }
}
