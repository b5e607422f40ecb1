/* mt_primitives.c - the fixed-point primitives the kernel families share: the requantization
 * mt_rq, the reciprocal mt_recip_u32, the inverse square root mt_rsqrt_u64 and 2^-z
 * (mt_exp2neg_q16) of mt_kernels.h; the per-row normaliser of a sum of exps (mt_norm16:
 * softmax, two-pass attention) and the dot products (mt_dot_*: matmul, attention) of
 * mt_internal.h, with their Armv7E-M variants (#if MT_DSP). Part of mt_kernels.c. */
#include "mt_internal.h"

/* ==================================================================================== */
/* Requantization                                                                        */
/* ==================================================================================== */

/* round(x m 2^-(31 + s)) for any int64 x: the product |x| |m| = hi 2^32 + lo is exact in
 * two 64-bit parts (|x| = xh 2^32 + xl, hi = xh |m| <= 2^62, lo = xl |m| < 2^63) and
 * rounded once. */
int32_t mt_rq(int64_t x, int32_t m, int s) {
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
