/* mt_primitives.c - the fixed-point primitives the kernel families share: the requantization
 * mt_rq, the reciprocal mt_recip_u32, the inverse square root mt_rsqrt_u64 and 2^-z
 * (mt_exp2neg_q16) of mt_kernels.h; the per-row normaliser of a sum of exps (mt_norm16:
 * softmax, two-pass attention) and the dot products (mt_dot_*: matmul, attention) of
 * mt_internal.h, with their Armv7E-M variants (#if MT_DSP); and, #if MT_F32, the float math of
 * the float32 kernels (mt_expf, mt_logf, mt_tanhf, mt_phif, mt_rsqrtf). Part of mt_kernels.c. */
#include "mt_internal.h"

/* ==================================================================================== */
/* Requantization                                                                        */
/* ==================================================================================== */

/* round(x m 2^-(31 + s)) for any int64 x: the product |x| |m| = hi 2^32 + lo is exact in
 * two 64-bit parts (|x| = xh 2^32 + xl, hi = xh |m| <= 2^62, lo = xl |m| < 2^63) and
 * rounded once. Never inlined: in the unity file (mt_kernels.c) GCC's choice to inline it
 * otherwise depends on how many callers every other family gives its helpers, and a new family
 * would change the code, size and instruction counts of the ones already there. */
__attribute__((noinline)) int32_t mt_rq(int64_t x, int32_t m, int s) {
  uint64_t a, mu, hi, lo, q;
  int neg, sh;
  if (m == 0) return mt_rshift_s64(x, s);
  if (x >= INT32_MIN && x <= INT32_MAX) return mt_rq32((int32_t)x, m, s);
  a = mt_abs_u64(x);
  mu = m < 0 ? (uint64_t)(0u - (uint32_t)m) : (uint64_t)(uint32_t)m;
  neg = (x < 0) != (m < 0);
  hi = (a >> 32) * mu;
  lo = (a & 0xFFFFFFFFu) * mu;
  sh = 31 + s;
  if (sh >= 32) { /* floor((hi 2^32 + lo + 2^(sh-1)) / 2^sh) */
    const int k = sh - 32;
    q = hi + (lo >> 32); /* < 2^62 + 2^31 */
    if (k == 0) return mt_signed_sat32(neg, q + (((lo & 0xFFFFFFFFu) + 0x80000000u) >> 32));
    if (k >= 63) return 0;
    return mt_signed_sat32(neg, (q + ((uint64_t)1 << (k - 1))) >> k); /* the low 32 bits cannot carry */
  }
  if (sh <= 0 || hi >= ((uint64_t)1 << (sh - 1))) return mt_signed_sat32(neg, 0xFFFFFFFFu); /* >= 2^31 */
  return mt_signed_sat32(neg, (hi << (32 - sh)) + mt_rshift_u64(lo, sh));
}

/* ==================================================================================== */
/* Reciprocal, inverse square root, 2^-z                                                 */
/* ==================================================================================== */

uint32_t mt_recip_u32(uint32_t d, int *e) {
  uint32_t m, y;
  int b, i;
  if (d == 0) {
    *e = 0;
    return 0xFFFFFFFFu;
  }
  b = mt_msb32(d);
  *e = 31 + b;
  if ((d & (d - 1u)) == 0) return 0x80000000u; /* 1/2^b = 2^31 * 2^-(31+b), exact */
  /* d = mu * 2^(b+1), m = mu in Q32, mu in (1/2, 1). Newton on y = 1/mu in Q30:
   * y0 = 48/17 - 32/17 mu (error <= 1/17), y <- y (2 - mu y); three steps reach the
   * precision of the 32-bit arithmetic. */
  m = d << (31 - b);
  y = 3031741621u - (uint32_t)(((uint64_t)m * 2021161081u) >> 32);
  for (i = 0; i < 3; ++i) {
    uint32_t t = (uint32_t)(((uint64_t)m * y) >> 32); /* mu * y, Q30, <= 2^30 */
    y = (uint32_t)(((uint64_t)y * (0x80000000u - t)) >> 30);
  }
  /* Newton approaches 1/mu from below and the truncations push lower still: a small
   * constant makes the result an over-estimate by at most 6 units of 2^-30 (so quotients
   * built on it round ties correctly); 1/mu < 2 keeps it within 2^31. */
  y += 4u;
  return y > 0x80000000u ? 0x80000000u : y;
}

