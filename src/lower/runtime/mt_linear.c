/* mt_linear.c - the linear layers (mt_linear_<x>_<w>_<y>) and the batched matmul
 * (mt_matmul_*): the lowering's linear family (src/lower/rules/linear.cpp). First the
 * portable reference's parts (a dot product and a requantization per output), then the
 * Armv7E-M variants of the layers (#if MT_DSP) and the Armv8.1-M MVE variants of the int8 x
 * int8 layers (#if MT_MVE), which use the reference's parts and which the kernels, last,
 * call first. Part of mt_kernels.c. */
#include "mt_internal.h"

/* A row of x and a weight row in pair order (mt_kernels.h, mt_linear_*: the middle two of
 * each four weights swapped) of a mixed-width layer, int16 x int8 or int8 x int16: the
 * products (|a b| <= 2^22) summed in int32 in chunks of 508 (508 * 2^22 < 2^31, a multiple
 * of four), each chunk then added to an int64. */
#define MT_DEFINE_DOT_PAIRED(NAME, AT, BT)                                                             \
  static int64_t NAME(const AT *a, const BT *w, int n) {                                              \
    int64_t acc = 0;                                                                                  \
    int i = 0;                                                                                        \
    while (i < n) {                                                                                   \
      const int end = n - i > 508 ? i + 508 : n;                                                      \
      int32_t s = 0;                                                                                  \
      for (; i + 4 <= end; i += 4)                                                                    \
        s += (int32_t)a[i] * w[i] + (int32_t)a[i + 1] * w[i + 2] + (int32_t)a[i + 2] * w[i + 1] +     \
             (int32_t)a[i + 3] * w[i + 3];                                                            \
      for (; i < end; ++i) s += (int32_t)a[i] * w[i]; /* the last in % 4, in order */                 \
      acc += s;                                                                                       \
    }                                                                                                 \
    return acc;                                                                                       \
  }
MT_DEFINE_DOT_PAIRED(mt_wdot_s8_s16, int8_t, int16_t)
MT_DEFINE_DOT_PAIRED(mt_wdot_s16_s8, int16_t, int8_t)

/* A row of x and a weight row of a same-width linear layer (in order) */
static int64_t mt_wdot_s8_s8(const int8_t *a, const int8_t *w, int n) { return mt_dot_s8_s8(a, w, 1, n); }
static int64_t mt_wdot_s16_s16(const int16_t *a, const int16_t *w, int n) {
  return mt_dot_s16_s16(a, w, 1, n);
}

/* y[r, o] = max(y_min, y_zero + rq(acc + b[o])) for one output channel (OUT: mt_out_*) */
#define MT_DEFINE_LINEAR_OUT(NAME, YT, OUT)                                                             \
  static YT NAME(int64_t acc, const int32_t *rq, int32_t y_zero, int32_t y_min) {                       \
    const YT v = OUT(mt_rq(acc, rq[0], rq[1]), y_zero);                                                 \
    return v < y_min ? (YT)y_min : v;                                                                   \
  }
MT_DEFINE_LINEAR_OUT(mt_linear_out_s8, int8_t, mt_out_s8)
MT_DEFINE_LINEAR_OUT(mt_linear_out_s16, int16_t, mt_out_s16)

/* The reference: one dot product (DOT: mt_wdot_*) and one requantization (OUT: mt_linear_out_*)
 * per output. */
#define MT_DEFINE_LINEAR(NAME, XT, WT, YT, BT, DOT, OUT, VARIANT)                                        \
  void NAME(const XT *x, const WT *w, const BT *b, YT *y, int rows, int in, int out, int x_stride,       \
            const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min) {                      \
    int r, o;                                                                                            \
    const int xs = x_stride > 0 ? x_stride : in;                                                         \
    if (VARIANT(x, w, b, y, rows, in, out, xs, rq, rq_per_channel, y_zero, y_min)) return;               \
    for (r = 0; r < rows; ++r)                                                                           \
      for (o = 0; o < out; ++o) {                                                                        \
        int64_t acc = DOT(x + r * xs, w + o * in, in);                                                    \
        if (b) acc += b[o];                                                                              \
        y[r * out + o] = OUT(acc, rq + (rq_per_channel ? 2 * o : 0), y_zero, y_min);                     \
      }                                                                                                  \
  }

#if MT_DSP
/* Armv7E-M variants of the linear layers: two output channels per pass over a row of x, so
 * each word of x is loaded (and its bytes sign-extended) once for both. int8 x int8: per 4
 * inputs and 2 channels 3 LDR, 6 SXTB16, 4 SMLAD for 8 MACs, int32 sums exact as in the
 * reference; int16 x int16: per 2 inputs 3 LDR, 2 SMLALD for 4 MACs; int16 x int8 (and int8 x
 * int16): per 4 inputs 4 LDR, 4 SXTB16, 4 SMLALD for 8 MACs (the weights in pair order meet the
 * int16 operand's halfword pairs as loaded); exact 64-bit sums. Same requantization, same
 * integers as the reference. */

/* One output of a DSP layer from its exact sum acc (bias included): y_zero + rq(acc) saturated
 * (QADD, then SSAT), at least y_min; mt_rq32_common inline when the channel's shift allows it.
 * The same integers as mt_linear_out_*: |rq| <= 2^31, and the saturations agree in sign.
 * NAME64, for the int64 sums: a sum that fits int32 (all but the widest) by NAME32, the same
 * integer, inline (the one-row layers of a decoder's step: the call of mt_rq per output cost
 * as much again as its requantization); a wider one by the reference's REF (mt_linear_out_*). */
#define MT_DEFINE_LINEAR_OUT_DSP(NAME32, NAME64, YT, BITS, REF)                                         \
  static inline YT NAME32(int32_t acc, const int32_t *rq, int32_t y_zero, int32_t y_min) {              \
    const int32_t r = rq[1] >= 1 && rq[1] <= 31 && rq[0] != 0 ? mt_rq32_common(acc, rq[0], rq[1])       \
                                                              : mt_rq(acc, rq[0], rq[1]);              \
    const int32_t v = (int32_t)__builtin_arm_ssat(__qadd(r, y_zero), BITS);                             \
    return (YT)(v < y_min ? y_min : v);                                                                 \
  }                                                                                                     \
  static inline YT NAME64(int64_t acc, const int32_t *rq, int32_t y_zero, int32_t y_min) {              \
    return acc == (int32_t)acc ? NAME32((int32_t)acc, rq, y_zero, y_min) : REF(acc, rq, y_zero, y_min); \
  }
MT_DEFINE_LINEAR_OUT_DSP(mt_linear_out32_s8, mt_linear_out64_s8, int8_t, 8, mt_linear_out_s8)
MT_DEFINE_LINEAR_OUT_DSP(mt_linear_out32_s16, mt_linear_out64_s16, int16_t, 16, mt_linear_out_s16)

/* The requantization of one channel, set up once per channel by the linear layers when
 * 1 <= s <= 31, m > 0 (a positive ratio below 1/2, the usual case) and |y_zero| < 2^(31-s)
 * (mt_rq_chan_fast): with P = acc m (|P| < 2^62), y_zero + rq(acc) = y_zero + floor((P +
 * 2^(30+s) - [P < 0]) / 2^(31+s)) is floor(T / 2^(31+s)) for T = P + c - [P < 0] with the
 * zero point folded into c = 2^(30+s) + y_zero 2^(31+s) (|c| < 2^62, so |T| < 2^63): the high
 * word of T shifted right by s - 1 (arithmetic: the floor), no 64-bit shift, the same integer.
 * As m > 0, [P < 0] = [acc < 0] and c - [P < 0] is c plus acc >> 31 (arithmetic: 0 or -1)
 * sign-extended to 64 bits: ADDS and ADC with the shifted operand, then the one SMLAL and the
 * ASR. |result| < 2^31 (the caller saturates it).
 * A shift of 0 or less (a ratio of 1/2 or more: int8 layers with int16 outputs), -30 <= s <= 0
 * with |acc| < 2^(30+s) and |y_zero| < 2^30 (mt_rq_up_ok): the sum shifted left by up = 1 - s
 * first (acc' = acc 2^up, |acc'| < 2^31), then the same with s = 1 (c = 2^31 + y_zero 2^32, no
 * right shift): floor((acc' m + 2^31 - [P < 0]) / 2^32) = floor((P + 2^(30+s) - [P < 0] 2^-up)
 * / 2^(31+s)), the floor of the same number less a fraction in (0, 1] where that is 1, the same
 * integer; |result| < 2^30 + |y_zero| (mt_rq_up: up = 0 for s >= 1). */
typedef struct {
  uint32_t c_lo; /* c's low and high words */
  int32_t c_hi, m;
  int sh;
} mt_rq_chan;

static inline int mt_rq_chan_fast(const int32_t *rq, int32_t y_zero) {
  return MT_RQ_CHAN_FAST(rq[0], rq[1], y_zero);
}

/* |b| + 2^7 sum |w_j| over n int8 weights: a bound on |b + x . w| for int8 x (< 2^32 for n <=
 * 65536 and |b| <= 2^31) */
static uint32_t mt_bound_s8(const int8_t *w, int n, int32_t b) {
  uint32_t a = 0;
  int j;
  for (j = 0; j < n; ++j) a += mt_mag32(w[j]);
  return (a << 7) + mt_mag32(b);
}

/* A channel of int8 x int8 sums that mt_rq_chan can requantize: fast, or a shift of 0 or less
 * whose sums (b + x . w over the channel's n <= 65536 weights) stay within 2^(30+s): |b| + n
 * 2^14 (|x w| <= 2^14) when that is enough, else mt_bound_s8 (a pass over the weights) */
static inline int mt_rq_up_ok(const int32_t *rq, int32_t y_zero, const int8_t *w, int n, int32_t b) {
  const int s = rq[1];
  if (s >= 1) return mt_rq_chan_fast(rq, y_zero);
  if (rq[0] <= 0 || s < -30 || mt_mag32(y_zero) >= 1u << 30) return 0;
  return ((((uint32_t)n << 14) + mt_mag32(b)) >> (30 + s)) == 0 || (mt_bound_s8(w, n, b) >> (30 + s)) == 0;
}

static inline mt_rq_chan mt_rq_chan_init(const int32_t *rq, int32_t y_zero) {
  const int s = rq[1]; /* c = 2^32 (2^(s-2) + y_zero 2^(s-1)), or 2^31 + 2^32 y_zero for s = 1 */
  mt_rq_chan q;
  q.m = rq[0];
  q.sh = s - 1;
  q.c_lo = s == 1 ? 1u << 31 : 0u;
  q.c_hi = (int32_t)((s == 1 ? 0u : 1u << (s - 2)) + (uint32_t)y_zero * (1u << (s - 1)));
  return q;
}

/* A channel of any shift (mt_rq_up_ok): its sums shifted left by up, then mt_rq_chan at
 * max(s, 1) */
typedef struct {
  mt_rq_chan c;
  int up;
} mt_rq_up;

static inline mt_rq_up mt_rq_up_init(const int32_t *rq, int32_t y_zero) {
  const int32_t r[2] = {rq[0], rq[1] >= 1 ? rq[1] : 1};
  mt_rq_up q;
  q.c = mt_rq_chan_init(r, y_zero);
  q.up = rq[1] >= 1 ? 0 : 1 - rq[1];
  return q;
}

/* {*hi, *lo} = c - [sign < 0]: ADDS and ADC of sign >> 31 (arithmetic) */
static inline void mt_rq_chan_c(const mt_rq_chan *q, int32_t sign, uint32_t *lo, uint32_t *hi) {
  __asm__("adds %0, %2, %4, asr #31\n\tadc %1, %3, %4, asr #31"
          : "=&r"(*lo), "=r"(*hi)
          : "r"(q->c_lo), "r"(q->c_hi), "r"(sign)
          : "cc");
}

/* y_zero + rq(acc) for a fast channel (not saturated) */
static inline int32_t mt_rq_chan_apply(const mt_rq_chan *q, int32_t acc) {
  uint32_t lo, hi; /* {hi, lo} = c - [acc < 0] */
  mt_rq_chan_c(q, acc, &lo, &hi);
  const uint64_t u = ((uint64_t)hi << 32 | lo) + (uint64_t)((int64_t)acc * q->m);
  return (int32_t)(uint32_t)(u >> 32) >> q->sh;
}
/* The same for a channel whose c_lo is 0 (s >= 2), from its three other constants:
 * {hi, lo} = {c_hi - [acc < 0], -[acc < 0]}, an ASR and an ADD where c_lo takes ADDS and ADC
 * and one register more */
typedef struct {
  int32_t c_hi, m;
  int sh;
} mt_rq_hi;
static inline mt_rq_hi mt_rq_hi_of(const mt_rq_chan *q) {
  mt_rq_hi h;
  h.c_hi = q->c_hi, h.m = q->m, h.sh = q->sh;
  return h;
}
static inline int32_t mt_rq_hi_apply(const mt_rq_hi *q, int32_t acc) {
  const int32_t n = acc >> 31;
  const uint64_t u = ((uint64_t)(uint32_t)(q->c_hi + n) << 32 | (uint32_t)n) + (uint64_t)((int64_t)acc * q->m);
  return (int32_t)(uint32_t)(u >> 32) >> q->sh;
}
static inline int32_t mt_max32(int32_t a, int32_t b) { return a < b ? b : a; }
/* y_zero + rq(acc) for a fast channel saturated to BITS (SSAT); MT_CHAN_OUT: at least y_min
 * too, mt_linear_out_* for a fast channel */
#define MT_CHAN_SAT(BITS, q, acc) ((int32_t)__builtin_arm_ssat(mt_rq_chan_apply(q, acc), BITS))
/* The same for a channel of any shift (mt_rq_up_ok): the sum shifted left by up first */
#define MT_UP_SAT(BITS, q, acc) MT_CHAN_SAT(BITS, &(q)->c, (int32_t)((uint32_t)(acc) << (q)->up))
#define MT_CHAN_OUT(BITS, q, acc, y_min) mt_max32(MT_CHAN_SAT(BITS, q, acc), y_min)


