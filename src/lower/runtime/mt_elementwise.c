/* mt_elementwise.c - the elementwise kernels (the lowering's elementwise family,
 * src/lower/rules/elementwise.cpp): the sum of two scaled tensors mt_add_* (with the
 * Armv7E-M variant of the adds with an int16 operand, #if MT_DSP), the product mt_mul_*, the
 * requantization mt_requant_* and the row division mt_div_rows_*. Part of mt_kernels.c. */
#include "mt_internal.h"

#if MT_DSP
/* The int64 adds without broadcast for a shift s in [18, 31] (Armv7E-M): round half away
 * from zero of x = a ma + b mb + c is floor((A + [A >= 0]) 2^-s) with A = x + 2^(s-1) - 1
 * (for x >= 0 both are floor((x + 2^(s-1)) 2^-s); for x < 0 floor((x - 1 + 2^(s-1)) 2^-s),
 * which is floor(A 2^-s) when A < 0 and 0, as floor((A + 1) 2^-s), when A >= 0). A is two
 * SMLAL from the constant c + 2^(s-1) - 1, [A >= 0] is its inverted sign bit added with
 * carry, and as |x| < 2^48 the result is within 2^30: the low word of the 64-bit floor shift
 * is (lo >> s) | (hi << (32 - s)). The zero point is added and the sum saturated by SSAT
 * (|result + y_zero| < 2^31: the same integer as mt_out). */
#define MT_ADD_DSP_ELEM(YT, BITS, ZERO) /* one element, the loop's pointers advanced */                   \
  do {                                                                                                     \
    const int64_t t = start + (int64_t)*a++ * ma + (int64_t)*b++ * mb; /* A */                             \
    const uint64_t w = (uint64_t)t + (~(uint32_t)((uint64_t)t >> 32) >> 31);                               \
    const uint32_t r = ((uint32_t)w >> shift) | ((uint32_t)(w >> 32) << left);                             \
    *y++ = (YT)__builtin_arm_ssat((int32_t)r + (ZERO), BITS);                                              \
  } while (0)
#define MT_DEFINE_ADD_DSP(NAME, AT, BT, YT, BITS)                                                          \
  static int NAME(const AT *a, const BT *b, int nb, YT *y, int n, int32_t ma, int32_t mb, int32_t c,       \
                  int shift, int32_t y_zero) {                                                             \
    const int64_t start = (int64_t)c + ((int64_t)1 << (shift - 1)) - 1;                                    \
    const int left = 32 - shift;                                                                           \
    const YT *const end = y + n;                                                                           \
    if (nb != n || shift < 18 || shift > 31) return 0;                                                     \
    if (y_zero == 0) /* symmetric outputs (int16 residual streams): no add, and no spill (4 fewer) */      \
      while (y != end) MT_ADD_DSP_ELEM(YT, BITS, 0);                                                       \
    while (y != end) MT_ADD_DSP_ELEM(YT, BITS, y_zero);                                                    \
    return 1;                                                                                              \
  }
MT_DEFINE_ADD_DSP(mt_add_dsp_s8_s16_s8, int8_t, int16_t, int8_t, 8)
MT_DEFINE_ADD_DSP(mt_add_dsp_s8_s16_s16, int8_t, int16_t, int16_t, 16)
MT_DEFINE_ADD_DSP(mt_add_dsp_s16_s8_s8, int16_t, int8_t, int8_t, 8)
MT_DEFINE_ADD_DSP(mt_add_dsp_s16_s8_s16, int16_t, int8_t, int16_t, 16)
MT_DEFINE_ADD_DSP(mt_add_dsp_s16_s16_s8, int16_t, int16_t, int8_t, 8)
MT_DEFINE_ADD_DSP(mt_add_dsp_s16_s16_s16, int16_t, int16_t, int16_t, 16)
#else
#define mt_add_dsp_s8_s16_s8 MT_NO_VARIANT
#define mt_add_dsp_s8_s16_s16 MT_NO_VARIANT
#define mt_add_dsp_s16_s8_s8 MT_NO_VARIANT
#define mt_add_dsp_s16_s8_s16 MT_NO_VARIANT
#define mt_add_dsp_s16_s16_s8 MT_NO_VARIANT
#define mt_add_dsp_s16_s16_s16 MT_NO_VARIANT
#endif

/* a ma + b mb + c in ACC (int32 for two int8 operands, |ma|, |mb| < 2^21; else int64, where
 * |acc| <= 2^15 2^31 2 + 2^31 < 2^48, so a shift in [18, 48] takes mt_rshift_within, the
 * same integer as mt_rshift_s64 in fewer instructions), one rounding shift; b's index wraps
 * with a counter (no modulo), the output saturated by SAT (mt_sat_*) or with its zero point by OUT
 * (mt_out_*). VARIANT is the target's variant (MT_NO_VARIANT: none). */
