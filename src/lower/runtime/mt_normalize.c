/* mt_normalize.c - softmax and layer norm over the last dim (the lowering's normalize
 * family, src/lower/rules/normalize.cpp): mt_softmax_* and mt_layernorm_*, each with its
 * Armv7E-M variants (#if MT_DSP) beside the portable C. Part of mt_kernels.c. */
#include "mt_internal.h"

/* ==================================================================================== */
/* Softmax                                                                               */
/* ==================================================================================== */

/* Base-2 exponent z = d * scale_x * log2(e) in Q16 for a logit difference d >= 0 in x's
 * integers (rq(d, in_m, in_s), saturated: 2^-z = 0 long before). */
static inline uint32_t mt_softmax_z(int32_t d, int32_t in_m, int in_s) { return (uint32_t)mt_rq32(d, in_m, in_s); }

/* int16 inputs: d = max - x_j in [0, 65535], d = 256 dh + dl, and 2^-z(d) = 2^-z(256 dh)
 * 2^-z(dl): h(d) = g(256 dh) g(dl) 2^-32 in Q30, g(v) = 2^-z(v) in Q31 from the Q24 mantissa
 * (0 from 2^-31 on; each exponent rounded to Q16 on its own, so h is within a factor of
 * 2^(2^-16) of the one-exponent exp, as close as that exp's own rounding). The row sum is
 * sum h (64 bits) >> 10 in Q20, each e16 = (h + 2^13) >> 14 in Q16; g(0) = 2^31, so d = 0
 * gives 1 exactly. The factors are looked up in two tables of 256 (2 KB on the stack) filled
 * per call as far as the rows' ranges need them; when the rows left are too few to pay for the
 * entries a row would add (more than 2 per element left), the row writes just its elements'
 * own two entries (the same values). An element then costs two loads and one UMULL where each
 * of its exps took z and the mantissa (twice). */
static uint32_t mt_softmax_g(int32_t v, int32_t in_m, int in_s) {
  /* z = rq(v) for v >= 0: for the usual ratio (m > 0, -30 <= s <= 0) floor((v m + 2^(k-1)) /
   * 2^k), k = 31 + s, saturated (the same integer as mt_rq32) */
  uint32_t z, n, m;
  if (in_m > 0 && in_s >= -30 && in_s <= 0) {
    const uint64_t p = ((uint64_t)(uint32_t)v * (uint32_t)in_m + (1u << (30 + in_s))) >> (31 + in_s);
    z = p > 0x7FFFFFFFu ? 0x7FFFFFFFu : (uint32_t)p;
  } else {
    z = mt_softmax_z(v, in_m, in_s);
  }
  n = z >> 16, m = mt_exp2neg_mant_q24(z & 0xFFFFu);
  return n >= 31 ? 0 : n <= 7 ? m << (7 - n) : mt_rsh_u32(m, (int)n - 7);
}
#define MT_SOFTMAX_TABLE_s16                                                                               \
  uint32_t g_lo[256], g_hi[256];                                                                           \
  int32_t filled_lo = 0, filled_hi = 0;
#define MT_SOFTMAX_FILL_s16(range)                                                                         \
  do {                                                                                                     \
    const int32_t top_lo = (range) < 255 ? (range) : 255, top_hi = (range) >> 8;                           \
    if ((top_lo + 1 - filled_lo > 0 ? top_lo + 1 - filled_lo : 0) +                                        \
            (top_hi + 1 - filled_hi > 0 ? top_hi + 1 - filled_hi : 0) >                                    \
        2 * (int64_t)n * (rows - r)) {                                                                     \
      for (j = 0; j < n; ++j) {                                                                            \
        const int32_t d = mx - xr[j];                                                                      \
        g_lo[d & 255] = mt_softmax_g(d & 255, in_m, in_s);                                                 \
        g_hi[d >> 8] = mt_softmax_g(d & ~255, in_m, in_s);                                                 \
      }                                                                                                    \
      break;                                                                                               \
    }                                                                                                      \
    for (; filled_lo <= top_lo; ++filled_lo) g_lo[filled_lo] = mt_softmax_g(filled_lo, in_m, in_s);       \
    for (; filled_hi <= top_hi; ++filled_hi) g_hi[filled_hi] = mt_softmax_g(256 * filled_hi, in_m, in_s);  \
  } while (0)