/* The low word of an int64 through an empty asm: where GCC has proved that the sum fits int32
 * it otherwise drops the conversion and multiplies all 64 bits by m (MUL, MLA, UMULL and adds
 * in place of mt_rq_chan_apply's one SMLAL). */
static inline int32_t mt_low_word(int64_t acc) {
  int32_t lo = (int32_t)acc;
  __asm__("" : "+r"(lo));
  return lo;
}

/* y_zero + rq(acc) for a fast channel and an int64 sum beyond int32, saturated to int32: the
 * same T = P + c' (c' = c - [acc < 0]) in 96 bits, P = acc m = ah m 2^32 + al m for acc = ah
 * 2^32 + al (al unsigned). Its words above the lowest, H = floor(T / 2^32) = ah m + (c'_hi +
 * t) with t = floor((al m + c'_lo) / 2^32) < 2^31: UMLAL, then SMLAL onto the int64 c'_hi +
 * t (|H| < 2^63). Then H >> (s - 1) (s - 1 <= 30: the low word from both words) saturated.
 * The same integer as mt_rq, without its magnitudes and 64-bit rounding. */
static inline int32_t mt_rq_chan_apply64(const mt_rq_chan *q, int64_t acc) {
  const int32_t ah = mt_low_word(acc >> 32); /* (SMLAL, not a 64-bit multiply) */
  int32_t sh = q->sh;
  __asm__ volatile("" : "+r"(sh)); /* what depends on it formed here, not per channel */
  uint32_t lo, hi; /* {hi, lo} = c' */
  mt_rq_chan_c(q, ah, &lo, &hi);
  const uint32_t t = (uint32_t)(((uint64_t)(uint32_t)acc * (uint32_t)q->m + lo) >> 32);
  const int64_t h = (int64_t)ah * q->m + ((int64_t)(int32_t)hi + t);
  const uint32_t hl = (uint32_t)h;
  const int32_t hh = (int32_t)(h >> 32), vh = hh >> sh;
  const int32_t vl = (int32_t)((hl >> sh) | ((uint32_t)hh << 1 << (31 - sh)));
  return vh == vl >> 31 ? vl : vh < 0 ? INT32_MIN : INT32_MAX;
}
/* y_zero + rq(acc) saturated to BITS for a fast channel (q) and an int64 sum: in 32 bits when
 * the sum fits int32 ((acc + 2^31) >> 32 is 0: a compare of the high word), else in 96
 * (mt_rq_chan_apply64). The same integers as mt_linear_out64 without y_min. */
#define MT_CHAN_SAT64(BITS, q, acc)                                                                       \
  ((int32_t)__builtin_arm_ssat((((uint64_t)(int64_t)(acc) + 0x80000000u) >> 32) == 0                     \
                                   ? mt_rq_chan_apply(q, mt_low_word(acc))                                \
                                   : mt_rq_chan_apply64(q, acc),                                          \
                               BITS))
/* The sums of one row of x against two weight rows, a0 += xr . w0 and a1 += xr . w1 over the
 * row's in inputs: MT_ROW_MAC_C, STEP inputs against the two weight rows (MAC2), twice per
 * loop iteration, then one STEP and one input at a time. */
#define MT_ROW_MAC_C(MAC2, STEP, xr, w0, w1, in, a0, a1)                                                  \
  do {                                                                                                    \
    int j;                                                                                                \
    for (j = 0; j + 2 * (STEP) <= (in); j += 2 * (STEP)) {                                                \
      MAC2((xr) + j, (w0) + j, (w1) + j, a0, a1);                                                         \
      MAC2((xr) + j + (STEP), (w0) + j + (STEP), (w1) + j + (STEP), a0, a1);                              \
    }                                                                                                     \
    if (j + (STEP) <= (in)) {                                                                             \
      MAC2((xr) + j, (w0) + j, (w1) + j, a0, a1);                                                         \
      j += (STEP);                                                                                        \
    }                                                                                                     \
    for (; j < (in); ++j) {                                                                               \
      a0 += (int32_t)(xr)[j] * (w0)[j];                                                                   \
      a1 += (int32_t)(xr)[j] * (w1)[j];                                                                   \
    }                                                                                                     \
  } while (0)
/* MT_ROW_MAC_WORDS: int16 x int16 with in a positive multiple of 8 and the row and both weight
 * rows on word boundaries (mt_linear_dsp2_s16_s16_* checks it): LDRD, one instruction for two
 * words (as two pipelined LDR on Cortex-M4 and M7; it faults on an address that is not a
 * multiple of 4), 3 LDRD and 4 SMLALD per 8 MACs, twice per pass: 14 instructions and the end
 * test per 16 MACs where MT_ROW_MAC_C's takes 24 LDR and SMLALD and its adds. 12 registers (a
 * frame pointer leaves 13). Inline assembly: GCC 12 neither pairs the loads into LDRD nor keeps
 * the sums in registers around them. */
#define MT_ROW_MAC_WORDS(MAC2, STEP, xr, w0, w1, in, a0, a1)                                              \
  do {                                                                                                    \
    const char *px_ = (const char *)(xr), *p0_ = (const char *)(w0), *p1_ = (const char *)(w1);           \
    const char *const end_ = px_ + 2 * (in);                                                              \
    int32_t x0_, x1_, u0_, u1_;                                                                           \
    __asm__("1:\n\t"                                                                                       \
            "ldrd %[x0], %[x1], [%[px]], #8\n\t"    /* (x0, x1), (x2, x3) */                             \
            "ldrd %[u0], %[u1], [%[p0]], #8\n\t"    /* channel 0's (w0, w1), (w2, w3) */                 \
            "smlald %Q[a0], %R[a0], %[x0], %[u0]\n\t"                                                     \
            "smlald %Q[a0], %R[a0], %[x1], %[u1]\n\t"                                                     \
            "ldrd %[u0], %[u1], [%[p1]], #8\n\t"    /* channel 1 */                                      \
            "smlald %Q[a1], %R[a1], %[x0], %[u0]\n\t"                                                     \
            "smlald %Q[a1], %R[a1], %[x1], %[u1]\n\t"                                                     \
            "ldrd %[x0], %[x1], [%[px]], #8\n\t"    /* (x4, x5), (x6, x7) */                             \
            "ldrd %[u0], %[u1], [%[p0]], #8\n\t"                                                          \
            "smlald %Q[a0], %R[a0], %[x0], %[u0]\n\t"                                                     \
            "smlald %Q[a0], %R[a0], %[x1], %[u1]\n\t"                                                     \
            "ldrd %[u0], %[u1], [%[p1]], #8\n\t"                                                          \
            "smlald %Q[a1], %R[a1], %[x0], %[u0]\n\t"                                                     \
            "smlald %Q[a1], %R[a1], %[x1], %[u1]\n\t"                                                     \
            "cmp %[px], %[end]\n\t"                                                                        \
            "bne 1b"                                                                                      \
            : [a0] "+r"(a0), [a1] "+r"(a1), [px] "+r"(px_), [p0] "+r"(p0_), [p1] "+r"(p1_),                \
              [x0] "=&r"(x0_), [x1] "=&r"(x1_), [u0] "=&r"(u0_), [u1] "=&r"(u1_)                           \
            : [end] "r"(end_)                                                                             \
            : "cc", "memory");                                                                            \
  } while (0)

/* The sums of two rows of x (xa, xb) against two weight rows in int32 (int16 x int16 words, in a
 * positive multiple of 8): a00 += xa . w0, a01 += xa . w1, a10 += xb . w0, a11 += xb . w1, one
 * LDR of each row's and each weight row's word and four SMLAD per two inputs (a weight word
 * serves both rows: 8 instructions per 8 MACs, as MT_ROW_MAC_WORDS's 7 per 8 for one row; what
 * the int32 sums save is in the requantization and the loop per row) and the end test per 8
 * inputs; 12 registers. The sums are exact when no addition overflowed int32, which the sticky
 * Q flag records (cleared first, returned: 0 when exact). */
static inline int mt_rows2_mac_s16(const int16_t *xa, const int16_t *xb, const int16_t *w0, const int16_t *w1,
                                     int in, int32_t *a) {
  int32_t a00 = a[0], a01 = a[1], a10 = a[2], a11 = a[3], u, va, vb;
  const int16_t *const end = xa + in;
#define MT_ROWS2_STEP                          \
  "ldr %[va], [%[xa]], #4\n\t"                 \
  "ldr %[vb], [%[xb]], #4\n\t"                 \
  "ldr %[u], [%[w0]], #4\n\t"                  \
  "smlad %[a00], %[va], %[u], %[a00]\n\t"      \
  "smlad %[a10], %[vb], %[u], %[a10]\n\t"      \
  "ldr %[u], [%[w1]], #4\n\t"                  \
  "smlad %[a01], %[va], %[u], %[a01]\n\t"      \
  "smlad %[a11], %[vb], %[u], %[a11]\n\t"
  __asm__("movs %[u], #0\n\t"
          "msr APSR_nzcvq, %[u]\n\t" /* Q = 0 */
          "1:\n\t" MT_ROWS2_STEP MT_ROWS2_STEP MT_ROWS2_STEP MT_ROWS2_STEP
          "ldr %[u], %[end]\n\t"
          "cmp %[xa], %[u]\n\t"
          "bne 1b\n\t"
          "mrs %[u], APSR"
          : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [u] "=&r"(u), [va] "=&r"(va),
            [vb] "=&r"(vb), [xa] "+r"(xa), [xb] "+r"(xb), [w0] "+r"(w0), [w1] "+r"(w1)
          : [end] "m"(end)
          : "cc", "memory");
#undef MT_ROWS2_STEP
  a[0] = a00, a[1] = a01, a[2] = a10, a[3] = a11;
  return (int)((uint32_t)u >> 27 & 1u);
}
/* The rows of MT_DEFINE_ROWS2_WORDS (its locals r, x, y, ...), each output APPLY(p0 or p1, its
 * sum) saturated to BITS */
#define MT_ROWS2_LOOP(YT, BITS, APPLY, p0, p1)                                                            \
  for (r = 0; r + 2 <= rows; r += 2, x += 2 * xs, y += 2 * out) {                                         \
    int32_t a[4];                                                                                         \
    a[0] = a[2] = b0, a[1] = a[3] = b1;                                                                   \
    if (mt_rows2_mac_s16(x, x + xs, w0, w1, in, a)) break;                                                \
    y[0] = (YT)__builtin_arm_ssat(APPLY(p0, a[0]), BITS);                                                 \
    y[1] = (YT)__builtin_arm_ssat(APPLY(p1, a[1]), BITS);                                                 \
    y[out] = (YT)__builtin_arm_ssat(APPLY(p0, a[2]), BITS);                                               \
    y[out + 1] = (YT)__builtin_arm_ssat(APPLY(p1, a[3]), BITS);                                           \
  }
/* A pair of channels' rows two at a time through mt_rows2_mac_s16 while the sums stay within
 * int32 (an int32 bias); each output requantized from its int32 sum as MT_CHAN_SAT does, the
 * integer MT_CHAN_SAT64 gives; when both channels' shifts are 2 or more (c_lo = 0), by
 * mt_rq_hi_apply with the channels' three other constants read once per call (GCC reloaded the
 * four of mt_rq_chan at every output: 42 instructions per four outputs where that took 52).
 * Returns the rows done: at the first pair where a sum overflows it stops, and NAME_pair
 * computes that pair and the rows after it. */
#define MT_DEFINE_ROWS2_WORDS(NAME, YT, BITS)                                                             \
  static __attribute__((noinline)) int NAME(const int16_t *x, const int16_t *w0, const int16_t *w1,       \
                                            int32_t b0, int32_t b1, const mt_rq_chan *q0,                 \
                                            const mt_rq_chan *q1, YT *y, int rows, int in, int xs,        \
                                            int out) {                                                    \
    int r;                                                                                                \
    if (q0->c_lo == 0 && q1->c_lo == 0) {                                                                 \
      const mt_rq_hi h0 = mt_rq_hi_of(q0), h1 = mt_rq_hi_of(q1);                                          \
      MT_ROWS2_LOOP(YT, BITS, mt_rq_hi_apply, &h0, &h1);                                                  \
      return r;                                                                                           \
    }                                                                                                     \
    MT_ROWS2_LOOP(YT, BITS, mt_rq_chan_apply, q0, q1);                                                    \
    return r;                                                                                             \
  }
MT_DEFINE_ROWS2_WORDS(mt_rows2_words_s8, int8_t, 8)
MT_DEFINE_ROWS2_WORDS(mt_rows2_words_s16, int16_t, 16)
/* PAIR(PAIR_FN, ROWS2, x, w0, w1, b0, b1, q0, q1, y, rows, in, xs, out, try2): a pair of fast
 * channels' rows. MT_PAIR_ROWS2 (the int16 x int16 word path, in >= 16: at in = 8 the calls
 * cost more than the int32 sums save): first two rows at a time in int32 (ROWS2:
 * mt_rows2_words_*), the rest by PAIR_FN (NAME_pair); once a pair of rows has overflowed,
 * try2 = 0 and the layer's other channels go to PAIR_FN directly (full-range inputs and
 * weights overflow at once: one wasted pair per call). MT_PAIR_PLAIN: PAIR_FN (ROWS2 unused:
 * MT_NO_ROWS2). */
#define MT_PAIR_ROWS2(PAIR_FN, ROWS2, x, w0, w1, b0, b1, q0, q1, y, rows, in, xs, out, try2)              \
  do {                                                                                                    \
    int r_ = 0;                                                                                           \
    if ((try2) && (in) >= 16 && (b0) == (int32_t)(b0) && (b1) == (int32_t)(b1)) {                         \
      r_ = ROWS2(x, w0, w1, (int32_t)(b0), (int32_t)(b1), q0, q1, y, rows, in, xs, out);                  \
      if (r_ + 1 < (rows)) (try2) = 0;                                                                    \
    }                                                                                                     \
    PAIR_FN((x) + r_ * (xs), w0, w1, b0, b1, q0, q1, (y) + r_ * (out), (rows) - r_, in, xs, out);         \
  } while (0)