#define MT_DEFINE_ADD(NAME, AT, BT, YT, ACC, RSHIFT, SAT, OUT, VARIANT)                                    \
  void NAME(const AT *a, const BT *b, int nb, YT *y, int n, int32_t ma, int32_t mb, int32_t c, int shift,  \
            int32_t y_zero) {                                                                              \
    int i, j;                                                                                              \
    if (nb <= 0) return;                                                                                   \
    if (VARIANT(a, b, nb, y, n, ma, mb, c, shift, y_zero)) return;                                         \
    if (sizeof(ACC) == 8 && shift >= 18 && shift <= 48) {                                                  \
      if (nb == n && y_zero == 0) { /* no broadcast, no zero point: mt_out is a saturation */              \
        for (i = 0; i < n; ++i) {                                                                          \
          const int64_t acc = (int64_t)a[i] * ma + (int64_t)b[i] * mb + c;                                 \
          y[i] = SAT(mt_rshift_within(acc, shift, 48));                                                    \
        }                                                                                                  \
        return;                                                                                            \
      }                                                                                                    \
      for (i = 0, j = 0; i < n; ++i) {                                                                     \
        const int64_t acc = (int64_t)a[i] * ma + (int64_t)b[j] * mb + c;                                   \
        y[i] = OUT(mt_rshift_within(acc, shift, 48), y_zero);                                             \
        if (++j == nb) j = 0;                                                                              \
      }                                                                                                    \
      return;                                                                                              \
    }                                                                                                      \
    for (i = 0, j = 0; i < n; ++i) {                                                                       \
      const ACC acc = (ACC)a[i] * (ACC)ma + (ACC)b[j] * (ACC)mb + (ACC)c;                                  \
      y[i] = OUT(RSHIFT(acc, shift), y_zero);                                                              \
      if (++j == nb) j = 0;                                                                                \
    }                                                                                                      \
  }
MT_DEFINE_ADD(mt_add_s8_s8_s8, int8_t, int8_t, int8_t, int32_t, mt_rshift_s32, mt_sat_s8, mt_out_s8,
              MT_NO_VARIANT)
MT_DEFINE_ADD(mt_add_s8_s8_s16, int8_t, int8_t, int16_t, int32_t, mt_rshift_s32, mt_sat_s16, mt_out_s16,
              MT_NO_VARIANT)
MT_DEFINE_ADD(mt_add_s8_s16_s8, int8_t, int16_t, int8_t, int64_t, mt_rshift_s64, mt_sat_s8, mt_out_s8,
              mt_add_dsp_s8_s16_s8)
MT_DEFINE_ADD(mt_add_s8_s16_s16, int8_t, int16_t, int16_t, int64_t, mt_rshift_s64, mt_sat_s16, mt_out_s16,
              mt_add_dsp_s8_s16_s16)
MT_DEFINE_ADD(mt_add_s16_s8_s8, int16_t, int8_t, int8_t, int64_t, mt_rshift_s64, mt_sat_s8, mt_out_s8,
              mt_add_dsp_s16_s8_s8)
MT_DEFINE_ADD(mt_add_s16_s8_s16, int16_t, int8_t, int16_t, int64_t, mt_rshift_s64, mt_sat_s16, mt_out_s16,
              mt_add_dsp_s16_s8_s16)
MT_DEFINE_ADD(mt_add_s16_s16_s8, int16_t, int16_t, int8_t, int64_t, mt_rshift_s64, mt_sat_s8, mt_out_s8,
              mt_add_dsp_s16_s16_s8)
MT_DEFINE_ADD(mt_add_s16_s16_s16, int16_t, int16_t, int16_t, int64_t, mt_rshift_s64, mt_sat_s16, mt_out_s16,
              mt_add_dsp_s16_s16_s16)

#define MT_DEFINE_MUL(NAME, CT, OUT)                                                                     \
  void NAME(const CT *a, const CT *b, int nb, CT *y, int n, int32_t a_zero, int32_t b_zero, int32_t m,   \
            int s, int32_t y_zero) {                                                                     \
    int i, j;                                                                                            \
    if (nb <= 0) return;                                                                                 \
    for (i = 0, j = 0; i < n; ++i) {                                                                     \
      const int64_t p = (int64_t)((int32_t)a[i] - a_zero) * (int64_t)((int32_t)b[j] - b_zero);           \
      y[i] = OUT(mt_rq(p, m, s), y_zero);                                                                \
      if (++j == nb) j = 0;                                                                              \
    }                                                                                                    \
  }