/* h from d's two bytes; MT_SOFTMAX_H2_s16: h0, h1 of elements j, j + 1 from their d in the
 * halves of one word (on Armv7E-M one LDR of the two x and SSUB16 from the max in both halves:
 * the two differences without a sign extension each) */
#define MT_SOFTMAX_H_s16(dl, dh) mt_mulhi_u32(g_hi[dh], g_lo[dl])
#if MT_DSP
#define MT_SOFTMAX_H2_s16(j, h0, h1)                                                                       \
  const uint32_t d2_ = (uint32_t)__ssub16((int32_t)((uint32_t)(uint16_t)mx * 0x10001u), mt_ld32(xr + (j))); \
  const uint32_t h0 = MT_SOFTMAX_H_s16(d2_ & 255u, (d2_ >> 8) & 255u);                                     \
  const uint32_t h1 = MT_SOFTMAX_H_s16((d2_ >> 16) & 255u, d2_ >> 24)
#else
#define MT_SOFTMAX_H2_s16(j, h0, h1)                                                                       \
  const int32_t da_ = mx - xr[j], db_ = mx - xr[(j) + 1];                                                  \
  const uint32_t h0 = MT_SOFTMAX_H_s16(da_ & 255, da_ >> 8), h1 = MT_SOFTMAX_H_s16(db_ & 255, db_ >> 8)
#endif
#define MT_SOFTMAX_SUM_s16(sum)                                                                            \
  do {                                                                                                     \
    for (j = 0; j + 2 <= n; j += 2) {                                                                      \
      MT_SOFTMAX_H2_s16(j, h0, h1);                                                                        \
      sum += h0 + h1;                                                                                      \
    }                                                                                                      \
    if (j < n) sum += MT_SOFTMAX_H_s16((mx - xr[j]) & 255, (mx - xr[j]) >> 8);                             \
    sum >>= 10;                                                                                            \
  } while (0)
#define MT_SOFTMAX_Q16_s16(d) ((MT_SOFTMAX_H_s16((d) & 255, (d) >> 8) + (1u << 13)) >> 14)
#define MT_SOFTMAX_P2_s16(Y, j)                                                                            \
  do {                                                                                                     \
    MT_SOFTMAX_H2_s16(j, h0, h1);                                                                          \
    yr[j] = MT_SOFTMAX_Y(Y, (h0 + (1u << 13)) >> 14);                                                      \
    yr[(j) + 1] = MT_SOFTMAX_Y(Y, (h1 + (1u << 13)) >> 14);                                                \
  } while (0)

/* int8 inputs: d = max - x_j has only 256 possible values. Their exps are computed once per
 * call into a table (1 KB on the stack), as far as the rows' ranges need them, then looked
 * up. One word holds both: 16 e16 (<= 2^20, 21 bits; e16 in Q16) and 16 e16 - e20 + 8 in
 * [0, 16] above it (e16 = round(a / 16), e20 = round(a) of the same a, so 16 e16 - e20 is in
 * [-8, 8]): e16 is one bit-field extract, e20 = the low field - the high field + 8; the same
 * bits as mt_exp2neg_q16 and mt_exp2neg_q20. */
static uint32_t mt_softmax_exp_pack(int32_t d, int32_t in_m, int in_s) {
  const uint32_t z = mt_softmax_z(d, in_m, in_s), e20 = mt_exp2neg_q20(z), e16 = mt_exp2neg_q16(z);
  return 16u * e16 | (16u * e16 + 8u - e20) << 21;
}
#define MT_SOFTMAX_TABLE_s8                                                                                \
  uint32_t table[256];                                                                                     \
  int32_t filled = 0;
#define MT_SOFTMAX_FILL_s8(range)                                                                          \
  for (; filled <= (range); ++filled) table[filled] = mt_softmax_exp_pack(filled, in_m, in_s)