#define MT_PAIR_PLAIN(PAIR_FN, ROWS2, x, w0, w1, b0, b1, q0, q1, y, rows, in, xs, out, try2)              \
  ((void)(try2), PAIR_FN(x, w0, w1, b0, b1, q0, q1, y, rows, in, xs, out))
#define MT_NO_ROWS2 0

/* y[i] = max(y[i], y_min) for i < n */
#define MT_DEFINE_RAISE_TO(NAME, YT)                                                                       \
  static void NAME(YT *y, int n, int32_t y_min) {                                                          \
    int i;                                                                                                 \
    for (i = 0; i < n; ++i) y[i] = (YT)mt_max32(y[i], y_min);                                              \
  }
MT_DEFINE_RAISE_TO(mt_raise_to_s8, int8_t)
MT_DEFINE_RAISE_TO(mt_raise_to_s16, int16_t)

/* Channels in pairs (outer loop: their bias, multipliers and weight rows are set up once),
 * rows inner, each row's two sums by ROW (above). The sums start from the bias: exact in int32
 * when |b| < 2^30 and in <= 65536 (|x w| <= 2^14), else the reference takes the call; with an
 * int16 operand they are int64 (SMLALD), exact, and for two rows or more a pair of fast
 * channels has its requantization set up once (mt_rq_chan) and its rows computed by NAME_pair,
 * which stores each sum's output saturated (MT_CHAN_SAT64); y_min, when above the type's
 * minimum, is applied by one pass afterwards (mt_raise_to_*). The pair's loop is a function of
 * its own, with few live values, so that GCC keeps more of them in registers (linear_s16 in =
 * 16: 85 instructions per pair of outputs, where one loop for every channel took 100). The
 * other pairs, and an odd last channel (computed twice), take OUT (mt_linear_out32_* or
 * mt_linear_out64_*) per output. PAIR calls NAME_pair (PAIR_NAME; MT_PAIR_PLAIN) or first tries
 * two rows at a time in int32 (MT_PAIR_ROWS2, by ROWS2). RAISE: mt_raise_to_*. */
#define MT_DEFINE_LINEAR_DSP(NAME, PAIR_NAME, XT, WT, YT, BT, BITS, ACC, STEP, MAC2, OUT, RAISE, ROW, PAIR, \
                             ROWS2)                                                                       \
  static __attribute__((noinline)) void PAIR_NAME(const XT *x, const WT *w0, const WT *w1, ACC b0, ACC b1, \
                                                  const mt_rq_chan *q0, const mt_rq_chan *q1, YT *y,      \
                                                  int rows, int in, int xs, int out) {                    \
    YT *const end = y + rows * out;                                                                       \
    for (; y != end; x += xs, y += out) {                                                                 \
      ACC a0 = b0, a1 = b1;                                                                               \
      ROW(MAC2, STEP, x, w0, w1, in, a0, a1);                                                             \
      y[0] = (YT)MT_CHAN_SAT64(BITS, q0, a0);                                                             \
      y[1] = (YT)MT_CHAN_SAT64(BITS, q1, a1);                                                             \
    }                                                                                                     \
  }                                                                                                       \
  static int NAME(const XT *x, const WT *w, const BT *b, YT *y, int rows, int in, int out, int xs,       \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min) {                \
    int r, o, try2 = 1;                                                                                   \
    const int wide = sizeof(ACC) == 8 && rows >= 2;                                                      \
    if (sizeof(ACC) == 4) {                                                                               \
      if (in > 65536) return 0;                                                                           \
      for (o = 0; b && o < out; ++o)                                                                      \
        if (b[o] >= (1 << 30) || b[o] <= -(1 << 30)) return 0;                                           \
    }                                                                                                     \
    for (o = 0; o < out; o += 2) {                                                                        \
      const int o1 = o + 1 < out ? o + 1 : o; /* an odd last channel is computed twice */                 \
      const WT *w0 = w + o * in, *w1 = w + o1 * in;                                                       \
      const int32_t *rq0 = rq + (rq_per_channel ? 2 * o : 0), *rq1 = rq + (rq_per_channel ? 2 * o1 : 0);  \
      const ACC b0 = b ? (ACC)b[o] : 0, b1 = b ? (ACC)b[o1] : 0;                                          \
      if (wide && o1 > o && mt_rq_chan_fast(rq0, y_zero) && mt_rq_chan_fast(rq1, y_zero)) {              \
        const mt_rq_chan q0 = mt_rq_chan_init(rq0, y_zero), q1 = mt_rq_chan_init(rq1, y_zero);            \
        PAIR(PAIR_NAME, ROWS2, x, w0, w1, b0, b1, &q0, &q1, y + o, rows, in, xs, out, try2);               \
        continue;                                                                                         \
      }                                                                                                   \
      for (r = 0; r < rows; ++r) {                                                                        \
        const XT *xr = x + r * xs;                                                                        \
        ACC a0 = b0, a1 = b1;                                                                             \
        ROW(MAC2, STEP, xr, w0, w1, in, a0, a1);                                                          \
        y[r * out + o] = OUT(a0, rq0, y_zero, y_min);                                                     \
        y[r * out + o1] = OUT(a1, rq1, y_zero, y_min);                                                    \
      }                                                                                                   \
    }                                                                                                     \
    if (wide && y_min > -(1 << ((BITS) - 1))) RAISE(y, rows * out, y_min);                               \
    return 1;                                                                                             \
  }

/* 4 int16 inputs against two int16 weight rows: MT_MAC2_S16_S16 twice (the linear layers'
 * step: 8 inputs per pass of their loop) */
#define MT_MAC2_S16_S16_4(xp, p0, p1, a0, a1)                                                             \
  do {                                                                                                    \
    MT_MAC2_S16_S16(xp, p0, p1, a0, a1);                                                                  \
    MT_MAC2_S16_S16((xp) + 2, (p0) + 2, (p1) + 2, a0, a1);                                                \
  } while (0)
/* 4 int16 inputs against two int8 weight rows in pair order (w0, w2, w1, w3): SXTB16 splits
 * a weight word into (w0, w1) and (w2, w3), the two halfword pairs of x as loaded: 4 SMLALD */
#define MT_MAC2_S16_S8(xp, p0, p1, a0, a1)                                                                \
  do {                                                                                                    \
    const int32_t x01_ = mt_ld32(xp), x23_ = mt_ld32((xp) + 2), w0_ = mt_ld32(p0), w1_ = mt_ld32(p1);     \
    a0 = __smlald(x23_, mt_odd_bytes(w0_), __smlald(x01_, __sxtb16(w0_), a0));                            \
    a1 = __smlald(x23_, mt_odd_bytes(w1_), __smlald(x01_, __sxtb16(w1_), a1));                            \
  } while (0)
/* 4 int8 inputs against two int16 weight rows in pair order: x split by SXTB16 into (x0, x2)
 * and (x1, x3), the two halfword pairs of a weight row as loaded */
#define MT_MAC2_S8_S16(xp, p0, p1, a0, a1)                                                                \
  do {                                                                                                    \
    const int32_t xw_ = mt_ld32(xp), xe_ = __sxtb16(xw_), xo_ = mt_odd_bytes(xw_);                        \
    a0 = __smlald(xo_, mt_ld32((p0) + 2), __smlald(xe_, mt_ld32(p0), a0));                                \
    a1 = __smlald(xo_, mt_ld32((p1) + 2), __smlald(xe_, mt_ld32(p1), a1));                                \
  } while (0)
MT_DEFINE_LINEAR_DSP(mt_linear_dsp_s8_s8_s8, mt_linear_dsp_s8_s8_s8_pair, int8_t, int8_t, int8_t, int32_t, 8,
                     int32_t, 4, MT_MAC2_S8_S8, mt_linear_out32_s8, mt_raise_to_s8, MT_ROW_MAC_C,
                     MT_PAIR_PLAIN, MT_NO_ROWS2)
MT_DEFINE_LINEAR_DSP(mt_linear_dsp_s8_s8_s16, mt_linear_dsp_s8_s8_s16_pair, int8_t, int8_t, int16_t, int32_t,
                     16, int32_t, 4, MT_MAC2_S8_S8, mt_linear_out32_s16, mt_raise_to_s16, MT_ROW_MAC_C,
                     MT_PAIR_PLAIN, MT_NO_ROWS2)
MT_DEFINE_LINEAR_DSP(mt_linear_dsp_s8_s16_s8, mt_linear_dsp_s8_s16_s8_pair, int8_t, int16_t, int8_t, int32_t,
                     8, int64_t, 4, MT_MAC2_S8_S16, mt_linear_out64_s8, mt_raise_to_s8, MT_ROW_MAC_C,
                     MT_PAIR_PLAIN, MT_NO_ROWS2)
MT_DEFINE_LINEAR_DSP(mt_linear_dsp_s8_s16_s16, mt_linear_dsp_s8_s16_s16_pair, int8_t, int16_t, int16_t,
                     int32_t, 16, int64_t, 4, MT_MAC2_S8_S16, mt_linear_out64_s16, mt_raise_to_s16,
                     MT_ROW_MAC_C, MT_PAIR_PLAIN, MT_NO_ROWS2)
MT_DEFINE_LINEAR_DSP(mt_linear_dsp_s16_s8_s8, mt_linear_dsp_s16_s8_s8_pair, int16_t, int8_t, int8_t, int64_t,
                     8, int64_t, 4, MT_MAC2_S16_S8, mt_linear_out64_s8, mt_raise_to_s8, MT_ROW_MAC_C,
                     MT_PAIR_PLAIN, MT_NO_ROWS2)
MT_DEFINE_LINEAR_DSP(mt_linear_dsp_s16_s8_s16, mt_linear_dsp_s16_s8_s16_pair, int16_t, int8_t, int16_t,
                     int64_t, 16, int64_t, 4, MT_MAC2_S16_S8, mt_linear_out64_s16, mt_raise_to_s16,
                     MT_ROW_MAC_C, MT_PAIR_PLAIN, MT_NO_ROWS2)
MT_DEFINE_LINEAR_DSP(mt_linear_dsp_s16_s16_s8, mt_linear_dsp_s16_s16_s8_pair, int16_t, int16_t, int8_t,
                     int64_t, 8, int64_t, 4, MT_MAC2_S16_S16_4, mt_linear_out64_s8, mt_raise_to_s8,
                     MT_ROW_MAC_C, MT_PAIR_PLAIN, MT_NO_ROWS2)
MT_DEFINE_LINEAR_DSP(mt_linear_dsp_s16_s16_s16, mt_linear_dsp_s16_s16_s16_pair, int16_t, int16_t, int16_t,
                     int64_t, 16, int64_t, 4, MT_MAC2_S16_S16_4, mt_linear_out64_s16, mt_raise_to_s16,
                     MT_ROW_MAC_C, MT_PAIR_PLAIN, MT_NO_ROWS2)
MT_DEFINE_LINEAR_DSP(mt_linear_words_s16_s16_s8, mt_linear_words_s16_s16_s8_pair, int16_t, int16_t, int8_t,
                     int64_t, 8, int64_t, 4, MT_MAC2_S16_S16_4, mt_linear_out64_s8, mt_raise_to_s8,
                     MT_ROW_MAC_WORDS, MT_PAIR_ROWS2, mt_rows2_words_s8)
MT_DEFINE_LINEAR_DSP(mt_linear_words_s16_s16_s16, mt_linear_words_s16_s16_s16_pair, int16_t, int16_t, int16_t,
                     int64_t, 16, int64_t, 4, MT_MAC2_S16_S16_4, mt_linear_out64_s16, mt_raise_to_s16,
                     MT_ROW_MAC_WORDS, MT_PAIR_ROWS2, mt_rows2_words_s16)

/* int16 x int16: rows of x and weight rows on word boundaries with in a multiple of 8 (the
 * lowering's layers: it aligns its arrays and the arena) through MT_ROW_MAC_WORDS, else
 * MT_ROW_MAC_C: WORDS (mt_linear_words_*) or DSP (mt_linear_dsp_*). */
#define MT_DEFINE_LINEAR_WORDS(NAME, YT, WORDS, DSP)                                                      \
  static int NAME(const int16_t *x, const int16_t *w, const int64_t *b, YT *y, int rows, int in, int out, \
                  int xs, const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min) {         \
    const int words = in >= 8 && (in & 7) == 0 && (xs & 1) == 0 && (((uintptr_t)x | (uintptr_t)w) & 3u) == 0; \
    return (words ? WORDS : DSP)(x, w, b, y, rows, in, out, xs, rq, rq_per_channel, y_zero, y_min);       \
  }
MT_DEFINE_LINEAR_WORDS(mt_linear_dsp2_s16_s16_s8, int8_t, mt_linear_words_s16_s16_s8,
                       mt_linear_dsp_s16_s16_s8)
MT_DEFINE_LINEAR_WORDS(mt_linear_dsp2_s16_s16_s16, int16_t, mt_linear_words_s16_s16_s16,
                       mt_linear_dsp_s16_s16_s16)

/* Four inputs of a row as the two halfword pairs that meet the SXTB16 split of a word of four
 * int8 weights: int8 inputs split by SXTB16 too ((x0, x2), (x1, x3) against weights in order),
 * int16 inputs as loaded ((x0, x1), (x2, x3) against weights in pair order, w0 w2 w1 w3). */
#define MT_SPLIT4_s8(p, e, o)                                                                             \
  do {                                                                                                    \
    const int32_t w_ = mt_ld32(p);                                                                        \
    e = __sxtb16(w_), o = mt_odd_bytes(w_);                                                               \
  } while (0)