MT_DEFINE_MUL(mt_mul_s8, int8_t, mt_out_s8)
MT_DEFINE_MUL(mt_mul_s16, int16_t, mt_out_s16)

/* Armv7E-M, the usual format (2 <= s <= 31, m != 0: within mt_rq32_common's case, a ratio
 * below 1/4) and |y_zero| <= 2^15: rq32(v, m, s), round(v m / 2^(31+s)) with ties away from
 * zero, is floor((v m + c - [v m < 0]) / 2^(31+s)) for c = 2^(30+s) (|v m| < 2^62: no
 * overflow): the high word of one SMLAL from {-n, 2^(s-2) - n} (n = [v m < 0], as
 * -((v ^ m) >> 31); v = 0 gives 0 either way), shifted right by s - 1 (arithmetic: the floor).
 * Then r + y_zero saturated by SSAT: |r| <= 2^30 and |y_zero| <= 2^15 make it the integer of
 * mt_out_* (its clamp to +-2^16 or +-2^17 before the zero point changes no saturated output).
 * The relu a constant of each loop (MT_REQUANT_LOOP). The same integers as the loop below,
 * without its tests per element (the q, k and v of a decoder's step to int8 caches: 37
 * Cortex-M4 instructions an element before). */
#if MT_DSP
#define MT_REQUANT_LOOP(RELU, YT)                                                                        \
  for (i = 0; i < n; ++i) {                                                                              \
    int32_t v = (int32_t)x[i] - x_zero, lo, hi;                                                          \
    if ((RELU) && v < 0) v = 0;                                                                          \
    lo = (v ^ m) >> 31; /* -[v m < 0] */                                                                 \
    hi = c_hi + lo;                                                                                      \
    __asm__("smlal %0, %1, %2, %3" : "+r"(lo), "+r"(hi) : "r"(v), "r"(m));                               \
    y[i] = (YT)__builtin_arm_ssat((hi >> hs) + y_zero, 8 * sizeof(YT));                                  \
  }
#define MT_REQUANT_USUAL(YT)                                                                             \
  if ((uint32_t)s - 2u < 30u && m != 0 && y_zero >= -32768 && y_zero <= 32768) {                        \
    const int32_t c_hi = (int32_t)1 << (s - 2), hs = s - 1;                                              \
    if (relu)                                                                                            \
      MT_REQUANT_LOOP(1, YT)                                                                             \
    else                                                                                                 \
      MT_REQUANT_LOOP(0, YT)                                                                             \
    return;                                                                                              \
  }
/* Armv7E-M, a widening by a power of two (m = 0 and -14 <= s <= 0: rq32 is v 2^-s, exact, no
 * rounding and, with |x_zero| <= 2^15, |v 2^-s| <= 2^16 2^14 = 2^30, no saturation) and
 * |y_zero| <= 2^15: v 2^-s + y_zero saturated by SSAT is mt_out_*'s integer, as above. The
 * int8 attention's q, k and v widened to int16 (times 2^8). */
#define MT_REQUANT_SHIFT_LOOP(RELU, YT)                                                                  \
  for (i = 0; i < n; ++i) {                                                                              \
    int32_t v = (int32_t)x[i] - x_zero;                                                                  \
    if ((RELU) && v < 0) v = 0;                                                                          \
    y[i] = (YT)__builtin_arm_ssat((int32_t)((uint32_t)v << ls) + y_zero, 8 * sizeof(YT));                \
  }
#define MT_REQUANT_SHIFT(YT)                                                                             \
  if (m == 0 && s <= 0 && s >= -14 && x_zero >= -32768 && x_zero <= 32768 && y_zero >= -32768 &&        \
      y_zero <= 32768) {                                                                                 \
    const int ls = -s;                                                                                   \
    if (relu)                                                                                            \
      MT_REQUANT_SHIFT_LOOP(1, YT)                                                                       \
    else                                                                                                 \
      MT_REQUANT_SHIFT_LOOP(0, YT)                                                                       \
    return;                                                                                              \
  }
#else
#define MT_REQUANT_USUAL(YT) (void)0
#define MT_REQUANT_SHIFT(YT) (void)0
#endif
#define MT_DEFINE_REQUANT(NAME, XT, YT, OUT)                                                             \
  void NAME(const XT *x, YT *y, int n, int32_t x_zero, int32_t m, int s, int32_t y_zero, int relu) {     \
    int i;                                                                                               \
    MT_REQUANT_USUAL(YT);                                                                                \
    MT_REQUANT_SHIFT(YT);                                                                                \
    for (i = 0; i < n; ++i) {                                                                            \
      int32_t v = (int32_t)x[i] - x_zero;                                                                \
      if (relu && v < 0) v = 0;                                                                          \
      y[i] = OUT(mt_rq32(v, m, s), y_zero);                                                              \
    }                                                                                                    \
  }
