/* mt_attention.c - scaled dot-product attention (the lowering's attention family,
 * src/lower/rules/attention.cpp): the streaming kernels mt_attention_stream_* (a blocked
 * online softmax) and the two-pass reference mt_attention_twopass_*; their Armv7E-M
 * variants (#if MT_DSP) beside the portable C. Part of mt_kernels.c. */
#include "mt_internal.h"

/* Rounding right shift of an int64 that stays int64 (no saturation), 0 < s <= 63. */
static int64_t mt_rshift_s64_s64(int64_t x, int s) {
  uint64_t m = mt_rshift_u64(mt_abs_u64(x), s);
  return x < 0 ? -(int64_t)m : (int64_t)m; /* m <= 2^62 */
}

/* round(m * alpha / 2^16) for alpha <= 65536, in 32-bit multiplies only; result <= m. */
static uint32_t mt_mulq16_u32(uint32_t m, uint32_t alpha) {
  return (m >> 16) * alpha + (((m & 0xFFFFu) * alpha + 0x8000u) >> 16);
}

static inline int32_t mt_mulq16_s32(int32_t a, uint32_t alpha) {
  uint32_t m = a < 0 ? 0u - (uint32_t)a : (uint32_t)a;
  return mt_signed_sat32(a < 0, mt_mulq16_u32(m, alpha));
}

/* At a new max m' the sums rescaled by alpha = 2^(m - m') (Q16): acc[d] = MULQ16(acc[d], alpha)
 * (mt_attn_rescale_row_*) */
#define MT_ATTN_RESCALE_ROW(acc, alpha, Dv, MULQ16)                         \
  do {                                                                      \
    int d_;                                                                 \
    for (d_ = 0; d_ < (Dv); ++d_) (acc)[d_] = MULQ16((acc)[d_], alpha);     \
  } while (0)

#if MT_DSP
/* The int16 logit rq(score, m, s) for 1 <= s <= 31 and m != 0 (the usual ratio below 1/2),
 * inline (no call in the loop over the keys), the same integer as mt_rq. A score within int32:
 * round(score m / 2^(31+s)), ties away from zero, is floor((score m + c - [score m < 0]) /
 * 2^(31+s)) with c = 2^(30+s): one SMLAL from {c_lo - [< 0], c_hi - borrow} (|score m| < 2^62,
 * no overflow), then its signed high word shifted right by s - 1 (arithmetic, GCC: the floor).
 * lz: c_lo = 0 (s >= 2), a constant where the caller knows it: the start is {-n, c_hi - n}
 * for n = [< 0], one ASR and one ADD. A wider score, on magnitudes: with |score| = h 2^32 + l,
 * floor((|score| |m| + 2^(30+s)) / 2^(31+s)) is the high part of l |m| + 2^(30+s) (< 2^64)
 * added to h |m|, shifted by s - 1, then the sign and saturation of mt_rq. */
typedef struct {
  uint64_t half; /* c = 2^(30+s) */
  uint32_t c_lo, mu;
  int32_t m, c_hi;
  int32_t lo_zero, neg, sh;
  int32_t fast; /* 2 <= s <= 31 (c_lo = 0) and 0 < |m| < 2^31 */
} mt_attn_logit_q;

static mt_attn_logit_q mt_attn_logit_q_init(const int32_t *p) {
  const int32_t m = p[MT_ATTN_LOGIT_M];
  const int s = p[MT_ATTN_LOGIT_S], ok = s >= 1 && s <= 31; /* else the caller takes mt_rq */
  const uint64_t half = ok ? (uint64_t)1 << (30 + s) : 0;
  mt_attn_logit_q q;
  q.half = half;
  q.c_lo = (uint32_t)half;
  q.c_hi = (int32_t)(half >> 32);
  q.lo_zero = q.c_lo == 0;
  q.m = m;
  q.mu = mt_mag32(m);
  q.neg = m < 0;
  q.sh = s - 1;
  q.fast = s >= 2 && s <= 31 && m != 0 && m != INT32_MIN;
  return q;
}

#endif

/* The view of one attention call: its parameter array and keep bits, k = 1 - s >= 0 when an
 * int8 logit can be one SMLAL (m != 0, -30 <= s <= 1, D 2^(14 + k) <= 2^30; else -1), and on
 * Armv7E-M the int16 logits' requantization constants (set up once per call, not per block of
 * keys). */
typedef struct {
  const int32_t *p;
  const uint8_t *keep;
  int logit_k;
#if MT_DSP
  mt_attn_logit_q lq;
#endif
#if MT_RV32
  uint32_t pv_cap; /* the RISC-V int16 P.V: a set of keys whose weights sum to at most pv_cap
                      has sum w v[d] within int32 (mt_attn_setup_rv; else 2^16) */
  uint32_t kmax;   /* max |k| over the call's keys (int16; else 2^15), mt_attn_logits_s16 */
#endif
} mt_attn;

static mt_attn mt_attn_init(const int32_t *p, const uint8_t *keep) {
  const int s = p[MT_ATTN_LOGIT_S];
  mt_attn a;
  a.p = p;
  a.keep = keep;
  a.logit_k = p[MT_ATTN_LOGIT_M] != 0 && s <= 1 && s >= -30 &&
                      ((uint64_t)(uint32_t)p[MT_ATTN_D] << (15 - s)) <= ((uint64_t)1 << 30)
                  ? 1 - s
                  : -1;
#if MT_DSP
  a.lq = mt_attn_logit_q_init(p);
#endif
#if MT_RV32
  a.pv_cap = 65536u;
  a.kmax = 32768u;
#endif
  return a;
}

static int mt_attn_visible(const mt_attn *a, int i, int j) {
  uint32_t bit;
  if ((a->p[MT_ATTN_FLAGS] & MT_ATTN_CAUSAL) && j > i) return 0;
  if (!a->keep) return 1;
  bit = (uint32_t)i * (uint32_t)a->p[MT_ATTN_S] + (uint32_t)j;
  return (a->keep[bit >> 3] >> (bit & 7u)) & 1;
}

static int mt_attn_key_end(const mt_attn *a, int i) {
  const int S = a->p[MT_ATTN_S];
  return (a->p[MT_ATTN_FLAGS] & MT_ATTN_CAUSAL) && i + 1 < S ? i + 1 : S;
}

static int mt_stride(int32_t s, int32_t dflt) { return s > 0 ? s : dflt; }

/* the base-2 logit of a score, Q16 */
static int32_t mt_attn_logit(const mt_attn *a, int64_t score) {
  return mt_rq(score, a->p[MT_ATTN_LOGIT_M], a->p[MT_ATTN_LOGIT_S]);
}

/* The max of t[0 .. n-1], n >= 1, two at a time (LDRD) */
static int32_t mt_attn_max(const int32_t *t, int n) {
  int32_t m = t[0];
  int u;
  for (u = 1; u + 2 <= n; u += 2) {
    const int32_t x = t[u], y = t[u + 1];
    m = x > m ? x : m;
    m = y > m ? y : m;
  }
  if (u < n) m = t[u] > m ? t[u] : m;
  return m;
}

/* The logits of the n keys kj, kj + ks, .. for query row qi, into t[0 .. n-1], and their max
 * (mt_attn_logits_*). int8 scores are int32 (|q k| <= 2^14, D <= 65535), requantized by
 * mt_rq32 (what mt_rq does for an int32); int16 scores are int64 and need mt_rq. */
#if MT_DSP
/* Halfwords (h0, h1) of a and (h2, h3) of b regrouped as (h0, h2) (PKHBT) and (h1, h3)
 * (PKHTB): the values of two keys paired feature by feature in the attention's v rows. One
 * instruction each (no ACLE intrinsic for them in GCC 12, which does not find them in the C
 * either). */