#define MT_SOFTMAX_Q20_s8(d) ((table[d] & 0x1FFFFFu) + 8u - (table[d] >> 21))
#define MT_SOFTMAX_Q16_s8(d) ((table[d] & 0x1FFFFFu) >> 4)
/* The row sum in Q20: in 32 bits for n < 4096 (each e20 <= 2^20) */
#define MT_SOFTMAX_SUM_s8(sum)                                                                             \
  do {                                                                                                     \
    if (n < 4096) {                                                                                        \
      uint32_t s32 = 0;                                                                                    \
      for (j = 0; j + 2 <= n; j += 2) s32 += MT_SOFTMAX_Q20_s8(mx - xr[j]) + MT_SOFTMAX_Q20_s8(mx - xr[j + 1]); \
      if (j < n) s32 += MT_SOFTMAX_Q20_s8(mx - xr[j]);                                                     \
      sum = s32;                                                                                           \
    } else {                                                                                               \
      for (j = 0; j < n; ++j) sum += MT_SOFTMAX_Q20_s8(mx - xr[j]);                                        \
    }                                                                                                      \
  } while (0)

/* The max and min of a row (n >= 1). On Armv7E-M four int8 (two int16) at a time (SSUB8 /
 * SSUB16 sets the lanes' GE flags, SEL picks the larger / smaller lanes: one line of assembly
 * each pair, as GCC does not order SEL after the flags by itself). */
#if MT_DSP
static inline int32_t mt_max4_s8(int32_t a, int32_t b) {
  int32_t r;
  __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
  return r;
}
static inline int32_t mt_min4_s8(int32_t a, int32_t b) {
  int32_t r;
  __asm__("ssub8 %0, %1, %2\n\tsel %0, %2, %1" : "=&r"(r) : "r"(a), "r"(b) : "cc");
  return r;
}
#endif
static inline void mt_row_range_s8(const int8_t *x, int n, int32_t *mx, int32_t *mn) {
  int32_t hi = x[0], lo = x[0];
  int j = 1;
#if MT_DSP
  if (n >= 8) {
    int32_t vmax = mt_ld32(x), vmin = vmax;
    int8_t b[8];
    for (j = 4; j + 4 <= n; j += 4) {
      const int32_t w = mt_ld32(x + j);
      vmax = mt_max4_s8(w, vmax);
      vmin = mt_min4_s8(w, vmin);
    }
    __builtin_memcpy(b, &vmax, 4);
    __builtin_memcpy(b + 4, &vmin, 4);
    hi = b[0], lo = b[4];
    for (int k = 1; k < 4; ++k) {
      if (b[k] > hi) hi = b[k];
      if (b[4 + k] < lo) lo = b[4 + k];
    }
  }
#endif
  for (; j < n; ++j) {
    if (x[j] > hi) hi = x[j];
    if (x[j] < lo) lo = x[j];
  }
  *mx = hi, *mn = lo;
}
#if MT_DSP /* m = max / min(w, m) lanewise, in place (t: SSUB16's differences, unused) */
#define MT_MAX2_S16(w, m, t)                                                                               \
  __asm__("ssub16 %0, %2, %1\n\tsel %1, %2, %1" : "=&r"(t), "+r"(m) : "r"(w) : "cc")
#define MT_MIN2_S16(w, m, t)                                                                               \
  __asm__("ssub16 %0, %2, %1\n\tsel %1, %1, %2" : "=&r"(t), "+r"(m) : "r"(w) : "cc")
#endif
static inline void mt_row_range_s16(const int16_t *x, int n, int32_t *mx, int32_t *mn) {
  int32_t hi = x[0], lo = x[0];
  int j = 1;
#if MT_DSP /* two int16 at a time (SSUB16, SEL) */
  if (n >= 4) {
    int32_t vmax = mt_ld32(x), vmin = vmax;
    for (j = 2; j + 2 <= n; j += 2) {
      const int32_t w = mt_ld32(x + j);
      int32_t t;
      MT_MAX2_S16(w, vmax, t);
      MT_MIN2_S16(w, vmin, t);
    }
    hi = (int16_t)vmax > vmax >> 16 ? (int16_t)vmax : vmax >> 16;
    lo = (int16_t)vmin < vmin >> 16 ? (int16_t)vmin : vmin >> 16;
  }
#endif
  for (; j < n; ++j) {
    if (x[j] > hi) hi = x[j];
    if (x[j] < lo) lo = x[j];
  }
  *mx = hi, *mn = lo;
}