#define MT_SPLIT4_s16(p, e, o)                                                                            \
  do {                                                                                                    \
    e = mt_ld32(p), o = mt_ld32((p) + 2);                                                                 \
  } while (0)

/* Inline assembly that needs all 14 registers (r0-r12 and lr): an optimizing build without a
 * frame pointer (MT_COLS8_C, mt_internal.h: a build that keeps one defines it). */
#if defined(__OPTIMIZE__) && !defined(MT_COLS8_C)
#define MT_LDRD14 1
#else
#define MT_LDRD14 0
#endif
/* The inner loops below inlined into the rows where GCC optimizes (as a call, their sums and
 * pointers went through memory: 4% more per MAC); at -O0 a call (a frame pointer and -O0's
 * spills leave the inlined 13-register block no registers) */
#ifdef __OPTIMIZE__
#define MT_ASM_INLINE static inline __attribute__((always_inline))
#else
#define MT_ASM_INLINE static inline
#endif
/* The two-row pass's int16 x int8 inner loop where both rows of x start on word boundaries and
 * n is a positive multiple of 8: a[0] += xa . w0, a[1] += xa . w1, a[2] += xb . w0, a[3] +=
 * xb . w1, the two weight words split as in MT_ROWS_MAC_s16, then each row's four inputs, two
 * words, by one LDRD (it faults on an address that is not a multiple of 4) into two registers
 * and four SMLAD: 2 LDR, 4 SXTB16, 2 LDRD and 8 SMLAD per 16 MACs, 8 inputs per loop step and
 * the end test, 35 instructions per 32 MACs where MT_ROWS_MAC_s16's one-word loads take 42
 * (the int16 x int16 rows' 35, mt_rows2_mac_s16). 14 registers (MT_LDRD14). */
/* A word of each channel's weights in pair order split into (pe, p) and (ge, g) */
#define MT_ROWS_SPLIT_W                                                                                   \
  "ldr %[p], [%[w0]], #4\n\t"     /* weights w0 w2 w1 w3 of channel 0 (pair order) */                    \
  "sxtb16 %[pe], %[p]\n\t"        /* (w0, w1) */                                                         \
  "sxtb16 %[p], %[p], ror #8\n\t" /* (w2, w3) */                                                         \
  "ldr %[g], [%[w1]], #4\n\t"     /* channel 1 */                                                        \
  "sxtb16 %[ge], %[g]\n\t"                                                                               \
  "sxtb16 %[g], %[g], ror #8\n\t"
#if MT_LDRD14
#define MT_ROWS_LDRD_STEP                                                                                 \
  MT_ROWS_SPLIT_W                                                                                         \
  "ldrd %[t], %[u], [%[xa]], #8\n\t" /* (x0, x1), (x2, x3) of row a */                                  \
  "smlad %[a00], %[t], %[pe], %[a00]\n\t"                                                                \
  "smlad %[a01], %[t], %[ge], %[a01]\n\t"                                                                \
  "smlad %[a00], %[u], %[p], %[a00]\n\t"                                                                 \
  "smlad %[a01], %[u], %[g], %[a01]\n\t"                                                                 \
  "ldrd %[t], %[u], [%[xb]], #8\n\t" /* row b */                                                        \
  "smlad %[a10], %[t], %[pe], %[a10]\n\t"                                                                \
  "smlad %[a11], %[t], %[ge], %[a11]\n\t"                                                                \
  "smlad %[a10], %[u], %[p], %[a10]\n\t"                                                                 \
  "smlad %[a11], %[u], %[g], %[a11]\n\t"
MT_ASM_INLINE void mt_rows_mac8_s16(const int16_t *xa, const int16_t *xb, const int8_t *w0, const int8_t *w1,
                                    int n, int32_t *a) {
  int32_t a00 = a[0], a01 = a[1], a10 = a[2], a11 = a[3], p, pe, g, ge, t, u;
  const int16_t *const end = xa + n;
  __asm__("1:\n\t" MT_ROWS_LDRD_STEP MT_ROWS_LDRD_STEP
          "ldr %[t], %[end]\n\t"
          "cmp %[xa], %[t]\n\t"
          "bne 1b"
          : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [xa] "+r"(xa), [xb] "+r"(xb),
            [w0] "+r"(w0), [w1] "+r"(w1), [p] "=&r"(p), [pe] "=&r"(pe), [g] "=&r"(g), [ge] "=&r"(ge),
            [t] "=&r"(t), [u] "=&r"(u)
          : [end] "m"(end)
          : "cc", "memory");
  a[0] = a00, a[1] = a01, a[2] = a10, a[3] = a11;
}
#undef MT_ROWS_LDRD_STEP
#else
#define mt_rows_mac8_s16(xa, xb, w0, w1, n, a) ((void)0)
#endif
/* The two-row pass's inner loop: a00 += xa . w0, a01 += xa . w1, a10 += xb . w0, a11 += xb . w1
 * over the first in4 inputs (a multiple of 4). int8 x: the multiple of 16 by mt_rows_mac16_s8
 * where row b and channel 1 lie one distance from row a and channel 0 (in >= 16), the rest in
 * C, the four rows indexed from their ends with j counting up to 0 (its add sets the flags: no
 * compare); 4 LDR, 8 SXTB16, 8 SMLAD per 4 inputs. int16 x: both rows on word boundaries and
 * in4 a multiple of 8, mt_rows_mac8_s16 (LDRD, 14 registers: MT_LDRD14); else the two weight
 * words split first, then each word of x loaded into one
 * register and multiplied into both channels' sums, so that the four pointers, the four sums
 * and five values take 13 registers (row a's end stays in memory; 13 are free even with a
 * frame pointer, as at -O0): 6 LDR (post-indexed), 4 SXTB16, 8 SMLAD and the end test, 21
 * instructions per 16 MACs where GCC's schedule of the same C spills two pointers (24).
 * Inline assembly: GCC 12 keeps no such order. */
#define MT_ROWS_MAC_s8(xa, xb, w0, w1, in4, a00, a01, a10, a11)                                           \
  do {                                                                                                    \
    const int8_t *const xae_ = (xa) + (in4), *const xbe_ = (xb) + (in4);                                  \
    const int8_t *const w0e_ = (w0) + (in4), *const w1e_ = (w1) + (in4);                                  \
    int j_ = -(in4);                                                                                      \
    if ((xb) - (xa) == (w1) - (w0) && (in4) >= 16) { /* row b and channel 1 one distance away */          \
      int32_t s_[4] = {a00, a01, a10, a11};                                                               \
      j_ += mt_rows_mac16_s8(xa, w0, (int)((xb) - (xa)), (in4) & ~15, s_);                               \
      a00 = s_[0], a01 = s_[1], a10 = s_[2], a11 = s_[3];                                                 \
    }                                                                                                     \
    for (; j_ != 0; j_ += 4) {                                                                            \
      int32_t ue, uo, te, to, pe, po, ge, go;                                                             \
      MT_SPLIT4_s8(xae_ + j_, ue, uo);                                                                    \
      MT_SPLIT4_s8(xbe_ + j_, te, to);                                                                    \
      MT_SPLIT4_s8(w0e_ + j_, pe, po);                                                                    \
      MT_SPLIT4_s8(w1e_ + j_, ge, go);                                                                    \
      a00 = __smlad(uo, po, __smlad(ue, pe, a00));                                                        \
      a10 = __smlad(to, po, __smlad(te, pe, a10));                                                        \
      a01 = __smlad(uo, go, __smlad(ue, ge, a01));                                                        \
      a11 = __smlad(to, go, __smlad(te, ge, a11));                                                        \
    }                                                                                                     \
  } while (0)
#define MT_ROWS_MAC_s16(xa, xb, w0, w1, in4, a00, a01, a10, a11)                                          \
  do {                                                                                                    \
    const int16_t *pa_ = (xa), *pb_ = (xb), *const end_ = (xa) + (in4);                                  \
    const int8_t *p0_ = (w0), *p1_ = (w1);                                                                \
    int32_t p_, pe_, g_, ge_, t_;                                                                         \
    if ((in4) == 0) break;                                                                                \
    if (MT_LDRD14 && ((in4) & 7) == 0 && (((uintptr_t)pa_ | (uintptr_t)pb_) & 3u) == 0) {                \
      int32_t s_[4] = {a00, a01, a10, a11};                                                               \
      mt_rows_mac8_s16(pa_, pb_, p0_, p1_, in4, s_);                                                      \
      a00 = s_[0], a01 = s_[1], a10 = s_[2], a11 = s_[3];                                                 \
      break;                                                                                              \
    }                                                                                                     \
    __asm__("1:\n\t" MT_ROWS_SPLIT_W                                                                       \
            "ldr %[t], [%[xa]], #4\n\t"        /* (x0, x1) of row a */                                   \
            "smlad %[a00], %[t], %[pe], %[a00]\n\t"                                                       \
            "smlad %[a01], %[t], %[ge], %[a01]\n\t"                                                       \
            "ldr %[t], [%[xa]], #4\n\t"        /* (x2, x3) */                                            \
            "smlad %[a00], %[t], %[p], %[a00]\n\t"                                                        \
            "smlad %[a01], %[t], %[g], %[a01]\n\t"                                                        \
            "ldr %[t], [%[xb]], #4\n\t"        /* row b */                                               \
            "smlad %[a10], %[t], %[pe], %[a10]\n\t"                                                       \
            "smlad %[a11], %[t], %[ge], %[a11]\n\t"                                                       \
            "ldr %[t], [%[xb]], #4\n\t"                                                                   \
            "smlad %[a10], %[t], %[p], %[a10]\n\t"                                                        \
            "smlad %[a11], %[t], %[g], %[a11]\n\t"                                                        \
            "ldr %[t], %[end]\n\t"             /* row a's end, from memory: the 13th register */         \
            "cmp %[xa], %[t]\n\t"                                                                          \
            "bne 1b"                                                                                      \
            : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [xa] "+r"(pa_),         \
              [xb] "+r"(pb_), [w0] "+r"(p0_), [w1] "+r"(p1_), [p] "=&r"(p_), [pe] "=&r"(pe_), [g] "=&r"(g_), \
              [ge] "=&r"(ge_), [t] "=&r"(t_)                                                              \
            : [end] "m"(end_)                                                                             \
            : "cc", "memory");                                                                            \
  } while (0)

/* The rows of two adjacent channels (rq0, rq1) of an int8 x int8 layer with int16 outputs whose
 * shifts are 1 or less (mt_rq_up at s = 1, sh = 0 and c = 2^31 + y_zero 2^32: a ratio of 1/2 or
 * more, as the projections of an int8 attention block have), two rows at a time, every pass in
 * one asm block: row b, channel 1 and their end one distance (in) from row a, channel 0 and the
 * weights' end (x's rows contiguous, in a positive multiple of 16); the four int32 sums from the
 * biases by 4 LDR, 8 SXTB16, 8 SMLAD per 16 MACs with two pointers and the distance in
 * registers (13 with the sums and six values), 16 inputs per loop step; then each output as
 * MT_UP_SAT's integer from the freed registers: the sum shifted left by up = 1 - s, {hi, lo} =
 * {y_zero, 2^31 + (acc >> 31)} (c less [acc < 0], ADD in place of ADDS and ADC), SMLAL, SSAT,
 * STRH: 6 instructions, the channel's m and up loaded once per two outputs; the next pass's row
 * a is row b's end (xa + in), its outputs 2 yb - ya from row a's and row b's (pairs >= 1: the
 * passes end where row a reaches x's end). In C, GCC kept the requantization constants and
 * two row pointers in memory: the int8 MHA block's projections (in = 16) took 166
 * instructions per pass where this takes 128. */
#define MT_ROWS_UP1_MAC                                                                                   \
  "ldr %[g], [%[w], %[d]]\n\t"       /* channel 1's four weights */                                     \
  "ldr %[p], [%[w]], #4\n\t"         /* channel 0's */                                                  \
  "sxtb16 %[pe], %[p]\n\t"           /* (w0, w2) */                                                     \
  "sxtb16 %[p], %[p], ror #8\n\t"    /* (w1, w3) */                                                     \
  "sxtb16 %[ge], %[g]\n\t"                                                                              \
  "sxtb16 %[g], %[g], ror #8\n\t"                                                                       \
  "ldr %[t], [%[xa], %[d]]\n\t"      /* row b's four inputs */                                          \
  "sxtb16 %[te], %[t]\n\t"                                                                              \
  "sxtb16 %[t], %[t], ror #8\n\t"                                                                       \
  "smlad %[a10], %[te], %[pe], %[a10]\n\t"                                                              \
  "smlad %[a10], %[t], %[p], %[a10]\n\t"                                                                \
  "smlad %[a11], %[te], %[ge], %[a11]\n\t"                                                              \
  "smlad %[a11], %[t], %[g], %[a11]\n\t"                                                                \
  "ldr %[t], [%[xa]], #4\n\t"        /* row a's */                                                      \
  "sxtb16 %[te], %[t]\n\t"                                                                              \
  "sxtb16 %[t], %[t], ror #8\n\t"                                                                       \
  "smlad %[a00], %[te], %[pe], %[a00]\n\t"                                                              \
  "smlad %[a00], %[t], %[p], %[a00]\n\t"                                                                \
  "smlad %[a01], %[te], %[ge], %[a01]\n\t"                                                              \
  "smlad %[a01], %[t], %[g], %[a01]\n\t"
/* one output: sum A, the channel's m in g and up in ge, 2^31 in p, y_zero in pe, stored at
 * [Y, #OFF]; lo and hi in w and d */
#define MT_ROWS_UP1_OUT(A, Y, OFF)                                                                        \
  "lsl %[" A "], %[" A "], %[ge]\n\t"                                                                   \
  "add %[w], %[p], %[" A "], asr #31\n\t"                                                               \
  "mov %[d], %[pe]\n\t"                                                                                 \
  "smlal %[w], %[d], %[" A "], %[g]\n\t"                                                                \
  "ssat %[d], #16, %[d]\n\t"                                                                            \
  "strh %[d], [%[" Y "], #" OFF "]\n\t"