static inline int32_t mt_even_halves(int32_t a, int32_t b) {
  int32_t r;
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
static inline int32_t mt_odd_halves(int32_t a, int32_t b) {
  int32_t r;
  __asm__("pkhtb %0, %2, %1, asr #16" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

/* Two values in [0, 32767] as the halfwords (a, b) of one word: the weights of a pair of keys,
 * one SMLAD / SMLALD operand */
static inline int32_t mt_pack_halves(int32_t a, int32_t b) { return (int32_t)((uint32_t)a | (uint32_t)b << 16); }

/* The high word of hi 2^32 + lo + a b (SMLAL from {hi, lo}), one instruction. */
static inline int32_t mt_smlal_hi(uint32_t lo, int32_t hi, int32_t a, int32_t b) {
  __asm__("smlal %0, %1, %2, %3" : "+r"(lo), "+r"(hi) : "r"(a), "r"(b));
  return hi;
}

/* The int8 logit rq(score, m, s) for a ratio of at least 1/4 (-30 <= s <= 1, m != 0), with
 * k = 1 - s and |score| 2^k < 2^31 (the caller checks D 2^(14 + k) <= 2^30): the product
 * P = (score 2^k) m is score m 2^-(31 + s) in units of 2^-32, |P| < 2^62, so the result fits
 * int32 unsaturated and round-half-away-from-zero is floor((P + 2^31 - [P < 0]) / 2^32): the
 * high word of one SMLAL, the same integer as mt_rq32. */
static inline int32_t mt_attn_logit_smlal(int32_t score, int32_t m, int k) {
  return mt_smlal_hi(0x80000000u - ((uint32_t)(score ^ m) >> 31), 0, score * ((int32_t)1 << k), m);
}

/* The logits of keys kj and k1 (two keys per pass over q): each word of q loaded and split once
 * (SXTB16), 4 SMLAD per 4 features and 2 keys; exact int32 sums as the reference. Inline, so
 * that a constant D unrolls the loop. */
static inline __attribute__((always_inline)) void mt_attn_logit2_s8(const mt_attn *a, const int8_t *qi,
                                                                    const int8_t *k0, const int8_t *k1, int D,
                                                                    int32_t *t) {
  const int32_t m = a->p[MT_ATTN_LOGIT_M];
  const int lk = a->logit_k;
  int32_t s0 = 0, s1 = 0;
  int i = 0;
  if (MT_ATTN_DIM16 && D == 16) { /* the usual head dimension, unrolled */
    MT_MAC2_S8_S8(qi, k0, k1, s0, s1);
    MT_MAC2_S8_S8(qi + 4, k0 + 4, k1 + 4, s0, s1);
    MT_MAC2_S8_S8(qi + 8, k0 + 8, k1 + 8, s0, s1);
    MT_MAC2_S8_S8(qi + 12, k0 + 12, k1 + 12, s0, s1);
    i = 16;
  }
  for (; i + 4 <= D; i += 4) MT_MAC2_S8_S8(qi + i, k0 + i, k1 + i, s0, s1);
  for (; i < D; ++i) {
    s0 += (int32_t)qi[i] * k0[i];
    s1 += (int32_t)qi[i] * k1[i];
  }
  if (lk >= 0) {
    t[0] = mt_attn_logit_smlal(s0, m, lk);
    t[1] = mt_attn_logit_smlal(s1, m, lk);
  } else {
    const int s = a->p[MT_ATTN_LOGIT_S];
    t[0] = mt_rq32(s0, m, s);
    t[1] = mt_rq32(s1, m, s);
  }
}

/* Head dimension 16 with the one-SMLAL logit (lk >= 0): q's four words split by SXTB16 once
 * per block into eight registers, then one key per pass: 4 LDR, 8 SXTB16, 8 SMLAD, the logit
 * and the block's max. */
static inline int32_t mt_attn_logits16_s8(const mt_attn *a, const int8_t *qi, const int8_t *kj, int ks, int n,
                                          int32_t *t) {
  const int32_t m = a->p[MT_ATTN_LOGIT_M];
  const int lk = a->logit_k;
  const int32_t q0 = mt_ld32(qi), q1 = mt_ld32(qi + 4), q2 = mt_ld32(qi + 8), q3 = mt_ld32(qi + 12);
  const int32_t e0 = __sxtb16(q0), o0 = mt_odd_bytes(q0), e1 = __sxtb16(q1), o1 = mt_odd_bytes(q1);
  const int32_t e2 = __sxtb16(q2), o2 = mt_odd_bytes(q2), e3 = __sxtb16(q3), o3 = mt_odd_bytes(q3);
  const int32_t *const end = t + n;
  int32_t mx = INT32_MIN;
  for (; t != end; ++t, kj += ks) {
    const int32_t k0 = mt_ld32(kj), k1 = mt_ld32(kj + 4), k2 = mt_ld32(kj + 8), k3 = mt_ld32(kj + 12);
    int32_t s = __smlad(e0, __sxtb16(k0), __smuad(o0, mt_odd_bytes(k0)));
    s = __smlad(e1, __sxtb16(k1), __smlad(o1, mt_odd_bytes(k1), s));
    s = __smlad(e2, __sxtb16(k2), __smlad(o2, mt_odd_bytes(k2), s));
    s = __smlad(e3, __sxtb16(k3), __smlad(o3, mt_odd_bytes(k3), s));
    *t = s = mt_attn_logit_smlal(s, m, lk);
    mx = s > mx ? s : mx;
  }
  return mx;
}

/* A word of two int16 lanes (SXTB16 of int8 values) with each lane times 2^k, 0 <= k <= 8:
 * |x| <= 128 keeps x 2^k within int16 */
static inline int32_t mt_lanes_shl(int32_t e, int k) {
  const int32_t lo = (int32_t)(int16_t)e * ((int32_t)1 << k), hi = (e >> 16) * ((int32_t)1 << k);
  return (int32_t)(((uint32_t)lo & 0xFFFFu) | (uint32_t)hi << 16);
}

/* Head dimensions 4 and 8 (constant D; a decoder's heads at d_model 64 and 8 heads: 8) with the
 * one-SMLAL logit (0 <= lk <= 8): q's D/4 words split by SXTB16 once per block, each lane
 * times 2^lk (mt_lanes_shl), then one key per pass: D/4 LDR, D/2 SXTB16, D/2 SMLAD give
 * score 2^lk exactly (the check of logit_k bounds it by 2^30, every partial sum too), the
 * logit of mt_attn_logit_smlal from it without the shift, and the block's max (22 Cortex-M4
 * instructions per key at D = 8, where the two-key loop of mt_attn_logit2_s8 over a D not
 * known to the compiler took 46). The same integers. */
static inline __attribute__((always_inline)) int32_t mt_attn_logits1_s8(const mt_attn *a, const int8_t *qi,
                                                                       const int8_t *kj, int ks, int n, int D,
                                                                       int32_t *t) {
  const int32_t m = a->p[MT_ATTN_LOGIT_M];
  const int lk = a->logit_k;
  const int32_t q0 = mt_ld32(qi), q1 = D > 4 ? mt_ld32(qi + 4) : 0;
  const int32_t e0 = mt_lanes_shl(__sxtb16(q0), lk), o0 = mt_lanes_shl(mt_odd_bytes(q0), lk);
  const int32_t e1 = mt_lanes_shl(__sxtb16(q1), lk), o1 = mt_lanes_shl(mt_odd_bytes(q1), lk);
  const int32_t *const end = t + n;
  int32_t mx = INT32_MIN;
  for (; t != end; ++t, kj += ks) {
    const int32_t k0 = mt_ld32(kj);
    int32_t s = __smlad(e0, __sxtb16(k0), __smuad(o0, mt_odd_bytes(k0)));
    if (D > 4) {
      const int32_t k1 = mt_ld32(kj + 4);
      s = __smlad(e1, __sxtb16(k1), __smlad(o1, mt_odd_bytes(k1), s));
    }
    *t = s = mt_smlal_hi(0x80000000u - ((uint32_t)(s ^ m) >> 31), 0, s, m); /* s holds score 2^lk */
    mx = s > mx ? s : mx;
  }
  return mx;
}

/* The logits of a block of n keys: head dimensions 4, 8 and 16 one key per pass (above), else
 * two at a time (an odd last key is computed twice, into t[n]). Not inlined into the attention
 * body (one call per block of keys), so that its loops keep their values in registers. */
static __attribute__((noinline)) int32_t mt_attn_logits_s8(const mt_attn *a, const int8_t *qi, const int8_t *kj,
                                                           int ks, int n, int D, int32_t *t) {
  int j;
  int32_t mx = INT32_MIN;
  if (MT_ATTN_DIM16 && D == 16 && a->logit_k >= 0) return mt_attn_logits16_s8(a, qi, kj, ks, n, t);
  if (MT_ATTN_DIM8 && D == 8 && a->logit_k >= 0 && a->logit_k <= 8) return mt_attn_logits1_s8(a, qi, kj, ks, n, 8, t);
  if (MT_ATTN_DIM4 && D == 4 && a->logit_k >= 0 && a->logit_k <= 8) return mt_attn_logits1_s8(a, qi, kj, ks, n, 4, t);
  for (j = 0; j < n; j += 2, kj += 2 * ks) {
    const int8_t *k1 = j + 1 < n ? kj + ks : kj;
    if (MT_ATTN_DIM16 && D == 16)
      mt_attn_logit2_s8(a, qi, kj, k1, 16, t + j);
    else
      mt_attn_logit2_s8(a, qi, kj, k1, D, t + j);
    mx = t[j] > mx ? t[j] : mx;
    mx = t[j + 1] > mx ? t[j + 1] : mx; /* t[n] = t[n - 1] for an odd n */
  }
  return mx;
}

/* mt_mulq16_s32 as one SMLAL: round(a alpha / 2^16) with ties away from zero is
 * floor((a alpha + 2^15 - [a < 0]) / 2^16), bits 16..47 of the 64-bit sum (|result| <= |a|:
 * no saturation, INT32_MIN * 1 stays INT32_MIN as in the reference). */
static inline int32_t mt_attn_rescale_s8(int32_t a, uint32_t alpha) {
  uint32_t lo = 0x8000u - ((uint32_t)a >> 31);
  int32_t hi = 0;
  __asm__("smlal %0, %1, %2, %3" : "+r"(lo), "+r"(hi) : "r"(a), "r"((int32_t)alpha));
  return (int32_t)((uint32_t)hi << 16 | lo >> 16);
}

/* acc[d] += w0 v0[d] + w1 v1[d] (exact int32 sums, as the reference): for weights that fit
 * int16 (w <= 32767: all but the keys within one unit of the max) one SMLAD per feature on
 * (v0[d], v1[d]) paired by SXTB16 + PKHBT/PKHTB and the weights packed once. */
static inline void mt_attn_pv2_s8(int32_t *acc, const int8_t *v0, int32_t w0, const int8_t *v1, int32_t w1, int Dv) {
  int d = 0;
  if (w0 <= 32767 && w1 <= 32767) {
    const int32_t wp = mt_pack_halves(w0, w1);
    for (; d + 4 <= Dv; d += 4) {
      const int32_t x = mt_ld32(v0 + d), y = mt_ld32(v1 + d);
      const int32_t xe = __sxtb16(x), ye = __sxtb16(y), xo = mt_odd_bytes(x), yo = mt_odd_bytes(y);
      acc[d] = __smlad(mt_even_halves(xe, ye), wp, acc[d]);
      acc[d + 1] = __smlad(mt_even_halves(xo, yo), wp, acc[d + 1]);
      acc[d + 2] = __smlad(mt_odd_halves(xe, ye), wp, acc[d + 2]);
      acc[d + 3] = __smlad(mt_odd_halves(xo, yo), wp, acc[d + 3]);
    }
  }
  for (; d < Dv; ++d) acc[d] += w0 * (int32_t)v0[d] + w1 * (int32_t)v1[d];
}

/* Four features d .. d+3 of four keys: acc[d] += w0 v0[d] + .. + w3 v3[d], two SMLAD per feature
 * on the v bytes paired by SXTB16 + PKHBT/PKHTB, the weights packed in two words wa, wb */
static inline __attribute__((always_inline)) void mt_attn_pv4_step_s8(int32_t *acc, const int8_t *v0,
                                                                      const int8_t *v1, const int8_t *v2,
                                                                      const int8_t *v3, int32_t wa, int32_t wb) {
  const int32_t x0 = mt_ld32(v0), x1 = mt_ld32(v1), x2 = mt_ld32(v2), x3 = mt_ld32(v3);
  const int32_t e0 = __sxtb16(x0), e1 = __sxtb16(x1), e2 = __sxtb16(x2), e3 = __sxtb16(x3);
  const int32_t o0 = mt_odd_bytes(x0), o1 = mt_odd_bytes(x1), o2 = mt_odd_bytes(x2), o3 = mt_odd_bytes(x3);
  acc[0] = __smlad(mt_even_halves(e2, e3), wb, __smlad(mt_even_halves(e0, e1), wa, acc[0]));
  acc[1] = __smlad(mt_even_halves(o2, o3), wb, __smlad(mt_even_halves(o0, o1), wa, acc[1]));
  acc[2] = __smlad(mt_odd_halves(e2, e3), wb, __smlad(mt_odd_halves(e0, e1), wa, acc[2]));
  acc[3] = __smlad(mt_odd_halves(o2, o3), wb, __smlad(mt_odd_halves(o0, o1), wa, acc[3]));
}

/* Four keys, rows pv[0..3], weights w[0..3] <= 2^16 (from mt_attn_weights_*): acc[d] += w0 v0[d]
 * + .. + w3 v3[d] in one load and store of each sum (mt_attn_pv4_*): when the four weights fit
 * int16, STEP features per mt_attn_pv4_step_* (the loop unrolled for value dims 4, 8 and 16);
 * otherwise (a key within one unit of the max: nearly all where the logits lie close, as in a
 * freshly initialised model), and for the last Dv % STEP features, one feature at a time
 * (MT_ATTN_PV4_ONE_*: four multiply-adds, no cheaper with SMLAD on w - 2^16 and a correction;
 * value dims 4, 8 and 16 unrolled, MT_ATTN_PV4_ROW_*). Exact sums, as the reference. Not
 * inlined: one call per group of keys keeps the caller's registers. The usual case, value dim
 * 16 with the four weights within int16, comes first with its own loads and returns: where it
 * shared them with the other paths GCC stored the four row pointers on the stack for those
 * (about 8 instructions more per group). STEP_FN: mt_attn_pv4_step_*; T (s8, s16) selects
 * MT_ATTN_PV4_ONE_* and MT_ATTN_PV4_ROW_*. */
#define MT_DEFINE_ATTN_PV4(NAME, T, CT, ACC, STEP, STEP_FN)                                                 \
  static __attribute__((noinline)) void NAME(ACC *acc, const CT *const *pv, const int32_t *w, int Dv) {     \
    if (MT_ATTN_DIM16 && Dv == 16 && (w[0] | w[1] | w[2] | w[3]) <= 32767) {                                \
      const CT *v0 = pv[0], *v1 = pv[1], *v2 = pv[2], *v3 = pv[3];                                          \
      const int32_t wa = mt_pack_halves(w[0], w[1]), wb = mt_pack_halves(w[2], w[3]);                      \
      int d;                                                                                                \
      _Pragma("GCC unroll 8") for (d = 0; d < 16; d += STEP)                                                \
          STEP_FN(acc + d, v0 + d, v1 + d, v2 + d, v3 + d, wa, wb);                                         \
      return;                                                                                               \
    }                                                                                                       \
    {                                                                                                       \
      const CT *v0 = pv[0], *v1 = pv[1], *v2 = pv[2], *v3 = pv[3];                                          \
      const int32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];                                             \
      int d = 0;                                                                                            \
      if ((w0 | w1 | w2 | w3) <= 32767) {                                                                   \
        const int32_t wa = mt_pack_halves(w0, w1), wb = mt_pack_halves(w2, w3);                             \
        if (MT_ATTN_DIM8 && Dv == 8) {                                                                      \
          _Pragma("GCC unroll 4") for (; d < 8; d += STEP)                                                  \
              STEP_FN(acc + d, v0 + d, v1 + d, v2 + d, v3 + d, wa, wb);                                     \
        } else if (MT_ATTN_DIM4 && Dv == 4) {                                                               \
          _Pragma("GCC unroll 2") for (; d < 4; d += STEP)                                                  \
              STEP_FN(acc + d, v0 + d, v1 + d, v2 + d, v3 + d, wa, wb);                                     \
        } else {                                                                                            \
          for (; d + STEP <= Dv; d += STEP)                                                                 \
            STEP_FN(acc + d, v0 + d, v1 + d, v2 + d, v3 + d, wa, wb);                                       \
        }                                                                                                   \
      } else if (MT_ATTN_DIM16 && Dv == 16) {                                                               \
        MT_ATTN_PV4_ROW_##T(16);                                                                            \
      } else if (MT_ATTN_DIM8 && Dv == 8) {                                                                 \
        MT_ATTN_PV4_ROW_##T(8);                                                                             \
      } else if (MT_ATTN_DIM4 && Dv == 4) {                                                                 \
        MT_ATTN_PV4_ROW_##T(4);                                                                             \
      }                                                                                                     \
      for (; d < Dv; ++d) MT_ATTN_PV4_ONE_##T;                                                              \
    }                                                                                                       \
  }
#define MT_ATTN_PV4_ONE_s8 \
  acc[d] += w0 * (int32_t)v0[d] + w1 * (int32_t)v1[d] + w2 * (int32_t)v2[d] + w3 * (int32_t)v3[d]
#define MT_ATTN_PV4_ROW_s8(N) _Pragma("GCC unroll 16") for (; d < (N); ++d) MT_ATTN_PV4_ONE_s8
MT_DEFINE_ATTN_PV4(mt_attn_pv4_s8, s8, int8_t, int32_t, 4, mt_attn_pv4_step_s8)
#define MT_ATTN_GROUP_s8 4
#define mt_attn_pvg_s8(a, acc, pv, w, Dv) mt_attn_pv4_s8(acc, pv, w, Dv)

static __attribute__((noinline)) int32_t mt_attn_logit_q_wide(const mt_attn_logit_q *q, int64_t score) {
  const uint64_t x = mt_abs_u64(score), u = (uint64_t)(uint32_t)x * q->mu + q->half;
  const uint64_t h = (uint64_t)(uint32_t)(x >> 32) * q->mu + (u >> 32);
  return mt_signed_sat32((score < 0) != q->neg, h >> q->sh);
}

static inline __attribute__((always_inline)) int32_t mt_attn_logit_q_apply(const mt_attn_logit_q *q, int64_t score,
                                                                          int lz) {
  const int32_t lo = (int32_t)score, hi = (int32_t)((uint64_t)score >> 32);
  if (hi == (lo < 0 ? -1 : 0)) {
    const int32_t nn = (lo ^ q->m) >> 31; /* -[score m < 0] */
    const int32_t r = lz ? mt_smlal_hi((uint32_t)nn, q->c_hi + nn, lo, q->m)
                         : mt_smlal_hi(q->c_lo + (uint32_t)nn, q->c_hi, lo, q->m); /* c_lo = 2^31 */
    return r >> q->sh;
  }
  return mt_attn_logit_q_wide(q, score); /* not inlined: rare in real blocks, large */
}

/* Head dimensions 4, 8 and 16 (constant D) with c_lo = 0: q's D/2 words loaded once per block
 * and kept in registers, then one key per pass: D/2 LDR and D/2 SMLALD into the exact 64-bit
 * sum, requantized inline as above. */
static inline __attribute__((always_inline)) void mt_attn_logits1_s16(const mt_attn_logit_q *q, const int16_t *qi,
                                                                     const int16_t *kj, int ks, int n, int D,
                                                                     int32_t *t) {
  int32_t qw[8];
  const int32_t *const end = t + n;
  int i;
#pragma GCC unroll 8
  for (i = 0; i < D / 2; ++i) qw[i] = mt_ld32(qi + 2 * i);
  for (; t != end; ++t, kj += ks) {
    int64_t s = 0;
#pragma GCC unroll 8
    for (i = 0; i < D / 2; ++i) s = __smlald(qw[i], mt_ld32(kj + 2 * i), s);
    *t = mt_attn_logit_q_apply(q, s, 1);
  }
}

/* Head dimension 16 with c_lo = 0 (s >= 2) and key rows on word boundaries: the loop over the
 * keys in inline assembly, q's eight words in registers, each key's exact score by 4 LDRD (two
 * words per load) and 8 SMLALD, then mt_attn_logit_q_apply's logit (lz): from {-n, c_hi - n}
 * with n = [score m < 0], one SMLAL, the high word shifted right by s - 1, and the block's max
 * (returned); the logit pointer, the max, m, c_hi, the shift, the key step and the end stay in
 * memory (13 registers: q, the score's two words, two loaded words and the key pointer; a frame
 * pointer leaves 13). A score beyond int32 leaves the loop (label 2) for mt_attn_logit_q_wide,
 * then the loop resumes at the next key. 36 instructions per key with the max, where
 * mt_attn_logits1_s16's C, which spills q, took 43 without it. */
static __attribute__((noinline)) int32_t mt_attn_logits16w_s16(const mt_attn_logit_q *q, const int16_t *qi,
                                                              const int16_t *kj, int ks, int n, int32_t *t) {
  const int32_t q0 = mt_ld32(qi), q1 = mt_ld32(qi + 2), q2 = mt_ld32(qi + 4), q3 = mt_ld32(qi + 6);
  const int32_t q4 = mt_ld32(qi + 8), q5 = mt_ld32(qi + 10), q6 = mt_ld32(qi + 12), q7 = mt_ld32(qi + 14);
  const int32_t m = q->m, c_hi = q->c_hi, sh = q->sh, kstep = 2 * ks;
  int32_t *tp = t, *const end = t + n, mx = INT32_MIN;
  const char *kp = (const char *)kj;
  while (tp != end) {
    int32_t lo, hi, k0, k1;
    __asm__("1:\n\t"
            "movs %[lo], #0\n\t"
            "movs %[hi], #0\n\t"
            "ldrd %[k0], %[k1], [%[kp]]\n\t"
            "smlald %[lo], %[hi], %[q0], %[k0]\n\t"
            "smlald %[lo], %[hi], %[q1], %[k1]\n\t"
            "ldrd %[k0], %[k1], [%[kp], #8]\n\t"
            "smlald %[lo], %[hi], %[q2], %[k0]\n\t"
            "smlald %[lo], %[hi], %[q3], %[k1]\n\t"
            "ldrd %[k0], %[k1], [%[kp], #16]\n\t"
            "smlald %[lo], %[hi], %[q4], %[k0]\n\t"
            "smlald %[lo], %[hi], %[q5], %[k1]\n\t"
            "ldrd %[k0], %[k1], [%[kp], #24]\n\t"
            "smlald %[lo], %[hi], %[q6], %[k0]\n\t"
            "smlald %[lo], %[hi], %[q7], %[k1]\n\t"
            "cmp %[hi], %[lo], asr #31\n\t"
            "bne 2f\n\t"
            "ldr %[k0], %[m]\n\t"
            "eor %[k1], %[lo], %[k0]\n\t"
            "asr %[k1], %[k1], #31\n\t"
            "ldr %[hi], %[chi]\n\t"
            "add %[hi], %[hi], %[k1]\n\t"
            "smlal %[k1], %[hi], %[lo], %[k0]\n\t"
            "ldr %[k0], %[sh]\n\t"
            "asr %[hi], %[hi], %[k0]\n\t"
            "ldr %[k0], %[tp]\n\t"
            "str %[hi], [%[k0]], #4\n\t"
            "str %[k0], %[tp]\n\t"
            "ldr %[k1], %[mx]\n\t"
            "cmp %[hi], %[k1]\n\t"
            "it gt\n\t"
            "strgt %[hi], %[mx]\n\t"
            "ldr %[k1], %[kstep]\n\t"
            "add %[kp], %[kp], %[k1]\n\t"
            "ldr %[k1], %[end]\n\t"
            "cmp %[k0], %[k1]\n\t"
            "bne 1b\n\t"
            "2:"
            : [lo] "=&r"(lo), [hi] "=&r"(hi), [k0] "=&r"(k0), [k1] "=&r"(k1), [kp] "+r"(kp), [tp] "+m"(tp),
              [mx] "+m"(mx)
            : [q0] "r"(q0), [q1] "r"(q1), [q2] "r"(q2), [q3] "r"(q3), [q4] "r"(q4), [q5] "r"(q5), [q6] "r"(q6),
              [q7] "r"(q7), [m] "m"(m), [chi] "m"(c_hi), [sh] "m"(sh), [kstep] "m"(kstep), [end] "m"(end)
            : "cc", "memory");
    if (tp != end) { /* the key at tp: a score beyond int32 */
      const int32_t y = mt_attn_logit_q_wide(q, (int64_t)((uint64_t)(uint32_t)hi << 32 | (uint32_t)lo));
      *tp++ = y;
      mx = y > mx ? y : mx;
      kp += kstep;
    }
  }
  return mx;
}

/* Head dimension 8 (a decoder's heads at d_model 64, 8 heads) in the same way as
 * mt_attn_logits16w_s16: q's four words in registers, each key's exact score by 2 LDRD and 4
 * SMLALD, mt_attn_logit_q_apply's logit (lz) with m and c_hi in registers, the block's max;
 * the shift, the max and the key step in memory (13 registers). A score beyond int32 leaves
 * the loop for mt_attn_logit_q_wide. 25 instructions per key with the max, where
 * mt_attn_logits1_s16 and mt_attn_max took 34 (the same integers). */
static __attribute__((noinline)) int32_t mt_attn_logits8w_s16(const mt_attn_logit_q *q, const int16_t *qi,
                                                             const int16_t *kj, int ks, int n, int32_t *t) {
  const int32_t q0 = mt_ld32(qi), q1 = mt_ld32(qi + 2), q2 = mt_ld32(qi + 4), q3 = mt_ld32(qi + 6);
  const int32_t m = q->m, c_hi = q->c_hi, sh = q->sh, kstep = 2 * ks;
  int32_t *tp = t, *const end = t + n, mx = INT32_MIN;
  const char *kp = (const char *)kj;
  while (tp != end) {
    int32_t lo, hi, k0, k1;
    __asm__("1:\n\t"
            "movs %[lo], #0\n\t"
            "movs %[hi], #0\n\t"
            "ldrd %[k0], %[k1], [%[kp]]\n\t"
            "smlald %[lo], %[hi], %[q0], %[k0]\n\t"
            "smlald %[lo], %[hi], %[q1], %[k1]\n\t"
            "ldrd %[k0], %[k1], [%[kp], #8]\n\t"
            "smlald %[lo], %[hi], %[q2], %[k0]\n\t"
            "smlald %[lo], %[hi], %[q3], %[k1]\n\t"
            "cmp %[hi], %[lo], asr #31\n\t"
            "bne 2f\n\t"
            "eor %[k1], %[lo], %[m]\n\t"
            "asr %[k1], %[k1], #31\n\t"
            "add %[hi], %[chi], %[k1]\n\t"
            "smlal %[k1], %[hi], %[lo], %[m]\n\t"
            "ldr %[k0], %[sh]\n\t"
            "asr %[hi], %[hi], %[k0]\n\t"
            "str %[hi], [%[tp]], #4\n\t"
            "ldr %[k1], %[mx]\n\t"
            "cmp %[hi], %[k1]\n\t"
            "it gt\n\t"
            "strgt %[hi], %[mx]\n\t"
            "ldr %[k1], %[kstep]\n\t"
            "add %[kp], %[kp], %[k1]\n\t"
            "cmp %[tp], %[end]\n\t"
            "bne 1b\n\t"
            "2:"
            : [lo] "=&r"(lo), [hi] "=&r"(hi), [k0] "=&r"(k0), [k1] "=&r"(k1), [kp] "+r"(kp), [tp] "+r"(tp),
              [mx] "+m"(mx)
            : [q0] "r"(q0), [q1] "r"(q1), [q2] "r"(q2), [q3] "r"(q3), [m] "r"(m), [chi] "r"(c_hi), [end] "r"(end),
              [sh] "m"(sh), [kstep] "m"(kstep)
            : "cc", "memory");
    if (tp != end) { /* the key at tp: a score beyond int32 */
      const int32_t y = mt_attn_logit_q_wide(q, (int64_t)((uint64_t)(uint32_t)hi << 32 | (uint32_t)lo));
      *tp++ = y;
      mx = y > mx ? y : mx;
      kp += kstep;
    }
  }
  return mx;
}

/* mt_attn_logits16w_s16's keys with int32 scores, in two passes. First the scores: SMUAD and
 * 7 SMLAD per key, four keys per pass of the loop (n % 4 enters the first pass late, at its
 * last n % 4 keys). A score is exact when none of its additions overflowed int32, which the
 * sticky Q flag records (SMUAD and SMLAD set it on an overflow of their sum): cleared first and
 * read after each quad, the loop leaves at the first quad where it is set (label 2) and drops
 * that quad's scores. 16.5 instructions per key (read after each pair: 18; full-range keys,
 * which overflow within a few, leave the pass up to two keys earlier). Then the kept scores'
 * logits, mt_attn_logit_q_apply's for an int32 score (-[score m < 0] by EOR and ASR, one SMLAL
 * onto {-n, c_hi - n}, the high word shifted right by s - 1), and their max: two keys per pass
 * of a second loop in assembly (10 instructions per key), an odd last one in C. The same integers as mt_attn_logits16w_s16.
 * Returns the number of logits written (into t, their max into *max, INT32_MIN if none); the
 * caller computes the others by mt_attn_logits16w_s16 (keys of full-range q and k). n >= 1. */
static __attribute__((noinline)) int mt_attn_logits16s_s16(const mt_attn_logit_q *q, const int16_t *qi,
                                                           const int16_t *kj, int ks, int n, int32_t *t,
                                                           int32_t *max) {
  const int32_t q0 = mt_ld32(qi), q1 = mt_ld32(qi + 2), q2 = mt_ld32(qi + 4), q3 = mt_ld32(qi + 6);
  const int32_t q4 = mt_ld32(qi + 8), q5 = mt_ld32(qi + 10), q6 = mt_ld32(qi + 12), q7 = mt_ld32(qi + 14);
  const int32_t kstep = 2 * ks;
  const uintptr_t end = (uintptr_t)(t + n);
  uintptr_t tp = (uintptr_t)t;
  int32_t mx = INT32_MIN, acc, k0, k1;
  const char *kp = (const char *)kj;
  int done;
#define MT_LOGITS16S_KEY                                  \
  "ldrd %[k0], %[k1], [%[kp]]\n\t"                        \
  "smuad %[acc], %[q0], %[k0]\n\t"                        \
  "smlad %[acc], %[q1], %[k1], %[acc]\n\t"                \
  "ldrd %[k0], %[k1], [%[kp], #8]\n\t"                    \
  "smlad %[acc], %[q2], %[k0], %[acc]\n\t"                \
  "smlad %[acc], %[q3], %[k1], %[acc]\n\t"                \
  "ldrd %[k0], %[k1], [%[kp], #16]\n\t"                   \
  "smlad %[acc], %[q4], %[k0], %[acc]\n\t"                \
  "smlad %[acc], %[q5], %[k1], %[acc]\n\t"                \
  "ldrd %[k0], %[k1], [%[kp], #24]\n\t"                   \
  "smlad %[acc], %[q6], %[k0], %[acc]\n\t"                \
  "smlad %[acc], %[q7], %[k1], %[acc]\n\t"                \
  "str %[acc], [%[tp]], #4\n\t"                           \
  "ldr %[k0], %[kstep]\n\t"                               \
  "add %[kp], %[kp], %[k0]\n\t"
  __asm__ volatile("movs %[k0], #0\n\t"
                   "msr APSR_nzcvq, %[k0]\n\t" /* Q = 0 */
                   "ldr %[k0], %[n]\n\t"
                   "lsls %[k0], %[k0], #31\n\t" /* bit 1 of n into C, bit 0 into N */
                   "bcs 7f\n\t"
                   "bmi 4f\n\t"                   /* n % 4 = 1: the quad's last key first */
                   "b 1f\n\t"
                   "7:\n\t"
                   "bmi 6f\n\t"                   /* 3: its last three */
                   "b 5f\n\t"                     /* 2: its last two */
                   "1:\n\t" MT_LOGITS16S_KEY "6:\n\t" MT_LOGITS16S_KEY "5:\n\t" MT_LOGITS16S_KEY
                   "4:\n\t" MT_LOGITS16S_KEY
                   "mrs %[k0], APSR\n\t"
                   "lsls %[k0], %[k0], #4\n\t" /* Q (bit 27) into the sign */
                   "bmi 2f\n\t"
                   "ldr %[k0], %[end]\n\t"
                   "cmp %[tp], %[k0]\n\t"
                   "bne 1b\n\t"
                   "b 3f\n\t"
                   "2:\n\t"
                   "subs %[tp], %[tp], #16\n\t" /* the quad that overflowed (a first one of n % 4 keys: none) */
                   "3:"
                   : [acc] "=&r"(acc), [k0] "=&r"(k0), [k1] "=&r"(k1), [kp] "+r"(kp), [tp] "+r"(tp)
                   : [q0] "r"(q0), [q1] "r"(q1), [q2] "r"(q2), [q3] "r"(q3), [q4] "r"(q4), [q5] "r"(q5),
                     [q6] "r"(q6), [q7] "r"(q7), [kstep] "m"(kstep), [end] "m"(end), [n] "m"(n)
                   : "cc", "memory");
#undef MT_LOGITS16S_KEY
  done = tp > (uintptr_t)t ? (int)((tp - (uintptr_t)t) >> 2) : 0;
  if (done >= 2) { /* the logits of pairs: mt_attn_logit_q_apply's, c_lo = 0 */
    const int32_t m = q->m, c_hi = q->c_hi, sh = q->sh;
    int32_t *lp = t, x0, x1, n0, n1, h0, h1;
    int32_t *const pend = t + (done & ~1);
    __asm__ volatile("1:\n\t"
                     "ldrd %[x0], %[x1], [%[lp]]\n\t"
                     "eor %[n0], %[x0], %[m]\n\t"
                     "asr %[n0], %[n0], #31\n\t" /* -[score m < 0] */
                     "add %[h0], %[chi], %[n0]\n\t"
                     "smlal %[n0], %[h0], %[x0], %[m]\n\t"
                     "asr %[h0], %[h0], %[sh]\n\t"
                     "eor %[n1], %[x1], %[m]\n\t"
                     "asr %[n1], %[n1], #31\n\t"
                     "add %[h1], %[chi], %[n1]\n\t"
                     "smlal %[n1], %[h1], %[x1], %[m]\n\t"
                     "asr %[h1], %[h1], %[sh]\n\t"
                     "strd %[h0], %[h1], [%[lp]], #8\n\t"
                     "cmp %[h0], %[mx]\n\t"
                     "it gt\n\t"
                     "movgt %[mx], %[h0]\n\t"
                     "cmp %[h1], %[mx]\n\t"
                     "it gt\n\t"
                     "movgt %[mx], %[h1]\n\t"
                     "cmp %[lp], %[pend]\n\t"
                     "bne 1b"
                     : [x0] "=&r"(x0), [x1] "=&r"(x1), [n0] "=&r"(n0), [n1] "=&r"(n1), [h0] "=&r"(h0),
                       [h1] "=&r"(h1), [lp] "+r"(lp), [mx] "+r"(mx)
                     : [m] "r"(m), [chi] "r"(c_hi), [sh] "r"(sh), [pend] "r"(pend)
                     : "cc", "memory");
  }
  if (done & 1) {
    const int32_t y = mt_attn_logit_q_apply(q, t[done - 1], 1);
    t[done - 1] = y;
    mx = y > mx ? y : mx;
  }
  *max = mx;
  return done;
}

/* Two keys per pass over q: each word of q (two features) loaded once, 2 SMLALD per 2
 * features and 2 keys, the exact 64-bit sums requantized inline as above. Inline, so that a
 * constant D fixes the loop over q. */
static inline __attribute__((always_inline)) void mt_attn_logits2_s16(const mt_attn_logit_q *q, const int16_t *qi,
                                                                     const int16_t *kj, int ks, int n, int D, int lz,
                                                                     int32_t *t) {
  int i, j;
  for (j = 0; j < n; j += 2, kj += 2 * ks) {
    const int16_t *k1 = j + 1 < n ? kj + ks : kj; /* an odd last key is computed twice */
    int64_t s0 = 0, s1 = 0;
    for (i = 0; i + 4 <= D; i += 4) {
      MT_MAC2_S16_S16(qi + i, kj + i, k1 + i, s0, s1);
      MT_MAC2_S16_S16(qi + i + 2, kj + i + 2, k1 + i + 2, s0, s1);
    }
    if (i + 2 <= D) {
      MT_MAC2_S16_S16(qi + i, kj + i, k1 + i, s0, s1);
      i += 2;
    }
    if (i < D) {
      s0 += (int32_t)qi[i] * kj[i];
      s1 += (int32_t)qi[i] * k1[i];
    }
    t[j] = mt_attn_logit_q_apply(q, s0, lz);
    t[j + 1] = mt_attn_logit_q_apply(q, s1, lz);
  }
}

/* The logits of a block of n keys (n <= MT_ATTN_KEYS; an odd last key is computed twice, into
 * t[n]) but the usual case below: the head dimensions 4, 8, 16 and 32 with a constant loop
 * count; other logit formats: mt_rq. */
static __attribute__((noinline)) int32_t mt_attn_logits_any_s16(const mt_attn *a, const int16_t *qi,
                                                                const int16_t *kj, int ks, int n, int D,
                                                                int32_t *t) {
  const mt_attn_logit_q *const q = &a->lq;
  int j;
  if (q->sh < 0 || q->sh > 30 || q->mu - 1u >= 0x7FFFFFFFu) /* also m = INT32_MIN, outside mt_rq's contract */
    for (j = 0; j < n; ++j) t[j] = mt_attn_logit(a, mt_dot_s16_s16(qi, kj + j * ks, 1, D));
  else if (!q->lo_zero) /* s = 1 */
    mt_attn_logits2_s16(q, qi, kj, ks, n, D, 0, t);
  else if (MT_ATTN_DIM8 && D == 8)
    mt_attn_logits1_s16(q, qi, kj, ks, n, 8, t);
  else if (MT_ATTN_DIM4 && D == 4)
    mt_attn_logits1_s16(q, qi, kj, ks, n, 4, t);
  else if (MT_ATTN_DIM16 && D == 16)
    mt_attn_logits1_s16(q, qi, kj, ks, n, 16, t);
  else if (D == 32)
    mt_attn_logits2_s16(q, qi, kj, ks, n, 32, 1, t);
  else
    mt_attn_logits2_s16(q, qi, kj, ks, n, D, 1, t);
  return mt_attn_max(t, n);
}

/* The logits of a block of keys: the usual cases (lq.fast, k's rows word-aligned) at head
 * dimension 16 by mt_attn_logits16s_s16, the keys it leaves by mt_attn_logits16w_s16, and at
 * head dimension 8 by mt_attn_logits8w_s16; the others out of line (mt_attn_logits_any_s16), so that this call, one per block of keys, saves
 * few registers. Not inlined into the attention body, so that its loops get the registers the
 * body's update keeps live. */
static __attribute__((noinline)) int32_t mt_attn_logits_s16(const mt_attn *a, const int16_t *qi,
                                                            const int16_t *kj, int ks, int n, int D, int32_t *t) {
  const mt_attn_logit_q *const q = &a->lq;
  int32_t mx = INT32_MIN, rest;
  int done;
  if (q->fast && MT_ATTN_DIM8 && D == 8 && ((uintptr_t)kj & 3u) == 0 && (ks & 1) == 0 && n > 0)
    return mt_attn_logits8w_s16(q, qi, kj, ks, n, t);
  if (!q->fast || !MT_ATTN_DIM16 || D != 16 || ((uintptr_t)kj & 3u) != 0 || (ks & 1) != 0)
    return mt_attn_logits_any_s16(a, qi, kj, ks, n, D, t);
  done = n > 0 ? mt_attn_logits16s_s16(q, qi, kj, ks, n, t, &mx) : 0;
  if (done == n) return mx;
  rest = mt_attn_logits16w_s16(q, qi, kj + done * ks, ks, n - done, t + done);
  return rest > mx ? rest : mx;
}

/* acc[d] += w0 v0[d] + w1 v1[d] for int16 v into the int64 sums: for weights that fit int16
 * (all but the keys within one unit of the max) one SMLALD per feature on (v0[d], v1[d])
 * regrouped by PKHBT / PKHTB, the weights packed once, else two SMLAL (a weight <= 2^16
 * times an int16 fits int32); exact, as the reference. */
static inline void mt_attn_pv2_s16(int64_t *acc, const int16_t *v0, int32_t a, const int16_t *v1, int32_t b, int Dv) {
  int d = 0;
  if (a <= 32767 && b <= 32767) {
    const int32_t wp = mt_pack_halves(a, b);
    for (; d + 2 <= Dv; d += 2) {
      const int32_t x = mt_ld32(v0 + d), y = mt_ld32(v1 + d);
      acc[d] = __smlald(mt_even_halves(x, y), wp, acc[d]);
      acc[d + 1] = __smlald(mt_odd_halves(x, y), wp, acc[d + 1]);
    }
  }
  for (; d < Dv; ++d) acc[d] = mt_smlal(mt_smlal(acc[d], a, v0[d]), b, v1[d]);
}

/* Two features d, d+1 of four keys into the int64 sums: two SMLALD per feature on the v
 * halfwords paired by PKHBT/PKHTB, the weights packed in two words wa, wb */
static inline __attribute__((always_inline)) void mt_attn_pv4_step_s16(int64_t *acc, const int16_t *v0,
                                                                       const int16_t *v1, const int16_t *v2,
                                                                       const int16_t *v3, int32_t wa, int32_t wb) {
  const int32_t x0 = mt_ld32(v0), x1 = mt_ld32(v1), x2 = mt_ld32(v2), x3 = mt_ld32(v3);
  acc[0] = __smlald(mt_even_halves(x2, x3), wb, __smlald(mt_even_halves(x0, x1), wa, acc[0]));
  acc[1] = __smlald(mt_odd_halves(x2, x3), wb, __smlald(mt_odd_halves(x0, x1), wa, acc[1]));
}

/* Four keys into the int64 sums, one feature: four SMLAL; exact */
#define MT_ATTN_PV4_ONE_s16 \
  acc[d] = mt_smlal(mt_smlal(mt_smlal(mt_smlal(acc[d], w0, v0[d]), w1, v1[d]), w2, v2[d]), w3, v3[d])

/* The same for the next feature, the pointers advanced: LDRD, four LDRSH and SMLAL, STRD, in
 * one asm so that GCC does not hoist an unrolled row's 64 loads and spill them (volatile: its
 * outputs are only the advanced pointers, the sums it stores are in memory) */
static inline __attribute__((always_inline)) void mt_attn_pv4_next_s16(int64_t **acc, const int16_t **v0,
                                                                       const int16_t **v1, const int16_t **v2,
                                                                       const int16_t **v3, int32_t w0, int32_t w1,
                                                                       int32_t w2, int32_t w3) {
  int32_t lo, hi, x;
  __asm__ volatile("ldrd %[lo], %[hi], [%[a]]\n\t"
                   "ldrsh %[x], [%[v0]], #2\n\t"
                   "smlal %[lo], %[hi], %[w0], %[x]\n\t"
                   "ldrsh %[x], [%[v1]], #2\n\t"
                   "smlal %[lo], %[hi], %[w1], %[x]\n\t"
                   "ldrsh %[x], [%[v2]], #2\n\t"
                   "smlal %[lo], %[hi], %[w2], %[x]\n\t"
                   "ldrsh %[x], [%[v3]], #2\n\t"
                   "smlal %[lo], %[hi], %[w3], %[x]\n\t"
                   "strd %[lo], %[hi], [%[a]], #8"
                   : [lo] "=&r"(lo), [hi] "=&r"(hi), [x] "=&r"(x), [a] "+r"(*acc), [v0] "+r"(*v0),
                     [v1] "+r"(*v1), [v2] "+r"(*v2), [v3] "+r"(*v3)
                   : [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w3] "r"(w3)
                   : "memory");
}
#define MT_ATTN_PV4_ROW_s16(N)                                                                     \
  do {                                                                                             \
    int64_t *a_ = acc;                                                                             \
    const int16_t *p0_ = v0, *p1_ = v1, *p2_ = v2, *p3_ = v3;                                      \
    _Pragma("GCC unroll 16") for (; d < (N); ++d)                                                  \
        mt_attn_pv4_next_s16(&a_, &p0_, &p1_, &p2_, &p3_, w0, w1, w2, w3);                         \
  } while (0)
MT_DEFINE_ATTN_PV4(mt_attn_pv4_s16, s16, int16_t, int64_t, 2, mt_attn_pv4_step_s16)
#define MT_ATTN_GROUP_s16 4
#define mt_attn_pvg_s16(a, acc, pv, w, Dv) mt_attn_pv4_s16(acc, pv, w, Dv)

/* mt_attn_rescale_row_*: the int16 sums' rounding in 64-bit steps: mt_mulq16_s64's
 * round(a alpha / 2^16), ties away from zero, is floor((a alpha + 2^15 - [a < 0]) / 2^16);
 * a alpha is exact in int64 (|a| <= l 2^15 <= 2^46, alpha <= 2^16): one UMULL and MLA, ADDS
 * and ADC, the 64-bit shift (GCC's >> of a negative int64 is arithmetic: the floor). */
#define mt_attn_rescale_row_s8(acc, alpha, Dv) MT_ATTN_RESCALE_ROW(acc, alpha, Dv, mt_attn_rescale_s8)
static void mt_attn_rescale_row_s16(int64_t *acc, uint32_t alpha, int Dv) {
  int d;
  for (d = 0; d < Dv; ++d) acc[d] = (acc[d] * (int64_t)alpha + (0x8000 - (int64_t)(acc[d] < 0))) >> 16;
}
#else
/* round(a alpha / 2^16) on the magnitude, ties away from zero, |a| < 2^48 */
static int64_t mt_mulq16_s64(int64_t a, uint32_t alpha) {
  uint64_t m = mt_abs_u64(a);
  uint64_t r = (m >> 16) * alpha + (((uint32_t)(m & 0xFFFFu) * alpha + 0x8000u) >> 16);
  return a < 0 ? -(int64_t)r : (int64_t)r;
}
#define mt_attn_rescale_row_s8(acc, alpha, Dv) MT_ATTN_RESCALE_ROW(acc, alpha, Dv, mt_mulq16_s32)
#define mt_attn_rescale_row_s16(acc, alpha, Dv) MT_ATTN_RESCALE_ROW(acc, alpha, Dv, mt_mulq16_s64)
#if MT_RV32
/* RISC-V: the logits of head dimension D = 4, 8 or 16 with q's row in D registers, when the
 * logit's multiplier m > 0, its shift 2 <= s <= 31 and q's row has no -32768: then
 * |q_i k_i| < 2^30, a pair's sum x = q_i k_i + q_{i+1} k_{i+1} is exact in int32, and the score
 * S = sum x (D / 2 <= 8 pairs) wraps to w = S mod 2^32 while u = sum (x >> 8) (arithmetic:
 * floor) lies in (S / 2^8 - 8, S / 2^8]; -2^22 <= u < 2^22 bounds -2^30 <= S < 2^30 + 2^11,
 * so S = w. The logit rq(w, m, s) as mt_rv_rq_out (mt_linear.c) forms it: sign mask g,
 * h = MULHU(|w|, m), ((h ^ g) + 2^(s-2)) >> (s - 1) is floor((w m + 2^(30+s) - [w < 0]) /
 * 2^(31+s)), ties away from zero as mt_rq32. A key with u out of range takes the exact 64-bit
 * sum and mt_rq. CHECK = 0 leaves out u and its test, for a query row with sum |q_i| kmax <
 * 2^31 (mt_attn's kmax = max |k| over the call's keys, 2^15 when not known): every partial sum
 * of every score is then within int32 (any q). Each pair's loads stay in their step
 * (MT_RV_PAIR_END: GCC otherwise hoists all of them and spills q). One body (D and CHECK
 * constants: the pairs beyond D and their q vanish), mt_attn_logits{4,8,16}_rv(..., check).
 * Returns the max. */
#define MT_RV_PAIR_END __asm__ volatile("" ::: "memory")
#define MT_RV_QK(i)                                   \
  do {                                                \
    if ((i) < D) {                                    \
      x = q##i * kj[i] + q##i##b * kj[(i) + 1];       \
      w += x;                                         \
      if (CHECK) u += x >> 8;                         \
      MT_RV_PAIR_END;                                 \
    }                                                 \
  } while (0)
#define MT_RV_Q(i) ((i) < D ? (int32_t)qi[i] : 0)
static inline __attribute__((always_inline)) int32_t mt_attn_logits_rv(const mt_attn *a, const int16_t *qi,
                                                                      const int16_t *kj, int ks, int n,
                                                                      int32_t *t, const int D,
                                                                      const int CHECK) {
  const int32_t q0 = MT_RV_Q(0), q0b = MT_RV_Q(1), q2 = MT_RV_Q(2), q2b = MT_RV_Q(3), q4 = MT_RV_Q(4);
  const int32_t q4b = MT_RV_Q(5), q6 = MT_RV_Q(6), q6b = MT_RV_Q(7), q8 = MT_RV_Q(8), q8b = MT_RV_Q(9);
  const int32_t q10 = MT_RV_Q(10), q10b = MT_RV_Q(11), q12 = MT_RV_Q(12), q12b = MT_RV_Q(13);
  const int32_t q14 = MT_RV_Q(14), q14b = MT_RV_Q(15);
  const uint32_t m = (uint32_t)a->p[MT_ATTN_LOGIT_M];
  const int sh = a->p[MT_ATTN_LOGIT_S] - 1;
  const uint32_t c_hi = 1u << (sh - 1);
  int32_t *const end = t + n, mx = INT32_MIN;
  for (; t != end; ++t, kj += ks) {
    int32_t x, w = 0, u = 0, y;
    MT_RV_QK(0);
    MT_RV_QK(2);
    MT_RV_QK(4);
    MT_RV_QK(6);
    MT_RV_QK(8);
    MT_RV_QK(10);
    MT_RV_QK(12);
    MT_RV_QK(14);
    if (!CHECK || (uint32_t)u + 0x400000u < 0x800000u) {
      const uint32_t g = (uint32_t)(w >> 31);
      const uint32_t h = (uint32_t)(((uint64_t)(((uint32_t)w ^ g) - g) * m) >> 32); /* MULHU */
      y = (int32_t)((h ^ g) + c_hi) >> sh;
    } else {
      int64_t sc = 0;
      int i;
      for (i = 0; i < D; ++i) sc += qi[i] * kj[i];
      y = mt_attn_logit(a, sc);
    }
    *t = y;
    mx = y > mx ? y : mx;
  }
  return mx;
}
#undef MT_RV_Q
#undef MT_RV_QK
#undef MT_RV_PAIR_END
#define MT_DEFINE_ATTN_LOGITS_RV(D)                                                                      \
  static __attribute__((noinline)) int32_t mt_attn_logits##D##_rv(const mt_attn *a, const int16_t *qi,  \
                                                                  const int16_t *kj, int ks, int n,      \
                                                                  int32_t *t, int check) {               \
    return check ? mt_attn_logits_rv(a, qi, kj, ks, n, t, D, 1)                                          \
                 : mt_attn_logits_rv(a, qi, kj, ks, n, t, D, 0);                                         \
  }
MT_DEFINE_ATTN_LOGITS_RV(4)
MT_DEFINE_ATTN_LOGITS_RV(8)
MT_DEFINE_ATTN_LOGITS_RV(16)
#undef MT_DEFINE_ATTN_LOGITS_RV
#endif
static __attribute__((noinline)) int32_t mt_attn_logits_s16(const mt_attn *a, const int16_t *qi,
                                                            const int16_t *kj, int ks, int n, int D, int32_t *t) {
  const int64_t pairs = (int64_t)(D >> 1) << 16;
  int i, j;
#if MT_RV32
  {
    const int32_t lm = a->p[MT_ATTN_LOGIT_M], ls = a->p[MT_ATTN_LOGIT_S];
    int fit = (D == 4 || D == 8 || D == 16) && lm > 0 && ls >= 2 && ls <= 31, check;
    uint32_t qsum = 0; /* sum |q_i| <= 16 2^15 */
    for (i = 0; fit && i < D; ++i) qsum += mt_mag32(qi[i]);
    check = (uint64_t)qsum * a->kmax >= 0x80000000u; /* else |every partial sum| < 2^31 */
    for (i = 0; fit && check && i < D; ++i) fit = qi[i] != INT16_MIN;
    if (fit)
      return D == 16 ? mt_attn_logits16_rv(a, qi, kj, ks, n, t, check)
             : D == 8 ? mt_attn_logits8_rv(a, qi, kj, ks, n, t, check)
                      : mt_attn_logits4_rv(a, qi, kj, ks, n, t, check);
  }
#endif
  for (j = 0; j < n; ++j, kj += ks) {
    int64_t sc = pairs; /* each pair below enters 2^16 short */
    for (i = 0; i + 2 <= D; i += 2)
      sc += (int32_t)((uint32_t)(qi[i] * kj[i]) + (uint32_t)(qi[i + 1] * kj[i + 1]) - 65536u);
    if (i < D) sc += qi[i] * kj[i];
    t[j] = mt_attn_logit(a, sc);
  }
  return mt_attn_max(t, n);
}
static __attribute__((noinline)) int32_t mt_attn_logits_s8(const mt_attn *a, const int8_t *qi, const int8_t *kj,
                                                           int ks, int n, int D, int32_t *t) {
  const int32_t m = a->p[MT_ATTN_LOGIT_M];
  const int s = a->p[MT_ATTN_LOGIT_S];
  int i, j;
  int32_t mx = INT32_MIN;
  for (j = 0; j < n; ++j, kj += ks) {
    int32_t sc = 0; /* exact: |q k| <= 2^14, D <= 65535 */
    for (i = 0; i < D; ++i) sc += (int32_t)qi[i] * kj[i];
    t[j] = sc = mt_rq32(sc, m, s);
    mx = sc > mx ? sc : mx;
  }
  return mx;
}

static inline void mt_attn_pv2_s8(int32_t *acc, const int8_t *v0, int32_t w0, const int8_t *v1, int32_t w1, int Dv) {
  int d;
  for (d = 0; d < Dv; ++d) acc[d] += w0 * (int32_t)v0[d] + w1 * (int32_t)v1[d]; /* |w v| <= 2^31 */
}

/* The same for int16 v into int64 sums: a weight (<= 2^16) times an int16 lies in
 * [-2^31, 2^31 - 2^16], an int32 product (a 32-bit multiply, not a 64-bit one: Armv6-M has no
 * SMULL) added to the int64 sum. */
static inline void mt_attn_pv2_s16(int64_t *acc, const int16_t *v0, int32_t a, const int16_t *v1, int32_t b, int Dv) {
  int d;
  for (d = 0; d < Dv; ++d) acc[d] += (int64_t)(a * v0[d]) + b * v1[d];
}
#endif

#if MT_RV32
/* RISC-V: four keys into the int64 sums, rows pv[0..3], weights w[0..3] <= 2^16: a product
 * p = w v lies in [-2^31, 2^31 - 2^16], so u = p + 2^31 = p XOR 2^31 is an unsigned word and
 * acc + p = acc + u - 2^31: each word u is added to the low word with its carry (SLTU) into the
 * high word, and the offsets (n 2^31 for n words) leave the high word once. When both pairs'
 * weights sum to at most cap (mt_attn's pv_cap, at least 2^16) a pair's sum w0 v0 + w1 v1 lies
 * within int32 and is one such word (two words per feature, offset 2^32), else each product is
 * (four words, offset 2 2^32); exact, as the reference. Value dim 16
 * unrolled (fixed offsets, no pointer steps per feature), each feature's loads kept in its
 * step by an empty asm that clobbers memory (GCC otherwise hoists them and spills). */
#define MT_RV_ADDU(x) (u_ = (uint32_t)(x) ^ 0x80000000u, lo_ += u_, hi_ += lo_ < u_)
#define MT_RV_PV4_ONE(d, PAIRS)                                                                           \
  do {                                                                                                    \
    const uint64_t a_ = (uint64_t)acc[d];                                                                 \
    uint32_t lo_ = (uint32_t)a_, hi_ = (uint32_t)(a_ >> 32), u_;                                          \
    if (PAIRS) {                                                                                          \
      MT_RV_ADDU(w0 * v0[d] + w1 * v1[d]), MT_RV_ADDU(w2 * v2[d] + w3 * v3[d]);                           \
      hi_ -= 1u;                                                                                          \
    } else {                                                                                              \
      MT_RV_ADDU(w0 * v0[d]), MT_RV_ADDU(w1 * v1[d]), MT_RV_ADDU(w2 * v2[d]), MT_RV_ADDU(w3 * v3[d]);     \
      hi_ -= 2u;                                                                                          \
    }                                                                                                     \
    acc[d] = (int64_t)((uint64_t)hi_ << 32 | lo_);                                                        \
    __asm__ volatile("" ::: "memory");                                                                    \
  } while (0)
static __attribute__((noinline)) void mt_attn_pv4_rv_s16(int64_t *acc, const int16_t *const *pv, const int32_t *w,
                                                         int Dv, uint32_t cap) {
  const int16_t *const v0 = pv[0], *const v1 = pv[1], *const v2 = pv[2], *const v3 = pv[3];
  const int32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
  const int pairs = (uint32_t)(w0 + w1) <= cap && (uint32_t)(w2 + w3) <= cap;
  int d;
  if (Dv == 16 && pairs) {
#pragma GCC unroll 16
    for (d = 0; d < 16; ++d) MT_RV_PV4_ONE(d, 1);
  } else if (Dv == 16) {
#pragma GCC unroll 16
    for (d = 0; d < 16; ++d) MT_RV_PV4_ONE(d, 0);
  } else {
    for (d = 0; d < Dv; ++d) MT_RV_PV4_ONE(d, pairs);
  }
}
/* Eight keys, their products in fewer words: a set of keys whose weights sum to at most cap
 * (mt_attn's pv_cap: 2^16 for any int16 v, more when the call's v are narrower) has
 * sum_k w_k v_k[d] within int32 (every partial sum too), one int32 word. WORDS = 1: all
 * eight (a block of spread logits, every key but those near the row's max), added to the int64
 * sum as its low word plus the carry (SLTU) and the sign word (x >> 31, arithmetic) to the high
 * word; WORDS = 2: each four, WORDS = 4: each pair (every pair sum at most cap: with cap = 2^16
 * all pairs but one with a key near the max), as offset words (MT_RV_ADDU, offset WORDS 2^31).
 * Per feature 8 loads, 8 MUL, 7 ADD (4 for WORDS = 4) and 5, 9 or 17 for the int64 with its load
 * and store: 3.1, 3.6 or 4.9 instructions per MAC where four keys in two words took 5.75. Else
 * the two halves by mt_attn_pv4_rv_s16, as other value dims are (mt_attn_pvg_s16).
 * Exact, as the reference. */
#define MT_RV_PV8_ONE(d, WORDS)                                                                           \
  do {                                                                                                    \
    const uint64_t a_ = (uint64_t)acc[d];                                                                 \
    uint32_t lo_ = (uint32_t)a_, hi_ = (uint32_t)(a_ >> 32), u_;                                          \
    const int32_t p0_ = w0 * v0[d] + w1 * v1[d], p1_ = w2 * v2[d] + w3 * v3[d];                           \
    const int32_t p2_ = (WORDS) == 6 ? 0 : w4 * v4[d] + w5 * v5[d];                                       \
    const int32_t p3_ = (WORDS) == 6 ? 0 : w6 * v6[d] + w7 * v7[d];                                       \
    if ((WORDS) == 1) {                                                                                   \
      const int32_t x_ = p0_ + p1_ + p2_ + p3_;                                                           \
      lo_ += (uint32_t)x_, hi_ += (uint32_t)(x_ >> 31) + (lo_ < (uint32_t)x_);                            \
    } else if ((WORDS) == 2) {                                                                            \
      MT_RV_ADDU(p0_ + p1_), MT_RV_ADDU(p2_ + p3_);                                                       \
      hi_ -= 1u;                                                                                          \
    } else if ((WORDS) == 6) {                                                                            \
      MT_RV_ADDU(p0_), MT_RV_ADDU(p1_), MT_RV_ADDU(w4 * v4[d]), MT_RV_ADDU(w5 * v5[d]);                   \
      MT_RV_ADDU(w6 * v6[d]), MT_RV_ADDU(w7 * v7[d]);                                                     \
      hi_ -= 3u;                                                                                          \
    } else {                                                                                              \
      MT_RV_ADDU(p0_), MT_RV_ADDU(p1_), MT_RV_ADDU(p2_), MT_RV_ADDU(p3_);                                 \
      hi_ -= 2u;                                                                                          \
    }                                                                                                     \
    acc[d] = (int64_t)((uint64_t)hi_ << 32 | lo_);                                                        \
    __asm__ volatile("" ::: "memory");                                                                    \
  } while (0)
/* Keys near the max in two pairs or fewer: the pairs whose sums are within cap first (two of
 * them in two words), the other four keys a word each (six words, offset 6 2^31): per feature
 * 8 loads, 8 MUL, 2 ADD and 25 for the int64 where the halves by mt_attn_pv4_rv_s16 took 52 */
static __attribute__((noinline)) void mt_attn_pv8w6_rv_s16(int64_t *acc, const int16_t *const *pv, const int32_t *w,
                                                           int bad) {
  const int16_t *v[8];
  int32_t ww[8];
  int i, g = 0, k = 8;
  for (i = 0; i < 8; i += 2) { /* bad: bit i / 2 for a pair above 2^16, placed from the end */
    const int at = (bad >> (i >> 1)) & 1 ? (k -= 2) : (g += 2) - 2;
    v[at] = pv[i], v[at + 1] = pv[i + 1], ww[at] = w[i], ww[at + 1] = w[i + 1];
  }
  {
    const int32_t w0 = ww[0], w1 = ww[1], w2 = ww[2], w3 = ww[3], w4 = ww[4], w5 = ww[5], w6 = ww[6], w7 = ww[7];
    const int16_t *const v0 = v[0], *const v1 = v[1], *const v2 = v[2], *const v3 = v[3];
    const int16_t *const v4 = v[4], *const v5 = v[5], *const v6 = v[6], *const v7 = v[7];
    int d;
#pragma GCC unroll 16
    for (d = 0; d < 16; ++d) MT_RV_PV8_ONE(d, 6);
  }
}
static __attribute__((noinline)) void mt_attn_pv8_rv_s16(int64_t *acc, const int16_t *const *pv, const int32_t *w,
                                                         uint32_t cap) {
  const int32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7];
  const uint32_t s01 = (uint32_t)(w0 + w1), s23 = (uint32_t)(w2 + w3), s45 = (uint32_t)(w4 + w5);
  const uint32_t s67 = (uint32_t)(w6 + w7), s03 = s01 + s23, s47 = s45 + s67;
  const int16_t *const v0 = pv[0], *const v1 = pv[1], *const v2 = pv[2], *const v3 = pv[3];
  const int16_t *const v4 = pv[4], *const v5 = pv[5], *const v6 = pv[6], *const v7 = pv[7];
  int d;
  const int b0 = s01 > cap, b1 = s23 > cap, b2 = s45 > cap, b3 = s67 > cap;
  if (b0 | b1 | b2 | b3) {
    if (b0 + b1 + b2 + b3 <= 2)
      mt_attn_pv8w6_rv_s16(acc, pv, w, b0 | b1 << 1 | b2 << 2 | b3 << 3);
    else {
      mt_attn_pv4_rv_s16(acc, pv, w, 16, cap);
      mt_attn_pv4_rv_s16(acc, pv + 4, w + 4, 16, cap);
    }
  } else if (s03 + s47 <= cap) {
#pragma GCC unroll 16
    for (d = 0; d < 16; ++d) MT_RV_PV8_ONE(d, 1);
  } else if (s03 <= cap && s47 <= cap) {
#pragma GCC unroll 16
    for (d = 0; d < 16; ++d) MT_RV_PV8_ONE(d, 2);
  } else {
#pragma GCC unroll 16
    for (d = 0; d < 16; ++d) MT_RV_PV8_ONE(d, 4);
  }
}
#undef MT_RV_PV8_ONE
#undef MT_RV_PV4_ONE
#undef MT_RV_ADDU
#define MT_ATTN_GROUP_s16 8
#define MT_ATTN_TAIL_PAIRS while /* up to seven keys left: pairs, then one */
#define mt_attn_pvg_s16(a, acc, pv, w, Dv)                                                                 \
  ((Dv) == 16 ? mt_attn_pv8_rv_s16(acc, pv, w, (a)->pv_cap)                                                \
              : (mt_attn_pv4_rv_s16(acc, pv, w, Dv, (a)->pv_cap),                                          \
                 mt_attn_pv4_rv_s16(acc, (pv) + 4, (w) + 4, Dv, (a)->pv_cap)))