uint32_t mt_rsqrt_u64(uint64_t v, int *e) {
  uint32_t m, y;
  int b, k, i;
  if (v == 0) {
    *e = 0;
    return 0;
  }
  b = mt_msb64(v);
  k = (b + 2) >> 1; /* v = mu * 4^k, mu in [1/4, 1) */
  m = 2 * k >= 32 ? (uint32_t)(v >> (2 * k - 32)) : (uint32_t)(v << (32 - 2 * k)); /* Q32 */
  /* Newton on y = 1/sqrt(mu) in Q30 from a 12-entry seed (error < 6%):
   * y <- y (3 - mu y^2) / 2, four steps. */
  y = mt_rsqrt_seed[(m >> 28) - 4u];
  for (i = 0; i < 4; ++i) {
    uint64_t y2 = ((uint64_t)y * y) >> 30;       /* y^2, Q30, <= 2^32 */
    uint64_t my2 = ((uint64_t)m * y2) >> 32;     /* mu y^2, Q30 */
    uint64_t t = ((uint64_t)3 << 30) - my2;      /* 3 - mu y^2, Q30 */
    y = (uint32_t)(((uint64_t)y * t) >> 31);     /* y t / 2 */
  }
  *e = 30 + k;
  y += 1u; /* Newton plus truncation end below 1/sqrt(mu): now within [0, 3] units */
  return y > 0x80000000u ? 0x80000000u : y;
}

/* 2^-(r / 2^16) for a fraction r < 2^16, in Q24: (2^23, 2^24]. With r = (i + w) / 64, w in
 * Q10: g(i + w) ~= g0 + w d1 - w (1 - w) / 2 d2 from the table of g(k) = 2^(-k/64)
 * (quadratic interpolation, error < 0.01 LSB of Q16), d1 = g1 - g0 and d2 = g2 + g0 - 2 g1
 * stored beside g0 per segment (mt_exp2_seg: g0, -2 d1, d2). g decreases and is convex
 * (d1 < 0, d2 > 0 for every entry), so the correction x = 2 d1 w - d2 w (1 - w) is never
 * positive and its rounding shift (ties away from zero) is -floor((|x| + 2^10) / 2^11):
 * multiply-adds on magnitudes, no sign test. */
/* Out of line, so that mt_exp2neg_q16 stays a small wrapper its callers inline (Cortex-M0) */
static __attribute__((noinline)) uint32_t mt_exp2neg_mant_q24(uint32_t r) {
  const uint32_t w = r & 1023u, ww = (w * (1024u - w)) >> 10; /* w (1 - w), Q10, <= 256 */
  const uint32_t *seg = mt_exp2_seg + 3u * (r >> 10);
  return seg[0] - ((seg[1] * w + seg[2] * ww + 1024u) >> 11); /* -2 d1 < 2^19, 0 < d2 < 2^11 */
}

/* 2^-z = 2^-n * 2^-(r/2^16), one rounding shift of the Q24 mantissa */
uint32_t mt_exp2neg_q16(uint32_t z) {
  const uint32_t n = z >> 16;
  return n >= 17 ? 0 : mt_rsh_u32(mt_exp2neg_mant_q24(z & 0xFFFFu), 8 + (int)n);
}

/* The same in Q20, for row sums: small terms then add up without a rounding bias. */
static uint32_t mt_exp2neg_q20(uint32_t z) {
  const uint32_t n = z >> 16;
  return n >= 21 ? 0 : mt_rsh_u32(mt_exp2neg_mant_q24(z & 0xFFFFu), 4 + (int)n);
}