static __attribute__((noinline)) void mt_rows2_s8_up1(const int8_t *x, const int8_t *w0, int in, int32_t b0,
                                                      int32_t b1, const int32_t *rq0, const int32_t *rq1,
                                                      int32_t yz, int16_t *y, int pairs, int out) {
  const int8_t *const wend = w0 + in, *const xend = x + 2 * pairs * in;
  const int32_t m0 = rq0[0], up0 = 1 - rq0[1], m1 = rq1[0], up1 = 1 - rq1[1], yb = 2 * out;
  const int8_t *xa = x, *w = w0;
  int d = in;
  int32_t a00, a01, a10, a11, p, pe, g, ge, t, te;
  __asm__ volatile("1:\n\t"
                   "ldr %[a00], %[b0]\n\t"
                   "mov %[a10], %[a00]\n\t"
                   "ldr %[a01], %[b1]\n\t"
                   "mov %[a11], %[a01]\n"
                   "2:\n\t" MT_ROWS_UP1_MAC MT_ROWS_UP1_MAC MT_ROWS_UP1_MAC MT_ROWS_UP1_MAC
                   "ldr %[t], %[wend]\n\t"
                   "cmp %[w], %[t]\n\t"
                   "bne 2b\n\t"
                   "ldr %[t], %[yp]\n\t"    /* row a's outputs */
                   "ldr %[te], %[yb]\n\t"
                   "add %[te], %[t], %[te]\n\t" /* row b's */
                   "mov %[p], #0x80000000\n\t"
                   "ldr %[pe], %[yz]\n\t"
                   "ldr %[g], %[m0]\n\t"
                   "ldr %[ge], %[up0]\n\t"
                   MT_ROWS_UP1_OUT("a00", "t", "0") MT_ROWS_UP1_OUT("a10", "te", "0")
                   "ldr %[g], %[m1]\n\t"
                   "ldr %[ge], %[up1]\n\t"
                   MT_ROWS_UP1_OUT("a01", "t", "2") MT_ROWS_UP1_OUT("a11", "te", "2")
                   "rsb %[t], %[t], %[te], lsl #1\n\t" /* the next pass's: 2 yb - ya */
                   "str %[t], %[yp]\n\t"
                   "ldr %[w], %[w0]\n\t"
                   "ldr %[d], %[in]\n\t"
                   "add %[xa], %[xa], %[d]\n\t" /* past row b */
                   "ldr %[t], %[xend]\n\t"
                   "cmp %[xa], %[t]\n\t"
                   "bne 1b"
                   : [a00] "=&r"(a00), [a01] "=&r"(a01), [a10] "=&r"(a10), [a11] "=&r"(a11), [xa] "+r"(xa),
                     [w] "+r"(w), [d] "+r"(d), [p] "=&r"(p), [pe] "=&r"(pe), [g] "=&r"(g), [ge] "=&r"(ge),
                     [t] "=&r"(t), [te] "=&r"(te), [yp] "+m"(y)
                   : [b0] "m"(b0), [b1] "m"(b1), [wend] "m"(wend), [xend] "m"(xend), [w0] "m"(w0), [in] "m"(in),
                     [yb] "m"(yb), [yz] "m"(yz), [m0] "m"(m0), [up0] "m"(up0), [m1] "m"(m1), [up1] "m"(up1)
                   : "cc", "memory");
}
/* The two-row pass's int8 x int8 inner loop where row b and channel 1 lie one distance d from
 * row a and channel 0 (x's rows at a stride of in, the weight rows adjacent): a[0] += xa . w0,
 * a[1] += xa . w1, a[2] += xb . w0, a[3] += xb . w1 over the first n inputs (a positive
 * multiple of 16), MT_ROWS_UP1_MAC's 4 LDR, 8 SXTB16 and 8 SMLAD per 16 MACs, 16 inputs per
 * loop step and the end test: 83 instructions per 64 MACs where GCC's schedule of the C loop
 * takes 96 (it keeps a row's offset in memory). 13 registers. Returns n. */
MT_ASM_INLINE int mt_rows_mac16_s8(const int8_t *xa, const int8_t *w, int d, int n, int32_t *a) {
  int32_t a00 = a[0], a01 = a[1], a10 = a[2], a11 = a[3], p, pe, g, ge, t, te;
  const int8_t *const wend = w + n;
  __asm__("1:\n\t" MT_ROWS_UP1_MAC MT_ROWS_UP1_MAC MT_ROWS_UP1_MAC MT_ROWS_UP1_MAC
          "ldr %[t], %[wend]\n\t"
          "cmp %[w], %[t]\n\t"
          "bne 1b"
          : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [xa] "+r"(xa), [w] "+r"(w),
            [p] "=&r"(p), [pe] "=&r"(pe), [g] "=&r"(g), [ge] "=&r"(ge), [t] "=&r"(t), [te] "=&r"(te)
          : [d] "r"(d), [wend] "m"(wend)
          : "cc", "memory");
  a[0] = a00, a[1] = a01, a[2] = a10, a[3] = a11;
  return n;
}
#undef MT_ROWS_UP1_MAC
#undef MT_ROWS_UP1_OUT
/* An int8 x int8 layer with int16 outputs whose sums stay within 2^(30+s) (mt_rq_up_ok), 8 rows
 * or more with xs = in, in a multiple of 16 and 2 channels or more (the caller checks these): when
 * every channel's shift is 1 or less (else returns 0), each pair of channels' rows by
 * mt_rows2_s8_up1, an odd last channel or row computed a second time with the one before it (the
 * same integers). From 8 rows: the pass's setup, about 40 instructions per call, outweighs what
 * it saves on fewer (the Iris model's 4 rows took 1% more). */
static __attribute__((noinline)) int mt_linear_up1_s8_s8_s16(const int8_t *x, const int8_t *w, const int32_t *b,
                                                             int16_t *y, int rows, int in, int out,
                                                             const int32_t *rq, int rq_per_channel,
                                                             int32_t y_zero) {
  int o;
  for (o = 0; o < (rq_per_channel ? out : 1); ++o)
    if (rq[2 * o + 1] > 1) return 0;
  for (o = 0; o < out; o += 2) {
    const int c = o + 2 <= out ? o : out - 2;
    const int32_t *rq0 = rq + (rq_per_channel ? 2 * c : 0), *rq1 = rq + (rq_per_channel ? 2 * c + 2 : 0);
    const int32_t b0 = b ? b[c] : 0, b1 = b ? b[c + 1] : 0;
    mt_rows2_s8_up1(x, w + c * in, in, b0, b1, rq0, rq1, y_zero, y + c, rows >> 1, out);
    if (rows & 1)
      mt_rows2_s8_up1(x + (rows - 2) * in, w + c * in, in, b0, b1, rq0, rq1, y_zero, y + (rows - 2) * out + c, 1,
                      out);
  }
  return 1;
}

/* int8 weights, two rows of x times two weight rows per pass, so each loaded word (and its
 * split) serves two products: per 4 inputs 8 SMLAD for 16 MACs, with 4 LDR and 8 SXTB16 for
 * int8 x, 6 LDR and 4 SXTB16 for int16 x (weights in pair order). The sums start from the bias
 * and are int32, exact when |b| < 2^30 and in <= MAX_IN (65536 for int8 x, |x w| <= 2^14; 256
 * for int16 x, |x w| <= 2^22); an odd last row takes one row times the two channels, an odd
 * last channel is computed twice. The inner loop is MT_ROWS_MAC_*. Each channel's
 * requantization is set up once per channel pair (QT, applied by OUT): mt_rq_chan when every
 * channel has the usual shift of 1 to 31 (a positive ratio below 1/2); else, for int8 x int8
 * with int16 outputs (ANY: the layers whose output is as fine as their sums, a ratio of 1/2 or
 * more), mt_rq_chan with the sums shifted left first (MT_UP_SAT: shifts down to -30 where the
 * channel's sums stay within 2^(30+s), mt_rq_up_ok; its rows out of line, and only for that
 * type). The rows store y_zero + rq(acc) saturated; a y_min above the type's minimum (a relu
 * into a format whose zero point is not the lowest value) is applied by a pass over the outputs
 * afterwards (mt_raise_to_*): max(y_min, saturated) either way, and the rows' registers go to
 * the sums (a bound per output cost linear_s8 8%). A negative multiplier, a single row (where
 * that setup would not pay), a wider sum, a larger bias or another shift: the one-row variant
 * above takes the call. QT is set up by QINIT (mt_rq_chan_init, mt_rq_up_init); ROWS_MAC and
 * SPLIT4: MT_ROWS_MAC_* and MT_SPLIT4_* of the type of x. */
#define MT_DEFINE_LINEAR_ROWS(NAME, QT, QINIT, OUT, XT, YT, BT, BITS, ROWS_MAC, SPLIT4)                   \
  static void NAME(const XT *x, const int8_t *w, const BT *b, YT *y, int rows, int in, int out, int xs,  \
                   const int32_t *rq, int rq_per_channel, int32_t y_zero) {                               \
    const int in4 = in & ~3;                                                                              \
    int r, o, j;                                                                                          \
    for (o = 0; o < out; o += 2) {                                                                        \
      const int o1 = o + 1 < out ? o + 1 : o;                                                             \
      const int8_t *w0 = w + o * in, *w1 = w + o1 * in;                                                   \
      const QT q0 = QINIT(rq + (rq_per_channel ? 2 * o : 0), y_zero);                                     \
      const QT q1 = QINIT(rq + (rq_per_channel ? 2 * o1 : 0), y_zero);                                    \
      const int32_t b0 = b ? (int32_t)b[o] : 0, b1 = b ? (int32_t)b[o1] : 0;                              \
      const XT *xa = x;                                                                                   \
      YT *y0 = y + o;                                                                                     \
      for (r = rows >> 1; r != 0; --r, xa += 2 * xs, y0 += 2 * out) {                                     \
        const XT *xb = xa + xs;                                                                           \
        YT *y1 = y0 + out;                                                                                \
        int32_t a00 = b0, a01 = b1, a10 = b0, a11 = b1;                                                   \
        ROWS_MAC(xa, xb, w0, w1, in4, a00, a01, a10, a11);                                                \
        if (__builtin_expect(in & 3, 0)) /* a hint: the last in % 4 inputs, rare (GCC's registers) */   \
          for (j = in4; j < in; ++j) {                                                                    \
            a00 += (int32_t)xa[j] * w0[j], a01 += (int32_t)xa[j] * w1[j];                                 \
            a10 += (int32_t)xb[j] * w0[j], a11 += (int32_t)xb[j] * w1[j];                                 \
          }                                                                                               \
        y0[0] = (YT)OUT(BITS, &q0, a00);                                                                  \
        y0[o1 - o] = (YT)OUT(BITS, &q1, a01);                                                             \
        y1[0] = (YT)OUT(BITS, &q0, a10);                                                                  \
        y1[o1 - o] = (YT)OUT(BITS, &q1, a11);                                                             \
      }                                                                                                   \
      if (rows & 1) { /* an odd last row: the two channels only */                                        \
        int32_t a00 = b0, a01 = b1;                                                                       \
        for (j = 0; j + 4 <= in; j += 4) {                                                                \
          int32_t ue, uo, pe, po, ge, go;                                                                 \
          SPLIT4(xa + j, ue, uo);                                                                         \
          MT_SPLIT4_s8(w0 + j, pe, po);                                                                   \
          MT_SPLIT4_s8(w1 + j, ge, go);                                                                   \
          a00 = __smlad(uo, po, __smlad(ue, pe, a00));                                                    \
          a01 = __smlad(uo, go, __smlad(ue, ge, a01));                                                    \
        }                                                                                                 \
        for (; j < in; ++j) a00 += (int32_t)xa[j] * w0[j], a01 += (int32_t)xa[j] * w1[j];                 \
        y0[0] = (YT)OUT(BITS, &q0, a00);                                                                  \
        y0[o1 - o] = (YT)OUT(BITS, &q1, a01);                                                             \
      }                                                                                                   \
    }                                                                                                     \
  }
/* ANY: 1 for the types with rows for any shift (ANY_ROWS: mt_linear_any_*), else 0 (ANY_ROWS:
 * MT_NO_ROWS) */
#define MT_NO_ROWS(...) ((void)0)
#define MT_ANY_OK_0(...)
#define MT_ANY_OK_1(ok, chan, ...) \
  if (MT_LINEAR_UP && ok && !chan) ok = mt_rq_up_all_ok(__VA_ARGS__)
/* Every channel of an int8 x int8 layer mt_rq_up_ok (out of line: inlined, it cost the rows
 * inlined beside it registers) */
static __attribute__((noinline)) int mt_rq_up_all_ok(const int32_t *rq, int rq_per_channel, int32_t y_zero,
                                                     const int8_t *w, const int32_t *b, int in, int out) {
  int o;
  for (o = 0; o < out; ++o)
    if (!mt_rq_up_ok(rq + (rq_per_channel ? 2 * o : 0), y_zero, w + o * in, in, b ? b[o] : 0)) return 0;
  return 1;
}
/* The two-row variant (ROWS: MT_DEFINE_LINEAR_ROWS with mt_rq_chan; ANY_ROWS for other shifts) where
 * it applies, else the one-row variant ONE_ROW (mt_linear_dsp_*); RAISE: mt_raise_to_*. A firmware
 * whose model takes none of them turns off the two-row variants (MT_LINEAR_ROWS), ANY_ROWS
 * (MT_LINEAR_UP) or the one-row variant (MT_LINEAR_ONE_ROW; its calls then go to the reference),
 * mt_internal.h. */