/* What the stream learns of its int16 k and v rows once per call (MT_ATTN_SETUP): kmax =
 * max |k|, for mt_attn_logits_s16 (a query row with sum |q_i| kmax < 2^31 has every partial
 * sum of every score within int32, no check per key), and pv_cap: with V = max |v| (at least
 * 1), weights summing to at most floor((2^31 - 1) / V) give |sum w v| <= 2^31 - 1; at least
 * 2^16, the bound for any int16 v ([-2^31, 2^31 - 2^16] when the weights sum to at most 2^16,
 * every partial sum too). */
static uint32_t mt_max_mag_rv(const int16_t *x, int xs, int rows, int cols) {
  uint32_t mx = 0;
  int j, d;
  for (j = 0; j < rows; ++j, x += xs)
    for (d = 0; d < cols; ++d) {
      const uint32_t m = mt_mag32(x[d]);
      mx = m > mx ? m : mx;
    }
  return mx;
}
static void mt_attn_setup_rv(mt_attn *a, const int16_t *k, int ks, const int16_t *v, int vs, int S, int D, int Dv) {
  const uint32_t vm = mt_max_mag_rv(v, vs, S, Dv), cap = 0x7FFFFFFFu / (vm ? vm : 1u);
  a->kmax = mt_max_mag_rv(k, ks, S, D);
  a->pv_cap = cap > 65536u ? cap : 65536u;
}
#define MT_ATTN_SETUP(a, k, ks, v, vs, S, D, Dv)                                                           \
  do {                                                                                                     \
    if (sizeof(*(v)) == 2) /* int16 k and v */                                                             \
      mt_attn_setup_rv(a, (const int16_t *)(const void *)(k), ks, (const int16_t *)(const void *)(v), vs, \
                       S, D, Dv);                                                                          \
  } while (0)