/* A probability p < 2^15 (the shift is >= 17, e16 y16 < 2^32) plus the zero point, saturated:
 * SSAT on Armv7E-M. */
#if MT_DSP
#define mt_softmax_out_s8(v) ((int8_t)(int32_t)__builtin_arm_ssat((v), 8))
#define mt_softmax_out_s16(v) ((int16_t)(int32_t)__builtin_arm_ssat((v), 16))
#else
#define mt_softmax_out_s8(v) mt_sat_s8(v)
#define mt_softmax_out_s16(v) mt_sat_s16(v)
#endif

/* y_j from e_j in Q16: e_j y16 2^-sh is p_j in Q0.15, rounded as ((t >> (s-1)) + 1) >> 1;
 * MT_SOFTMAX_P: y_j, MT_SOFTMAX_P2_*: y_j and y_j+1 */
#define MT_SOFTMAX_Y(Y, e) mt_softmax_out_##Y((int32_t)(((((e) * y16) >> sh) + 1u) >> 1) + y_zero)
#define MT_SOFTMAX_P(X, Y, j) yr[j] = MT_SOFTMAX_Y(Y, MT_SOFTMAX_Q16_##X(mx - xr[j]))
#define MT_SOFTMAX_P2_s8(Y, j) (MT_SOFTMAX_P(s8, Y, j), MT_SOFTMAX_P(s8, Y, (j) + 1))

/* p_j = e_j / sum in Q(out_bits), plus the zero point, saturated: one reciprocal per row of
 * the row sum in Q20 (MT_SOFTMAX_SUM_*). X and Y (s8, s16) select the MT_SOFTMAX_* steps of the
 * input and output types; RANGE: mt_row_range_*. */
#define MT_DEFINE_SOFTMAX(NAME, X, Y, XT, YT, RANGE)                                                       \
  void NAME(const XT *x, YT *y, int rows, int n, int32_t in_m, int in_s, int out_bits, int32_t y_zero) {   \
    MT_SOFTMAX_TABLE_##X                                                                                   \
    int r, j, sh;                                                                                          \
    if (n <= 0) return;                                                                                    \
    for (r = 0; r < rows; ++r) {                                                                           \
      const XT *xr = x + r * n;                                                                            \
      YT *yr = y + r * n;                                                                                  \
      int32_t mx, mn;                                                                                      \
      uint64_t sum = 0;                                                                                    \
      uint32_t y16;                                                                                        \
      RANGE(xr, n, &mx, &mn);                                                                              \
      MT_SOFTMAX_FILL_##X(mx - mn);                                                                        \
      MT_SOFTMAX_SUM_##X(sum); /* the loops take two elements per pass (one end test for both) */        \
      y16 = mt_norm16(sum, &sh);                                                                           \
      if (sh + 15 - out_bits > 32) y16 = 0; /* every p_j rounds to 0 */                                    \
      sh = sh + 15 - out_bits > 32 ? 31 : sh + 14 - out_bits;                                              \
      for (j = 0; j + 2 <= n; j += 2) MT_SOFTMAX_P2_##X(Y, j);                                             \
      if (j < n) MT_SOFTMAX_P(X, Y, j);                                                                    \
    }                                                                                                      \
  }
MT_DEFINE_SOFTMAX(mt_softmax_s8_s8, s8, s8, int8_t, int8_t, mt_row_range_s8)
MT_DEFINE_SOFTMAX(mt_softmax_s8_s16, s8, s16, int8_t, int16_t, mt_row_range_s8)
MT_DEFINE_SOFTMAX(mt_softmax_s16_s8, s16, s8, int16_t, int8_t, mt_row_range_s16)
MT_DEFINE_SOFTMAX(mt_softmax_s16_s16, s16, s16, int16_t, int16_t, mt_row_range_s16)

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