#define MT_DEFINE_LINEAR_DSP2(NAME, XT, YT, BT, BITS, MAX_IN, ANY, ROWS, ANY_ROWS, ONE_ROW, RAISE)        \
  static int NAME(const XT *x, const int8_t *w, const BT *b, YT *y, int rows, int in, int out, int xs,    \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min) {                 \
    int o, ok = MT_LINEAR_ROWS && rows >= 2 && in <= (MAX_IN), chan = 1;                                  \
    for (o = 0; ok && o < (rq_per_channel ? out : 1); ++o) {                                              \
      chan = chan && mt_rq_chan_fast(rq + 2 * o, y_zero);                                                 \
      ok = chan || ((ANY) && MT_LINEAR_UP);                                                               \
    }                                                                                                     \
    MT_ANY_OK_##ANY(ok, chan, rq, rq_per_channel, y_zero, w, b, in, out);                                 \
    for (o = 0; ok && b && o < out; ++o) ok = MT_LINEAR_BIAS_FITS(b[o]);                                  \
    if (!ok)                                                                                              \
      return MT_LINEAR_ONE_ROW ? ONE_ROW(x, w, b, y, rows, in, out, xs, rq, rq_per_channel, y_zero, y_min) : 0; \
    if (chan)                                                                                             \
      ROWS(x, w, b, y, rows, in, out, xs, rq, rq_per_channel, y_zero);                                   \
    else if (MT_LINEAR_UP)                                                                                \
      ANY_ROWS(x, w, b, y, rows, in, out, xs, rq, rq_per_channel, y_zero);                                \
    if (y_min > -(1 << ((BITS) - 1))) RAISE(y, rows * out, y_min);                                        \
    return 1;                                                                                             \
  }
__attribute__((noinline))
MT_DEFINE_LINEAR_ROWS(mt_linear_rows_any_s8_s8_s16, mt_rq_up, mt_rq_up_init, MT_UP_SAT, int8_t, int16_t,
                      int32_t, 16, MT_ROWS_MAC_s8, MT_SPLIT4_s8)
/* The rows of an int8 x int8 layer with int16 outputs and a shift of 0 or less (ANY_ROWS):
 * mt_linear_up1_s8_s8_s16 where it applies, else the rows for any shift */
static void mt_linear_any_s8_s8_s16(const int8_t *x, const int8_t *w, const int32_t *b, int16_t *y, int rows,
                                    int in, int out, int xs, const int32_t *rq, int rq_per_channel,
                                    int32_t y_zero) {
  if (rows >= 8 && xs == in && in >= 16 && (in & 15) == 0 && out >= 2 &&
      mt_linear_up1_s8_s8_s16(x, w, b, y, rows, in, out, rq, rq_per_channel, y_zero))
    return;
  mt_linear_rows_any_s8_s8_s16(x, w, b, y, rows, in, out, xs, rq, rq_per_channel, y_zero);
}
MT_DEFINE_LINEAR_ROWS(mt_linear_rows_s8_s8_s8, mt_rq_chan, mt_rq_chan_init, MT_CHAN_SAT, int8_t, int8_t,
                      int32_t, 8, MT_ROWS_MAC_s8, MT_SPLIT4_s8)
MT_DEFINE_LINEAR_DSP2(mt_linear_dsp2_s8_s8_s8, int8_t, int8_t, int32_t, 8, MT_LINEAR_MAX_IN_S8, 0,
                      mt_linear_rows_s8_s8_s8, MT_NO_ROWS, mt_linear_dsp_s8_s8_s8, mt_raise_to_s8)
MT_DEFINE_LINEAR_ROWS(mt_linear_rows_s8_s8_s16, mt_rq_chan, mt_rq_chan_init, MT_CHAN_SAT, int8_t, int16_t,
                      int32_t, 16, MT_ROWS_MAC_s8, MT_SPLIT4_s8)
MT_DEFINE_LINEAR_DSP2(mt_linear_dsp2_s8_s8_s16, int8_t, int16_t, int32_t, 16, MT_LINEAR_MAX_IN_S8, 1,
                      mt_linear_rows_s8_s8_s16, mt_linear_any_s8_s8_s16, mt_linear_dsp_s8_s8_s16,
                      mt_raise_to_s16)
MT_DEFINE_LINEAR_ROWS(mt_linear_rows_s16_s8_s8, mt_rq_chan, mt_rq_chan_init, MT_CHAN_SAT, int16_t, int8_t,
                      int64_t, 8, MT_ROWS_MAC_s16, MT_SPLIT4_s16)
MT_DEFINE_LINEAR_DSP2(mt_linear_dsp2_s16_s8_s8, int16_t, int8_t, int64_t, 8, MT_LINEAR_MAX_IN_S16, 0,
                      mt_linear_rows_s16_s8_s8, MT_NO_ROWS, mt_linear_dsp_s16_s8_s8, mt_raise_to_s8)
MT_DEFINE_LINEAR_ROWS(mt_linear_rows_s16_s8_s16, mt_rq_chan, mt_rq_chan_init, MT_CHAN_SAT, int16_t, int16_t,
                      int64_t, 16, MT_ROWS_MAC_s16, MT_SPLIT4_s16)
MT_DEFINE_LINEAR_DSP2(mt_linear_dsp2_s16_s8_s16, int16_t, int16_t, int64_t, 16, MT_LINEAR_MAX_IN_S16, 0,
                      mt_linear_rows_s16_s8_s16, MT_NO_ROWS, mt_linear_dsp_s16_s8_s16, mt_raise_to_s16)
#else
#define mt_linear_dsp2_s8_s8_s8 MT_NO_VARIANT
#define mt_linear_dsp2_s8_s8_s16 MT_NO_VARIANT
#define mt_linear_dsp_s8_s16_s8 MT_NO_VARIANT
#define mt_linear_dsp_s8_s16_s16 MT_NO_VARIANT
#define mt_linear_dsp2_s16_s8_s8 MT_NO_VARIANT
#define mt_linear_dsp2_s16_s8_s16 MT_NO_VARIANT
#define mt_linear_dsp2_s16_s16_s8 MT_NO_VARIANT
#define mt_linear_dsp2_s16_s16_s16 MT_NO_VARIANT
#endif

#if MT_MVE
/* Armv8.1-M MVE variants of the int8 x int8 linear layers whose every channel has the usual
 * requantization (a shift of 2 to 31, a positive multiplier; else the DSP variant takes the
 * call): four channels per pass over a row of x, each channel's dot product by VMLADAVA.S8
 * (16 products into its int32 sum per instruction, exact as the DSP variant's: in <= 65536,
 * |b| < 2^30), the last in % 16 inputs under a tail predicate (VCTP: lanes past the row are
 * neither loaded nor added); then the four outputs requantized at once, lane by lane. With
 * P = acc m (m > 0: the sign of acc), rq(acc) = floor((P + 2^(30+s) - [P < 0]) / 2^(31+s))
 * = (h' + 2^(s-2)) >> (s - 1) for h' = floor((P - [P < 0]) / 2^32): the high word of P
 * (VMULH) less 1 where P < 0 and its low word l (VMUL) is 0 ((acc >> 31) & (clz(l) >> 5)), the
 * shift arithmetic (VSHL by -(s - 1)); then y_zero added saturating (VQADD), the bounds (VMAX, VMIN)
 * and a narrowing store of the four (VSTRB / VSTRH), predicated past the last channel (a
 * group of the last out % 4 channels computes the last one again). The same integers as
 * the reference. DSP2: the DSP variant (mt_linear_dsp2_*). */
#define MT_DEFINE_LINEAR_MVE_S8(NAME, YT, BITS, STORE, DSP2)                                              \
  static int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, int rows, int in, int out,   \
                  int xs, const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min) {         \
    const int32x4_t lo = vdupq_n_s32(y_min > -(1 << ((BITS) - 1)) ? y_min : -(1 << ((BITS) - 1)));      \
    const int32x4_t hi = vdupq_n_s32((1 << ((BITS) - 1)) - 1);                                            \
    int r, o, j, k, ok = in <= MT_LINEAR_MAX_IN_S8;                                                       \
    for (o = 0; ok && o < out; ++o) {                                                                     \
      const int32_t *q = rq + (rq_per_channel ? 2 * o : 0);                                               \
      ok = q[1] >= 2 && q[1] <= 31 && q[0] > 0 && (!b || (b[o] < (1 << 30) && b[o] > -(1 << 30)));       \
    }                                                                                                     \
    if (!ok) return DSP2(x, w, b, y, rows, in, out, xs, rq, rq_per_channel, y_zero, y_min);               \
    for (o = 0; o < out; o += 4) {                                                                        \
      int32_t mv[4], rv[4], sv[4], bv[4];                                                                 \
      const int8_t *wk[4];                                                                                \
      const mve_pred16_t last = vctp32q((uint32_t)(out - o));                                             \
      int32x4_t m, rc, sh;                                                                                \
      for (k = 0; k < 4; ++k) {                                                                           \
        const int c = o + k < out ? o + k : out - 1;                                                      \
        const int32_t *q = rq + (rq_per_channel ? 2 * c : 0);                                             \
        mv[k] = q[0], rv[k] = 1 << (q[1] - 2), sv[k] = 1 - q[1], bv[k] = b ? b[c] : 0, wk[k] = w + c * in; \
      }                                                                                                   \
      m = vld1q_s32(mv), rc = vld1q_s32(rv), sh = vld1q_s32(sv);                                          \
      for (r = 0; r < rows; ++r) {                                                                        \
        const int8_t *xr = x + r * xs;                                                                    \
        int32_t a0 = bv[0], a1 = bv[1], a2 = bv[2], a3 = bv[3];                                           \
        int32x4_t acc, h, l;                                                                              \
        for (j = 0; j + 16 <= in; j += 16) {                                                              \
          const int8x16_t xv = vld1q_s8(xr + j);                                                          \
          a0 = vmladavaq_s8(a0, xv, vld1q_s8(wk[0] + j)), a1 = vmladavaq_s8(a1, xv, vld1q_s8(wk[1] + j)); \
          a2 = vmladavaq_s8(a2, xv, vld1q_s8(wk[2] + j)), a3 = vmladavaq_s8(a3, xv, vld1q_s8(wk[3] + j)); \
        }                                                                                                 \
        if (j < in) {                                                                                     \
          const mve_pred16_t p = vctp8q((uint32_t)(in - j));                                              \
          const int8x16_t xv = vldrbq_z_s8(xr + j, p);                                                    \
          a0 = vmladavaq_p_s8(a0, xv, vldrbq_z_s8(wk[0] + j, p), p);                                      \
          a1 = vmladavaq_p_s8(a1, xv, vldrbq_z_s8(wk[1] + j, p), p);                                      \
          a2 = vmladavaq_p_s8(a2, xv, vldrbq_z_s8(wk[2] + j, p), p);                                      \
          a3 = vmladavaq_p_s8(a3, xv, vldrbq_z_s8(wk[3] + j, p), p);                                      \
        }                                                                                                 \
        acc = vsetq_lane_s32(a3, vsetq_lane_s32(a2, vsetq_lane_s32(a1, vdupq_n_s32(a0), 1), 2), 3);       \
        h = vmulhq_s32(acc, m), l = vmulq_s32(acc, m);                                                    \
        l = vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(vclzq_s32(l)), 5)); /* [l == 0] */    \
        h = vsubq_s32(h, vandq_s32(vshrq_n_s32(acc, 31), l));                                             \
        h = vqaddq_n_s32(vshlq_s32(vaddq_s32(h, rc), sh), y_zero);                                        \
        STORE(y + r * out + o, vminq_s32(vmaxq_s32(h, lo), hi), last);                                    \
      }                                                                                                   \
    }                                                                                                     \
    return 1;                                                                                             \
  }
MT_DEFINE_LINEAR_MVE_S8(mt_linear_mve_s8_s8_s8, int8_t, 8, vstrbq_p_s32, mt_linear_dsp2_s8_s8_s8)
MT_DEFINE_LINEAR_MVE_S8(mt_linear_mve_s8_s8_s16, int16_t, 16, vstrhq_p_s32, mt_linear_dsp2_s8_s8_s16)
#define mt_linear_variant_s8_s8_s8 mt_linear_mve_s8_s8_s8
#define mt_linear_variant_s8_s8_s16 mt_linear_mve_s8_s8_s16
#else
#define mt_linear_variant_s8_s8_s8 mt_linear_dsp2_s8_s8_s8
#define mt_linear_variant_s8_s8_s16 mt_linear_dsp2_s8_s8_s16
#endif

#if MT_RV32
/* RISC-V (rv32imc) variants of the linear layers with int8 weights and int8 or int16 x. The
 * core has no packed SIMD: a MAC is a load, a MUL and an ADD, so the loops are register-blocked,
 * three rows of x against four weight rows per pass: per input 3 loads of x and 4 of weights
 * serve 12 MACs (12 MUL, 12 ADD), 2.58 instructions per MAC and the pointers' share
 * (MT_RV_STEP12, 16 inputs per loop iteration), the twelve int32 sums in registers; two last
 * rows by pairs (MT_RV_STEP8: 2.75 per MAC), one last row alone.
 * The sums are exact in int32 as the DSP variants' (the bias below 2^30: int8 x at most 65536
 * inputs, |x w| <= 2^14; int16 x at most 256, |x w| <= 2^22; else the reference takes the
 * call), so they equal the reference's and are requantized to the same integers: each channel's
 * requantization set up once per group of four channels (mt_rv_rq), an output then in MULHU,
 * six ALU instructions and the clamp (y_min folded into the lower bound), or in MULH, two and the
 * clamp where no tie can occur (mt_rv_rq_out_h). A last group of fewer than four channels takes
 * its last channel repeated (the same outputs stored again). */