#endif

/* The keys added in one pass over the sums, MT_ATTN_GROUP_* keys by mt_attn_pvg_*(acc, their
 * rows, their weights, Dv): four for the Armv7E-M variants, eight for the RISC-V ones, else two. */
#ifndef MT_ATTN_TAIL_PAIRS /* the keys left after the groups: at most one pair for groups of four */
#define MT_ATTN_TAIL_PAIRS if
#endif
#ifndef MT_ATTN_GROUP_s16
#define MT_ATTN_GROUP_s16 2
#define mt_attn_pvg_s16(a, acc, pv, w, Dv) mt_attn_pv2_s16(acc, (pv)[0], (w)[0], (pv)[1], (w)[1], Dv)
#endif
#ifndef MT_ATTN_SETUP /* what the RISC-V variants learn of k and v once per call (mt_attn_setup_rv) */
#define MT_ATTN_SETUP(a, k, ks, v, vs, S, D, Dv) ((void)0)
#endif
#ifndef MT_ATTN_GROUP_s8
#define MT_ATTN_GROUP_s8 2
#define mt_attn_pvg_s8(a, acc, pv, w, Dv) mt_attn_pv2_s8(acc, (pv)[0], (w)[0], (pv)[1], (w)[1], Dv)
#endif

/* acc[d] += w v[d] for one key (a block's last listed key) */
static inline void mt_attn_pv1_s8(int32_t *acc, const int8_t *v, int32_t w, int Dv) {
  int d;
  for (d = 0; d < Dv; ++d) acc[d] += w * (int32_t)v[d];
}
static inline void mt_attn_pv1_s16(int64_t *acc, const int16_t *v, int32_t a, int Dv) {
  int d;
  for (d = 0; d < Dv; ++d) acc[d] += a * v[d]; /* an int32 product, as above */
}

