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

/* mt_rq32(x, m, s) by the path `kind` chose once per call (1: mt_rq32_common, 2:
 * mt_rq32_large, 0: mt_rq32 itself), so that an elementwise loop inlines it */
static inline __attribute__((always_inline)) int32_t mt_rq32_by(int32_t x, int32_t m, int s, int kind) {
  return kind == 1 ? mt_rq32_common(x, m, s) : kind == 2 ? mt_rq32_large(x, m, s) : mt_rq32(x, m, s);
}
static int mt_rq32_kind(int32_t m, int s) {
#ifndef __ARM_ARCH_6M__ /* as mt_rq32: no 32 x 32 -> 64 multiply on Armv6-M */
  if (m != 0 && s >= 1 && s <= 31) return 1;
  if (m != 0 && s >= -30 && s <= 0) return 2;
#endif
  (void)m, (void)s;
  return 0;
}

/* SwiGLU's product y = silu(g) u = g sigmoid(g) u in the three roundings of the chain
 * mt_sigmoid_s16_s16 (sigmoid in Q0.15: mt_sigmoid_q21v, its argument as mt_lut_arg),
 * mt_mul_s16 (g sigmoid(g)), mt_mul_s16 (times u), in one pass: each product of two int16
 * fits int32 (|g s| <= 2^15 (2^15 - 1)), where mt_rq32 gives mt_rq's integer, inline. */
void mt_swiglu_s16(const int16_t *g, const int16_t *u, int16_t *y, int n, int32_t in_m, int in_s, int32_t sig_m,
                   int sig_s, int32_t act_m, int act_s, int32_t m, int s) {
  const int k_in = mt_rq32_kind(in_m, in_s), k_sig = mt_rq32_kind(sig_m, sig_s);
  const int k_act = mt_rq32_kind(act_m, act_s), k_y = mt_rq32_kind(m, s);
  int i;
  for (i = 0; i < n; ++i) {
    const int32_t gi = g[i];
    const int32_t t = mt_rq32_by((int32_t)mt_mag32(gi), in_m, in_s, k_in);
    const int32_t v = mt_lut_q20(mt_tanh_q16, t > (1 << 24) ? 1u << 24 : (uint32_t)t, 21);
    const int32_t sig = mt_out_s16(mt_rq32_by(gi < 0 ? (1 << 20) - v : (1 << 20) + v, sig_m, sig_s, k_sig), 0);
    const int32_t act = mt_out_s16(mt_rq32_by(gi * sig, act_m, act_s, k_act), 0);
    y[i] = mt_out_s16(mt_rq32_by(act * (int32_t)u[i], m, s, k_y), 0);
  }
}

#if MT_F32
/* ==================================================================================== */
/* Float32 (training in float): relu, clamp, GELU, tanh, sigmoid and their backward     */
/* ==================================================================================== */

void mt_relu_f32(const float *x, float *y, int n) {
  int i;
  for (i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void mt_relu_backward_f32(const float *y, const float *dy, float *dx, int n, int acc) {
  int i;
  for (i = 0; i < n; ++i) mt_put_f32(dx + i, y[i] > 0.0f ? dy[i] : 0.0f, acc & 1);
}

void mt_clamp_f32(const float *x, float *y, int n, float lo, float hi) {
  int i;
  for (i = 0; i < n; ++i) y[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);
}

void mt_clamp_backward_f32(const float *x, const float *dy, float *dx, int n, float lo, float hi, int acc) {
  int i;
  for (i = 0; i < n; ++i) mt_put_f32(dx + i, lo <= x[i] && x[i] <= hi ? dy[i] : 0.0f, acc & 1);
}

/* sigmoid(z), and 1 - sigmoid(z) in *rest when rest is not NULL, each without cancellation:
 * with e = exp(-|z|), the larger is 1 / (1 + e), the smaller e / (1 + e). */
static float mt_sigmoid2_f32(float z, float *rest) {
  const float e = mt_expf(z < 0.0f ? z : -z), big = 1.0f / (1.0f + e), small = e / (1.0f + e);
  if (rest) *rest = z < 0.0f ? big : small;
  return z < 0.0f ? small : big;
}

/* The tanh GELU's x / 2 (1 + tanh(u)) = x sigmoid(2u): 2u = 2 sqrt(2/pi) (x + 0.044715 x^3) */
static float mt_gelu_tanh_arg(float x) { return 1.59576917f * (x + 0.044715f * (x * x * x)); }

void mt_gelu_f32(const float *x, float *y, int n, int tanh_form) {
  int i;
  for (i = 0; i < n; ++i)
    y[i] = x[i] * (tanh_form ? mt_sigmoid2_f32(mt_gelu_tanh_arg(x[i]), 0) : mt_phi_pdf(x[i], 0));
}

/* d/dx x Phi(x) = Phi(x) + x phi(x); d/dx x s(2u) = s + x s (1 - s) 2u' with
 * 2u' = 2 sqrt(2/pi) (1 + 3 0.044715 x^2) (where s (1 - s) is 0 the last term is left out:
 * it would be 0 times a huge 2u') */
void mt_gelu_backward_f32(const float *x, const float *dy, float *dx, int n, int tanh_form, int acc) {
  int i;
  for (i = 0; i < n; ++i) {
    const float xi = x[i];
    float d;
    if (tanh_form) {
      float rest;
      const float s = mt_sigmoid2_f32(mt_gelu_tanh_arg(xi), &rest), q = s * rest;
      d = q == 0.0f ? s : s + (xi * q) * (1.59576917f * (1.0f + 0.134145f * (xi * xi)));
    } else {
      float pdf;
      const float phi = mt_phi_pdf(xi, &pdf);
      d = phi + xi * pdf;
    }
    mt_put_f32(dx + i, dy[i] * d, acc & 1);
  }
}

void mt_tanh_f32(const float *x, float *y, int n) {
  int i;
  for (i = 0; i < n; ++i) y[i] = mt_tanhf(x[i]);
}

/* 1 - y^2 as (1 - y)(1 + y): no cancellation near |y| = 1 */
void mt_tanh_backward_f32(const float *y, const float *dy, float *dx, int n, int acc) {
  int i;
  for (i = 0; i < n; ++i) mt_put_f32(dx + i, dy[i] * ((1.0f - y[i]) * (1.0f + y[i])), acc & 1);
}

void mt_sigmoid_f32(const float *x, float *y, int n) {
  int i;
  for (i = 0; i < n; ++i) y[i] = mt_sigmoid2_f32(x[i], 0);
}

void mt_sigmoid_backward_f32(const float *y, const float *dy, float *dx, int n, int acc) {
  int i;
  for (i = 0; i < n; ++i) mt_put_f32(dx + i, dy[i] * (y[i] * (1.0f - y[i])), acc & 1);
}
#endif
