/* mt_activation.c - the activation functions (the lowering's activation family,
 * src/lower/rules/activation.cpp): a table of 256 entries for int8 inputs (mt_lut_*), and
 * tanh, sigmoid and GELU of int16 inputs from interpolated tables (mt_tanh_*,
 * mt_sigmoid_*, mt_gelu_*). Portable C only. Part of mt_kernels.c. */
#include "mt_internal.h"

void mt_lut_s8_s8(const int8_t *x, int8_t *y, int n, const int8_t *table) {
  int i;
  for (i = 0; i < n; ++i) y[i] = table[(int32_t)x[i] + 128];
}

void mt_lut_s8_s16(const int8_t *x, int16_t *y, int n, const int16_t *table) {
  int i;
  for (i = 0; i < n; ++i) y[i] = table[(int32_t)x[i] + 128];
}

/* ==================================================================================== */
/* Tables of int16 inputs                                                               */
/* ==================================================================================== */

/* g(t * 2^-f) in Q20 (t >= 0) from a Q16 table of g(k/32), k = 0..257, by quadratic
 * (Newton forward) interpolation on the points k, k+1, k+2 with w = the fraction in Q16:
 *   g(k + w) ~= g0 + w d1 - w (1 - w) / 2 d2,  d1 = g1 - g0,  d2 = g2 - 2 g1 + g0,
 * rounded once. Interpolation error <= h^3 max|g'''| / 15.6 (0.27 LSB of Q16 for tanh,
 * 0.05 for Phi) plus the table's rounding. 2^20 (g = 1) from x = 8 on. */
static int32_t mt_lut_q20(const uint16_t *T, uint32_t t, int f) {
  uint32_t idx, w, ww;
  int32_t g0, d1, d2;
  int s = f - 5; /* table position = t * 2^(5 - f): index idx, fraction (t mod 2^s) / 2^s */
  if (s <= 0) {
    if (-s >= 9) return t ? (1 << 20) : (int32_t)T[0] << 4;
    idx = t << -s;
    return idx >= 256u ? (1 << 20) : (int32_t)T[idx] * 16;
  }
  if (s > 16) { /* keep 16 fraction bits of the position */
    t >>= s - 16;
    s = 16;
  }
  idx = t >> s;
  if (idx >= 256u) return 1 << 20;
  w = (t & ((1u << s) - 1u)) << (16 - s); /* fraction, Q16 */
  ww = (w * (65536u - w)) >> 16;          /* w (1 - w), Q16, <= 2^14 */
  g0 = T[idx];
  d1 = (int32_t)T[idx + 1u] - g0;                             /* 0 <= d1 < 2^11 */
  d2 = (int32_t)T[idx + 2u] - 2 * (int32_t)T[idx + 1u] + g0; /* |d2| < 2^6 */
  return g0 * 16 + mt_rshift_s32(2 * d1 * (int32_t)w - d2 * (int32_t)ww, 13);
}

/* tanh(x) as a signed value in Q20 */

/* The table argument of an int16 input: |x| * scale_x in Q20 (= rq(|x|, in_m, in_s)),
 * capped at 2^24 (16: every table saturates from 8 on). */
static uint32_t mt_lut_arg(int32_t x, int32_t in_m, int in_s) {
  const int32_t t = mt_rq32((int32_t)mt_mag32(x), in_m, in_s);
  return t > (1 << 24) ? 1u << 24 : (uint32_t)t;
}

/* tanh(x) in Q20, signed */
static int32_t mt_tanh_q20v(int32_t x, int32_t in_m, int in_s) {
  const int32_t v = mt_lut_q20(mt_tanh_q16, mt_lut_arg(x, in_m, in_s), 20);
  return x < 0 ? -v : v;
}

/* sigmoid(x) = (1 + tanh(x/2)) / 2 in Q21 (= 1 + tanh(x/2) in Q20): the argument read in
 * Q21 is x/2 */
static int32_t mt_sigmoid_q21v(int32_t x, int32_t in_m, int in_s) {
  const int32_t v = mt_lut_q20(mt_tanh_q16, mt_lut_arg(x, in_m, in_s), 21);
  return x < 0 ? (1 << 20) - v : (1 << 20) + v;
}

/* gelu(x) = x Phi(x), Phi(-x) = 1 - Phi(x); Phi rounded to Q16 so that x Phi fits int32
 * (|x| <= 2^15): x Phi in units of x times 2^16 */
static int32_t mt_gelu_v(int32_t x, int32_t in_m, int in_s) {
  int32_t phi = mt_rshift_s32(mt_lut_q20(mt_phi_q16, mt_lut_arg(x, in_m, in_s), 20), 4);
  if (x < 0) phi = 65536 - phi; /* <= 32768 */
  return x * phi;
}

/* y = y_zero + rq(VALUE(x)) (VALUE: mt_tanh_q20v, mt_sigmoid_q21v, mt_gelu_v), saturated by OUT
 * (mt_out_*) */
#define MT_DEFINE_TABLE_ACTIVATION(NAME, YT, VALUE, OUT)                                                \
  void NAME(const int16_t *x, YT *y, int n, int32_t in_m, int in_s, int32_t out_m, int out_s,           \
            int32_t y_zero) {                                                                           \
    int i;                                                                                              \
    for (i = 0; i < n; ++i) y[i] = OUT(mt_rq32(VALUE(x[i], in_m, in_s), out_m, out_s), y_zero);         \
  }
MT_DEFINE_TABLE_ACTIVATION(mt_tanh_s16_s8, int8_t, mt_tanh_q20v, mt_out_s8)
MT_DEFINE_TABLE_ACTIVATION(mt_tanh_s16_s16, int16_t, mt_tanh_q20v, mt_out_s16)
MT_DEFINE_TABLE_ACTIVATION(mt_sigmoid_s16_s8, int8_t, mt_sigmoid_q21v, mt_out_s8)
MT_DEFINE_TABLE_ACTIVATION(mt_sigmoid_s16_s16, int16_t, mt_sigmoid_q21v, mt_out_s16)
MT_DEFINE_TABLE_ACTIVATION(mt_gelu_s16_s8, int8_t, mt_gelu_v, mt_out_s8)
MT_DEFINE_TABLE_ACTIVATION(mt_gelu_s16_s16, int16_t, mt_gelu_v, mt_out_s16)