/* Per-query normaliser: out = acc / l * 2^g * scale_v / scale_out, with |acc| <~ l * 2^15
 * (weights are Q16, v at most 2^15). One reciprocal per query: acc is first brought to ~31
 * bits (pre), then multiplied by y = 1/l (times the scale ratio's multiplier, y * 2^-e) and
 * rounded once. */
typedef struct {
  uint32_t y;
  int pre, sh;
} mt_attn_norm;

static mt_attn_norm mt_attn_norm_init(const mt_attn *a, uint32_t l, int g) {
  const int32_t m = a->p[MT_ATTN_OUT_M];
  mt_attn_norm n;
  int e;
  n.y = mt_recip_u32(l, &e);
  if (m != 0) n.y = (uint32_t)mt_rshift_u64((uint64_t)n.y * (uint32_t)m, 31); /* m > 0: a ratio of scales */
  n.pre = mt_msb32(l) - 15; /* l >= 2^16 -> pre >= 1; |acc / 2^pre| <= ~2^31 */
  n.sh = e - n.pre - g + a->p[MT_ATTN_OUT_S];
  return n;
}

static int32_t mt_attn_norm_apply(const mt_attn_norm *n, int64_t acc) {
  return mt_rshift_s64(mt_rshift_s64_s64(acc, n->pre) * (int64_t)n->y, n->sh);
}

