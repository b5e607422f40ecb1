/* mt_softmax.c - softmax over the last dim (the softmax family, src/lower/rules/softmax.cpp):
 * mt_softmax_*, with its Armv7E-M variants (#if MT_DSP) beside the portable C. Part of
 * mt_kernels.c. */
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