MT_DEFINE_REQUANT(mt_requant_s8_s8, int8_t, int8_t, mt_out_s8)
MT_DEFINE_REQUANT(mt_requant_s8_s16, int8_t, int16_t, mt_out_s16)
MT_DEFINE_REQUANT(mt_requant_s16_s8, int16_t, int8_t, mt_out_s8)
MT_DEFINE_REQUANT(mt_requant_s16_s16, int16_t, int16_t, mt_out_s16)

/* x / d for one row: 1/|d| = r * 2^-e (mt_recip_u32, never below the true value), then
 * rq(|x| r, m, s + e), the sign of x * d applied to the magnitude. */
typedef struct {
  uint32_t r;
  int sh, neg, zero;
} mt_rowdiv;

static mt_rowdiv mt_rowdiv_init(int32_t d, int s) {
  mt_rowdiv q;
  int e = 0;
  q.zero = d == 0;
  q.neg = d < 0;
  q.r = q.zero ? 0u : mt_recip_u32(mt_mag32(d), &e);
  q.sh = e + s;
  return q;
}

static int32_t mt_rowdiv_apply(const mt_rowdiv *q, int32_t x, int32_t m) { /* |x| <= 2^15 */
  int64_t t;
  if (x == 0) return 0;
  if (q->zero) return x < 0 ? INT32_MIN : INT32_MAX; /* saturates to -max / +max */
  t = (int64_t)((uint64_t)mt_mag32(x) * q->r);      /* < 2^47 */
  return mt_rq((x < 0) != q->neg ? -t : t, m, q->sh);
}

#define MT_DEFINE_DIV_ROWS(NAME, CT, OUT)                                                               \
  void NAME(const CT *x, const CT *d, CT *y, int rows, int n, int32_t m, int s) {                       \
    int r, j;                                                                                           \
    if (n <= 0) return;                                                                                 \
    for (r = 0; r < rows; ++r) {                                                                        \
      const mt_rowdiv q = mt_rowdiv_init(d[r], s);                                                      \
      const CT *xr = x + r * n;                                                                         \
      CT *yr = y + r * n;                                                                               \
      for (j = 0; j < n; ++j) yr[j] = OUT(mt_rowdiv_apply(&q, xr[j], m), 0);                           \
    }                                                                                                   \
  }
MT_DEFINE_DIV_ROWS(mt_div_rows_s8, int8_t, mt_out_s8)
MT_DEFINE_DIV_ROWS(mt_div_rows_s16, int16_t, mt_out_s16)

#if MT_F32
/* ==================================================================================== */
/* Float32 (training in float): mt_add_f32, mt_mul_f32 and their backward               */
/* ==================================================================================== */
/* b's index wraps with a counter (no modulo); the sums over b's repeats take i ascending. */

void mt_add_f32(const float *a, const float *b, float *y, int n, int nb, float ca, float cb) {
  int i, j;
  if (!b) {
    for (i = 0; i < n; ++i) y[i] = ca * a[i] + cb;
    return;
  }
  if (nb <= 0) return;
  for (i = 0, j = 0; i < n; ++i) {
    y[i] = ca * a[i] + cb * b[j];
    if (++j == nb) j = 0;
  }
}

void mt_add_backward_f32(const float *dy, float *da, float *db, int n, int nb, float ca, float cb, int acc) {
  int i, j;
  if (da)
    for (i = 0; i < n; ++i) mt_put_f32(da + i, ca * dy[i], acc & 1);
  if (db && nb > 0)
    for (j = 0; j < nb; ++j) mt_put_f32(db + j, cb * mt_sumf(0.0f, dy + j, nb, (n - j + nb - 1) / nb), acc & 1);
}

void mt_mul_f32(const float *a, const float *b, float *y, int n, int nb) {
  int i, j;
  if (nb <= 0) return;
  for (i = 0, j = 0; i < n; ++i) {
    y[i] = a[i] * b[j];
    if (++j == nb) j = 0;
  }
}

void mt_mul_backward_f32(const float *a, const float *b, const float *dy, float *da, float *db, int n, int nb,
                         int acc) {
  int i, j;
  if (nb <= 0) return;
  if (da)
    for (i = 0, j = 0; i < n; ++i) {
      mt_put_f32(da + i, dy[i] * b[j], acc & 1);
      if (++j == nb) j = 0;
    }
  if (db)
    for (j = 0; j < nb; ++j) mt_put_f32(db + j, mt_dotf(0.0f, dy + j, nb, a + j, nb, (n - j + nb - 1) / nb), acc & 1);
}
#endif