/* Per-row normaliser from the row sum in Q20 (sum >= 2^20, the max contributes 1):
 * p_j * 2^15 = e_j * y16 >> shift for e_j in Q16, with y16 <= 65535 so e_j * y16 < 2^32.
 * One reciprocal per row. */
static uint32_t mt_norm16(uint64_t sum_q20, int *shift) {
  int e, k = mt_msb64(sum_q20) - 31;
  uint32_t y, y16;
  if (k < 0) k = 0;
  y = mt_recip_u32((uint32_t)(sum_q20 >> k), &e); /* 1/sum = y * 2^-(e + k) (truncated sum) */
  y16 = (y >> 15) + ((y >> 14) & 1u);
  if (y16 > 65535u) y16 = 65535u;
  *shift = e + k - 34; /* e_j 2^-16 / (sum 2^-20) * 2^15 = e_j * y * 2^(19 - e - k); >= 17 */
  return y16;
}

/* ==================================================================================== */
/* Dot products                                                                         */
/* ==================================================================================== */

/* Dot products with b read at a stride (1 for a weight row, N for a matmul column).
 * int8 x int8 products are summed in int32 in chunks of 131071 (131071 * 2^14 < 2^31), each
 * chunk then added to an int64; int16 x int16 (|a b| <= 2^30) sums in int64 throughout
 * (SMLAL on Cortex-M4). */
static int64_t mt_dot_ref_s8_s8(const int8_t *a, const int8_t *b, int bstride, int n) {
  int64_t acc = 0;
  int i = 0;
  while (i < n) {
    const int end = n - i > 131071 ? i + 131071 : n;
    int32_t s = 0;
    for (; i < end; ++i) s += (int32_t)a[i] * (int32_t)b[i * bstride];
    acc += s;
  }
  return acc;
}

static int64_t mt_dot_ref_s16_s16(const int16_t *a, const int16_t *b, int bstride, int n) {
  int64_t acc = 0;
  int i;
  for (i = 0; i < n; ++i) acc += (int32_t)a[i] * (int32_t)b[i * bstride];
  return acc;
}

#if MT_DSP
/* sum a_i b_i over 4 int8 pairs, added to acc: 2 SMLAD (4 MACs), 4 SXTB16 */
static inline int32_t mt_dot4_s8(int32_t a, int32_t b, int32_t acc) {
  acc = __smlad(__sxtb16(a), __sxtb16(b), acc);
  return __smlad(mt_odd_bytes(a), mt_odd_bytes(b), acc);
}

/* int8 x int8, unit stride: exact in int32 for n <= 131071 (|a b| <= 2^14), as the reference */
static inline int32_t mt_dot_s8_s8_dsp(const int8_t *a, const int8_t *b, int n) {
  int32_t acc = 0;
  int i = 0;
  for (; i + 4 <= n; i += 4) acc = mt_dot4_s8(mt_ld32(a + i), mt_ld32(b + i), acc);
  for (; i < n; ++i) acc += (int32_t)a[i] * (int32_t)b[i];
  return acc;
}

/* int16 x int16, unit stride: SMLALD, two MACs into the exact 64-bit sum per instruction */
static int64_t mt_dot_s16_s16_dsp(const int16_t *a, const int16_t *b, int n) {
  int64_t acc = 0;
  int i = 0;
  for (; i + 2 <= n; i += 2) acc = __smlald(mt_ld32(a + i), mt_ld32(b + i), acc);
  if (i < n) acc += (int32_t)a[i] * (int32_t)b[i];
  return acc;
}
#endif