/* One channel's y_zero + rq(acc) for m > 0 (the usual case; else the reference): with
 * P = a m for a = acc 2^up, round half away from zero is floor((P + 2^(30+s') - [P < 0]) /
 * 2^(31+s')) and the zero point folds into the constant, c = 2^(30+s') + y_zero 2^(31+s'),
 * whose low word is 0 for s' >= 2: y_zero + rq(acc) = H >> (s' - 1) with H = floor((P + c -
 * [a < 0]) / 2^32) (arithmetic shift: the floor) = c_hi + floor((P - [a < 0]) / 2^32). With
 * N = |a| m >= 0 and h = floor(N / 2^32) (MULHU), that floor is h for a >= 0 and, for a < 0,
 * floor(-(N + 1) / 2^32) = -(h + 1) = ~h: h XOR the sign mask a >> 31 (0 or all ones).
 * s' = s for 2 <= s <= 31 (up = 0; |y_zero| < 2^(31-s) keeps |c| < 2^62); a shift s <= 1 (a
 * ratio of 1/4 or more, as int8 layers with int16 outputs have) becomes s' = 2 with the sum
 * shifted left by up = 2 - s first, which needs |acc| < 2^(29+s) (mt_rv_rq_ok): floor((2^up
 * (P + 2^(30+s)) - [P < 0]) / 2^33) equals floor((P + 2^(30+s) - [P < 0]) / 2^(31+s)), as no
 * multiple of 2^33 lies strictly between 2^up X - 2^up and 2^up X - 1. */
typedef struct {
  int32_t m, c_hi;
  int sh, up;
} mt_rv_rq;

/* Whether a channel (rq, y_zero) takes mt_rv_rq when its sums stay within |acc| <= amax. */
static inline int mt_rv_rq_ok(const int32_t *rq, int32_t y_zero, uint32_t amax) {
  const int s = rq[1];
  if (rq[0] <= 0 || s > 31 || s < -29 || mt_mag32(y_zero) >= 1u << 29) return 0;
  return s >= 2 ? mt_mag32(y_zero) < 1u << (31 - s) : (amax >> (29 + s)) == 0;
}

static inline mt_rv_rq mt_rv_rq_init(const int32_t *rq, int32_t y_zero) {
  const int s = rq[1] >= 2 ? rq[1] : 2; /* c_hi = 2^(s-2) + y_zero 2^(s-1) */
  mt_rv_rq q;
  q.m = rq[0];
  q.up = s - rq[1];
  q.sh = s - 1;
  q.c_hi = (int32_t)((1u << (s - 2)) + (uint32_t)y_zero * (1u << (s - 1)));
  return q;
}

/* y_zero + rq(acc), clamped to [lo, hi] */
static inline int32_t mt_rv_rq_out(const mt_rv_rq *q, int32_t acc, int32_t lo, int32_t hi) {
  const int32_t a = (int32_t)((uint32_t)acc << q->up);
  const uint32_t sg = (uint32_t)(a >> 31), mag = ((uint32_t)a ^ sg) - sg; /* sign mask, |a| */
  const uint32_t h = (uint32_t)(((uint64_t)mag * (uint32_t)q->m) >> 32); /* MULHU */
  const int32_t v = (int32_t)((h ^ sg) + (uint32_t)q->c_hi) >> q->sh;
  return v < lo ? lo : v > hi ? hi : v;
}

/* The same with a signed MULH in place of the magnitude's MULHU and the two sign flips:
 * floor((P + c) / 2^(31+s')) for P = a m, which differs from mt_rv_rq_out's floor((P + c - [P < 0])
 * / 2^(31+s')) only when P < 0 and P + c is a multiple of 2^(31+s'), i.e. P an odd multiple of
 * 2^(30+s') (c = 2^(30+s') modulo 2^(31+s')). With m = m' 2^t (m' odd) that needs a an odd
 * multiple of 2^(30+s'-t): none when |a| <= amax 2^up < 2^(30+s'-t), i.e. amax 2^up 2^t < 2^(30+s')
 * (mt_rv_rq_h_ok: the high word of that product, s' - 2 = sh - 1 bits more), which every channel
 * but those of a multiplier with many trailing zeros (a ratio near a power of two) meets; taken
 * by groups of four whole channels (MT_RV_OUT12), without the shift by up when each has up = 0
 * (s >= 2; mt_rv_rq_out_hu with it). */
static inline int32_t mt_rv_rq_out_h(const mt_rv_rq *q, int32_t acc, int32_t lo, int32_t hi) {
  const int32_t h = (int32_t)(((int64_t)acc * q->m) >> 32); /* MULH (up = 0) */
  const int32_t v = (int32_t)((uint32_t)h + (uint32_t)q->c_hi) >> q->sh;
  return v < lo ? lo : v > hi ? hi : v;
}
static inline int32_t mt_rv_rq_out_hu(const mt_rv_rq *q, int32_t acc, int32_t lo, int32_t hi) {
  return mt_rv_rq_out_h(q, (int32_t)((uint32_t)acc << q->up), lo, hi); /* any up */
}
/* 0: not every channel of a group meets it; 1: all, each with up = 0; 2: all */
static inline int mt_rv_rq_h_ok(const mt_rv_rq *q, uint32_t amax) {
  const uint32_t m = (uint32_t)q->m, low = m & (0u - m); /* 2^t */
  return ((uint32_t)(((uint64_t)(amax << q->up) * low) >> 32) >> (q->sh - 1)) == 0 ? 1 + (q->up != 0) : 0;
}

/* One input k of a pass (its weight at u: k in order, the middle two of four swapped in pair
 * order): the three rows' x against the four weight rows, into the 12 sums (STEP12), the two
 * rows' into 8 (STEP8), or one row's x into 4 (STEP4). The pointers advance once per 16
 * inputs (STEP12; 8 for STEP8, 4 for STEP4), so every load has an immediate offset: per 16
 * inputs of STEP12 112 loads, 192 MUL, 192 ADD and 8 pointer and loop instructions for 192
 * MACs (about 2.6 per MAC). A step's loads stay in its step (MT_RV_STEP_END, an empty asm that
 * clobbers memory, so no load moves across it; STEP12 also between its weight rows): GCC
 * otherwise hoists the loads of all the steps to the top of the loop and spills what then no
 * longer fits in the registers. */
#define MT_RV_STEP_END __asm__ volatile("" ::: "memory")
#define MT_RV_STEP8(k, u)                                                                                 \
  do {                                                                                                    \
    const int32_t xa_ = pa[k], xb_ = pb[k], v0_ = p0[u], v1_ = p1[u], v2_ = p2[u], v3_ = p3[u];           \
    a0 += xa_ * v0_, a1 += xa_ * v1_, a2 += xa_ * v2_, a3 += xa_ * v3_;                                   \
    a4 += xb_ * v0_, a5 += xb_ * v1_, a6 += xb_ * v2_, a7 += xb_ * v3_;                                   \
    MT_RV_STEP_END;                                                                                       \
  } while (0)
#define MT_RV_STEP12(k, u)                                                                                \
  do {                                                                                                    \
    const int32_t xa_ = pa[k], xb_ = pb[k], xc_ = pc[k];                                                  \
    int32_t v_ = p0[u];                                                                                   \
    a0 += xa_ * v_, a4 += xb_ * v_, a8 += xc_ * v_;                                                       \
    MT_RV_STEP_END;                                                                                       \
    v_ = p1[u];                                                                                          \
    a1 += xa_ * v_, a5 += xb_ * v_, a9 += xc_ * v_;                                                       \
    MT_RV_STEP_END;                                                                                       \
    v_ = p2[u];                                                                                          \
    a2 += xa_ * v_, a6 += xb_ * v_, a10 += xc_ * v_;                                                      \
    MT_RV_STEP_END;                                                                                       \
    v_ = p3[u];                                                                                          \
    a3 += xa_ * v_, a7 += xb_ * v_, a11 += xc_ * v_;                                                      \
    MT_RV_STEP_END;                                                                                       \
  } while (0)
#define MT_RV_STEP4(k, u)                                                                                 \
  do {                                                                                                    \
    const int32_t xa_ = pa[k];                                                                            \
    a0 += xa_ * p0[u], a1 += xa_ * p1[u], a2 += xa_ * p2[u], a3 += xa_ * p3[u];                           \
    MT_RV_STEP_END;                                                                                       \
  } while (0)

/* The twelve outputs of a pass of three rows (OUTF: mt_rv_rq_out or mt_rv_rq_out_h), the four
 * channels' outputs at C0 .. C3 of the rows ya, yb, yc */
#define MT_RV_OUT12(OUTF, YT, YHI, C0, C1, C2, C3)                                                        \
  do {                                                                                                    \
    ya[C0] = (YT)OUTF(&q[0], a0, lo, YHI), yb[C0] = (YT)OUTF(&q[0], a4, lo, YHI);                         \
    yc[C0] = (YT)OUTF(&q[0], a8, lo, YHI);                                                                \
    ya[C1] = (YT)OUTF(&q[1], a1, lo, YHI), yb[C1] = (YT)OUTF(&q[1], a5, lo, YHI);                         \
    yc[C1] = (YT)OUTF(&q[1], a9, lo, YHI);                                                                \
    ya[C2] = (YT)OUTF(&q[2], a2, lo, YHI), yb[C2] = (YT)OUTF(&q[2], a6, lo, YHI);                         \
    yc[C2] = (YT)OUTF(&q[2], a10, lo, YHI);                                                               \
    ya[C3] = (YT)OUTF(&q[3], a3, lo, YHI), yb[C3] = (YT)OUTF(&q[3], a7, lo, YHI);                         \
    yc[C3] = (YT)OUTF(&q[3], a11, lo, YHI);                                                               \
  } while (0)

/* NAME: the layer for x of type XT (int8 or int16: PAIRED weights, |x w| <= 2^XW, at most
 * MAX_IN inputs), outputs YT in [YLO, YHI], bias BT. Returns 0 (the reference computes) when a
 * bias is beyond 2^30 or a channel is not mt_rv_rq's. Three rows against four channels
 * (STEP12), then two (STEP8) or one (STEP4). */