/* A query's outputs: out[d] = OUT(norm(acc[d]), 0) (OUT: mt_out_*), mt_attn_out_* */
#define MT_DEFINE_ATTN_OUT(NAME, CT, ACC, OUT)                                                  \
  static void NAME(const mt_attn_norm *n, const ACC *acc, CT *out, int Dv) {                    \
    int d;                                                                                      \
    for (d = 0; d < Dv; ++d) out[d] = OUT(mt_attn_norm_apply(n, acc[d]), 0);                    \
  }
MT_DEFINE_ATTN_OUT(mt_attn_out_ref_s8, int8_t, int32_t, mt_out_s8)
MT_DEFINE_ATTN_OUT(mt_attn_out_ref_s16, int16_t, int64_t, mt_out_s16)
#if MT_DSP
/* For 33 <= sh <= 63 (sh = 46 - g + the output shift) the same integers in 32-bit steps:
 * a = round(|acc| / 2^pre) (1 <= pre <= 16) from the words {hi, lo} of |acc| + 2^(pre-1) (UT:
 * one word for int8, two for int16) as lo >> pre | hi << (32 - pre), a < 2^32 where
 * hi >> pre = 0 (|acc| <= 2^31 for int8; about l 2^15 for int16, so a <= ~2^31); with
 * y <= 2^31, round(a y / 2^sh) = floor((a y + 2^(sh-1)) / 2^sh) is the high word of a y
 * (UMULL; the low word of 2^(sh-1) is 0, so no carry) plus 2^(sh-33), shifted by sh - 32,
 * below 2^30 (nothing to saturate at int32); then the sign by EOR and SUB of acc's sign word
 * (no branch: GCC made one copy of the tail per sign) and SSAT to the output type (mt_out_*
 * with zero point 0). REF: mt_attn_out_ref_*, OUT: mt_out_*. */