/* The dot products the kernels call: the DSP variant for unit strides where it applies. */
static int64_t mt_dot_s8_s8(const int8_t *a, const int8_t *b, int bstride, int n) {
#if MT_DSP
  if (bstride == 1 && n <= 131071) return mt_dot_s8_s8_dsp(a, b, n);
#endif
  return mt_dot_ref_s8_s8(a, b, bstride, n);
}

static int64_t mt_dot_s16_s16(const int16_t *a, const int16_t *b, int bstride, int n) {
#if MT_DSP
  if (bstride == 1) return mt_dot_s16_s16_dsp(a, b, n);
#endif
  return mt_dot_ref_s16_s16(a, b, bstride, n);
}

#if MT_F32
/* ==================================================================================== */
/* Float32 math: float + - * /, comparisons and bit casts only (no libm, no double)     */
/* ==================================================================================== */
/* The polynomials' coefficients: tools/mcu/fit_f32_polys.py (fits in relative error); the
 * others are Taylor coefficients rounded to float. Accuracy, measured over sweeps by
 * tests/lower_kernels/test_primitives.cpp: mt_kernels.h. */

static float mt_dotf(float s, const float *a, int as, const float *b, int bs, int n) {
  int i;
  for (i = 0; i < n; ++i) s += a[i * as] * b[i * bs];
  return s;
}

static float mt_sumf(float s, const float *a, int as, int n) {
  int i;
  for (i = 0; i < n; ++i) s += a[i * as];
  return s;
}

/* c[0] + t (c[1] + t (c[2] + ...)) for the n coefficients c (Horner, from the highest) */
static float mt_poly_f32(const float *c, int n, float t) {
  float r = c[n - 1];
  int i;
  for (i = n - 2; i >= 0; --i) r = r * t + c[i];
  return r;
}

/* x 2^k for 1/2 <= |x| < 2 and |k| <= 160: two exact powers of two 2^k1 2^k2 (k1 = k / 2,
 * both within [-80, 80]), the first product exact, the second rounded once (to a subnormal,
 * 0 or infinity where x 2^k is out of range). */
static float mt_scale2_f32(float x, int k) {
  const int k1 = k / 2, k2 = k - k1;
  return x * mt_f32_of_bits((uint32_t)(k1 + 127) << 23) * mt_f32_of_bits((uint32_t)(k2 + 127) << 23);
}

#define MT_LOG2E_F32 1.44269502f        /* log2(e) */
#define MT_LN2_HI_F32 0.693145752f      /* ln 2 to 15 bits (0x3F317200): k ln2_hi exact for |k| < 256 */
#define MT_LN2_LO_F32 1.42860677e-06f   /* ln 2 - MT_LN2_HI_F32 */

/* exp(x) = 2^k exp(r): k = round(x / ln 2), r = x - k ln 2 in two parts (Cody and Waite; the
 * first product exact), |r| <= 0.347; exp(r) = 1 + r + r^2 (1/2 + r/6 + .. + r^5/5040)
 * (Taylor to degree 7: truncation below 5.3e-9 relative); 2^k by mt_scale2_f32. */
float mt_expf(float x) {
  float t, r, p;
  int k;
  if (x != x) return x;                                            /* NaN */
  if (x > 100.0f) return mt_f32_of_bits(MT_F32_INF_BITS);          /* beyond 88.73: infinity */
  if (x < -110.0f) return 0.0f;                                    /* below -103.98: 0 */
  t = x * MT_LOG2E_F32;
  k = (int)(t < 0.0f ? t - 0.5f : t + 0.5f);                       /* nearest, ties away */
  r = (x - (float)k * MT_LN2_HI_F32) - (float)k * MT_LN2_LO_F32;
  p = r * r *
      (0.5f + r * (0.166666672f + r * (0.0416666679f + r * (0.00833333377f + r * (0.00138888892f +
                                                                                 r * 0.000198412701f)))));
  return mt_scale2_f32(1.0f + (r + p), k);
}