#define MT_DEFINE_LINEAR_RV(NAME, XT, YT, BT, YLO, YHI, PAIRED, XW, MAX_IN)                               \
  static int NAME(const XT *x, const int8_t *w, const BT *b, YT *y, int rows, int in, int out, int xs,    \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min) {                 \
    const int32_t lo = y_min > (YLO) ? y_min : (YLO);                                                     \
    const uint32_t xw_sum = (uint32_t)in << (XW); /* |x . w| of any row */                                \
    enum { U1 = (PAIRED) ? 2 : 1, U2 = (PAIRED) ? 1 : 2 }; /* the weights of inputs 1 and 2 */           \
    int o, r, k, j;                                                                                       \
    if (in > (MAX_IN)) return 0;                                                                          \
    for (o = 0; o < out; ++o) {                                                                           \
      const int64_t bo = b ? (int64_t)b[o] : 0;                                                           \
      if (bo >= (1 << 30) || bo <= -(1 << 30)) return 0;                                                  \
      if ((o == 0 || rq_per_channel) &&                                                                   \
          !mt_rv_rq_ok(rq + (rq_per_channel ? 2 * o : 0), y_zero, xw_sum + mt_mag32((int32_t)bo)))        \
        return 0;                                                                                         \
    }                                                                                                     \
    for (o = 0; o < out; o += 4) {                                                                        \
      mt_rv_rq q[4];                                                                                      \
      int32_t bias[4];                                                                                    \
      int c[4], hq = o + 4 <= out && rows >= 3; /* 1, 2: every channel's mt_rv_rq_h_ok, the largest */  \
      for (k = 0; k < 4; ++k) {                                                                           \
        c[k] = o + k < out ? o + k : out - 1;                                                             \
        q[k] = mt_rv_rq_init(rq + (rq_per_channel ? 2 * c[k] : 0), y_zero);                               \
        bias[k] = b ? (int32_t)b[c[k]] : 0;                                                               \
      }                                                                                                   \
      for (k = 0; k < 4 && hq; ++k) {                                                                     \
        const int h_ = mt_rv_rq_h_ok(&q[k], xw_sum + mt_mag32(bias[k]));                                  \
        hq = h_ == 0 ? 0 : h_ > hq ? h_ : hq;                                                             \
      }                                                                                                   \
      for (r = 0; r + 3 <= rows; r += 3) {                                                                \
        const XT *pa = x + r * xs, *pb = pa + xs, *pc = pb + xs;                                          \
        const int8_t *p0 = w + c[0] * in, *p1 = w + c[1] * in, *p2 = w + c[2] * in, *p3 = w + c[3] * in;  \
        int32_t a0 = bias[0], a1 = bias[1], a2 = bias[2], a3 = bias[3];                                   \
        int32_t a4 = a0, a5 = a1, a6 = a2, a7 = a3, a8 = a0, a9 = a1, a10 = a2, a11 = a3;                 \
        for (j = in >> 4; j > 0; --j) {                                                                   \
          MT_RV_STEP12(0, 0);                                                                             \
          MT_RV_STEP12(1, U1);                                                                            \
          MT_RV_STEP12(2, U2);                                                                            \
          MT_RV_STEP12(3, 3);                                                                             \
          MT_RV_STEP12(4, 4);                                                                             \
          MT_RV_STEP12(5, 4 + U1);                                                                        \
          MT_RV_STEP12(6, 4 + U2);                                                                        \
          MT_RV_STEP12(7, 7);                                                                             \
          MT_RV_STEP12(8, 8);                                                                             \
          MT_RV_STEP12(9, 8 + U1);                                                                        \
          MT_RV_STEP12(10, 8 + U2);                                                                       \
          MT_RV_STEP12(11, 11);                                                                           \
          MT_RV_STEP12(12, 12);                                                                           \
          MT_RV_STEP12(13, 12 + U1);                                                                      \
          MT_RV_STEP12(14, 12 + U2);                                                                      \
          MT_RV_STEP12(15, 15);                                                                           \
          pa += 16, pb += 16, pc += 16, p0 += 16, p1 += 16, p2 += 16, p3 += 16;                           \
        }                                                                                                 \
        for (j = (in >> 2) & 3; j > 0; --j) {                                                             \
          MT_RV_STEP12(0, 0);                                                                             \
          MT_RV_STEP12(1, U1);                                                                            \
          MT_RV_STEP12(2, U2);                                                                            \
          MT_RV_STEP12(3, 3);                                                                             \
          pa += 4, pb += 4, pc += 4, p0 += 4, p1 += 4, p2 += 4, p3 += 4;                                  \
        }                                                                                                 \
        for (j = in & 3; j > 0; --j) { /* the last in % 4, in order */                                    \
          MT_RV_STEP12(0, 0);                                                                             \
          ++pa, ++pb, ++pc, ++p0, ++p1, ++p2, ++p3;                                                       \
        }                                                                                                 \
        { /* channel by channel, its requantization loaded once for the three rows */                     \
          YT *ya = y + r * out, *yb = ya + out, *yc = yb + out;                                           \
          if (hq == 1) { /* four whole channels from o: stores at fixed offsets */                        \
            ya += o, yb += o, yc += o;                                                                    \
            MT_RV_OUT12(mt_rv_rq_out_h, YT, YHI, 0, 1, 2, 3);                                             \
          } else if (hq == 2) {                                                                           \
            ya += o, yb += o, yc += o;                                                                    \
            MT_RV_OUT12(mt_rv_rq_out_hu, YT, YHI, 0, 1, 2, 3);                                            \
          } else                                                                                          \
            MT_RV_OUT12(mt_rv_rq_out, YT, YHI, c[0], c[1], c[2], c[3]);                                   \
        }                                                                                                 \
      }                                                                                                   \
      if (r + 2 <= rows) { /* two last rows */                                                            \
        const XT *pa = x + r * xs, *pb = pa + xs;                                                         \
        const int8_t *p0 = w + c[0] * in, *p1 = w + c[1] * in, *p2 = w + c[2] * in, *p3 = w + c[3] * in;  \
        int32_t a0 = bias[0], a1 = bias[1], a2 = bias[2], a3 = bias[3];                                   \
        int32_t a4 = a0, a5 = a1, a6 = a2, a7 = a3;                                                       \
        for (j = in >> 3; j > 0; --j) {                                                                   \
          MT_RV_STEP8(0, 0);                                                                              \
          MT_RV_STEP8(1, U1);                                                                             \
          MT_RV_STEP8(2, U2);                                                                             \
          MT_RV_STEP8(3, 3);                                                                              \
          MT_RV_STEP8(4, 4);                                                                              \
          MT_RV_STEP8(5, 4 + U1);                                                                         \
          MT_RV_STEP8(6, 4 + U2);                                                                         \
          MT_RV_STEP8(7, 7);                                                                              \
          pa += 8, pb += 8, p0 += 8, p1 += 8, p2 += 8, p3 += 8;                                           \
        }                                                                                                 \
        if (in & 4) {                                                                                     \
          MT_RV_STEP8(0, 0);                                                                              \
          MT_RV_STEP8(1, U1);                                                                             \
          MT_RV_STEP8(2, U2);                                                                             \
          MT_RV_STEP8(3, 3);                                                                              \
          pa += 4, pb += 4, p0 += 4, p1 += 4, p2 += 4, p3 += 4;                                           \
        }                                                                                                 \
        for (j = in & 3; j > 0; --j) { /* the last in % 4, in order */                                    \
          MT_RV_STEP8(0, 0);                                                                              \
          ++pa, ++pb, ++p0, ++p1, ++p2, ++p3;                                                             \
        }                                                                                                 \
        { /* channel by channel, its requantization loaded once for both rows */                          \
          YT *ya = y + r * out, *yb = ya + out;                                                           \
          ya[c[0]] = (YT)mt_rv_rq_out(&q[0], a0, lo, YHI), yb[c[0]] = (YT)mt_rv_rq_out(&q[0], a4, lo, YHI);  \
          ya[c[1]] = (YT)mt_rv_rq_out(&q[1], a1, lo, YHI), yb[c[1]] = (YT)mt_rv_rq_out(&q[1], a5, lo, YHI);  \
          ya[c[2]] = (YT)mt_rv_rq_out(&q[2], a2, lo, YHI), yb[c[2]] = (YT)mt_rv_rq_out(&q[2], a6, lo, YHI);  \
          ya[c[3]] = (YT)mt_rv_rq_out(&q[3], a3, lo, YHI), yb[c[3]] = (YT)mt_rv_rq_out(&q[3], a7, lo, YHI);  \
        }                                                                                                 \
        r += 2;                                                                                           \
      }                                                                                                   \
      if (r < rows) { /* one last row */                                                                  \
        const XT *pa = x + r * xs;                                                                        \
        const int8_t *p0 = w + c[0] * in, *p1 = w + c[1] * in, *p2 = w + c[2] * in, *p3 = w + c[3] * in;  \
        int32_t a0 = bias[0], a1 = bias[1], a2 = bias[2], a3 = bias[3];                                   \
        for (j = in >> 2; j > 0; --j) {                                                                   \
          MT_RV_STEP4(0, 0);                                                                              \
          MT_RV_STEP4(1, U1);                                                                             \
          MT_RV_STEP4(2, U2);                                                                             \
          MT_RV_STEP4(3, 3);                                                                              \
          pa += 4, p0 += 4, p1 += 4, p2 += 4, p3 += 4;                                                    \
        }                                                                                                 \
        for (j = in & 3; j > 0; --j) {                                                                    \
          MT_RV_STEP4(0, 0);                                                                              \
          ++pa, ++p0, ++p1, ++p2, ++p3;                                                                   \
        }                                                                                                 \
        y[r * out + c[0]] = (YT)mt_rv_rq_out(&q[0], a0, lo, YHI);                                         \
        y[r * out + c[1]] = (YT)mt_rv_rq_out(&q[1], a1, lo, YHI);                                         \
        y[r * out + c[2]] = (YT)mt_rv_rq_out(&q[2], a2, lo, YHI);                                         \
        y[r * out + c[3]] = (YT)mt_rv_rq_out(&q[3], a3, lo, YHI);                                         \
      }                                                                                                   \
    }                                                                                                     \
    return 1;                                                                                             \
  }
MT_DEFINE_LINEAR_RV(mt_linear_rv_s8_s8_s8, int8_t, int8_t, int32_t, -128, 127, 0, 14, MT_LINEAR_MAX_IN_S8)
MT_DEFINE_LINEAR_RV(mt_linear_rv_s8_s8_s16, int8_t, int16_t, int32_t, -32768, 32767, 0, 14, MT_LINEAR_MAX_IN_S8)
MT_DEFINE_LINEAR_RV(mt_linear_rv_s16_s8_s8, int16_t, int8_t, int64_t, -128, 127, 1, 22, MT_LINEAR_MAX_IN_S16)
MT_DEFINE_LINEAR_RV(mt_linear_rv_s16_s8_s16, int16_t, int16_t, int64_t, -32768, 32767, 1, 22, MT_LINEAR_MAX_IN_S16)
#undef mt_linear_variant_s8_s8_s8
#undef mt_linear_variant_s8_s8_s16
#define mt_linear_variant_s8_s8_s8 mt_linear_rv_s8_s8_s8
#define mt_linear_variant_s8_s8_s16 mt_linear_rv_s8_s8_s16
#define mt_linear_variant_s16_s8_s8 mt_linear_rv_s16_s8_s8
#define mt_linear_variant_s16_s8_s16 mt_linear_rv_s16_s8_s16
#else
#define mt_linear_variant_s16_s8_s8 mt_linear_dsp2_s16_s8_s8
#define mt_linear_variant_s16_s8_s16 mt_linear_dsp2_s16_s8_s16
#endif

MT_DEFINE_LINEAR(mt_linear_s8_s8_s8, int8_t, int8_t, int8_t, int32_t, mt_wdot_s8_s8, mt_linear_out_s8,
                 mt_linear_variant_s8_s8_s8)
MT_DEFINE_LINEAR(mt_linear_s8_s8_s16, int8_t, int8_t, int16_t, int32_t, mt_wdot_s8_s8, mt_linear_out_s16,
                 mt_linear_variant_s8_s8_s16)
MT_DEFINE_LINEAR(mt_linear_s8_s16_s8, int8_t, int16_t, int8_t, int32_t, mt_wdot_s8_s16, mt_linear_out_s8,
                 mt_linear_dsp_s8_s16_s8)
MT_DEFINE_LINEAR(mt_linear_s8_s16_s16, int8_t, int16_t, int16_t, int32_t, mt_wdot_s8_s16, mt_linear_out_s16,
                 mt_linear_dsp_s8_s16_s16)
MT_DEFINE_LINEAR(mt_linear_s16_s8_s8, int16_t, int8_t, int8_t, int64_t, mt_wdot_s16_s8, mt_linear_out_s8,
                 mt_linear_variant_s16_s8_s8)
MT_DEFINE_LINEAR(mt_linear_s16_s8_s16, int16_t, int8_t, int16_t, int64_t, mt_wdot_s16_s8, mt_linear_out_s16,
                 mt_linear_variant_s16_s8_s16)
MT_DEFINE_LINEAR(mt_linear_s16_s16_s8, int16_t, int16_t, int8_t, int64_t, mt_wdot_s16_s16, mt_linear_out_s8,
                 mt_linear_dsp2_s16_s16_s8)
MT_DEFINE_LINEAR(mt_linear_s16_s16_s16, int16_t, int16_t, int16_t, int64_t, mt_wdot_s16_s16, mt_linear_out_s16,
                 mt_linear_dsp2_s16_s16_s16)

/* y[t] = rq(a[t] b[t]) by one dot product per output (DOT: mt_dot_*, b read down a column or along a
 * row of b^T), saturated by OUT (mt_out_*) */
#define MT_DEFINE_MATMUL(NAME, CT, DOT, OUT)                                                             \
  void NAME(const CT *a, const CT *b, CT *y, int batch, int M, int K, int N, int b_transposed, int32_t m, \
            int s) {                                                                                     \
    int t, i, j;                                                                                         \
    for (t = 0; t < batch; ++t) {                                                                        \
      const CT *at = a + t * M * K, *bt = b + t * K * N;                                                 \
      CT *yt = y + t * M * N;                                                                            \
      for (i = 0; i < M; ++i)                                                                            \
        for (j = 0; j < N; ++j) {                                                                        \
          const int64_t acc = b_transposed ? DOT(at + i * K, bt + j * K, 1, K)                          \
                                           : DOT(at + i * K, bt + j, N, K);                              \
          yt[i * N + j] = OUT(mt_rq(acc, m, s), 0);                                                     \
        }                                                                                                \
    }                                                                                                    \
  }
MT_DEFINE_MATMUL(mt_matmul_s8, int8_t, mt_dot_s8_s8, mt_out_s8)
MT_DEFINE_MATMUL(mt_matmul_s16, int16_t, mt_dot_s16_s16, mt_out_s16)

#if MT_F32
/* ==================================================================================== */
/* Float32 (training in float): mt_linear_f32, mt_matmul_f32 and their backward         */
/* ==================================================================================== */
/* Every output one sum (mt_dotf: the terms added in index order), as mt_kernels.h states. */

void mt_linear_f32(const float *x, const float *w, const float *b, float *y, int rows, int in, int out, int xs) {
  int r, c;
  if (xs <= 0) xs = in;
  for (r = 0; r < rows; ++r)
    for (c = 0; c < out; ++c) y[r * out + c] = mt_dotf(b ? b[c] : 0.0f, x + r * xs, 1, w + c * in, 1, in);
}

void mt_linear_backward_f32(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                            int rows, int in, int out, int xs, int acc) {
  int r, c, k;
  if (xs <= 0) xs = in;
  if (dx)
    for (r = 0; r < rows; ++r)
      for (k = 0; k < in; ++k) mt_put_f32(dx + r * in + k, mt_dotf(0.0f, dy + r * out, 1, w + k, in, out), acc & 1);
  if (dw)
    for (c = 0; c < out; ++c)
      for (k = 0; k < in; ++k) mt_put_f32(dw + c * in + k, mt_dotf(0.0f, dy + c, out, x + k, xs, rows), acc & 2);
  if (db)
    for (c = 0; c < out; ++c) mt_put_f32(db + c, mt_sumf(0.0f, dy + c, out, rows), acc & 2);
}

void mt_matmul_f32(const float *a, const float *b, float *y, int batch, int M, int K, int N, int bt) {
  int z, m, n;
  for (z = 0; z < batch; ++z) {
    const float *A = a + z * M * K, *B = b + z * K * N;
    float *Y = y + z * M * N;
    for (m = 0; m < M; ++m)
      for (n = 0; n < N; ++n)
        Y[m * N + n] = bt ? mt_dotf(0.0f, A + m * K, 1, B + n * K, 1, K) : mt_dotf(0.0f, A + m * K, 1, B + n, N, K);
  }
}

void mt_matmul_backward_f32(const float *a, const float *b, const float *dy, float *da, float *db, int batch, int M,
                            int K, int N, int bt, int acc) {
  int z, m, k, n;
  for (z = 0; z < batch; ++z) {
    const float *A = a + z * M * K, *B = b + z * K * N, *DY = dy + z * M * N;
    if (da) /* da[m, k] = sum_n dy[m, n] b[k, n] (b stored [N, K] when bt) */
      for (m = 0; m < M; ++m)
        for (k = 0; k < K; ++k)
          mt_put_f32(da + z * M * K + m * K + k,
                     bt ? mt_dotf(0.0f, DY + m * N, 1, B + k, K, N) : mt_dotf(0.0f, DY + m * N, 1, B + k * N, 1, N),
                     acc & 1);
    if (db) /* db[k, n] = sum_m a[m, k] dy[m, n], stored as b is */
      for (k = 0; k < K; ++k)
        for (n = 0; n < N; ++n)
          mt_put_f32(db + z * K * N + (bt ? n * K + k : k * N + n), mt_dotf(0.0f, A + k, K, DY + n, N, M), acc & 1);
  }
}
#endif