#define MT_DEFINE_ATTN_OUT_DSP(NAME, CT, ACC, MAG, UT, BITS, REF, OUT)                                    \
  static void NAME(const mt_attn_norm *n, const ACC *acc, CT *out, int Dv) {                              \
    const uint32_t y = n->y;                                                                              \
    const int pre = n->pre, hs = n->sh - 32;                                                              \
    int d;                                                                                                \
    if (hs < 1 || hs > 31) {                                                                              \
      REF(n, acc, out, Dv);                                                                               \
      return;                                                                                             \
    }                                                                                                     \
    for (d = 0; d < Dv; ++d) {                                                                            \
      const UT m = MAG(acc[d]) + (1u << (pre - 1));                                                       \
      const uint32_t lo = (uint32_t)m, hi = (uint32_t)((uint64_t)m >> 32);                                \
      uint32_t r, sg;                                                                                     \
      if (hi >> pre) { /* beyond the bound above: the reference */                                        \
        out[d] = OUT(mt_attn_norm_apply(n, acc[d]), 0);                                                   \
        continue;                                                                                         \
      }                                                                                                   \
      r = (mt_mulhi_u32(lo >> pre | hi << (32 - pre), y) + (1u << (hs - 1))) >> hs;                      \
      sg = (uint32_t)(int32_t)(acc[d] >> (8 * sizeof(ACC) - 1)); /* 0 or ~0 */                          \
      out[d] = (CT)(int32_t)__builtin_arm_ssat((int32_t)((r ^ sg) - sg), BITS);                           \
    }                                                                                                     \
  }
MT_DEFINE_ATTN_OUT_DSP(mt_attn_out_s8, int8_t, int32_t, mt_mag32, uint32_t, 8, mt_attn_out_ref_s8, mt_out_s8)
MT_DEFINE_ATTN_OUT_DSP(mt_attn_out_s16, int16_t, int64_t, mt_abs_u64, uint64_t, 16, mt_attn_out_ref_s16,
                       mt_out_s16)
#else
#define mt_attn_out_s8 mt_attn_out_ref_s8
#define mt_attn_out_s16 mt_attn_out_ref_s16
#endif

/* 0 through an empty asm: a loop of zero stores (Dv of them) that GCC does not turn into a call
 * of memset (the C library's costs ~4 instructions per byte at these sizes) */
static inline int32_t mt_zero_opaque(void) {
  int32_t z = 0;
  __asm__("" : "+r"(z));
  return z;
}

/* The max of a block's visible logits t[0 .. nk-1] (keys j .. j+nk-1 of query i, a keep mask)
 * into *bm; 0 when none is visible. */
static int mt_attn_visible_max(const mt_attn *a, int i, int j, const int32_t *t, int nk, int32_t *bm) {
  int u, have = 0;
  int32_t m = 0;
  for (u = 0; u < nk; ++u)
    if (mt_attn_visible(a, i, j + u) && (!have || t[u] > m)) {
      m = t[u];
      have = 1;
    }
  *bm = m;
  return have;
}

/* 2^-(z / 2^16) in Q16, the weights and rescalings of the streaming attention: with
 * z = n 2^16 + 512 h + l, 2^-(z/2^16) = 2^-n 2^-(h/128) 2^-(l/65536), the high word of the
 * product of two Q31 factors (mt_exp2_hi[h] and the line MT_EXP2_LO_A - l MT_EXP2_LO_C, one
 * MLS; relative error < 2e-6) is the mantissa in Q30, rounded to Q16 (ties up) by 14 + n more
 * bits (error < 0.62 units); 0 for n >= 17, z >= MT_ATTN_EXP2_ZERO. */
#define MT_ATTN_EXP2_ZERO (17u << 16)
static inline __attribute__((always_inline)) uint32_t mt_attn_exp2(uint32_t z) {
  const uint32_t n = z >> 16;
  uint32_t x;
  if (n >= 17) return 0;
  x = mt_mulhi_u32(mt_exp2_hi[(z >> 9) & 127u], MT_EXP2_LO_A - (z & 511u) * MT_EXP2_LO_C);
  return ((x >> (13 + n)) + 1u) >> 1;
}

/* A block's weights w = 2^(t - mx) (Q16, <= 1 since mx is at least the block's max) of its
 * visible keys; *l gets their sum. Rounded to Q(16 - g) for the sums, all but zeros are listed:
 * weight in t[n] (in place of the logits), row in pv[n]. Returns n. */
#define MT_ATTN_WEIGHT(G) /* the logit *tu, row v; G = g */                                              \
  do {                                                                                                    \
    const uint32_t w = mt_attn_exp2((uint32_t)mx - (uint32_t)*tu);                                        \
    const int32_t wg = (int32_t)((G) ? (w >> (G)) + ((w >> ((G) - 1)) & 1u) : w);                         \
    sum += w;                                                                                             \
    if (wg != 0) {                                                                                        \
      *tw++ = wg;                                                                                         \
      *pw++ = v;                                                                                          \
    }                                                                                                     \
  } while (0)
/* The usual case of mt_attn_weights_* (no mask, g = 0): every key with z = mx - t below
 * MT_ATTN_EXP2_ZERO listed with its weight mt_attn_exp2(z), without testing it (>= 1: the two
 * factors' product is at least 2^29 in Q30). Armv7E-M: the loop in inline assembly, 20
 * instructions per listed key (GCC's took 25: it spilled the row list's pointer), its rounding
 * ((x >> (13 + n)) + 1) >> 1 as ((x >> n) + 2^13) >> 14 (the same floor of (x + 2^(13 + n)) /
 * 2^(14 + n), one add fewer); the t index counts up to 0 from -4 nk (nk >= 1), the row step
 * stays in memory (13 registers). */
#if MT_DSP
#define MT_ATTN_WEIGHTS_USUAL                                                                             \
  do {                                                                                                    \
    const int32_t vstep = vs * (int32_t)sizeof(*v);                                                       \
    int32_t off = -4 * nk;                                                                                \
    uint32_t z, x, y;                                                                                     \
    __asm__ volatile("1:\n\t"                                                                             \
                     "ldr %[z], [%[te], %[off]]\n\t"                                                      \
                     "subs %[z], %[mx], %[z]\n\t"                                                         \
                     "cmp %[z], %[zero]\n\t"                                                             \
                     "bhs 2f\n\t"                                                                         \
                     "ubfx %[x], %[z], #9, #7\n\t"                                                        \
                     "ldr %[x], [%[tab], %[x], lsl #2]\n\t"                                               \
                     "ubfx %[y], %[z], #0, #9\n\t"                                                        \
                     "mls %[y], %[y], %[c], %[a]\n\t"                                                     \
                     "umull %[y], %[x], %[x], %[y]\n\t"                                                   \
                     "lsrs %[z], %[z], #16\n\t"         /* n */                                         \
                     "lsrs %[x], %[x], %[z]\n\t"                                                          \
                     "add %[x], %[x], #8192\n\t"                                                          \
                     "lsrs %[x], %[x], #14\n\t"                                                           \
                     "add %[sum], %[sum], %[x]\n\t"                                                       \
                     "str %[x], [%[tw]], #4\n\t"                                                          \
                     "str %[v], [%[pw]], #4\n\t"                                                          \
                     "2:\n\t"                                                                             \
                     "ldr %[x], %[vstep]\n\t"                                                             \
                     "add %[v], %[v], %[x]\n\t"                                                           \
                     "adds %[off], %[off], #4\n\t"                                                        \
                     "bne 1b"                                                                             \
                     : [z] "=&r"(z), [x] "=&r"(x), [y] "=&r"(y), [off] "+r"(off), [sum] "+r"(sum),        \
                       [tw] "+r"(tw), [pw] "+r"(pw), [v] "+r"(v)                                          \
                     : [te] "r"(end), [mx] "r"(mx), [tab] "r"(mt_exp2_hi), [a] "r"(MT_EXP2_LO_A),         \
                       [c] "r"(MT_EXP2_LO_C), [zero] "I"(MT_ATTN_EXP2_ZERO), [vstep] "m"(vstep)           \
                     : "cc", "memory");                                                                   \
  } while (0)
#else
#define MT_ATTN_WEIGHTS_USUAL                                                                             \
  do {                                                                                                    \
    for (; tu != end; ++tu, v += vs) {                                                                    \
      const uint32_t z = (uint32_t)mx - (uint32_t)*tu;                                                    \
      if (z < MT_ATTN_EXP2_ZERO) {                                                                        \
        const uint32_t w = mt_attn_exp2(z);                                                               \
        sum += w;                                                                                         \
        *tw++ = (int32_t)w;                                                                               \
        *pw++ = v;                                                                                        \
      }                                                                                                   \
    }                                                                                                     \
  } while (0)
#endif
#define MT_DEFINE_ATTN_WEIGHTS(NAME, CT)                                                                  \
  static __attribute__((noinline)) int NAME(const mt_attn *a, int i, int j, int32_t mx, int g, int32_t *t, \
                                            int nk, const CT *v, int vs, const CT **pv, uint32_t *l) {    \
    const int32_t *tu = t, *const end = t + nk;                                                           \
    int32_t *tw = t;                                                                                      \
    const CT **pw = pv;                                                                                   \
    uint32_t sum = 0;                                                                                     \
    if (!a->keep && g == 0) /* the usual case */                                                          \
      MT_ATTN_WEIGHTS_USUAL;                                                                              \
    else                                                                                                  \
      for (; tu != end; ++tu, v += vs)                                                                    \
        if (!a->keep || mt_attn_visible(a, i, j + (int)(tu - t))) MT_ATTN_WEIGHT(g);                      \
    *l += sum;                                                                                            \
    return (int)(tw - t);                                                                                 \
  }
MT_DEFINE_ATTN_WEIGHTS(mt_attn_weights_s8, int8_t)
MT_DEFINE_ATTN_WEIGHTS(mt_attn_weights_s16, int16_t)

/* Streaming attention, one body for both types (blocked online softmax): the keys in blocks of
 * MT_ATTN_KEYS; per block its logits (mt_attn_logits_*: the Armv7E-M variants keep q in
 * registers or compute two keys per pass over it), their max m_b over the visible keys; when
 * m_b raises the running max m the sums and l are rescaled once by alpha = 2^(m - m_b) (Q16,
 * mt_attn_rescale_row_*, mt_mulq16_u32), then the block's weights 2^(t - m) (mt_attn_weights_*)
 * and acc[d] += sum w v[d], MT_ATTN_GROUP_* keys per pass over the sums (mt_attn_pvg_*). The
 * integers depend on the block size (where the roundings of the rescaling fall), the same in
 * every variant. ACC the sums: int64 for s16; int32 for s8, where the weights enter with g
 * fewer bits so that S 2^(16 - g) 2^7 <= 2^31. Working memory: the block's logits and row
 * pointers on the stack (516 B on 32-bit cores) and acc. 64 keys per block: half the blocks'
 * setups and rescalings of 32 (0.91x to 0.96x the instructions at L = S = 128 on Cortex-M4),
 * the working memory under 1 KB. The steps of a type: LOGITS (mt_attn_logits_*), RESCALE_ROW
 * (mt_attn_rescale_row_*), WEIGHTS (mt_attn_weights_*), GROUP keys by PVG (MT_ATTN_GROUP_*,
 * mt_attn_pvg_*), the rest by PV2 and PV1 (mt_attn_pv2_*, mt_attn_pv1_*), OUT (mt_attn_out_*);
 * MT_ATTN_SETUP: what a variant learns of k and v once per call (RISC-V: mt_attn_setup_rv). */