#define MT_LN2_HI9_F32 0.693359375f     /* ln 2 to 9 bits (355/512): e ln2_hi exact for |e| < 2^15 */
#define MT_LN2_LO9_F32 -0.000212194442f /* ln 2 - MT_LN2_HI9_F32 */

/* log(x) = e ln 2 + log(1 + f) for x = 2^e (1 + f), sqrt(1/2) <= 1 + f < sqrt(2); with
 * s = f / (2 + f), log(1 + f) = 2 atanh(s) = 2 s + s R, R = 2 s^2/3 + 2 s^4/5 + .. + 2 s^8/9
 * (|s| <= 0.1716: truncation below 2e-9), and 2 s = f - s f, so log(1 + f) = f - s (f - R)
 * (the small correction last). x = 0: -infinity; x < 0 or NaN: NaN; subnormals scaled first. */
float mt_logf(float x) {
  uint32_t u = mt_f32_bits(x);
  int e = 0;
  float f, s, z, R, l;
  if (!(x > 0.0f)) return mt_f32_of_bits(x == 0.0f ? 0xFF800000u : MT_F32_NAN_BITS);
  if (u >= MT_F32_INF_BITS) return x;                              /* +infinity */
  if (u < 0x00800000u) {                                           /* subnormal: x 2^23 */
    u = mt_f32_bits(x * 8388608.0f);
    e = -23;
  }
  e += (int)(u >> 23) - 127;
  u = (u & 0x007FFFFFu) | 0x3F800000u;                             /* 1 + f in [1, 2) */
  if (u > 0x3FB504F3u) {                                           /* above sqrt(2): (1 + f) / 2 */
    u -= 0x00800000u;
    ++e;
  }
  f = mt_f32_of_bits(u) - 1.0f;                                    /* exact */
  s = f / (2.0f + f);
  z = s * s;
  R = z * (0.666666687f + z * (0.400000006f + z * (0.285714298f + z * 0.222222224f)));
  l = f - s * (f - R);
  return (float)e * MT_LN2_HI9_F32 + (l + (float)e * MT_LN2_LO9_F32);
}

/* FITS BEGIN (tools/mcu/fit_f32_polys.py) */
/* tanh(x) = x + x^3 Q(x^2), |x| < 0.625: Q; fit within 5.0e-08 (relative) */
static const float mt_tanh_poly[6] = {-0.333333343f, 0.13333492f, -0.053997919f, 0.0220418368f, -0.00912958197f, 0.00308559369f};
/* Phi(x) = 1/2 + x P(x^2), |x| < 1/sqrt(2): P; fit within 2.8e-08 (relative) */
static const float mt_phi_poly[6] = {0.398942292f, -0.0664914921f, 0.00999111123f, -0.00128460873f, 0.000335841818f, -0.000184136603f};
/* erfcx(a / sqrt 2) on [0.7071, 2.8284] in t - t0, t = 1 / (1 + a / 2); fit within 2.7e-08 (relative) */
static const float mt_phi_tail1[8] = {0.417192936f, 1.11297131f, 0.703193545f, -0.115733176f, -0.247760862f, 0.151810169f, 0.0483834967f, -0.203596234f};
#define MT_PHI_TAIL1_T0 0.576504827f
/* erfcx(a / sqrt 2) on [2.8284, 14.5000] in t - t0, t = 1 / (1 + a / 2); fit within 3.6e-08 (relative) */
static const float mt_phi_tail2[8] = {0.141395628f, 0.679575861f, 0.642543435f, 0.245162711f, -0.230664298f, -0.237976223f, 0.214678556f, 0.320468158f};
#define MT_PHI_TAIL2_T0 0.267712831f
/* FITS END */

/* tanh(x): x + x^3 Q(x^2) for |x| < 0.625, else sign(x) (1 - 2 / (exp(2|x|) + 1)), 1 from
 * |x| > 10 (below 2^-25 from 1 already at 9.1) */
float mt_tanhf(float x) {
  const float a = x < 0.0f ? -x : x;
  float r;
  if (a < 0.625f) {
    const float x2 = x * x;
    return x + x * x2 * mt_poly_f32(mt_tanh_poly, 6, x2);
  }
  r = a > 10.0f ? 1.0f : 1.0f - 2.0f / (mt_expf(a + a) + 1.0f);
  return x < 0.0f ? -r : r;
}

/* exp(-a^2 / 2) for a >= 0 without the rounding of a^2: a = hi + lo with hi a's leading 12
 * bits (hi^2 exact), a^2 = hi^2 + lo (a + hi), so exp(-a^2/2) = exp(-hi^2/2) exp(-lo (a + hi)/2),
 * the second argument below 0.1 (its rounding costs 6e-9 relative). 0 from a >= 15 (the
 * result is below half the least subnormal from 14.5 on). */
static float mt_exp_neg_half_sq(float a) {
  float hi, lo;
  if (!(a < 15.0f)) return a != a ? a : 0.0f;
  hi = mt_f32_of_bits(mt_f32_bits(a) & 0xFFFFF000u);
  lo = a - hi;
  return mt_expf(-0.5f * (hi * hi)) * mt_expf(-0.5f * (lo * (a + hi)));
}

/* Phi(x) = (1 + erf(x / sqrt 2)) / 2, written in x (no rounding of x / sqrt 2):
 * |x| < 1/sqrt(2): 1/2 + x P(x^2); else, a = |x|, the tail Phi(-a) = exp(-a^2/2) G(a) / 2 with
 * G(a) = erfc(a / sqrt 2) exp(a^2 / 2) from a polynomial in t = 1 / (1 + a/2) on [0.707, 2.83)
 * and on [2.83, 15) (0 beyond), Phi(x) = tail for x < 0, 1 - tail for x > 0 (the tail keeps
 * its relative accuracy down to the subnormals). pdf: exp(-x^2/2) / sqrt(2 pi). */
static float mt_phi_pdf(float x, float *pdf) {
  const float a = x < 0.0f ? -x : x;
  const float e = mt_exp_neg_half_sq(a);
  float t, g;
  if (pdf) *pdf = e * 0.398942292f;
  if (a < 0.707106769f) {
    const float x2 = x * x;
    return 0.5f + x * mt_poly_f32(mt_phi_poly, 6, x2);
  }
  t = 1.0f / (1.0f + 0.5f * a);
  g = a < 2.82842708f ? mt_poly_f32(mt_phi_tail1, 8, t - MT_PHI_TAIL1_T0) : mt_poly_f32(mt_phi_tail2, 8, t - MT_PHI_TAIL2_T0);
  g = 0.5f * (e * g);
  return x < 0.0f ? g : 1.0f - g;
}

float mt_phif(float x) { return mt_phi_pdf(x, 0); }

/* 1/sqrt(x): the classic bit-trick estimate (0x5F3759DF - bits/2, within 3.5%), then three
 * Newton steps y += y (1/2 - (x/2) y^2) (the correction formed last, so the steps do not
 * round 3/2 - (x/2) y^2 to the ulp of 3/2); subnormals scaled by 2^24 first. x <= 0, NaN and
 * +infinity give 0 (mt_layernorm_f32: a constant row with eps = 0 normalises to 0, not NaN). */
float mt_rsqrtf(float x) {
  float y, h, scale = 1.0f;
  int i;
  if (!(x > 0.0f) || mt_f32_bits(x) >= MT_F32_INF_BITS) return 0.0f;
  if (x < 1.17549435e-38f) { /* subnormal: 1/sqrt(x 2^24) 2^12 */
    x *= 16777216.0f;
    scale = 4096.0f;
  }
  y = mt_f32_of_bits(0x5F3759DFu - (mt_f32_bits(x) >> 1));
  h = 0.5f * x;
  for (i = 0; i < 3; ++i) y = y + y * (0.5f - h * y * y);
  return y * scale;
}
#endif