#define MT_ATTN_KEYS 64
#define MT_DEFINE_ATTENTION_STREAM(NAME, CT, ACC, LOGITS, RESCALE_ROW, WEIGHTS, GROUP, PVG, PV2, PV1, OUT) \
  void NAME(const int32_t *p, const uint8_t *keep, const CT *q, const CT *k, const CT *v, CT *out,         \
            ACC *acc) {                                                                                    \
    mt_attn a = mt_attn_init(p, keep);                                                                     \
    const int L = p[MT_ATTN_L], S = p[MT_ATTN_S], D = p[MT_ATTN_D], Dv = p[MT_ATTN_DV];                    \
    const int qs = mt_stride(p[MT_ATTN_Q_STRIDE], D), ks = mt_stride(p[MT_ATTN_K_STRIDE], D);              \
    const int vs = mt_stride(p[MT_ATTN_V_STRIDE], Dv), os = mt_stride(p[MT_ATTN_OUT_STRIDE], Dv);          \
    const int g = sizeof(ACC) == 4 && S > 256 ? mt_msb32((uint32_t)(S - 1)) + 1 - 8 : 0;                   \
    int32_t tb[MT_ATTN_KEYS + 1]; /* a block's logits, then weights (one more: an odd block's pair) */     \
    const CT *pv[MT_ATTN_KEYS];   /* the weighted keys' rows */                                            \
    int i, j, u, n, d;                                                                                     \
    MT_ATTN_SETUP(&a, k, ks, v, vs, S, D, Dv);                                                             \
    for (i = 0; i < L; ++i) {                                                                              \
      const CT *qi = q + i * qs;                                                                           \
      const int jend = mt_attn_key_end(&a, i);                                                             \
      int have = 0;                                                                                        \
      int32_t mx = 0, bm;                                                                                  \
      uint32_t l = 0; /* sum of 2^(t_j - mx), Q16 */                                                       \
      for (j = 0; j < jend; j += MT_ATTN_KEYS) {                                                           \
        const int nk = jend - j < MT_ATTN_KEYS ? jend - j : MT_ATTN_KEYS;                                  \
        const CT *vb = v + j * vs;                                                                         \
        bm = LOGITS(&a, qi, k + j * ks, ks, nk, D, tb);                                                    \
        if (keep && !mt_attn_visible_max(&a, i, j, tb, nk, &bm)) continue; /* no visible key */            \
        if (!have) {                                                                                       \
          have = 1;                                                                                        \
          mx = bm;                                                                                         \
          for (d = 0; d < Dv; ++d) acc[d] = mt_zero_opaque();                                              \
        } else if (bm > mx) {                                                                              \
          const uint32_t alpha = mt_attn_exp2((uint32_t)bm - (uint32_t)mx);                                \
          l = mt_mulq16_u32(l, alpha);                                                                     \
          RESCALE_ROW(acc, alpha, Dv);                                                                     \
          mx = bm;                                                                                         \
        }                                                                                                  \
        n = WEIGHTS(&a, i, j, mx, g, tb, nk, vb, vs, pv, &l);                                              \
        for (u = 0; u + GROUP <= n; u += GROUP)                                                            \
          PVG(&a, acc, pv + u, tb + u, Dv);                                                                \
        MT_ATTN_TAIL_PAIRS (n - u >= 2) {                                                                  \
          PV2(acc, pv[u], tb[u], pv[u + 1], tb[u + 1], Dv);                                                \
          u += 2;                                                                                          \
        }                                                                                                  \
        if (u < n) PV1(acc, pv[u], tb[u], Dv);                                                             \
      }                                                                                                    \
      if (!have) { /* fully masked row: zeros */                                                           \
        for (d = 0; d < Dv; ++d) out[i * os + d] = 0;                                                      \
        continue;                                                                                          \
      }                                                                                                    \
      {                                                                                                    \
        const mt_attn_norm nrm = mt_attn_norm_init(&a, l, g);                                              \
        OUT(&nrm, acc, out + i * os, Dv);                                                                  \
      }                                                                                                    \
    }                                                                                                      \
  }
MT_DEFINE_ATTENTION_STREAM(mt_attention_stream_s8, int8_t, int32_t, mt_attn_logits_s8, mt_attn_rescale_row_s8,
                           mt_attn_weights_s8, MT_ATTN_GROUP_s8, mt_attn_pvg_s8, mt_attn_pv2_s8,
                           mt_attn_pv1_s8, mt_attn_out_s8)
MT_DEFINE_ATTENTION_STREAM(mt_attention_stream_s16, int16_t, int64_t, mt_attn_logits_s16,
                           mt_attn_rescale_row_s16, mt_attn_weights_s16, MT_ATTN_GROUP_s16, mt_attn_pvg_s16,
                           mt_attn_pv2_s16, mt_attn_pv1_s16, mt_attn_out_s16)

/* Softmax in Q0.15 of the visible entries of one row of base-2 logits (Q16), in place;
 * invisible entries become 0. Same exp and reciprocal as everywhere else. */
static void mt_attn_probs_row(const mt_attn *a, int i, int32_t *row) {
  const int S = a->p[MT_ATTN_S];
  int j, have = 0, sh;
  int32_t mx = 0;
  uint64_t sum = 0;
  uint32_t y16;
  for (j = 0; j < S; ++j)
    if (mt_attn_visible(a, i, j) && (!have || row[j] > mx)) {
      mx = row[j];
      have = 1;
    }
  if (!have) {
    for (j = 0; j < S; ++j) row[j] = 0;
    return;
  }
  for (j = 0; j < S; ++j)
    if (mt_attn_visible(a, i, j)) sum += mt_exp2neg_q20((uint32_t)mx - (uint32_t)row[j]);
  y16 = mt_norm16(sum, &sh);
  for (j = 0; j < S; ++j) {
    uint32_t pr = 0;
    if (mt_attn_visible(a, i, j)) {
      pr = mt_rsh_u32(mt_exp2neg_q16((uint32_t)mx - (uint32_t)row[j]) * y16, sh);
      if (pr > 32767u) pr = 32767u;
    }
    row[j] = (int32_t)pr;
  }
}

/* The two-pass reference: the scores by DOT (mt_dot_*), each row's probabilities in Q0.15, then P v
 * saturated by OUT (mt_out_*) */
#define MT_DEFINE_ATTENTION_TWOPASS(NAME, CT, DOT, OUT)                                                     \
  void NAME(const int32_t *p, const uint8_t *keep, const CT *q, const CT *k, const CT *v, CT *out,          \
            int32_t *scores) {                                                                              \
    const mt_attn a = mt_attn_init(p, keep);                                                                \
    const int L = p[MT_ATTN_L], S = p[MT_ATTN_S], D = p[MT_ATTN_D], Dv = p[MT_ATTN_DV];                     \
    const int qs = mt_stride(p[MT_ATTN_Q_STRIDE], D), ks = mt_stride(p[MT_ATTN_K_STRIDE], D);               \
    const int vs = mt_stride(p[MT_ATTN_V_STRIDE], Dv), os = mt_stride(p[MT_ATTN_OUT_STRIDE], Dv);           \
    int i, j, d;                                                                                            \
    /* pass 1: all L x S logits, then each row's probabilities (Q0.15) in place */                          \
    for (i = 0; i < L; ++i) {                                                                               \
      for (j = 0; j < S; ++j)                                                                               \
        scores[i * S + j] =                                                                                 \
            mt_attn_visible(&a, i, j) ? mt_attn_logit(&a, DOT(q + i * qs, k + j * ks, 1, D)) : 0;              \
      mt_attn_probs_row(&a, i, scores + i * S);                                                             \
    }                                                                                                       \
    /* pass 2: out = P v, P in Q0.15 */                                                                     \
    for (i = 0; i < L; ++i)                                                                                 \
      for (d = 0; d < Dv; ++d) {                                                                            \
        int64_t acc = 0;                                                                                    \
        for (j = 0; j < S; ++j) acc += scores[i * S + j] * (int32_t)v[j * vs + d]; /* <= 2^30 */           \
        out[i * os + d] = OUT(mt_rq(acc, p[MT_ATTN_OUT_M], p[MT_ATTN_OUT_S] + 15), 0);                      \
      }                                                                                                     \
  }
MT_DEFINE_ATTENTION_TWOPASS(mt_attention_twopass_s8, int8_t, mt_dot_s8_s8, mt_out_s8)
MT_DEFINE_ATTENTION_TWOPASS(mt_attention_twopass_s16, int16_t, mt_dot_s16_s16, mt_out_s16)

#if MT_F32
/* ==================================================================================== */
/* Float32 (training in float): mt_attention_f32 and its backward                       */
/* ==================================================================================== */

/* Per query i, its visible keys j in ascending order (online softmax, no L x S buffer, the
 * running sums in out's row): s = scale (q_i . k_j); where s exceeds the running max m, the
 * running sum l and the row are rescaled by exp(m - s) and m = s; then w = exp(s - m),
 * l += w, out_i += w v_j. At the end out_i *= 1 / l and lse_i = m + log l; no visible key:
 * a zero row, lse_i = +infinity. */
void mt_attention_f32(const int32_t *p, const uint8_t *keep, const float *q, const float *k, const float *v,
                      float *out, float *lse, float scale) {
  const mt_attn a = mt_attn_init(p, keep);
  const int L = p[MT_ATTN_L], D = p[MT_ATTN_D], Dv = p[MT_ATTN_DV];
  const int qs = mt_stride(p[MT_ATTN_Q_STRIDE], D), ks = mt_stride(p[MT_ATTN_K_STRIDE], D);
  const int vs = mt_stride(p[MT_ATTN_V_STRIDE], Dv), os = mt_stride(p[MT_ATTN_OUT_STRIDE], Dv);
  int i, j, d;
  for (i = 0; i < L; ++i) {
    const float *qi = q + i * qs;
    float *o = out + i * os;
    const int end = mt_attn_key_end(&a, i);
    float m = 0.0f, l = 0.0f;
    for (d = 0; d < Dv; ++d) o[d] = 0.0f;
    for (j = 0; j < end; ++j) {
      float s, w;
      if (!mt_attn_visible(&a, i, j)) continue;
      s = scale * mt_dotf(0.0f, qi, 1, k + j * ks, 1, D);
      if (l == 0.0f) {
        m = s; /* the first visible key */
      } else if (s > m) {
        const float alpha = mt_expf(m - s);
        l *= alpha;
        for (d = 0; d < Dv; ++d) o[d] *= alpha;
        m = s;
      }
      w = mt_expf(s - m);
      l += w;
      for (d = 0; d < Dv; ++d) o[d] += w * v[j * vs + d];
    }
    if (l > 0.0f) {
      const float r = 1.0f / l;
      for (d = 0; d < Dv; ++d) o[d] *= r;
      if (lse) lse[i] = m + mt_logf(l);
    } else if (lse) {
      lse[i] = mt_f32_of_bits(MT_F32_INF_BITS);
    }
  }
}

/* FlashAttention-2's backward, one query at a time, its visible keys ascending: D_i =
 * dout_i . out_i; s = scale (q_i . k_j), pr = exp(s - lse_i); dv_j += pr dout_i;
 * ds = pr (dout_i . v_j - D_i); dq_i += (scale ds) k_j, dk_j += (scale ds) q_i. */
void mt_attention_backward_f32(const int32_t *p, const uint8_t *keep, const float *q, const float *k, const float *v,
                               const float *out, const float *dout, const float *lse, float *dq, float *dk, float *dv,
                               float scale, int acc) {
  const mt_attn a = mt_attn_init(p, keep);
  const int L = p[MT_ATTN_L], S = p[MT_ATTN_S], D = p[MT_ATTN_D], Dv = p[MT_ATTN_DV];
  const int qs = mt_stride(p[MT_ATTN_Q_STRIDE], D), ks = mt_stride(p[MT_ATTN_K_STRIDE], D);
  const int vs = mt_stride(p[MT_ATTN_V_STRIDE], Dv), os = mt_stride(p[MT_ATTN_OUT_STRIDE], Dv);
  int i, j, d;
  if (!(acc & 1)) { /* only the rows' D or Dv elements: they may be views into one packed gradient */
    for (i = 0; dq && i < L; ++i)
      for (d = 0; d < D; ++d) dq[i * qs + d] = 0.0f;
    for (j = 0; dk && j < S; ++j)
      for (d = 0; d < D; ++d) dk[j * ks + d] = 0.0f;
    for (j = 0; dv && j < S; ++j)
      for (d = 0; d < Dv; ++d) dv[j * vs + d] = 0.0f;
  }
  if (!dq && !dk && !dv) return;
  for (i = 0; i < L; ++i) {
    const float *qi = q + i * qs, *gi = dout + i * os;
    const int end = mt_attn_key_end(&a, i);
    const float li = lse[i];
    float Di;
    if (mt_f32_bits(li) == MT_F32_INF_BITS) continue; /* no visible key */
    Di = mt_dotf(0.0f, gi, 1, out + i * os, 1, Dv);
    for (j = 0; j < end; ++j) {
      const float *kj = k + j * ks;
      float pr;
      if (!mt_attn_visible(&a, i, j)) continue;
      pr = mt_expf(scale * mt_dotf(0.0f, qi, 1, kj, 1, D) - li);
      if (dv)
        for (d = 0; d < Dv; ++d) dv[j * vs + d] += pr * gi[d];
      if (dq || dk) {
        const float sds = scale * (pr * (mt_dotf(0.0f, gi, 1, v + j * vs, 1, Dv) - Di));
        if (dq)
          for (d = 0; d < D; ++d) dq[i * qs + d] += sds * kj[d];
        if (dk)
          for (d = 0; d < D; ++d) dk[j * ks + d] += sds * qi[d];
      }
    }
  }
}
#endif
