/* mt_conv.c - convolutions (mt_conv_<x>_<w>_<y>) and pooling (mt_max_pool_*, mt_avg_pool_*):
 * the lowering's conv family (src/lower/rules/conv.cpp, src/lower/rules/pool.cpp). Direct
 * loops over each output's taps, no im2col buffer; the requantization is the linear layers'
 * (mt_linear_out_* of mt_linear.c). Part of mt_kernels.c. */
#include "mt_internal.h"

/* floor(u / d) for d > 0 without a divide instruction: u times the reciprocal of
 * mt_recip_u32 (1/d = r 2^-e, never below it, relative error < 2^-27) gives the quotient or a
 * little more, lowered while q d > u. Exact. */
static uint32_t mt_udiv_u32(uint32_t u, uint32_t d) {
  int e;
  const uint32_t r = mt_recip_u32(d, &e);
  uint32_t q = (uint32_t)(((uint64_t)u * r) >> e);
  while ((uint64_t)q * d > u) --q;
  return q;
}

/* The taps k in [0, kernel) of a window starting at `start` (dilation d) that land inside
 * [0, size): start + k d >= 0 from mt_tap_begin on, start + k d < size before mt_tap_end (no
 * division: Cortex-M0 has no divide instruction; kernels are short). */
static int mt_tap_begin(int start, int d, int kernel) {
  int k = 0;
  while (k < kernel && start + k * d < 0) ++k;
  return k;
}
static int mt_tap_end(int start, int d, int size, int kernel) {
  int k = kernel;
  while (k > 0 && start + (k - 1) * d >= size) --k;
  return k;
}

/* y[n, o, p, q] = max(y_min, y_zero + rq(b[o] + sum over c < C_g and the taps (i, j) inside
 * the input of x[n, g C_g + c, p SH - PH + i DH, q SW - PW + j DW] w[o, c, i, j]))
 * (cross-correlation; the padding is zeros, symmetric x), o = g O_g + k. ACC: int32 for int8
 * x int8 (|x w| <= 2^14: exact up to C_g KH KW = 131071 taps, the lowering's bound), int64
 * otherwise. OUT: mt_linear_out_* (mt_linear.c). VARIANT: a target's variant (MT_NO_VARIANT:
 * none), which returns 1 when it computed the call. */
#define MT_DEFINE_CONV(NAME, XT, WT, YT, BT, ACC, OUT, VARIANT)                                           \
  void NAME(const XT *x, const WT *w, const BT *b, YT *y, const int32_t *g, const int32_t *rq,            \
            int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col) {                            \
    const int N = g[MT_CONV_N], CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W];                   \
    const int OG = g[MT_CONV_OG], KH = g[MT_CONV_KH], KW = g[MT_CONV_KW], OH = g[MT_CONV_OH];             \
    const int OW = g[MT_CONV_OW], SH = g[MT_CONV_SH], SW = g[MT_CONV_SW], PH = g[MT_CONV_PH];             \
    const int PW = g[MT_CONV_PW], DH = g[MT_CONV_DH], DW = g[MT_CONV_DW], G = g[MT_CONV_GROUPS];          \
    const int C = CG * G, O = OG * G;                                                                     \
    int n, grp, t, p, q, c, i, j;                                                                         \
    if (VARIANT(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min, col)) return;                          \
    (void)col;                                                                                            \
    for (n = 0; n < N; ++n)                                                                               \
      for (grp = 0; grp < G; ++grp)                                                                       \
        for (t = 0; t < OG; ++t) {                                                                        \
          const int o = grp * OG + t;                                                                     \
          const XT *xg = x + ((long)n * C + (long)grp * CG) * H * W;                                      \
          const WT *wo = w + (long)o * CG * KH * KW;                                                      \
          const int32_t *r = rq + (rq_per_channel ? 2 * o : 0);                                           \
          YT *yo = y + ((long)n * O + o) * OH * OW;                                                       \
          for (p = 0; p < OH; ++p) {                                                                      \
            const int h0 = p * SH - PH, i0 = mt_tap_begin(h0, DH, KH), i1 = mt_tap_end(h0, DH, H, KH);    \
            for (q = 0; q < OW; ++q) {                                                                    \
              const int w0 = q * SW - PW, j0 = mt_tap_begin(w0, DW, KW), j1 = mt_tap_end(w0, DW, W, KW); \
              ACC acc = 0;                                                                                \
              if (KH == 1 && KW == 1) { /* pointwise: one tap per channel, HW apart (or in the padding) */ \
                const XT *xp = xg + (i0 < i1 && j0 < j1 ? (long)h0 * W + w0 : 0);                         \
                const long hw = (long)H * W;                                                              \
                for (c = 0; i0 < i1 && j0 < j1 && c < CG; ++c) acc += (ACC)xp[c * hw] * wo[c];            \
              } else {                                                                                    \
                for (c = 0; c < CG; ++c)                                                                  \
                  for (i = i0; i < i1; ++i) {                                                             \
                    const XT *xr = xg + ((long)c * H + h0 + i * DH) * W + w0;                             \
                    const WT *wr = wo + ((long)c * KH + i) * KW;                                          \
                    for (j = j0; j < j1; ++j) acc += (ACC)xr[j * DW] * wr[j];                             \
                  }                                                                                       \
              }                                                                                           \
              yo[p * OW + q] = OUT((int64_t)acc + (b ? b[o] : 0), r, y_zero, y_min);                      \
            }                                                                                             \
          }                                                                                               \
        }                                                                                                 \
  }
#if MT_DSP
/* The Armv7E-M variant of the int8 x int8 convolutions: im2col four output positions at a
 * time into col (four columns of the CG KH KW taps as int16, the padding's taps 0), then one
 * pass over the taps per output channel of the group (MT_COLS4_MAC: per 4 taps one word of
 * weights split by SXTB16 and 8 SMLAD, 16 MACs in 17 instructions), so each column serves
 * every channel of the group, each channel's requantization is set up once per four outputs,
 * and no buffer holds more than four columns. The columns are interleaved by blocks of four
 * taps (block b holds taps 4b .. 4b + 3 of column 0, then of columns 1, 2, 3: 32 bytes, two
 * LDRD), each block with its middle two taps swapped (t0 t2 t1 t3), so that SXTB16's split
 * of a word of weights in order, (w0, w2) and (w1, w3), meets their halfword pairs as loaded;
 * a last block of fewer taps padded with zeros (Armv8.1-M MVE: the columns as int8 in order,
 * below). Sums in int32
 * from the bias (exact: |b| < 2^30, taps <= 65536), requantized per channel by mt_rq_chan
 * (every channel mt_rq_chan_fast), at least y_min. Depthwise layers of kernel width 3 take the
 * variant below; other calls (no col, another shift, a larger bias, other layers of one
 * output channel per group, where a column would serve one channel) go to the reference. The
 * same integers. */
#define MT_CONV_COLS 4
#define MT_SLOT(t) ((((t) & 1) << 1) | (((t) & 2) >> 1)) /* tap t's place in its block: t0 t2 t1 t3 */

/* Column c (< MT_CONV_COLS) of col: the taps of output position (p, q) of a group (its CG
 * channels from x0) in the layout above. */
static void mt_conv_column_s8(const int8_t *x0, const int32_t *g, int p, int q, int16_t *col, int c_) {
  const int CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W], KH = g[MT_CONV_KH], KW = g[MT_CONV_KW];
  const int h0 = p * g[MT_CONV_SH] - g[MT_CONV_PH], w0 = q * g[MT_CONV_SW] - g[MT_CONV_PW];
  const int DH = g[MT_CONV_DH], DW = g[MT_CONV_DW];
  int16_t *const dst = col + 4 * c_;
  int c, i, j, t = 0;
#if MT_MVE
  if (1) { /* MVE: column c_ as int8 in order, (taps + 3) & ~3 bytes apart */
    int8_t *const d8 = (int8_t *)col + (long)c_ * ((CG * KH * KW + 3) & ~3);
    (void)dst;
    if (KH == 1 && KW == 1 && h0 >= 0 && h0 < H && w0 >= 0 && w0 < W) { /* pointwise: a tap per channel */
      const long hw = (long)H * W;
      const int8_t *xp = x0 + (long)h0 * W + w0;
      for (c = 0; c < CG; ++c, xp += hw) d8[c] = xp[0];
      return;
    }
    for (c = 0; c < CG; ++c)
      for (i = 0; i < KH; ++i) {
        const int hi = h0 + i * DH;
        const int8_t *xr = x0 + ((long)c * H + hi) * W;
        const int row_in = hi >= 0 && hi < H;
        for (j = 0; j < KW; ++j, ++t) {
          const int wi = w0 + j * DW;
          d8[t] = row_in && wi >= 0 && wi < W ? xr[wi] : 0;
        }
      }
    return;
  }
#endif
  if (KH == 1 && KW == 1 && h0 >= 0 && h0 < H && w0 >= 0 && w0 < W) { /* pointwise: a tap per channel */
    const long hw = (long)H * W;
    const int8_t *xp = x0 + (long)h0 * W + w0;
    for (c = 0; c + 4 <= CG; c += 4, xp += 4 * hw) {
      int16_t *d = dst + MT_CONV_COLS * c;
      d[0] = xp[0], d[1] = xp[2 * hw], d[2] = xp[hw], d[3] = xp[3 * hw];
    }
    for (; c < CG; ++c, xp += hw) dst[MT_CONV_COLS * (c & ~3) + MT_SLOT(c)] = xp[0];
    return;
  }
  for (c = 0; c < CG; ++c)
    for (i = 0; i < KH; ++i) {
      const int hi = h0 + i * DH;
      const int8_t *xr = x0 + ((long)c * H + hi) * W;
      const int row_in = hi >= 0 && hi < H;
      for (j = 0; j < KW; ++j, ++t) {
        const int wi = w0 + j * DW;
        const int16_t v = (int16_t)(row_in && wi >= 0 && wi < W ? xr[wi] : 0);
        dst[MT_CONV_COLS * (t & ~3) + MT_SLOT(t)] = v;
      }
    }
}

/* a0 .. a3 += the taps4 (a multiple of 4, > 0) first taps of the four columns of col times the
 * weights w (in order): per block, LDR of 4 weights, SXTB16 into (w0, w2) and (w1, w3), LDRD
 * of each column's two words and 2 SMLAD each; two blocks per iteration, the end compared in a
 * register (an odd number of blocks enters at the second, CBNZ). Inline assembly: 16
 * instructions per 16 MACs and the loop's 2 per 32, 11 registers. */
#define MT_COLS4_BLOCK                                                                                    \
  "ldr %[p], [%[wq]], #4\n\t"                                                                             \
  "sxtb16 %[pe], %[p]\n\t"                                                                                \
  "sxtb16 %[p], %[p], ror #8\n\t"                                                                         \
  "ldrd %[t0], %[t1], [%[xq]], #8\n\t"                                                                    \
  "smlad %[a0], %[t0], %[pe], %[a0]\n\t"                                                                  \
  "smlad %[a0], %[t1], %[p], %[a0]\n\t"                                                                   \
  "ldrd %[t0], %[t1], [%[xq]], #8\n\t"                                                                    \
  "smlad %[a1], %[t0], %[pe], %[a1]\n\t"                                                                  \
  "smlad %[a1], %[t1], %[p], %[a1]\n\t"                                                                   \
  "ldrd %[t0], %[t1], [%[xq]], #8\n\t"                                                                    \
  "smlad %[a2], %[t0], %[pe], %[a2]\n\t"                                                                  \
  "smlad %[a2], %[t1], %[p], %[a2]\n\t"                                                                   \
  "ldrd %[t0], %[t1], [%[xq]], #8\n\t"                                                                    \
  "smlad %[a3], %[t0], %[pe], %[a3]\n\t"                                                                  \
  "smlad %[a3], %[t1], %[p], %[a3]\n\t"
#define MT_COLS4_MAC(col, w, taps4, a0, a1, a2, a3)                                                       \
  do {                                                                                                    \
    const int16_t *x_ = (col), *const end_ = (col) + MT_CONV_COLS * (taps4);                              \
    const int8_t *w_ = (w);                                                                               \
    MT_COLS4_ASM(x_, end_, w_, taps4, a0, a1, a2, a3);                                                    \
  } while (0)
/* The same, the weights' pointer wq (an lvalue) advanced past them, the columns' xq to end */
#define MT_COLS4_ASM(x_, end_, w_, taps4, a0, a1, a2, a3)                                                 \
  do {                                                                                                    \
    int32_t p_, pe_, t0_, t1_, odd_ = (taps4) & 4;                                                        \
    __asm__("cbnz %[odd], 2f\n"                                                                           \
            "1:\n\t" MT_COLS4_BLOCK                                                                       \
            "2:\n\t" MT_COLS4_BLOCK                                                                       \
            "cmp %[xq], %[end]\n\t"                                                                       \
            "bne 1b"                                                                                      \
            : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xq] "+r"(x_), [wq] "+r"(w_),      \
              [p] "=&r"(p_), [pe] "=&r"(pe_), [t0] "=&r"(t0_), [t1] "=&r"(t1_), [odd] "+l"(odd_)          \
            : [end] "r"(end_)                                                                             \
            : "cc", "memory");                                                                            \
  } while (0)

/* Depthwise int8 x int8 convolutions of kernel width 3, stride and dilation 1 along W (one
 * input and one output channel per group; a row of W >= 4, any KH <= 8, stride and dilation
 * along H, padding up to 3 before a row): two outputs (q, q + 1) per pass over each kernel
 * row i, from one word of input bytes s .. s + 3 (s = q - PW) of the row, (x0 x1 x2 x3):
 * SXTB16 gives (x0, x2) and (x1, x3), and with the row's weights as (w0, w2) and w1,
 * y_q += SMLAD((x0, x2), (w0, w2)) + x1 w1 (SMLABB) and y_{q+1} += SMLAD((x1, x3), (w0, w2)) +
 * x2 w1 (SMLATB): 1 LDR, 2 SXTB16, 4 multiply-adds for 6 MACs. A word that reaches past the
 * row takes zeros there (mt_dw3_word), so the border outputs take the same pass; an odd last
 * output is computed with a second one beyond the map, not stored. The three rows of a 3 x 3
 * kernel away from the top and bottom borders in one pass, the weights in registers (w1 of
 * rows 0 and 1 as the halves of one word: SMLABT and SMLATT take the top one). Sums in int32
 * from the bias, requantized by mt_rq_chan; the caller checked the channels and biases. */

/* The word of bytes s .. s + 3 of a row xr of W >= 4 bytes, the bytes outside [0, W) as 0,
 * from the row's word at off shifted left by ls, then right by rs (logical): one LDR inside
 * the row (off = s, ls = rs = 0); left of it (-3 <= s < 0) its first word shifted left by
 * -8 s (little-endian: the bytes move to higher addresses, zeros in at s); past its end
 * (s + 3 >= W, s < W) its last word (off = W - 4) shifted right by 8 (s + 4 - W). */
static inline __attribute__((always_inline)) int32_t mt_dw3_word(const int8_t *xr, int off, int ls, int rs) {
  return (int32_t)(((uint32_t)mt_ld32(xr + off) << ls) >> rs);
}
/* off, ls, rs of mt_dw3_word for s */
static inline void mt_dw3_shifts(int s, int W, int *off, int *ls, int *rs) {
  *off = s < 0 ? 0 : s + 3 >= W ? W - 4 : s;
  *ls = s < 0 ? -8 * s : 0;
  *rs = s >= 0 && s + 3 >= W ? 8 * (s + 4 - W) : 0;
}
/* (a0, a1) += the taps of one kernel row (its weights wp = (w0, w2), w1 in the bottom half of
 * w1b) for the outputs q and q + 1, from the row's word v */
#define MT_DW3_ROW(v, wp, w1b, a0, a1, BB, TB)                                                              \
  do {                                                                                                    \
    const int32_t e_ = __sxtb16(v), o_ = mt_odd_bytes(v);                                                 \
    a0 = BB(o_, w1b, __smlad(e_, wp, a0));                                                                \
    a1 = TB(e_, w1b, __smlad(o_, wp, a1));                                                                \
  } while (0)
/* The three rows from xr (rows W apart) of a 3 x 3 kernel: w101 = (w1 of row 0, w1 of row 1), w12 = w1 of row 2 */
static inline __attribute__((always_inline)) void mt_dw3_rows3(const int8_t *xr, int W, int off, int ls, int rs,
                                                              int32_t wp0, int32_t wp1, int32_t wp2, int32_t w101,
                                                              int32_t w12, int32_t *a0, int32_t *a1) {
  int32_t s0 = *a0, s1 = *a1;
  MT_DW3_ROW(mt_dw3_word(xr, off, ls, rs), wp0, w101, s0, s1, __smlabb, __smlatb);
  MT_DW3_ROW(mt_dw3_word(xr + W, off, ls, rs), wp1, w101, s0, s1, __smlabt, __smlatt);
  MT_DW3_ROW(mt_dw3_word(xr + 2 * W, off, ls, rs), wp2, w12, s0, s1, __smlabb, __smlatb);
  *a0 = s0, *a1 = s1;
}
/* The sums of the outputs [0, n) of a row (n even; an odd last output's neighbour beyond the
 * map is computed, not kept) into ac, from the bias: pairs left of the row's first word
 * (s < 0), inside it (s in [0, W - 4]: no shifts), past its end. BODY(off, ls, rs, a0, a1)
 * adds the taps of a pair from the row's words at off, shifted (mt_dw3_word). */
#define MT_DW3_PAIRS(BODY)                                                                                \
  do {                                                                                                    \
    const int e_ = PW < n ? PW : n, f_ = W - 3 + PW < n ? W - 3 + PW : n;                                 \
    int q_ = 0;                                                                                           \
    for (; q_ < e_; q_ += 2, ac += 2) { /* left of the row */                                             \
      int32_t a0_ = bias, a1_ = bias;                                                                     \
      BODY(0, 8 * (PW - q_), 0, a0_, a1_);                                                                \
      ac[0] = a0_, ac[1] = a1_;                                                                           \
    }                                                                                                     \
    for (xr += q_ - PW; q_ < f_; q_ += 2, ac += 2, xr += 2) { /* inside */                                \
      int32_t a0_ = bias, a1_ = bias;                                                                     \
      BODY(0, 0, 0, a0_, a1_);                                                                            \
      ac[0] = a0_, ac[1] = a1_;                                                                           \
    }                                                                                                     \
    for (xr -= q_ - PW; q_ < n; q_ += 2, ac += 2) { /* past its end */                                    \
      int32_t a0_ = bias, a1_ = bias;                                                                     \
      BODY(W - 4, 0, 8 * (q_ - PW + 4 - W), a0_, a1_);                                                    \
      ac[0] = a0_, ac[1] = a1_;                                                                           \
    }                                                                                                     \
  } while (0)
/* A row of a 3 x 3 kernel whose three rows lie inside the input (xr its first; k: wp0, wp1,
 * wp2, w101, w12) */
#define MT_DW3_BODY3(off, ls, rs, a0, a1) mt_dw3_rows3(xr, W, off, ls, rs, wp0, wp1, wp2, w101, w12, &a0, &a1)
static __attribute__((noinline)) void mt_dw3_sums3(const int8_t *xr, int W, int PW, int n, const int32_t *k,
                                                   int32_t bias, int32_t *ac) {
  const int32_t wp0 = k[0], wp1 = k[1], wp2 = k[2], w101 = k[3], w12 = k[4];
  MT_DW3_PAIRS(MT_DW3_BODY3);
}
/* A row of one kernel row (wp, w1) */
#define MT_DW3_BODY1(off, ls, rs, a0, a1) MT_DW3_ROW(mt_dw3_word(xr, off, ls, rs), wp, w1, a0, a1, __smlabb, __smlatb)
static __attribute__((noinline)) void mt_dw3_sums1(const int8_t *xr, int W, int PW, int n, int32_t wp, int32_t w1,
                                                   int32_t bias, int32_t *ac) {
  MT_DW3_PAIRS(MT_DW3_BODY1);
}
/* A row of the kernel rows [i0, i1), DH W apart */
#define MT_DW3_BODYN(off, ls, rs, a0, a1)                                                                 \
  do {                                                                                                    \
    const int8_t *xi_ = xr;                                                                               \
    int i_;                                                                                               \
    for (i_ = i0; i_ < i1; ++i_, xi_ += step)                                                             \
      MT_DW3_ROW(mt_dw3_word(xi_, off, ls, rs), wp[i_], w1[i_], a0, a1, __smlabb, __smlatb);              \
  } while (0)
static __attribute__((noinline)) void mt_dw3_sumsn(const int8_t *xr, int W, int PW, int n, const int32_t *wp,
                                                   const int32_t *w1, int i0, int i1, int step, int32_t bias,
                                                   int32_t *ac) {
  MT_DW3_PAIRS(MT_DW3_BODYN);
}
/* y[q] = the requantized ac[q], q < n, at least y_min (SSAT alone for a y_min at the type's
 * minimum or below) */
#define MT_DEFINE_DW3_OUT(NAME, YT, BITS)                                                                 \
  static __attribute__((noinline)) void NAME(const int32_t *ac, int n, const mt_rq_chan *qp, int32_t y_min, YT *y) { \
    const mt_rq_chan q = *qp;                                                                             \
    int j;                                                                                                \
    if (y_min <= -(1 << ((BITS) - 1)))                                                                    \
      for (j = 0; j < n; ++j) y[j] = (YT)MT_CHAN_SAT(BITS, &q, ac[j]);                                    \
    else                                                                                                  \
      for (j = 0; j < n; ++j) y[j] = (YT)MT_CHAN_OUT(BITS, &q, ac[j], y_min);                             \
  }
MT_DEFINE_DW3_OUT(mt_dw3_out_s8, int8_t, 8)
MT_DEFINE_DW3_OUT(mt_dw3_out_s16, int16_t, 16)

/* One channel (xc its input plane, wc its KH x 3 weights, yc its output plane) from the bias,
 * requantized by qc: the sums of up to 64 outputs of a row first (acc, on the stack), then
 * their requantization (OUT); each in a function of its own with few values, so that none of
 * the loops runs out of registers. */
#define MT_DW3_CHUNK 64
#define MT_DEFINE_CONV_DW3_CHAN(NAME, YT, OUT)                                                            \
  static void NAME(const int8_t *xc, const int8_t *wc, const int32_t *g, int32_t bias, const mt_rq_chan *qc, \
                   int32_t y_min, YT *yc) {                                                               \
    const int H = g[MT_CONV_H], W = g[MT_CONV_W], KH = g[MT_CONV_KH], OH = g[MT_CONV_OH];                 \
    const int OW = g[MT_CONV_OW], PW = g[MT_CONV_PW], SH = g[MT_CONV_SH], PH = g[MT_CONV_PH];             \
    const int DH = g[MT_CONV_DH];                                                                         \
    int32_t wp[8], w1[8], k[5], acc[MT_DW3_CHUNK];                                                        \
    int p, q0, n, i;                                                                                      \
    for (i = 0; i < KH; ++i) /* (w0, w2) as halfwords, and w1 */                                          \
      wp[i] = (int32_t)(((uint32_t)(uint16_t)wc[3 * i + 2] << 16) | (uint16_t)wc[3 * i]), w1[i] = wc[3 * i + 1]; \
    if (KH == 3) k[0] = wp[0], k[1] = wp[1], k[2] = wp[2], k[3] = (int32_t)(((uint32_t)w1[1] << 16) | (uint16_t)w1[0]), k[4] = w1[2]; \
    for (p = 0; p < OH; ++p) {                                                                            \
      const int h0 = p * SH - PH, i0 = mt_tap_begin(h0, DH, KH), i1 = mt_tap_end(h0, DH, H, KH);          \
      const int8_t *xr = xc + (long)(h0 + i0 * DH) * W;                                                   \
      for (q0 = 0; q0 < OW; q0 += n) {                                                                    \
        n = OW - q0 > MT_DW3_CHUNK ? MT_DW3_CHUNK : OW - q0;                                              \
        if (KH == 3 && DH == 1 && i0 == 0 && i1 == 3) /* the whole kernel inside the rows */              \
          mt_dw3_sums3(xr, W, PW - q0, n + (n & 1), k, bias, acc);                                   \
        else if (i1 - i0 == 1) /* one row (a 1-D layer, or a border) */                                   \
          mt_dw3_sums1(xr, W, PW - q0, n + (n & 1), wp[i0], w1[i0], bias, acc);                      \
        else                                                                                              \
          mt_dw3_sumsn(xr, W, PW - q0, n + (n & 1), wp, w1, i0, i1, DH * W, bias, acc);              \
        OUT(acc, n, qc, y_min, yc + p * OW + q0);                                                         \
      }                                                                                                   \
    }                                                                                                     \
  }
MT_DEFINE_CONV_DW3_CHAN(mt_conv_dw3_chan_s8, int8_t, mt_dw3_out_s8)
MT_DEFINE_CONV_DW3_CHAN(mt_conv_dw3_chan_s16, int16_t, mt_dw3_out_s16)

/* 'Same' 3 x 3 depthwise layers (KH = KW = 3, stride, dilation and padding 1 both ways, the
 * map's size kept, H >= 3, W >= 4: the DS-CNN's): one output row per pass over the three input
 * rows it reads, the kernel in five registers (MT_DW3_ROW's pairs (w0, w2) of each row, w1 of
 * rows 0 and 1 as the halves of one word, w1 of row 2), each output requantized as soon as its
 * nine taps are in. Along the row, per kernel row: outputs 0 and 1 from the row's first word
 * (x0 x1 x2 x3; output 0's padding tap left out: y0 += x0 w1 + x1 w2, SMLAB? and SMLABT), the
 * pairs (q, q + 1) from bytes q - 1 .. q + 2 (MT_DW3_ROW), the last one or two outputs from the
 * row's last word (x[W - 4 .. W - 1]): 1 LDR, 2 SXTB16 and 4 multiply-adds per pair and row,
 * no byte outside the row read. The top and bottom output rows take the same pass over input
 * rows 0 .. 2 and H - 3 .. H - 1 with the kernel's rows moved up or down a row and a zero row
 * where the padding is (the added products are 0). A width of 5 (the DS-CNN's) compiled as a
 * constant: each row's words at immediate offsets, no loop along the row. */
typedef struct {
  int32_t wp0, wp1, wp2, w101, w12; /* (w0, w2) of rows 0, 1, 2; (w1 of row 0, w1 of row 1); w1 of row 2 */
} mt_dw3s_k;
static inline int32_t mt_pair16(int32_t lo, int32_t hi) { return (int32_t)(((uint32_t)hi << 16) | (uint16_t)lo); }
/* the kernel (mid), and the same moved up a row (top: rows 1, 2, zeros) and down (bot: zeros, rows 0, 1) */
static inline void mt_dw3s_k_of(const int8_t *w, mt_dw3s_k *top, mt_dw3s_k *mid, mt_dw3s_k *bot) {
  mid->wp0 = mt_pair16(w[0], w[2]), mid->wp1 = mt_pair16(w[3], w[5]), mid->wp2 = mt_pair16(w[6], w[8]);
  mid->w101 = mt_pair16(w[1], w[4]), mid->w12 = w[7];
  top->wp0 = mid->wp1, top->wp1 = mid->wp2, top->wp2 = 0, top->w101 = mt_pair16(w[4], w[7]), top->w12 = 0;
  bot->wp0 = 0, bot->wp1 = mid->wp0, bot->wp2 = mid->wp1, bot->w101 = mt_pair16(0, w[1]), bot->w12 = w[4];
}

/* The requantization of a channel whose sums cannot meet a rounding tie, in one SMMLA: with
 * c_lo = 0 (s >= 2), mt_rq_chan's floor((P + c - [P < 0]) / 2^(31+s)) (P = acc m) is
 * floor((P + c) / 2^(31+s)) unless P < 0 and P + c is a multiple of 2^(31+s), that is (c =
 * 2^(30+s) mod 2^(31+s)) P an odd multiple of 2^(30+s), which needs |acc| 2^t >= 2^(30+s) for
 * m's lowest set bit 2^t: never when amax 2^t < 2^(30+s), amax a bound on |acc| (as
 * mt_rv_rq_h_ok). Then y_zero + rq(acc) = (the high word of acc m + c_hi 2^32, SMMLA) >> (s -
 * 1): SMMLA, ASR, SSAT and the store per output. */
static inline int mt_rq_chan_h_ok(const int32_t *rq, uint32_t amax) {
  const uint32_t m = (uint32_t)rq[0], low = m & (0u - m);
  return rq[1] >= 2 && (((uint64_t)amax * low) >> (30 + rq[1])) == 0;
}
static inline int32_t mt_smmla(int32_t a, int32_t b, int32_t c) {
  int32_t r;
  __asm__("smmla %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

/* Output (p, q)'s int8 or int16 (Y16) y_zero + rq(a) saturated: by SMMLA (H) or mt_rq_chan_apply */
#define MT_DW3S_OUT(q_, a)                                                                                \
  do {                                                                                                    \
    const int32_t r_ = HQ ? mt_smmla(a, m, c_hi) >> sh : mt_rq_chan_apply(qc, a);                          \
    if (Y16) ((int16_t *)y)[q_] = (int16_t)__builtin_arm_ssat(r_, 16);                                    \
    else ((int8_t *)y)[q_] = (int8_t)__builtin_arm_ssat(r_, 8);                                           \
  } while (0)
/* (a0, a1) += one kernel row's taps for the outputs q and q + 1 from the word v of bytes q - 1
 * .. q + 2 of its input row (MT_DW3_ROW), w1 in the bottom (B) or top (T) half of w1r */
#define MT_DW3S_PAIR(v, wp, w1r, SMLAB, SMLAT)                                                            \
  do {                                                                                                    \
    const int32_t e_ = __sxtb16(v), o_ = mt_odd_bytes(v);                                                 \
    a0 = SMLAB(o_, w1r, __smlad(e_, wp, a0));                                                             \
    a1 = SMLAT(e_, w1r, __smlad(o_, wp, a1));                                                             \
  } while (0)
#define MT_DW3S_PAIR3(xs)                                                                                 \
  do {                                                                                                    \
    MT_DW3S_PAIR(mt_ld32(xs), k.wp0, k.w101, __smlabb, __smlatb);                                         \
    MT_DW3S_PAIR(mt_ld32((xs) + W), k.wp1, k.w101, __smlabt, __smlatt);                                   \
    MT_DW3S_PAIR(mt_ld32((xs) + 2 * W), k.wp2, k.w12, __smlabb, __smlatb);                                \
  } while (0)
/* outputs 0 and 1 from a row's first word (x0 x1 x2 x3) */
#define MT_DW3S_FIRST(v, wp, w1r, SMLAB)                                                                  \
  do {                                                                                                    \
    const int32_t e_ = __sxtb16(v), o_ = mt_odd_bytes(v);                                                 \
    a0 = __smlabt(o_, wp, SMLAB(e_, w1r, a0));                                                            \
    a1 = SMLAB(o_, w1r, __smlad(e_, wp, a1));                                                             \
  } while (0)
/* the last two outputs (W even) from a row's last word (a b c d = x[W - 4 .. W - 1]):
 * y[W - 2] += b w0 + c w1 + d w2, y[W - 1] += c w0 + d w1 */
#define MT_DW3S_LAST2(v, wp, w1r, SMLAT)                                                                  \
  do {                                                                                                    \
    const int32_t e_ = __sxtb16(v), o_ = mt_odd_bytes(v);                                                 \
    a0 = SMLAT(e_, w1r, __smlad(o_, wp, a0));                                                             \
    a1 = SMLAT(o_, w1r, __smlatb(e_, wp, a1));                                                            \
  } while (0)
/* the last output (W odd) from the same word: y[W - 1] += c w0 + d w1 */
#define MT_DW3S_LAST1(v, wp, w1r, SMLAT) a1 = SMLAT(mt_odd_bytes(v), w1r, __smlatb(__sxtb16(v), wp, a1))

/* One output row from input rows xr, xr + W, xr + 2 W and the kernel k into y */
static inline __attribute__((always_inline)) void mt_dw3s_row(const int8_t *xr, int W, mt_dw3s_k k, int32_t bias,
                                                             const mt_rq_chan *qc, int32_t m, int32_t c_hi,
                                                             int sh, void *y, int HQ, int Y16) {
  int32_t a0 = bias, a1 = bias;
  int q;
  MT_DW3S_FIRST(mt_ld32(xr), k.wp0, k.w101, __smlabb);
  MT_DW3S_FIRST(mt_ld32(xr + W), k.wp1, k.w101, __smlabt);
  MT_DW3S_FIRST(mt_ld32(xr + 2 * W), k.wp2, k.w12, __smlabb);
  MT_DW3S_OUT(0, a0);
  MT_DW3S_OUT(1, a1);
  for (q = 2; q + 3 <= W; q += 2) {
    const int8_t *xs = xr + q - 1;
    a0 = bias, a1 = bias;
    MT_DW3S_PAIR3(xs);
    MT_DW3S_OUT(q, a0);
    MT_DW3S_OUT(q + 1, a1);
  }
  if (q < W) {
    const int8_t *xs = xr + W - 4;
    a0 = bias, a1 = bias;
    if (q == W - 2) {
      MT_DW3S_LAST2(mt_ld32(xs), k.wp0, k.w101, __smlatb);
      MT_DW3S_LAST2(mt_ld32(xs + W), k.wp1, k.w101, __smlatt);
      MT_DW3S_LAST2(mt_ld32(xs + 2 * W), k.wp2, k.w12, __smlatb);
      MT_DW3S_OUT(W - 2, a0);
    } else {
      MT_DW3S_LAST1(mt_ld32(xs), k.wp0, k.w101, __smlatb);
      MT_DW3S_LAST1(mt_ld32(xs + W), k.wp1, k.w101, __smlatt);
      MT_DW3S_LAST1(mt_ld32(xs + 2 * W), k.wp2, k.w12, __smlatb);
    }
    MT_DW3S_OUT(W - 1, a1);
  }
}
/* The same for W = 5 (the DS-CNN's), the five sums at once, kernel row by kernel row: from
 * each input row's words at 0 (x0 x1 x2 x3) and 1 (x1 x2 x3 x4), whose even bytes (x1, x3) are
 * the first's odd ones, (x0, x2), (x1, x3) and (x2, x4) by three SXTB16; y0 += x0 w1 + x1 w2,
 * y1, y2, y3 as in MT_DW3S_PAIR, y4 += x3 w0 + x4 w1: 2 LDR, 3 SXTB16, 10 multiply-adds per
 * kernel row */
#define MT_DW3S_ROW5(xs, wp, w1r, SMLAB, SMLAT)                                                           \
  do {                                                                                                    \
    const int32_t u_ = mt_ld32(xs), v_ = mt_ld32((xs) + 1);                                               \
    const int32_t e_ = __sxtb16(u_), o_ = mt_odd_bytes(u_), p_ = mt_odd_bytes(v_);                        \
    a0 = __smlabt(o_, wp, SMLAB(e_, w1r, a0));                                                            \
    a1 = SMLAB(o_, w1r, __smlad(e_, wp, a1));                                                             \
    a2 = SMLAB(p_, w1r, __smlad(o_, wp, a2));                                                             \
    a3 = SMLAT(o_, w1r, __smlad(p_, wp, a3));                                                             \
    a4 = SMLAT(p_, w1r, __smlatb(o_, wp, a4));                                                            \
  } while (0)
static inline __attribute__((always_inline)) void mt_dw3s_row5(const int8_t *xr, const mt_dw3s_k *kp,
                                                              const int32_t *bp, const mt_rq_chan *qc, void *y,
                                                              int HQ, int Y16) {
  int32_t a0, a1, a2, a3, a4, m, c_hi;
  int sh;
  /* the kernel, bias and requantization read from memory per row (an LDM or two): held through
   * the loop they would take the registers the five sums and two split words need */
  __asm__ volatile("" ::: "memory");
  {
    const mt_dw3s_k k = *kp;
    a0 = a1 = a2 = a3 = a4 = *bp;
    MT_DW3S_ROW5(xr, k.wp0, k.w101, __smlabb, __smlatb);
    MT_DW3S_ROW5(xr + 5, k.wp1, k.w101, __smlabt, __smlatt);
    MT_DW3S_ROW5(xr + 10, k.wp2, k.w12, __smlabb, __smlatb);
  }
  m = qc->m, c_hi = qc->c_hi, sh = qc->sh;
  MT_DW3S_OUT(0, a0);
  MT_DW3S_OUT(1, a1);
  MT_DW3S_OUT(2, a2);
  MT_DW3S_OUT(3, a3);
  MT_DW3S_OUT(4, a4);
}
#define MT_DW3S_ROW_W(xr, W, k, bias, qc, m, c_hi, sh, y, HQ, Y16)                                        \
  ((W) == 5 ? mt_dw3s_row5(xr, &k, &bias, qc, y, HQ, Y16) : mt_dw3s_row(xr, W, k, bias, qc, m, c_hi, sh, y, HQ, Y16))
/* A channel's plane: the top row (kernel rows 1, 2 over input rows 0, 1, a zero row over row
 * 2), the rows between, the bottom row (a zero row over input row H - 3, kernel rows 0, 1 over
 * rows H - 2, H - 1) */
static inline __attribute__((always_inline)) void mt_dw3s_plane(const int8_t *xc, const int8_t *wc, int H, int W,
                                                               int32_t bias, const mt_rq_chan *qc, char *y,
                                                               int HQ, int Y16) {
  mt_dw3s_k top, mid, bot;
  const int32_t m = qc->m, c_hi = qc->c_hi;
  const int sh = qc->sh, ys = Y16 ? 2 * W : W;
  const int8_t *xr = xc, *const end = xc + (H - 2) * W;
  mt_dw3s_k_of(wc, &top, &mid, &bot);
  MT_DW3S_ROW_W(xr, W, top, bias, qc, m, c_hi, sh, y, HQ, Y16);
  for (y += ys; xr != end; xr += W, y += ys) MT_DW3S_ROW_W(xr, W, mid, bias, qc, m, c_hi, sh, y, HQ, Y16);
  MT_DW3S_ROW_W(end - W, W, bot, bias, qc, m, c_hi, sh, y, HQ, Y16);
}
#define MT_DEFINE_DW3S_CHAN(NAME, HQ, Y16)                                                                \
  static __attribute__((noinline)) void NAME(const int8_t *xc, const int8_t *wc, int H, int W, int32_t bias, \
                                             const mt_rq_chan *qc, char *y) {                             \
    if (W == 5)                                                                                           \
      mt_dw3s_plane(xc, wc, H, 5, bias, qc, y, HQ, Y16);                                                  \
    else                                                                                                  \
      mt_dw3s_plane(xc, wc, H, W, bias, qc, y, HQ, Y16);                                                  \
  }
MT_DEFINE_DW3S_CHAN(mt_dw3s_chan_h_s8, 1, 0)
MT_DEFINE_DW3S_CHAN(mt_dw3s_chan_x_s8, 0, 0)
MT_DEFINE_DW3S_CHAN(mt_dw3s_chan_h_s16, 1, 1)
MT_DEFINE_DW3S_CHAN(mt_dw3s_chan_x_s16, 0, 1)

/* 'Same' 1-D depthwise layers of kernel 3 (KH 1, KW 3, stride and dilation 1, padding 1 along
 * W, none along H: conv_dw's Conv1d(C, C, 3, padding=1, groups=C); rows of W >= 4): y[q] = b +
 * x[q - 1] w0 + x[q] w1 + x[q + 1] w2 (x[-1] = x[W] = 0), four outputs q .. q + 3 per word of
 * the row (x0 x1 x2 x3 at q), split by SXTB16 into E = (x0, x2) and O = (x1, x3), with the
 * previous word's O' = (x-3, x-1) and the next word's E'' = (x4, x6):
 *   y[q]     = SMLADX((x1, x-1), (w0, w2)) + x0 w1    (x1, x-1) = PKHBT(O, O')
 *   y[q + 1] = SMLAD(E, (w0, w2)) + x1 w1
 *   y[q + 2] = SMLAD(O, (w0, w2)) + x2 w1
 *   y[q + 3] = SMLADX((x4, x2), (w0, w2)) + x3 w1     (x4, x2) = PKHBT(E'', E)
 * each sum from the bias, then requantized by SMMLA, ASR and SSAT (the channel's
 * mt_rq_chan_h_ok: no rounding tie) and stored: per word 1 LDR, 2 SXTB16, 2 PKHBT, 8
 * multiply-adds and 4 x 4 for the outputs, 29 instructions for 12 MACs. The weights and the
 * requantization stay in registers, w1 in the top half of the word whose low byte is the shift
 * (ASR reads that byte alone). The first word starts from O' = 0 (the left padding); the words
 * whose next word lies inside the row run two per loop step in inline assembly (the four
 * registers of the window change roles each word: after a word, O is the next one's O', E''
 * its E, and the word's first register, free once y[q] is stored, takes the next load and
 * then its O); an odd first one, the last word (its next word the row's last bytes shifted
 * down, zeros above: the right padding) and the W % 4 outputs after it in C (MT_DW1S_WORD). */
typedef struct {
  int32_t wp, w1s, m, c_hi, bias; /* (w0, w2); w1 2^16 + sh; mt_rq_chan's m, c_hi; the bias */
} mt_dw1s_k;
/* y[0 .. CNT) (CNT <= 4) of the word (E, O) after O' = P, before E'' = EN: the products
 * reaching into P and EN as single multiply-adds */
#define MT_DW1S_OUT(YT, BITS, J, A) y[J] = (YT)__builtin_arm_ssat(mt_smmla(A, k.m, k.c_hi) >> sh, BITS)
#define MT_DW1S_WORD(YT, BITS, P, E, O, EN, CNT)                                                          \
  do {                                                                                                    \
    MT_DW1S_OUT(YT, BITS, 0, __smlatb(P, k.wp, __smlabt(O, k.wp, __smlabt(E, k.w1s, k.bias))));           \
    if ((CNT) > 1) MT_DW1S_OUT(YT, BITS, 1, __smlabt(O, k.w1s, __smlad(E, k.wp, k.bias)));                \
    if ((CNT) > 2) MT_DW1S_OUT(YT, BITS, 2, __smlatt(E, k.w1s, __smlad(O, k.wp, k.bias)));                \
    if ((CNT) > 3) MT_DW1S_OUT(YT, BITS, 3, __smlabt(EN, k.wp, __smlatt(O, k.w1s, __smlatb(E, k.wp, k.bias)))); \
  } while (0)
/* One word in assembly: registers P (O'), E, O, F (free); afterwards O is O', F is E, P is O, E free */
#define MT_DW1S_REQ(R, ST)                                                                                \
  "smmla " R ", " R ", %[m], %[c]\n\t"                                                                    \
  "asr " R ", " R ", %[w1s]\n\t" ST(R)
#define MT_DW1S_ASM_WORD(P, E, O, F, ST)                                                                  \
  "pkhbt " F ", " O ", " P "\n\t"                                                                         \
  "smladx " F ", " F ", %[wp], %[b]\n\t"                                                                  \
  "smlabt " F ", " E ", %[w1s], " F "\n\t" MT_DW1S_REQ(F, ST)                                             \
  "smlad " F ", " E ", %[wp], %[b]\n\t"                                                                   \
  "smlabt " F ", " O ", %[w1s], " F "\n\t" MT_DW1S_REQ(F, ST)                                             \
  "smlad " F ", " O ", %[wp], %[b]\n\t"                                                                   \
  "smlatt " F ", " E ", %[w1s], " F "\n\t" MT_DW1S_REQ(F, ST)                                             \
  "ldr " P ", [%[x]], #4\n\t"                                                                             \
  "sxtb16 " F ", " P "\n\t"                                                                               \
  "pkhbt " E ", " F ", " E "\n\t"                                                                         \
  "smladx " E ", " E ", %[wp], %[b]\n\t"                                                                  \
  "smlatt " E ", " O ", %[w1s], " E "\n\t"                                                                \
  "sxtb16 " P ", " P ", ror #8\n\t" MT_DW1S_REQ(E, ST)
#define MT_DW1S_ST8(R) "ssat " R ", #8, " R "\n\tstrb " R ", [%[y]], #1\n\t"
#define MT_DW1S_ST16(R) "ssat " R ", #16, " R "\n\tstrh " R ", [%[y]], #2\n\t"
#define MT_DEFINE_DW1S_ROWS(NAME, YT, BITS, ST)                                                           \
  static __attribute__((noinline)) void NAME(const int8_t *x, int W, int H, const mt_dw1s_k *kp, YT *y) { \
    const mt_dw1s_k k = *kp;                                                                              \
    const int sh = k.w1s & 0xff, words = W / 4 - 1, rest = W & 3; /* words: those with a next word */    \
    int r;                                                                                                \
    for (r = 0; r < H; ++r, x += W) {                                                                     \
      const int8_t *xq = x + 4, *const end = x + 4 * (words + 1);                                         \
      int32_t v = mt_ld32(x), p = 0, e = __sxtb16(v), o = mt_odd_bytes(v), f;                             \
      if (words & 1) {                                                                                    \
        v = mt_ld32(xq), xq += 4, f = __sxtb16(v);                                                        \
        MT_DW1S_WORD(YT, BITS, p, e, o, f, 4);                                                                      \
        y += 4, p = o, e = f, o = mt_odd_bytes(v);                                                        \
      }                                                                                                   \
      if (xq != end)                                                                                      \
        __asm__("1:\n\t" MT_DW1S_ASM_WORD("%[p]", "%[e]", "%[o]", "%[f]", ST)                            \
                MT_DW1S_ASM_WORD("%[o]", "%[f]", "%[p]", "%[e]", ST)                                      \
                "cmp %[x], %[end]\n\t"                                                                    \
                "bne 1b"                                                                                  \
                : [x] "+r"(xq), [y] "+r"(y), [p] "+r"(p), [e] "+r"(e), [o] "+r"(o), [f] "=&r"(f)          \
                : [wp] "r"(k.wp), [w1s] "r"(k.w1s), [m] "r"(k.m), [c] "r"(k.c_hi), [b] "r"(k.bias),       \
                  [end] "r"(end)                                                                          \
                : "cc", "memory");                                                                        \
      v = rest ? (int32_t)((uint32_t)mt_ld32(x + W - 4) >> (32 - 8 * rest)) : 0; /* zeros past the row */ \
      f = __sxtb16(v);                                                                                    \
      MT_DW1S_WORD(YT, BITS, p, e, o, f, 4);                                                                        \
      y += 4;                                                                                             \
      if (rest) {                                                                                         \
        p = o, e = f, o = mt_odd_bytes(v);                                                                \
        MT_DW1S_WORD(YT, BITS, p, e, o, 0, rest);                                                                   \
        y += rest;                                                                                        \
      }                                                                                                   \
    }                                                                                                     \
  }
MT_DEFINE_DW1S_ROWS(mt_dw1s_rows_s8, int8_t, 8, MT_DW1S_ST8)
MT_DEFINE_DW1S_ROWS(mt_dw1s_rows_s16, int16_t, 16, MT_DW1S_ST16)

/* The same rows with int8 outputs, four per word in one STR, for a channel whose shift sh
 * (mt_rq_chan's) is in [8, 16] and whose outputs stay far inside int16 (mt_dw1sp_ok): the
 * weights and the bias scaled by 2^(16 - sh) (w 2^(16 - sh) still an int16, the sums still
 * int32) and c_hi by the same, plus 128 2^16 (c' = 2^15 + (y_zero + 128) 2^16), so that SMMLA
 * leaves y + 128 = floor(2^(16 - sh) (a m + c_hi 2^32) / 2^48) in its top half (the same
 * floor as SMMLA and ASR by sh: floors of divisions by powers of two compose): PKHTB takes two
 * outputs' top halves into one word, USAT16 saturates both to [0, 255] (y to [-128, 127]), ORR
 * interleaves two such words into four bytes and EOR with 0x80 each gives the int8 y: 4
 * SMMLA, 2 PKHTB, 2 USAT16, ORR, EOR and STR for four outputs, 11 instructions where SMMLA,
 * ASR, SSAT and STRB per output take 16. A word (E, O) at q gives y[q - 1] .. y[q + 2], the
 * first from the previous word's (E', O') = ((x-4, x-2), (x-3, x-1)):
 *   y[q - 1] = SMLADX((x0, x-2), (w0, w2)) + x-1 w1   (x0, x-2) = PKHBT(E, E')
 *   y[q]     = SMLADX((x1, x-1), (w0, w2)) + x0 w1    (x1, x-1) = PKHBT(O, O')
 *   y[q + 1] = SMLAD(E, (w0, w2)) + x1 w1,  y[q + 2] = SMLAD(O, (w0, w2)) + x2 w1
 * 24 instructions per word (12 MACs), two words per loop step in assembly (the two pairs of
 * registers take turns as the previous word and the next load; an odd number of words enters
 * at the second), 3 more per step for the end (read from memory: the block takes 12
 * registers, which Cortex-M55 builds have, not 13); the row's first word (its outputs 0 .. 2,
 * the left padding as the previous word) and the last one (the W % 4 bytes after the words
 * shifted down, zeros above: y[W - 1 - W % 4] .. y[W - 1]) in C (MT_DW1SP_WORD). A channel's
 * bound amax is mt_bound_s8's; the outputs are within int16 when rq(-amax) and rq(amax) are
 * (SMMLA and ASR are nondecreasing in the sum for m > 0), here with a margin: |y + 128| <= 2^14. */
static inline int mt_dw1sp_ok(const mt_rq_chan *q, uint32_t amax) {
  const int kw = 16 - q->sh;
  const int32_t top = mt_smmla((int32_t)amax, q->m, q->c_hi) >> q->sh, bot = mt_smmla(-(int32_t)amax, q->m, q->c_hi) >> q->sh;
  return q->sh >= 8 && q->sh <= 16 && (amax >> (31 - kw)) == 0 && top + 128 <= 1 << 14 && bot + 128 >= -(1 << 14);
}
/* y[j - J0] for the outputs j in [J0, J1) of {q - 1, q, q + 1, q + 2} of the word (E, O) after (PE, PO) */
#define MT_DW1SP_OUT(Y, J, A) (Y)[J] = (int8_t)((int32_t)__builtin_arm_usat(mt_smmla(A, k.m, k.c_hi) >> 16, 8) - 128)
#define MT_DW1SP_WORD(PE, PO, E, O, J0, J1, Y)                                                            \
  do {                                                                                                    \
    if ((J0) == 0) MT_DW1SP_OUT(Y, 0, __smlabt(E, k.wp, __smlatt(PO, k.w1s, __smlatb(PE, k.wp, k.bias)))); \
    if ((J1) > 1) MT_DW1SP_OUT(Y, 1 - (J0), __smlabt(O, k.wp, __smlabt(E, k.w1s, __smlatb(PO, k.wp, k.bias)))); \
    if ((J1) > 2) MT_DW1SP_OUT(Y, 2 - (J0), __smlabt(O, k.w1s, __smlad(E, k.wp, k.bias)));                \
    if ((J1) > 3) MT_DW1SP_OUT(Y, 3 - (J0), __smlatt(E, k.w1s, __smlad(O, k.wp, k.bias)));                \
  } while (0)
/* One word in assembly: the previous word's (E', O') in PE, PO; the word loaded into E, O; T free */
#define MT_DW1SP_ASM_WORD(PE, PO, E, O, T)                                                                \
  "ldr " O ", [%[x]], #4\n\t"                                                                             \
  "sxtb16 " E ", " O "\n\t"                                                                               \
  "sxtb16 " O ", " O ", ror #8\n\t"                                                                       \
  "pkhbt " T ", " E ", " PE "\n\t"                                                                        \
  "smladx " T ", " T ", %[wp], %[b]\n\t"                                                                  \
  "smlatt " T ", " PO ", %[w1], " T "\n\t"                                                                \
  "smmla " T ", " T ", %[m], %[c]\n\t"                                                                    \
  "smlad " PE ", " E ", %[wp], %[b]\n\t"                                                                  \
  "smlabt " PE ", " O ", %[w1], " PE "\n\t"                                                               \
  "smmla " PE ", " PE ", %[m], %[c]\n\t"                                                                  \
  "pkhtb " T ", " PE ", " T ", asr #16\n\t"                                                               \
  "usat16 " T ", #8, " T "\n\t"                                                                           \
  "pkhbt " PE ", " O ", " PO "\n\t"                                                                       \
  "smladx " PE ", " PE ", %[wp], %[b]\n\t"                                                                \
  "smlabt " PE ", " E ", %[w1], " PE "\n\t"                                                               \
  "smmla " PE ", " PE ", %[m], %[c]\n\t"                                                                  \
  "smlad " PO ", " O ", %[wp], %[b]\n\t"                                                                  \
  "smlatt " PO ", " E ", %[w1], " PO "\n\t"                                                               \
  "smmla " PO ", " PO ", %[m], %[c]\n\t"                                                                  \
  "pkhtb " PE ", " PO ", " PE ", asr #16\n\t"                                                             \
  "usat16 " PE ", #8, " PE "\n\t"                                                                         \
  "orr " T ", " T ", " PE ", lsl #8\n\t"                                                                  \
  "eor " T ", " T ", #0x80808080\n\t"                                                                     \
  "str " T ", [%[y]], #4\n\t"
/* An int8 'same' 1-D depthwise layer (MT_DEFINE_CONV_DW3_DSP checked its shape; y_min is
 * the caller's): each channel by the word loop above where mt_dw1sp_ok, else by
 * mt_dw1s_rows_s8 where no rounding tie can occur, else by the exact CHAN; one function, so
 * that a channel's set-up (its bound, checks and scaled constants) costs little beside its row */
static __attribute__((noinline)) void mt_dw1sp_layer_s8(const int8_t *x, const int8_t *w, const int32_t *b, int8_t *y,
                                                       const int32_t *g, const int32_t *rq, int rq_per_channel,
                                                       int32_t y_zero, int32_t y_min) {
  const int N = g[MT_CONV_N], G = g[MT_CONV_GROUPS], H = g[MT_CONV_H], W = g[MT_CONV_W];
  const int words = W / 4 - 1, rest = W & 3; /* words: those after the first with a whole word */
  const int32_t cq = (int32_t)((1u << 15) + ((uint32_t)y_zero + 128u) * 65536u); /* c' */
  int n, o, r;
  for (n = 0; n < N; ++n)
    for (o = 0; o < G; ++o, x += H * W, y += H * W) {
      const int32_t *r_ = rq + (rq_per_channel ? 2 * o : 0), bias = b ? b[o] : 0;
      const int32_t w0 = w[3 * o], w1 = w[3 * o + 1], w2 = w[3 * o + 2];
      const uint32_t amax = ((mt_mag32(w0) + mt_mag32(w1) + mt_mag32(w2)) << 7) + mt_mag32(bias); /* mt_bound_s8 */
      const mt_rq_chan qc = mt_rq_chan_init(r_, y_zero);
      const int8_t *xr = x;
      int8_t *yr = y;
      if (!mt_rq_chan_h_ok(r_, amax)) {
        mt_conv_dw3_chan_s8(x, w + 3 * o, g, bias, &qc, y_min, y);
      } else if (!mt_dw1sp_ok(&qc, amax)) {
        const mt_dw1s_k k1 = {mt_pair16(w0, w2), (int32_t)(((uint32_t)w1 << 16) | (uint32_t)qc.sh), qc.m, qc.c_hi, bias};
        mt_dw1s_rows_s8(x, W, H, &k1, y);
      } else {
        const int kw = 16 - qc.sh; /* the weights, bias and c_hi 2^kw */
        const mt_dw1s_k k = {mt_pair16(w0 * (1 << kw), w2 * (1 << kw)), (int32_t)((uint32_t)w1 << (16 + kw)), qc.m,
                             cq, (int32_t)((uint32_t)bias << kw)};
        for (r = 0; r < H; ++r, xr += W) {
          const int8_t *xq = xr + 4, *const end = xr + 4 * (words + 1);
          int32_t v = mt_ld32(xr), pe = __sxtb16(v), po = mt_odd_bytes(v), e, o_, t = words & 1;
          MT_DW1SP_WORD(0, 0, pe, po, 1, 4, yr); /* outputs 0 .. 2: the left padding as the previous word */
          yr += 3, e = pe, o_ = po; /* an odd number of words enters at the second, the previous word in (e, o_) */
          if (xq != end)
            __asm__("cbnz %[t], 2f\n"
                    "1:\n\t" MT_DW1SP_ASM_WORD("%[pe]", "%[po]", "%[e]", "%[o]", "%[t]")
                    "2:\n\t" MT_DW1SP_ASM_WORD("%[e]", "%[o]", "%[pe]", "%[po]", "%[t]")
                    "ldr %[t], %[end]\n\t" /* (12 registers: the end from memory) */
                    "cmp %[x], %[t]\n\t"
                    "bne 1b"
                    : [x] "+r"(xq), [y] "+r"(yr), [pe] "+r"(pe), [po] "+r"(po), [e] "+r"(e), [o] "+r"(o_), [t] "+l"(t)
                    : [wp] "r"(k.wp), [w1] "r"(k.w1s), [m] "r"(k.m), [c] "r"(k.c_hi), [b] "r"(k.bias), [end] "m"(end)
                    : "cc", "memory");
          if (rest == 0) { /* y[W - 1] = x[W - 2] w0 + x[W - 1] w1 */
            MT_DW1SP_OUT(yr, 0, __smlatt(po, k.w1s, __smlatb(pe, k.wp, k.bias)));
            ++yr;
          } else { /* the last rest bytes, zeros past the row */
            v = (int32_t)((uint32_t)mt_ld32(xr + W - 4) >> (32 - 8 * rest)), e = __sxtb16(v), o_ = mt_odd_bytes(v);
            MT_DW1SP_WORD(pe, po, e, o_, 0, 1 + rest, yr);
            yr += 1 + rest;
          }
        }
      }
    }
}
#undef MT_DW1SP_OUT

/* Depthwise layers of kernel width 3 (above): the 'same' 3 x 3 ones by mt_dw3s_chan_* (SMMLA
 * for each channel that mt_rq_chan_h_ok allows, amax = 9 2^14 + |b| or, when that is too coarse,
 * mt_bound_s8 of its nine weights and bias;
 * a y_min above the type's minimum applied afterwards by RAISE, as the linear layers do), the
 * others a row at a time by CHAN */
#define MT_DEFINE_CONV_DW3_DSP(NAME, YT, CHAN, SAME_H, SAME_X, ROWS, PACKED, RAISE, BITS)                               \
  static __attribute__((noinline)) int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, const int32_t *g, \
                                             const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min) { \
    const int N = g[MT_CONV_N], H = g[MT_CONV_H], HW = g[MT_CONV_H] * g[MT_CONV_W], KH = g[MT_CONV_KH];    \
    const int G = g[MT_CONV_GROUPS], OHW = g[MT_CONV_OH] * g[MT_CONV_OW], W = g[MT_CONV_W];               \
    const int PW = g[MT_CONV_PW];                                                                         \
    int n, o;                                                                                             \
    if (g[MT_CONV_KW] != 3 || g[MT_CONV_DW] != 1 || g[MT_CONV_SW] != 1 || KH > 8 || W < 4 || PW > 3 ||    \
        ((g[MT_CONV_OW] - 1) & ~1) - PW > W - 1)                                                          \
      return 0;                                                                                           \
    if (MT_CONV_SAME3X3 && KH == 3 && PW == 1 && g[MT_CONV_PH] == 1 && g[MT_CONV_SH] == 1 &&              \
        g[MT_CONV_DH] == 1 && H >= 3) {                                                                   \
      for (n = 0; n < N; ++n) /* 'same' 3 x 3: OH = H, OW = W */                                          \
        for (o = 0; o < G; ++o) {                                                                         \
          const int32_t *r_ = rq + (rq_per_channel ? 2 * o : 0), bias = b ? b[o] : 0;                     \
          const mt_rq_chan qc = mt_rq_chan_init(r_, y_zero);                                              \
          const int h_ = mt_rq_chan_h_ok(r_, (9u << 14) + mt_mag32(bias)) || /* |x w| <= 2^14, else the weights' */ \
                         mt_rq_chan_h_ok(r_, mt_bound_s8(w + 9 * o, 9, bias));                               \
          (h_ ? SAME_H : SAME_X)(                                                                         \
              x + ((long)n * G + o) * HW, w + 9 * o, H, W, bias, &qc, (char *)(y + ((long)n * G + o) * HW)); \
        }                                                                                                 \
      if (y_min > -(1 << ((BITS) - 1))) RAISE(y, N * G * HW, y_min);                                      \
      return 1;                                                                                           \
    }                                                                                                     \
    if (MT_CONV_SAME1X3 && KH == 1 && PW == 1 && g[MT_CONV_PH] == 0 && g[MT_CONV_SH] == 1 &&              \
        g[MT_CONV_OW] == W && g[MT_CONV_OH] == H) {                                                       \
      if (PACKED) /* int8: mt_dw1sp_layer_s8 */                                                          \
        mt_dw1sp_layer_s8(x, w, b, (int8_t *)(void *)y, g, rq, rq_per_channel, y_zero, y_min);          \
      else                                                                                                \
        for (n = 0; n < N; ++n) /* each row by ROWS where no tie can occur, else by CHAN */               \
          for (o = 0; o < G; ++o) {                                                                       \
            const int32_t *r_ = rq + (rq_per_channel ? 2 * o : 0), bias = b ? b[o] : 0;                   \
            const mt_rq_chan qc = mt_rq_chan_init(r_, y_zero);                                            \
            const long at_ = ((long)n * G + o) * HW;                                                      \
            if (mt_rq_chan_h_ok(r_, mt_bound_s8(w + 3 * o, 3, bias))) {                                   \
              const mt_dw1s_k k_ = {mt_pair16(w[3 * o], w[3 * o + 2]),                                    \
                                    (int32_t)(((uint32_t)w[3 * o + 1] << 16) | (uint32_t)qc.sh), qc.m, qc.c_hi, bias}; \
              ROWS(x + at_, W, H, &k_, y + at_);                                                          \
            } else {                                                                                      \
              CHAN(x + at_, w + 3 * o, g, bias, &qc, y_min, y + at_);                                     \
            }                                                                                             \
          }                                                                                               \
      if (y_min > -(1 << ((BITS) - 1))) RAISE(y, N * G * HW, y_min);                                      \
      return 1;                                                                                           \
    }                                                                                                     \
    for (n = 0; n < N; ++n)                                                                               \
      for (o = 0; o < G; ++o) {                                                                           \
        const mt_rq_chan qc = mt_rq_chan_init(rq + (rq_per_channel ? 2 * o : 0), y_zero);                 \
        CHAN(x + ((long)n * G + o) * HW, w + o * KH * 3, g, b ? b[o] : 0, &qc, y_min,                     \
             y + ((long)n * G + o) * OHW);                                                                \
      }                                                                                                   \
    return 1;                                                                                             \
  }
MT_DEFINE_CONV_DW3_DSP(mt_conv_dw3_s8_s8_s8, int8_t, mt_conv_dw3_chan_s8, mt_dw3s_chan_h_s8, mt_dw3s_chan_x_s8,
                       mt_dw1s_rows_s8, 1, mt_raise_to_s8, 8)
MT_DEFINE_CONV_DW3_DSP(mt_conv_dw3_s8_s8_s16, int16_t, mt_conv_dw3_chan_s16, mt_dw3s_chan_h_s16,
                       mt_dw3s_chan_x_s16, mt_dw1s_rows_s16, 0, mt_raise_to_s16, 16)

#if MT_MVE
/* Armv8.1-M MVE: the four columns as int8 in order ((taps + 3) & ~3 bytes apart, from
 * mt_conv_column_s8), each channel's four sums by VMLADAVA.S8 (16 products into an int32 sum
 * per instruction: 4 loads of the columns and 1 of the weights per 64 MACs), the last taps %
 * 16 under a tail predicate (VCTP: lanes past the taps neither loaded nor added). The same
 * exact int32 sums. */
#define MT_COLS4_SUMS(col, tail, w, taps, taps4, j, a0, a1, a2, a3)                                       \
  do {                                                                                                    \
    const int span_ = ((taps) + 3) & ~3;                                                                  \
    const int8_t *c0_ = (const int8_t *)(col), *c1_ = c0_ + span_, *c2_ = c1_ + span_, *c3_ = c2_ + span_; \
    (void)(tail), (void)(taps4);                                                                          \
    for (j = 0; j + 16 <= (taps); j += 16) {                                                              \
      const int8x16_t wv_ = vld1q_s8((w) + j);                                                            \
      a0 = vmladavaq_s8(a0, vld1q_s8(c0_ + j), wv_), a1 = vmladavaq_s8(a1, vld1q_s8(c1_ + j), wv_);       \
      a2 = vmladavaq_s8(a2, vld1q_s8(c2_ + j), wv_), a3 = vmladavaq_s8(a3, vld1q_s8(c3_ + j), wv_);       \
    }                                                                                                     \
    if (j < (taps)) {                                                                                     \
      const mve_pred16_t p_ = vctp8q((uint32_t)((taps) - j));                                             \
      const int8x16_t wv_ = vldrbq_z_s8((w) + j, p_);                                                     \
      a0 = vmladavaq_p_s8(a0, vldrbq_z_s8(c0_ + j, p_), wv_, p_);                                         \
      a1 = vmladavaq_p_s8(a1, vldrbq_z_s8(c1_ + j, p_), wv_, p_);                                         \
      a2 = vmladavaq_p_s8(a2, vldrbq_z_s8(c2_ + j, p_), wv_, p_);                                         \
      a3 = vmladavaq_p_s8(a3, vldrbq_z_s8(c3_ + j, p_), wv_, p_);                                         \
    }                                                                                                     \
  } while (0)
#endif

/* The outputs [0, n) of four positions of a channel: y[j] = the requantized a_j (HQ 1: by SMMLA,
 * every channel of the call mt_rq_chan_h_ok; else mt_rq_chan_apply), at least y_min (CLAMP 1) or
 * saturated alone (CLAMP 0: y_min at the type's minimum or below) */
#define MT_CONV_OUT1(BITS, YT, q, a, y_min, CLAMP, HQ)                                                    \
  ((YT)mt_max32((HQ) ? (int32_t)__builtin_arm_ssat(mt_smmla(a, (q)->m, (q)->c_hi) >> (q)->sh, BITS)       \
                     : MT_CHAN_SAT(BITS, q, a),                                                           \
                (CLAMP) ? y_min : INT32_MIN))
#define MT_CONV_OUT4(BITS, YT, q, y, n, a0, a1, a2, a3, y_min, CLAMP, HQ)                                 \
  do {                                                                                                    \
    y[0] = MT_CONV_OUT1(BITS, YT, q, a0, y_min, CLAMP, HQ);                                               \
    if (n > 1) y[1] = MT_CONV_OUT1(BITS, YT, q, a1, y_min, CLAMP, HQ);                                    \
    if (n > 2) y[2] = MT_CONV_OUT1(BITS, YT, q, a2, y_min, CLAMP, HQ);                                    \
    if (n > 3) y[3] = MT_CONV_OUT1(BITS, YT, q, a3, y_min, CLAMP, HQ);                                    \
  } while (0)
#if MT_MVE
/* The output channels of a group against the four columns of col (MT_DEFINE_CONV_DSP's names),
 * the outputs of positions k .. k + CNT - 1 */
#define MT_CONV_CHANNELS(YT, BITS, CNT)                                                                   \
  for (o = grp * OG; o < (grp + 1) * OG; ++o) {                                                           \
    const mt_rq_chan qo = mt_rq_chan_init(rq + (rq_per_channel ? 2 * o : 0), y_zero);                     \
    const int8_t *wo = w + (long)o * taps;                                                                \
    int32_t a0 = b ? b[o] : 0, a1 = a0, a2 = a0, a3 = a0;                                                 \
    YT *yo = y + ((long)n * O + o) * P + k;                                                               \
    MT_COLS4_SUMS(col, tail, wo, taps, taps4, j, a0, a1, a2, a3);                                         \
    if (hq && y_min <= -(1 << ((BITS) - 1)))                                                              \
      MT_CONV_OUT4(BITS, YT, &qo, yo, CNT, a0, a1, a2, a3, y_min, 0, 1);                                  \
    else if (hq)                                                                                          \
      MT_CONV_OUT4(BITS, YT, &qo, yo, CNT, a0, a1, a2, a3, y_min, 1, 1);                                  \
    else if (y_min <= -(1 << ((BITS) - 1)))                                                               \
      MT_CONV_OUT4(BITS, YT, &qo, yo, CNT, a0, a1, a2, a3, y_min, 0, 0);                                  \
    else                                                                                                  \
      MT_CONV_OUT4(BITS, YT, &qo, yo, CNT, a0, a1, a2, a3, y_min, 1, 0);                                  \
  }
#define MT_DEFINE_CONV_DSP(NAME, YT, BITS, DW3)                                                            \
  static int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, const int32_t *g,            \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col) {   \
    const int N = g[MT_CONV_N], CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W];                   \
    const int OG = g[MT_CONV_OG], OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS];          \
    const int taps = CG * g[MT_CONV_KH] * g[MT_CONV_KW], taps4 = taps & ~3;                               \
    const int O = OG * G, P = OH * OW;                                                                    \
    const int16_t *const tail = col; /* (no tail: MT_COLS4_SUMS reads the int8 columns whole) */ \
    uint32_t bmax = 0;                                                                                    \
    int n, grp, o, k, j, c, hq = 1;                                                                       \
    if (taps > 65536) return 0;                                                                           \
    for (o = 0; o < (rq_per_channel ? O : 1); ++o)                                                        \
      if (!mt_rq_chan_fast(rq + 2 * o, y_zero)) return 0;                                                 \
    for (o = 0; b && o < O; ++o) {                                                                        \
      const uint32_t m_ = mt_mag32(b[o]);                                                                 \
      if (m_ >= 1u << 30) return 0;                                                                       \
      bmax = m_ > bmax ? m_ : bmax;                                                                       \
    }                                                                                                     \
    if (OG == 1 && CG == 1) return DW3(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min);                 \
    if (!col || OG == 1) return 0; /* one channel per group: a column would serve one channel */          \
    for (o = 0; o < (rq_per_channel ? O : 1); ++o) /* |sum| <= taps 2^14 + |b| */                         \
      hq = hq && mt_rq_chan_h_ok(rq + 2 * o, ((uint32_t)taps << 14) + bmax);                              \
    for (n = 0; n < N; ++n)                                                                               \
      for (grp = 0; grp < G; ++grp) {                                                                     \
        const int8_t *x0 = x + ((long)n * CG * G + (long)grp * CG) * H * W;                               \
        int p = 0, q = 0; /* position k = p OW + q */                                                     \
        for (k = 0; k < P; k += MT_CONV_COLS) {                                                           \
          int cnt = P - k < MT_CONV_COLS ? P - k : MT_CONV_COLS; /* a last block of fewer: its last column again */ \
          if (cnt < MT_CONV_COLS && P >= MT_CONV_COLS) /* or, P >= 4, the last four positions (some again) */ \
            for (; cnt < MT_CONV_COLS; ++cnt, --k)                                                        \
              if (q-- == 0) q = OW - 1, --p;                                                              \
          for (c = 0; c < MT_CONV_COLS; ++c) {                                                            \
            mt_conv_column_s8(x0, g, p, q, col, c);                                                       \
            if (c + 1 < cnt && ++q == OW) q = 0, ++p;                                                     \
          }                                                                                               \
          if (++q == OW) q = 0, ++p;                                                                      \
          if (cnt == MT_CONV_COLS) { /* the outputs without a test of cnt */                              \
            MT_CONV_CHANNELS(YT, BITS, MT_CONV_COLS);                                                     \
          } else {                                                                                        \
            MT_CONV_CHANNELS(YT, BITS, cnt);                                                              \
          }                                                                                               \
        }                                                                                                 \
      }                                                                                                   \
    return 1;                                                                                             \
  }
MT_DEFINE_CONV_DSP(mt_conv_dsp_s8_s8_s8, int8_t, 8, mt_conv_dw3_s8_s8_s8)
MT_DEFINE_CONV_DSP(mt_conv_dsp_s8_s8_s16, int16_t, 16, mt_conv_dw3_s8_s8_s16)
#else
/* Armv7E-M: the four columns hold every tap in blocks, the last block's taps past CG KH KW zeros
 * (written once per call), so that each channel's sums are MT_COLS4_MAC over (taps + 3) & ~3
 * taps: the word of weights of the last block reaches up to 3 bytes into the next channel's,
 * which meet those zeros. The channel whose weights end the array takes its last block here
 * instead (a word read past the array could leave the memory): its taps % 4 weights as a word
 * (the rest zeros), SXTB16 into (w0, w2) and (w1, w3), 2 SMLAD per column (cb: the block). */
#define MT_COLS4_LAST(cb, w, n, a0, a1, a2, a3)                                                           \
  do {                                                                                                    \
    uint32_t wt_ = 0;                                                                                     \
    int32_t pe_, po_;                                                                                     \
    int j_;                                                                                               \
    for (j_ = 0; j_ < (n); ++j_) wt_ |= (uint32_t)(uint8_t)(w)[j_] << (8 * j_);                           \
    pe_ = __sxtb16((int32_t)wt_), po_ = mt_odd_bytes((int32_t)wt_);                                       \
    a0 = __smlad(mt_ld32((cb) + 2), po_, __smlad(mt_ld32(cb), pe_, a0));                                  \
    a1 = __smlad(mt_ld32((cb) + 6), po_, __smlad(mt_ld32((cb) + 4), pe_, a1));                            \
    a2 = __smlad(mt_ld32((cb) + 10), po_, __smlad(mt_ld32((cb) + 8), pe_, a2));                           \
    a3 = __smlad(mt_ld32((cb) + 14), po_, __smlad(mt_ld32((cb) + 12), pe_, a3));                          \
  } while (0)

/* A word to col (no alignment asked: one STR) */
static inline void mt_st32(int16_t *d, int32_t v) { __builtin_memcpy(d, &v, 4); }

/* The four columns of a pointwise layer of stride 1 without padding at positions k .. k + 3,
 * the inputs of a channel one word (xk = x0 + k, channels hw apart): per block of four channels
 * c0 .. c3, the words of each split by SXTB16 into (position 0, 2) and (1, 3), then paired
 * channel by channel (PKHBT, PKHTB of mt_attention.c): column j's words (c0, c2) and (c1, c3),
 * the block's layout. 4 LDR, 8 SXTB16, 8 PKH and 8 STR per 16 taps; channels past CG zeros. */
#define MT_PW_BLOCK(v0, v1, v2, v3, d)                                                                    \
  do {                                                                                                    \
    const int32_t e0_ = __sxtb16(v0), o0_ = mt_odd_bytes(v0), e1_ = __sxtb16(v1), o1_ = mt_odd_bytes(v1);  \
    const int32_t e2_ = __sxtb16(v2), o2_ = mt_odd_bytes(v2), e3_ = __sxtb16(v3), o3_ = mt_odd_bytes(v3);  \
    mt_st32((d), mt_even_halves(e0_, e2_)), mt_st32((d) + 2, mt_even_halves(e1_, e3_));                   \
    mt_st32((d) + 4, mt_even_halves(o0_, o2_)), mt_st32((d) + 6, mt_even_halves(o1_, o3_));               \
    mt_st32((d) + 8, mt_odd_halves(e0_, e2_)), mt_st32((d) + 10, mt_odd_halves(e1_, e3_));                \
    mt_st32((d) + 12, mt_odd_halves(o0_, o2_)), mt_st32((d) + 14, mt_odd_halves(o1_, o3_));               \
  } while (0)
static void mt_conv_cols_pw(const int8_t *xk, long hw, int CG, int16_t *col) {
  int c;
  for (c = 0; c + 4 <= CG; c += 4, xk += 4 * hw, col += 16)
    MT_PW_BLOCK(mt_ld32(xk), mt_ld32(xk + hw), mt_ld32(xk + 2 * hw), mt_ld32(xk + 3 * hw), col);
  if (c < CG)
    MT_PW_BLOCK(mt_ld32(xk), c + 1 < CG ? mt_ld32(xk + hw) : 0, c + 2 < CG ? mt_ld32(xk + 2 * hw) : 0, 0, col);
}

/* Windows inside the input: off[s] = the input offset of the tap in place s of col's blocks
 * (t0 t2 t1 t3) from the window's first, -1 for the last block's padding; 0 when the taps are
 * more than MT_CONV_TAB or an offset does not fit int16 (those windows take
 * mt_conv_column_s8). Then a column is a load of each offset, the input and a store. */
#define MT_CONV_TAB 128
static int mt_conv_tab(const int32_t *g, int16_t *off) {
  const int CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W], KH = g[MT_CONV_KH], KW = g[MT_CONV_KW];
  const int DH = g[MT_CONV_DH], DW = g[MT_CONV_DW];
  int c, i, j, t = 0;
  if (CG * KH * KW > MT_CONV_TAB || (long)CG * H * W + (long)(KH - 1) * DH * W + (long)(KW - 1) * DW > 32767) return 0;
  for (c = 0; c < CG; ++c)
    for (i = 0; i < KH; ++i)
      for (j = 0; j < KW; ++j, ++t) off[(t & ~3) + MT_SLOT(t)] = (int16_t)(((long)c * H + (long)i * DH) * W + j * DW);
  for (; t & 3; ++t) off[(t & ~3) + MT_SLOT(t)] = -1;
  return 1;
}
static void mt_conv_column_tab(const int8_t *xo, const int16_t *off, int taps4, int tapsr, int16_t *d) {
  int s;
  for (s = 0; s < taps4; s += 4, d += 16) d[0] = xo[off[s]], d[1] = xo[off[s + 1]], d[2] = xo[off[s + 2]], d[3] = xo[off[s + 3]];
  for (; s < tapsr; ++s)
    if (off[s] >= 0) d[s & 3] = xo[off[s]];
}
/* The four columns at once, windows inside the input sw apart (four positions of a row): per
 * place of a block one offset, four loads and four stores */
#define MT_TAB4(i)                                                                                        \
  do {                                                                                                    \
    const int8_t *xs_ = xo + off[s + (i)];                                                                \
    d[(i)] = xs_[0], d[(i) + 4] = xs_[sw], d[(i) + 8] = xs_[s2], d[(i) + 12] = xs_[s3];                     \
  } while (0)
static void mt_conv_cols4_tab(const int8_t *xo, int sw, const int16_t *off, int taps4, int tapsr, int16_t *d) {
  const int s2 = 2 * sw, s3 = 3 * sw;
  int s, i;
  for (s = 0; s < taps4; s += 4, d += 16) {
    MT_TAB4(0);
    MT_TAB4(1);
    MT_TAB4(2);
    MT_TAB4(3);
  }
  for (i = 0; s < tapsr && i < 4; ++i) /* the last block (s = taps4) */
    if (off[s + i] >= 0) MT_TAB4(i);
}

/* The channels [0, og) of a group against the four columns (channel o: its weights w + o taps,
 * bias b[o], rq pair r + o rs), every channel's sums free of rounding ties
 * (mt_rq_chan_h_ok), the outputs of four positions to y + o P .. + 3: per channel the bias
 * four times, m, the shift and c_hi = (2 y_zero + 1) 2^(s-2) (mt_rq_chan_init's for s >= 2,
 * yz21 = 2 y_zero + 1), MT_COLS4_MAC over the blocks and per output SMMLA, ASR, SSAT (and the
 * y_min clamp where CLAMP), the store. Not inlined, so that few values live through its loop. */
#define MT_DEFINE_CONV_CHANS4(NAME, YT, BITS, CLAMP)                                                      \
  static __attribute__((noinline)) void NAME(const int16_t *col, const int8_t *w, const int32_t *b,       \
                                             const int32_t *r, int rs, YT *y, int P, int og, int taps,     \
                                             uint32_t yz21, int32_t y_min) {                               \
    const int tapsr = (taps + 3) & ~3, wd = taps - tapsr;                                                 \
    const int16_t *const cend = col + MT_CONV_COLS * tapsr;                                               \
    YT *const end = y + (long)og * P;                                                                     \
    for (; y != end; y += P, r += rs) {                                                                   \
      int32_t a0 = *b++, a1 = a0, a2 = a0, a3 = a0, s_;                                                   \
      const int16_t *xq = col;                                                                            \
      mt_rq_chan q;                                                                                       \
      MT_COLS4_ASM(xq, cend, w, tapsr, a0, a1, a2, a3);                                                   \
      w += wd; /* the next channel's weights */                                                           \
      s_ = r[1], q.c_lo = 0, q.m = r[0], q.sh = s_ - 1, q.c_hi = (int32_t)(yz21 << (s_ - 2));             \
      MT_CONV_OUT4(BITS, YT, &q, y, 4, a0, a1, a2, a3, y_min, CLAMP, 1);                                  \
    }                                                                                                     \
  }
MT_DEFINE_CONV_CHANS4(mt_conv_chans4_s8, int8_t, 8, 0)
MT_DEFINE_CONV_CHANS4(mt_conv_chans4_s8c, int8_t, 8, 1)
MT_DEFINE_CONV_CHANS4(mt_conv_chans4_s16, int16_t, 16, 0)
MT_DEFINE_CONV_CHANS4(mt_conv_chans4_s16c, int16_t, 16, 1)
/* The four columns of the positions k = p OW + q .. k + cnt - 1 (cnt < 4: the last one again),
 * (*pp, *qp) = (p, q) moved past them: a pointwise layer of stride 1 without padding
 * (pw) by mt_conv_cols_pw, four windows inside the input in a row by mt_conv_cols4_tab, other
 * windows inside one by one by mt_conv_column_tab (off: mt_conv_tab's, or 0), the rest tap by
 * tap (mt_conv_column_s8). */
static void mt_conv_cols4(const int8_t *x0, const int32_t *g, int pw, const int16_t *off, int k, int cnt, int *pp,
                          int *qp, int16_t *col) {
  const int H = g[MT_CONV_H], W = g[MT_CONV_W], OW = g[MT_CONV_OW], SH = g[MT_CONV_SH], SW = g[MT_CONV_SW];
  const int PH = g[MT_CONV_PH], PW = g[MT_CONV_PW], taps = g[MT_CONV_CG] * g[MT_CONV_KH] * g[MT_CONV_KW];
  const int hs = (g[MT_CONV_KH] - 1) * g[MT_CONV_DH], ws = (g[MT_CONV_KW] - 1) * g[MT_CONV_DW]; /* extents - 1 */
  const int taps4 = taps & ~3, tapsr = (taps + 3) & ~3;
  int p = *pp, q = *qp, c;
  if (pw && cnt == MT_CONV_COLS) {
    mt_conv_cols_pw(x0 + k, (long)H * W, g[MT_CONV_CG], col);
    for (q += MT_CONV_COLS; q >= OW; q -= OW) ++p;
  } else if (off && cnt == MT_CONV_COLS && q + 3 < OW && p * SH - PH >= 0 && p * SH - PH + hs < H && q * SW - PW >= 0 &&
             (q + 3) * SW - PW + ws < W) {
    mt_conv_cols4_tab(x0 + (long)(p * SH - PH) * W + q * SW - PW, SW, off, taps4, tapsr, col);
    if ((q += MT_CONV_COLS) == OW) q = 0, ++p;
  } else {
    for (c = 0; c < MT_CONV_COLS; ++c) {
      const int h0 = p * SH - PH, w0 = q * SW - PW;
      if (off && h0 >= 0 && h0 + hs < H && w0 >= 0 && w0 + ws < W)
        mt_conv_column_tab(x0 + (long)h0 * W + w0, off, taps4, tapsr, col + 4 * c);
      else
        mt_conv_column_s8(x0, g, p, q, col, c);
      if (c + 1 < cnt && ++q == OW) q = 0, ++p;
    }
    if (++q == OW) q = 0, ++p;
  }
  *pp = p, *qp = q;
}

/* One channel (any: the array's last too, safe 0: its weights end the array) against the four
 * columns from its bias, its outputs of positions 0 .. cnt - 1 (requantized by SMMLA where hq,
 * else by mt_rq_chan_apply; at least y_min) */
#define MT_DEFINE_CONV_CHAN1(NAME, YT, BITS)                                                              \
  static __attribute__((noinline)) void NAME(const int16_t *col, const int8_t *w, int32_t bias,          \
                                             const int32_t *r, int32_t y_zero, int32_t y_min, YT *y,       \
                                             int cnt, int taps, int safe, int hq) {                        \
    const int nb = safe ? (taps + 3) & ~3 : taps & ~3; /* the taps of whole words of weights */          \
    const mt_rq_chan q = mt_rq_chan_init(r, y_zero);                                                      \
    int32_t a0 = bias, a1 = bias, a2 = bias, a3 = bias;                                                   \
    if (nb) MT_COLS4_MAC(col, w, nb, a0, a1, a2, a3);                                                     \
    if (nb < taps) MT_COLS4_LAST(col + MT_CONV_COLS * nb, w + nb, taps - nb, a0, a1, a2, a3);             \
    {                                                                                                     \
      const int32_t a[MT_CONV_COLS] = {a0, a1, a2, a3};                                                   \
      int j;                                                                                              \
      for (j = 0; j < cnt; ++j)                                                                           \
        y[j] = (YT)mt_max32(hq ? (int32_t)__builtin_arm_ssat(mt_smmla(a[j], q.m, q.c_hi) >> q.sh, BITS)   \
                               : MT_CHAN_SAT(BITS, &q, a[j]),                                             \
                            y_min);                                                                       \
    }                                                                                                     \
  }
MT_DEFINE_CONV_CHAN1(mt_conv_chan1_s8, int8_t, 8)
MT_DEFINE_CONV_CHAN1(mt_conv_chan1_s16, int16_t, 16)
/* Channel o of group grp by CHAN1 */
#define MT_CONV_CHAN1(CHAN1)                                                                              \
  CHAN1(col, w0 + (long)o * taps, bg ? bg[o] : 0, rq + (rq_per_channel ? 2 * (grp * OG + o) : 0), y_zero, y_min, \
        y0 + (long)o * P + k, cnt, taps, grp * OG + o + 1 < O, hq)
/* The calls of MT_DEFINE_CONV_DSP that take the columns (hq: every channel's sums free of rounding
 * ties), in a function of their own: the checks and the depthwise variant stay small */
#define MT_DEFINE_CONV_DSP(NAME, YT, BITS, DW3, CHANS4, CHANS4C, CHAN1)                                    \
  static __attribute__((noinline)) int NAME##_cols(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, \
                                                   const int32_t *g, const int32_t *rq, int rq_per_channel, \
                                                   int32_t y_zero, int32_t y_min, int16_t *col, int hq) {  \
    const int N = g[MT_CONV_N], CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W];                   \
    const int OG = g[MT_CONV_OG], OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS];          \
    const int KH = g[MT_CONV_KH], KW = g[MT_CONV_KW], SH = g[MT_CONV_SH], SW = g[MT_CONV_SW];             \
    const int PH = g[MT_CONV_PH], PW = g[MT_CONV_PW];                                                     \
    const int taps = CG * KH * KW, taps4 = taps & ~3, tapsr = (taps + 3) & ~3;                            \
    const int O = OG * G, P = OH * OW;                                                                    \
    const int pw = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PH == 0 && PW == 0 && OH == H && OW == W;  \
    const uint32_t yz21 = 2u * (uint32_t)y_zero + 1u;                                                     \
    const int wl_ok = taps4 != taps && tapsr <= MT_CONV_TAB;                                              \
    int16_t off[MT_CONV_TAB];                                                                             \
    int8_t wl[MT_CONV_TAB];                                                                               \
    int n, grp, o, k, c, tab;                                                                             \
    for (k = taps; k < tapsr; ++k) /* the last block's padding */                                         \
      for (c = 0; c < MT_CONV_COLS; ++c) col[MT_CONV_COLS * taps4 + 4 * c + MT_SLOT(k)] = 0;              \
    tab = !pw && mt_conv_tab(g, off);                                                                     \
    if (wl_ok) /* the last channel's weights, then zeros to a multiple of 4 */                            \
      for (k = 0; k < tapsr; ++k) wl[k] = k < taps ? w[(long)(O - 1) * taps + k] : 0;                     \
    for (n = 0; n < N; ++n)                                                                               \
      for (grp = 0; grp < G; ++grp) {                                                                     \
        const int8_t *x0 = x + ((long)n * CG * G + (long)grp * CG) * H * W, *w0 = w + (long)grp * OG * taps; \
        const int32_t *bg = b ? b + grp * OG : 0;                                                         \
        YT *y0 = y + ((long)n * O + (long)grp * OG) * P;                                                  \
        /* the channels whose words of weights stay in the array; the last of it after them */           \
        const int og = grp == G - 1 && taps4 != taps ? OG - 1 : OG;                                       \
        int p = 0, q = 0; /* position k = p OW + q */                                                     \
        for (k = 0; k < P; k += MT_CONV_COLS) {                                                           \
          int cnt = P - k < MT_CONV_COLS ? P - k : MT_CONV_COLS; /* a last block of fewer: its last column again */ \
          if (cnt < MT_CONV_COLS && P >= MT_CONV_COLS) /* or, P >= 4, the last four positions (some again) */ \
            for (; cnt < MT_CONV_COLS; ++cnt, --k)                                                        \
              if (q-- == 0) q = OW - 1, --p;                                                              \
          mt_conv_cols4(x0, g, pw, tab ? off : 0, k, cnt, &p, &q, col);                                   \
          if (cnt == MT_CONV_COLS && hq && b) {                                                           \
            const int rs = rq_per_channel ? 2 : 0;                                                        \
            const int32_t *rg = rq + rs * grp * OG;                                                       \
            void (*const chans)(const int16_t *, const int8_t *, const int32_t *, const int32_t *, int, YT *, \
                                int, int, int, uint32_t, int32_t) = y_min <= -(1 << ((BITS) - 1)) ? CHANS4 : CHANS4C; \
            chans(col, w0, bg, rg, rs, y0 + k, P, og, taps, yz21, y_min);                                 \
            if (og < OG && wl_ok) /* the last channel of the array, its weights from wl */                \
              chans(col, wl, bg + og, rg + rs * og, rs, y0 + (long)og * P + k, P, 1, taps, yz21, y_min);  \
            else                                                                                          \
              for (o = og; o < OG; ++o) MT_CONV_CHAN1(CHAN1);                                          \
          } else {                                                                                        \
            for (o = 0; o < OG; ++o) MT_CONV_CHAN1(CHAN1);                                             \
          }                                                                                               \
        }                                                                                                 \
      }                                                                                                   \
    return 1;                                                                                             \
  }                                                                                                     \
  static int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, const int32_t *g,            \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col) {   \
    const int CG = g[MT_CONV_CG], OG = g[MT_CONV_OG], O = OG * g[MT_CONV_GROUPS];                         \
    const int taps = CG * g[MT_CONV_KH] * g[MT_CONV_KW];                                                  \
    uint32_t bmax = 0;                                                                                    \
    int o, hq = 1;                                                                                        \
    if (taps > 65536) return 0;                                                                           \
    for (o = 0; o < (rq_per_channel ? O : 1); ++o)                                                        \
      if (!mt_rq_chan_fast(rq + 2 * o, y_zero)) return 0;                                                 \
    for (o = 0; b && o < O; ++o) {                                                                        \
      const uint32_t m_ = mt_mag32(b[o]);                                                                 \
      if (m_ >= 1u << 30) return 0;                                                                       \
      bmax = m_ > bmax ? m_ : bmax;                                                                       \
    }                                                                                                     \
    if (OG == 1 && CG == 1) return DW3(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min);                 \
    if (!col || OG == 1) return 0; /* one channel per group: a column would serve one channel */          \
    for (o = 0; o < (rq_per_channel ? O : 1); ++o) /* |sum| <= taps 2^14 + |b| */                         \
      hq = hq && mt_rq_chan_h_ok(rq + 2 * o, ((uint32_t)taps << 14) + bmax);                              \
    return NAME##_cols(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min, col, hq);                        \
  }
MT_DEFINE_CONV_DSP(mt_conv_dsp_s8_s8_s8, int8_t, 8, mt_conv_dw3_s8_s8_s8, mt_conv_chans4_s8, mt_conv_chans4_s8c,
                   mt_conv_chan1_s8)
MT_DEFINE_CONV_DSP(mt_conv_dsp_s8_s8_s16, int16_t, 16, mt_conv_dw3_s8_s8_s16, mt_conv_chans4_s16, mt_conv_chans4_s16c,
                   mt_conv_chan1_s16)
#endif
#else
#define mt_conv_dsp_s8_s8_s8 MT_NO_VARIANT
#define mt_conv_dsp_s8_s8_s16 MT_NO_VARIANT
#endif

#if MT_RV32
/* The RISC-V (rv32imc) variant of the int8 x int8 convolutions: the linear layers' register
 * blocking (MT_RV_STEP12 of mt_linear.c) with output positions as its rows. The CG KH KW taps
 * of three output positions are im2col'd into col as int8 (the padding's taps 0), interleaved
 * (tap t of position r at 3 t + r: one pointer reaches the three with immediate offsets; col's
 * 4 ((taps + 3) & ~3) bytes hold them), and each group of four output channels runs over them
 * with the twelve int32 sums in registers (mt_conv_sums_rv): per tap 3 + 4 loads, 12 MUL,
 * 12 ADD, each column serving every channel of the group. Sums from the bias,
 * exact in int32 as the linear variant's (|b| < 2^30, taps <= 65536), requantized by
 * mt_rv_rq of mt_linear.c, set up after the sums (no register held through the loop): in one
 * MULH when every channel of the call passes mt_rv_rq_h_ok (no rounding tie can occur), else
 * mt_rv_rq_out. A last group of fewer than four channels repeats its last channel, a last
 * chunk of fewer than three positions its last column (neither stored twice). Pointwise layers
 * and 1-D ones (KH 1, stride 1 or 2 along W) with every channel's MULH read their taps in place
 * instead (mt_pw_run_*, mt_row_run*_*, below); depthwise layers of kernel width 3 take
 * mt_conv_dw3_rv; other calls (no col, other layers of one output channel per group, a larger
 * bias, a channel not mt_rv_rq's) go to the reference. The same integers. */

/* Tap t of output position (p, q) of a group (its CG channels from x0) at dst[3 t]. */
static void mt_conv_column_rv(const int8_t *x0, const int32_t *g, int p, int q, int8_t *dst) {
  const int CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W], KH = g[MT_CONV_KH], KW = g[MT_CONV_KW];
  const int h0 = p * g[MT_CONV_SH] - g[MT_CONV_PH], w0 = q * g[MT_CONV_SW] - g[MT_CONV_PW];
  const int DH = g[MT_CONV_DH], DW = g[MT_CONV_DW];
  const int j0 = mt_tap_begin(w0, DW, KW), j1 = mt_tap_end(w0, DW, W, KW);
  const long hw = (long)H * W;
  int c, i, j;
  if (KH == 1 && KW == 1 && j0 < j1 && h0 >= 0 && h0 < H) { /* pointwise: a tap per channel */
    const int8_t *xp = x0 + (long)h0 * W + w0;
    for (c = 0; c < CG; ++c, xp += hw, dst += 3) dst[0] = xp[0];
    return;
  }
  for (c = 0; c < CG; ++c)
    for (i = 0; i < KH; ++i, dst += 3 * KW) {
      const int hi = h0 + i * DH;
      if (hi < 0 || hi >= H || j0 >= j1) {
        for (j = 0; j < KW; ++j) dst[3 * j] = 0;
      } else {
        const int8_t *xr = x0 + c * hw + (long)hi * W + w0;
        for (j = 0; j < j0; ++j) dst[3 * j] = 0;
        for (; j < j1; ++j) dst[3 * j] = xr[j * DW];
        for (; j < KW; ++j) dst[3 * j] = 0;
      }
    }
}

/* The twelve sums of a pass: three positions' columns interleaved from pa (tap t of position r
 * at pa[3 t + r]) against the taps weights of four channels from p0 .. p3; s[j] holds channel
 * j's bias on entry, s[4 r + j] the sum of position r and channel j on return. Not inlined, so
 * that the caller's loop variables take none of the loop's registers (twelve sums, three
 * columns' taps, a weight, five pointers); GCC still spills a few sums, about 3 instructions per
 * MAC. */
static __attribute__((noinline)) void mt_conv_sums_rv(const int8_t *pa, const int8_t *p0, const int8_t *p1,
                                                      const int8_t *p2, const int8_t *p3, int taps, int32_t *s) {
  const int8_t *pb = pa + 1, *pc = pa + 2;
  int32_t a0 = s[0], a1 = s[1], a2 = s[2], a3 = s[3];
  int32_t a4 = a0, a5 = a1, a6 = a2, a7 = a3, a8 = a0, a9 = a1, a10 = a2, a11 = a3;
  int j;
  for (j = taps >> 4; j > 0; --j) {
    MT_RV_STEP12(0, 0);
    MT_RV_STEP12(3, 1);
    MT_RV_STEP12(6, 2);
    MT_RV_STEP12(9, 3);
    MT_RV_STEP12(12, 4);
    MT_RV_STEP12(15, 5);
    MT_RV_STEP12(18, 6);
    MT_RV_STEP12(21, 7);
    MT_RV_STEP12(24, 8);
    MT_RV_STEP12(27, 9);
    MT_RV_STEP12(30, 10);
    MT_RV_STEP12(33, 11);
    MT_RV_STEP12(36, 12);
    MT_RV_STEP12(39, 13);
    MT_RV_STEP12(42, 14);
    MT_RV_STEP12(45, 15);
    pa += 48, pb += 48, pc += 48, p0 += 16, p1 += 16, p2 += 16, p3 += 16;
  }
  for (j = (taps >> 2) & 3; j > 0; --j) {
    MT_RV_STEP12(0, 0);
    MT_RV_STEP12(3, 1);
    MT_RV_STEP12(6, 2);
    MT_RV_STEP12(9, 3);
    pa += 12, pb += 12, pc += 12, p0 += 4, p1 += 4, p2 += 4, p3 += 4;
  }
  switch (taps & 3) { /* the last taps % 4, at fixed offsets */
  case 3: MT_RV_STEP12(6, 2); /* fall through */
  case 2: MT_RV_STEP12(3, 1); /* fall through */
  case 1: MT_RV_STEP12(0, 0); /* fall through */
  default: break;
  }
  s[0] = a0, s[1] = a1, s[2] = a2, s[3] = a3, s[4] = a4, s[5] = a5;
  s[6] = a6, s[7] = a7, s[8] = a8, s[9] = a9, s[10] = a10, s[11] = a11;
}

/* Depthwise layers of a 3-tap 'same' kernel along one axis (stride and dilation 1, padding 1
 * at both ends): the n outputs of one line along that axis slide over its n inputs, each input
 * step (T contiguous taps at x, the next step xs further) read once and multiplied by the
 * three weight rows k0, k1, k2 (T each) kept in registers: it ends output r - 1 (k2), adds to
 * output r (k1) and starts output r + 1 from the bias (k0), so the padding's taps are never
 * computed and the border outputs take the same pass. Per step T loads, 3 T MUL, 3 T ADD and
 * one output (mt_rv_rq_out_h: every channel's mt_rv_rq_h_ok is 1), unrolled by three so the
 * three sums rotate by name. T = 3 and T = 2: the columns of a 3 x 3 kernel down H (the
 * first and last column T = 2, their padding's taps left out); T = 1: a row of a 1-D kernel
 * along W. The same integers as mt_rv_rq_out_h (the clamp as two compares, one below lo). */
#define MT_DW_DOT(xp, K) \
  ((T) == 1 ? (int32_t)(xp)[0] * K##0 \
            : (T) == 2 ? (int32_t)(xp)[0] * K##0 + (int32_t)(xp)[1] * K##1 \
                       : (int32_t)(xp)[0] * K##0 + (int32_t)(xp)[1] * K##1 + (int32_t)(xp)[2] * K##2)
#define MT_DW_OUT(yp, acc)                                                                                \
  do {                                                                                                    \
    int32_t v_ = (int32_t)((uint32_t)(int32_t)(((int64_t)(acc) * m) >> 32) + (uint32_t)c_hi) >> sh;    \
    if (v_ < lo) v_ = lo;                                                                                 \
    else if (v_ > hi) v_ = hi;                                                                            \
    if (y16) *(int16_t *)(void *)(yp) = (int16_t)v_;                                                   \
    else *(int8_t *)(void *)(yp) = (int8_t)v_;                                                         \
  } while (0)
static inline __attribute__((always_inline)) void mt_dw_slide_rv(const int8_t *x, long xs, int T, const int8_t *k0,
                                                                const int8_t *k1, const int8_t *k2, int32_t bias,
                                                                const mt_rv_rq *q, int32_t lo, int32_t hi, char *y,
                                                                long ys, int n, int y16) {
  const int32_t a0 = k0[0], a1 = T > 1 ? k0[1] : 0, a2 = T > 2 ? k0[2] : 0;
  const int32_t b0 = k1[0], b1 = T > 1 ? k1[1] : 0, b2 = T > 2 ? k1[2] : 0;
  const int32_t c0 = k2[0], c1 = T > 1 ? k2[1] : 0, c2 = T > 2 ? k2[2] : 0;
  const int32_t m = q->m, c_hi = q->c_hi;
  const int sh = q->sh;
  int32_t s0 = bias + MT_DW_DOT(x, b), s1 = bias + MT_DW_DOT(x, a), s2; /* outputs 0, 1 */
  int r = n - 1; /* steps left */
  (void)a1, (void)a2, (void)b1, (void)b2, (void)c1, (void)c2;
  x += xs;
  for (; r >= 3; r -= 3, x += 3 * xs, y += 3 * ys) { /* steps r, r + 1, r + 2: outputs r - 1 .. r + 1 end */
    s0 += MT_DW_DOT(x, c), s1 += MT_DW_DOT(x, b), s2 = bias + MT_DW_DOT(x, a);
    MT_DW_OUT(y, s0);
    s1 += MT_DW_DOT(x + xs, c), s2 += MT_DW_DOT(x + xs, b), s0 = bias + MT_DW_DOT(x + xs, a);
    MT_DW_OUT(y + ys, s1);
    s2 += MT_DW_DOT(x + 2 * xs, c), s0 += MT_DW_DOT(x + 2 * xs, b), s1 = bias + MT_DW_DOT(x + 2 * xs, a);
    MT_DW_OUT(y + 2 * ys, s2);
  }
  for (; r > 0; --r, x += xs, y += ys) {
    s0 += MT_DW_DOT(x, c), s1 += MT_DW_DOT(x, b), s2 = bias + MT_DW_DOT(x, a);
    MT_DW_OUT(y, s0);
    s0 = s1, s1 = s2;
  }
  MT_DW_OUT(y, s0); /* the last output: no step below it */
}

/* The largest requantized output of a channel whose sums stay at most amax (mt_rv_rq_out_h
 * unclamped: MULH, ADD and the arithmetic shift are nondecreasing in the sum for m > 0), and
 * the bound amax of bias + the taps k[0 .. n) against int8 inputs (each tap at most
 * max(127 k, -128 k), a padding's tap 0). A variant leaves the upper clamp out where that
 * output is at most hi: the same integers, one compare less per output. */
static inline int32_t mt_rv_rq_top(const mt_rv_rq *q, int32_t amax) {
  return (int32_t)((uint32_t)(int32_t)(((int64_t)amax * q->m) >> 32) + (uint32_t)q->c_hi) >> q->sh;
}
static int32_t mt_rv_amax_s8(int32_t bias, const int8_t *k, int n) {
  int32_t a = bias;
  int j;
  for (j = 0; j < n; ++j) a += k[j] > 0 ? 127 * k[j] : -128 * k[j];
  return a;
}

/* A row of a 1-D depthwise layer of kernel 3, stride 1, padding 1: y[r] = the requantized
 * bias + x[r - 1] k0 + x[r] k1 + x[r + 1] k2 for r < n (x[-1] = x[n] = 0; n >= 2), sliding as
 * mt_dw_slide_rv with T = 1 (each input loaded once, its three products ending, continuing and
 * starting a sum), unrolled by three with the sums rotating by name; an output by MULH, ADD,
 * SRA (mt_rv_rq_out_h), the clamp at lo as one compare (and at hi as another where CHK), and
 * the store. Per output 1 load, 3 MUL, 3 ADD and 5 or 6 instructions of output. */
#define MT_DW1_OUT(YT, CHK, YP, ACC)                                                                         \
  do {                                                                                                    \
    int32_t v_ = (int32_t)((uint32_t)(int32_t)(((int64_t)(ACC) * m) >> 32) + (uint32_t)c_hi) >> sh;    \
    if (v_ < lo) v_ = lo;                                                                                 \
    if (CHK && v_ > hi) v_ = hi;                                                                          \
    *(YP) = (YT)v_;                                                                                       \
  } while (0)
/* Steps J, J + 1, J + 2 (outputs J - 1 .. J + 1 end) */
#define MT_DW1_STEP3(YT, CHK, J)                                                                          \
  do {                                                                                                    \
    t = x[J], s0 += t * k2, s1 += t * k1, s2 = bias + t * k0;                                             \
    MT_DW1_OUT(YT, CHK, y + (J), s0);                                                                     \
    t = x[(J) + 1], s1 += t * k2, s2 += t * k1, s0 = bias + t * k0;                                       \
    MT_DW1_OUT(YT, CHK, y + (J) + 1, s1);                                                                 \
    t = x[(J) + 2], s2 += t * k2, s0 += t * k1, s1 = bias + t * k0;                                       \
    MT_DW1_OUT(YT, CHK, y + (J) + 2, s2);                                                                 \
  } while (0)
#define MT_DEFINE_DW1_ROW_RV(NAME, YT, CHK)                                                               \
  static __attribute__((noinline)) void NAME(const int8_t *x, int n, const int8_t *k, int32_t bias,      \
                                             const mt_rv_rq *q, int32_t lo, int32_t hi, YT *y) {         \
    const int32_t k0 = k[0], k1 = k[1], k2 = k[2], m = q->m, c_hi = q->c_hi;                              \
    const int sh = q->sh;                                                                                 \
    const int8_t *const xe = x + n; /* steps 1 .. n - 1 */                                                \
    int32_t s0 = bias + x[0] * k1, s1 = bias + x[0] * k0, s2, t;                                          \
    (void)hi;                                                                                             \
    for (++x; x + 6 <= xe; x += 6, y += 6) {                                                              \
      MT_DW1_STEP3(YT, CHK, 0);                                                                           \
      MT_DW1_STEP3(YT, CHK, 3);                                                                           \
    }                                                                                                     \
    if (x + 3 <= xe) {                                                                                    \
      MT_DW1_STEP3(YT, CHK, 0);                                                                           \
      x += 3, y += 3;                                                                                     \
    }                                                                                                     \
    for (; x < xe; ++x, ++y) {                                                                            \
      t = x[0], s0 += t * k2, s1 += t * k1, s2 = bias + t * k0;                                           \
      MT_DW1_OUT(YT, CHK, y, s0);                                                                                  \
      s0 = s1, s1 = s2;                                                                                   \
    }                                                                                                     \
    MT_DW1_OUT(YT, CHK, y, s0); /* the last output: no step below it */                                            \
  }
MT_DEFINE_DW1_ROW_RV(mt_dw1_row_s8_rv, int8_t, 0)
MT_DEFINE_DW1_ROW_RV(mt_dw1_row_s8c_rv, int8_t, 1)
MT_DEFINE_DW1_ROW_RV(mt_dw1_row_s16_rv, int16_t, 0)
MT_DEFINE_DW1_ROW_RV(mt_dw1_row_s16c_rv, int16_t, 1)
#undef MT_DW1_STEP3
#undef MT_DW1_OUT

/* Depthwise int8 x int8 convolutions of kernel width 3, stride and dilation 1 along W (one
 * input and one output channel per group; any KH, stride and dilation along H, padding): four
 * outputs (q .. q + 3) per pass over each kernel row i inside the input, from the six inputs
 * they cover: 3 + 6 loads, 12 MUL, 12 ADD for 12 MACs; an output whose pass would leave the row
 * alone, its three taps unrolled where they are inside, else the taps inside only. Sums in
 * int32 from the bias, requantized by mt_rv_rq (MULH when HQ is 1, as above); the caller checked
 * the channels and biases. With HQ 1, 'same' 3 x 3 layers (stride 1) and 1-D ones (kernel 3,
 * padding 1) take mt_dw_slide_rv instead, down each column or along each row. */
#define MT_DEFINE_CONV_DW3_RV(NAME, YT, YLO, YHI, ROW, ROWC)                                                       \
  static int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, const int32_t *g,            \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int hq) {         \
    const int N = g[MT_CONV_N], H = g[MT_CONV_H], W = g[MT_CONV_W], KH = g[MT_CONV_KH];                   \
    const int OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS], PW = g[MT_CONV_PW];          \
    const int SH = g[MT_CONV_SH], PH = g[MT_CONV_PH], DH = g[MT_CONV_DH];                                 \
    const int32_t lo = y_min > (YLO) ? y_min : (YLO);                                                     \
    int n, o, p, q, i;                                                                                    \
    if (g[MT_CONV_KW] != 3 || g[MT_CONV_DW] != 1 || g[MT_CONV_SW] != 1) return 0;                         \
    if (hq == 1 && PW == 1 && OW == W && W >= 2 && OH == H &&                                             \
        ((KH == 3 && SH == 1 && DH == 1 && PH == 1) || (KH == 1 && SH == 1 && PH == 0))) {                \
      for (n = 0; n < N; ++n) /* mt_dw_slide_rv down each column (3 x 3) or along each row (1-D) */       \
        for (o = 0; o < G; ++o) {                                                                         \
          const int8_t *xc = x + ((long)n * G + o) * H * W, *wc = w + o * KH * 3;                         \
          const mt_rv_rq qc = mt_rv_rq_init(rq + (rq_per_channel ? 2 * o : 0), y_zero);                  \
          const int32_t bias = b ? b[o] : 0;                                                              \
          char *yc = (char *)(y + ((long)n * G + o) * H * W);                                             \
          const long ys = (long)sizeof(YT) * W;                                                           \
          if (KH == 1) { /* mt_dw1_row_*: without the upper clamp where no sum reaches past YHI */       \
            const int chk = mt_rv_rq_top(&qc, mt_rv_amax_s8(bias, wc, 3)) > (YHI);                        \
            for (p = 0; p < H; ++p)                                                                       \
              (chk ? ROWC : ROW)(xc + (long)p * W, W, wc, bias, &qc, lo, YHI, (YT *)(void *)(yc + p * ys)); \
          } else {                                                                                          \
            mt_dw_slide_rv(xc, W, 2, wc + 1, wc + 4, wc + 7, bias, &qc, lo, YHI, yc, ys, H,               \
                           sizeof(YT) == 2);                                                              \
            for (q = 1; q < W - 1; ++q)                                                                   \
              mt_dw_slide_rv(xc + q - 1, W, 3, wc, wc + 3, wc + 6, bias, &qc, lo, YHI,                    \
                             yc + q * (long)sizeof(YT), ys, H, sizeof(YT) == 2);                          \
            mt_dw_slide_rv(xc + W - 2, W, 2, wc, wc + 3, wc + 6, bias, &qc, lo, YHI,                      \
                           yc + (W - 1) * (long)sizeof(YT), ys, H, sizeof(YT) == 2);                      \
          }                                                                                               \
        }                                                                                                 \
      return 1;                                                                                           \
    }                                                                                                     \
    for (n = 0; n < N; ++n)                                                                               \
      for (o = 0; o < G; ++o) {                                                                           \
        const int8_t *xc = x + ((long)n * G + o) * H * W, *wc = w + o * KH * 3;                           \
        const mt_rv_rq qc = mt_rv_rq_init(rq + (rq_per_channel ? 2 * o : 0), y_zero);                    \
        const int32_t bias = b ? b[o] : 0;                                                                \
        YT *yc = y + ((long)n * G + o) * OH * OW;                                                         \
        for (p = 0; p < OH; ++p) {                                                                        \
          const int h0 = p * SH - PH, i0 = mt_tap_begin(h0, DH, KH), i1 = mt_tap_end(h0, DH, H, KH);      \
          const int8_t *x0 = xc + (long)(h0 + i0 * DH) * W - PW, *w0 = wc + i0 * 3; /* column q - PW */   \
          YT *yr = yc + p * OW;                                                                           \
          for (q = 0; q < OW;) {                                                                          \
            if (q >= PW && q - PW + 6 <= W && q + 4 <= OW) { /* four outputs */                           \
              int32_t a0 = bias, a1 = bias, a2 = bias, a3 = bias;                                         \
              const int8_t *xr = x0 + q, *wr = w0;                                                        \
              for (i = i0; i < i1; ++i, xr += DH * W, wr += 3) {                                          \
                const int32_t v0 = wr[0], v1 = wr[1], v2 = wr[2];                                         \
                const int32_t x0_ = xr[0], x1_ = xr[1], x2_ = xr[2], x3_ = xr[3], x4_ = xr[4], x5_ = xr[5]; \
                a0 += x0_ * v0 + x1_ * v1 + x2_ * v2, a1 += x1_ * v0 + x2_ * v1 + x3_ * v2;               \
                a2 += x2_ * v0 + x3_ * v1 + x4_ * v2, a3 += x3_ * v0 + x4_ * v1 + x5_ * v2;               \
              }                                                                                           \
              if (hq == 1)                                                                                \
                yr[q] = (YT)mt_rv_rq_out_h(&qc, a0, lo, YHI), yr[q + 1] = (YT)mt_rv_rq_out_h(&qc, a1, lo, YHI), \
                yr[q + 2] = (YT)mt_rv_rq_out_h(&qc, a2, lo, YHI), yr[q + 3] = (YT)mt_rv_rq_out_h(&qc, a3, lo, YHI); \
              else                                                                                        \
                yr[q] = (YT)mt_rv_rq_out(&qc, a0, lo, YHI), yr[q + 1] = (YT)mt_rv_rq_out(&qc, a1, lo, YHI), \
                yr[q + 2] = (YT)mt_rv_rq_out(&qc, a2, lo, YHI), yr[q + 3] = (YT)mt_rv_rq_out(&qc, a3, lo, YHI); \
              q += 4;                                                                                     \
            } else { /* one output */                                                                     \
              const int j0 = q >= PW ? 0 : PW - q, j1 = q - PW + 3 <= W ? 3 : W - q + PW;                 \
              int32_t a = bias;                                                                           \
              const int8_t *xr = x0 + q, *wr = w0;                                                        \
              int j;                                                                                      \
              if (j0 == 0 && j1 == 3)                                                                     \
                for (i = i0; i < i1; ++i, xr += DH * W, wr += 3) a += xr[0] * wr[0] + xr[1] * wr[1] + xr[2] * wr[2]; \
              else                                                                                        \
                for (i = i0; i < i1; ++i, xr += DH * W, wr += 3)                                          \
                  for (j = j0; j < j1; ++j) a += xr[j] * wr[j];                                           \
              yr[q] = (YT)(hq == 1 ? mt_rv_rq_out_h(&qc, a, lo, YHI) : mt_rv_rq_out(&qc, a, lo, YHI));    \
              ++q;                                                                                        \
            }                                                                                             \
          }                                                                                               \
        }                                                                                                 \
      }                                                                                                   \
    return 1;                                                                                             \
  }
MT_DEFINE_CONV_DW3_RV(mt_conv_dw3_rv_s8_s8_s8, int8_t, -128, 127, mt_dw1_row_s8_rv, mt_dw1_row_s8c_rv)
MT_DEFINE_CONV_DW3_RV(mt_conv_dw3_rv_s8_s8_s16, int16_t, -32768, 32767, mt_dw1_row_s16_rv, mt_dw1_row_s16c_rv)

/* Layers whose taps are read in place, no im2col, with every channel's mt_rv_rq_h_ok 1:
 * pointwise ones (kernel 1 x 1, stride 1, no padding: the positions k, k + 1, k + 2 of the
 * flattened map, tap c at x[c HW + k + r]) and 1-D ones (KH 1, stride S = 1 or 2 along W:
 * positions q, q + 1, q + 2 of a row, tap (c, j) at x[c HW + h W + (q + r) S - PW + j DW], away
 * from the padding). One pointer reaches a tap's three positions with immediate offsets 0, S,
 * 2 S; it moves HW per tap of a pointwise layer (mt_pw_run_*), and per tap of a 1-D layer by
 * the step stored after the tap's weights (mt_row_run*_*: DW, and from a channel's last tap to
 * the next channel's first), so that the taps of every channel run as one loop. Each group of
 * four output channels has its requantization set up once (mt_pw_ctx_rv) and its weights
 * copied into col interleaved (tap t of channel j at 4 t + j, or 8 t + j with the tap's step
 * as an int32 at 8 t + 4: one pointer, immediate offsets; at most col's 8 ((taps + 3) & ~3)
 * bytes), then runs over the positions of a row, three per pass: the twelve sums of
 * mt_conv_sums_rv (8, 4 or 1 taps per loop iteration) and their twelve outputs, each by MULH,
 * ADD, SRA and the clamp as two compares (the integers of mt_rv_rq_out_h); every pass of a row
 * in one call, ctx restrict, so that the int8 stores do not reload it. A last pass of fewer than
 * three positions takes the three last positions of the run (n >= 3), some stored twice with
 * the same values. The positions of a 1-D layer whose taps reach into the padding (a few at
 * each end of a row, every position of a padding row) take mt_pos4_*: one position, the four
 * channels, the taps inside. */
typedef struct {
  int32_t b[4], m[4], c_hi[4], sh[4], lo, hi;
  long ds; /* a pointwise layer's tap step */
  int kw;  /* taps */
  void *y[4];
} mt_pw_ctx_rv;

/* y_zero + rq(acc) of channel j (mt_rv_rq_out_h), at least lo, and at most hi where CHK */
static inline __attribute__((always_inline)) int32_t mt_pw_out_rv(int32_t acc, const mt_pw_ctx_rv *c, int j,
                                                                  int32_t lo, int32_t hi, int chk) {
  int32_t v = (int32_t)((uint32_t)(int32_t)(((int64_t)acc * c->m[j]) >> 32) + (uint32_t)c->c_hi[j]) >> c->sh[j];
  if (v < lo) v = lo;
  if (chk && v > hi) v = hi;
  return v;
}
/* The twelve outputs of a pass: channel j's three positions from the sums A, B, C at y[j] + k */
#define MT_PW_OUT3(YT, J, A, B, C, CHK)                                                                   \
  do {                                                                                                    \
    YT *const y_ = (YT *)ctx->y[J] + k;                                                                   \
    y_[0] = (YT)mt_pw_out_rv(A, ctx, J, lo_, hi_, CHK), y_[1] = (YT)mt_pw_out_rv(B, ctx, J, lo_, hi_, CHK); \
    y_[2] = (YT)mt_pw_out_rv(C, ctx, J, lo_, hi_, CHK);                                                   \
  } while (0)
#define MT_PW_OUT12(YT, CHK)                                                                              \
  do {                                                                                                    \
    MT_PW_OUT3(YT, 0, a0, a4, a8, CHK);                                                                   \
    MT_PW_OUT3(YT, 1, a1, a5, a9, CHK);                                                                   \
    MT_PW_OUT3(YT, 2, a2, a6, a10, CHK);                                                                  \
    MT_PW_OUT3(YT, 3, a3, a7, a11, CHK);                                                                  \
  } while (0)

/* Positions [k, k + n) of a run (n >= 3; the first's taps from pa, the next S further): three
 * per pass, outputs to y[j] + k of ctx */
/* One tap of a pass: MT_RV_STEP12 from px (positions S apart) and the interleaved weights at
 * wq + u; px then moves ds (DT 0: a pointwise layer), or by the tap's step stored after its
 * weights (DT 1: a 1-D layer, tap t's four weights and step at wq + 8 t: DW, and a row's step
 * after each row's last tap) */
#define MT_PW_STEP(S, DT, u)                                                                              \
  do {                                                                                                    \
    const int8_t *const pa = px, *const pb = px + (S), *const pc = px + 2 * (S);                          \
    const int8_t *const p0 = wq, *const p1 = wq + 1, *const p2 = wq + 2, *const p3 = wq + 3;              \
    MT_RV_STEP12(0, (DT) ? 2 * (u) : (u));                                                                \
    px += (DT) ? *(const int32_t *)(const void *)(wq + 2 * (u) + 4) : ds;                                 \
  } while (0)
#define MT_DEFINE_PW_RUN_RV(NAME, YT, S, DT)                                                              \
  static __attribute__((noinline)) void NAME(const int8_t *x0, const int8_t *pw, const mt_pw_ctx_rv *restrict ctx, \
                                             int k, int n) {                                              \
    const int kend = k + n - 3;                                                                           \
    for (;; k += 3, x0 += 3 * (S)) {                                                                      \
      const long ds = ctx->ds;                                                                            \
      const int8_t *px = x0, *wq = pw;                                                                    \
      int32_t a0 = ctx->b[0], a1 = ctx->b[1], a2 = ctx->b[2], a3 = ctx->b[3];                             \
      int32_t a4 = a0, a5 = a1, a6 = a2, a7 = a3, a8 = a0, a9 = a1, a10 = a2, a11 = a3;                   \
      int j;                                                                                              \
      (void)ds;                                                                                           \
      if (k > kend) px = x0 -= (k - kend) * (S), k = kend; /* the last three */                           \
      for (j = ctx->kw >> 3; j > 0; --j, wq += 32 << (DT)) {                                              \
        MT_PW_STEP(S, DT, 0);                                                                             \
        MT_PW_STEP(S, DT, 4);                                                                             \
        MT_PW_STEP(S, DT, 8);                                                                             \
        MT_PW_STEP(S, DT, 12);                                                                            \
        MT_PW_STEP(S, DT, 16);                                                                            \
        MT_PW_STEP(S, DT, 20);                                                                            \
        MT_PW_STEP(S, DT, 24);                                                                            \
        MT_PW_STEP(S, DT, 28);                                                                            \
      }                                                                                                   \
      if (ctx->kw & 4) {                                                                                  \
        MT_PW_STEP(S, DT, 0);                                                                             \
        MT_PW_STEP(S, DT, 4);                                                                             \
        MT_PW_STEP(S, DT, 8);                                                                             \
        MT_PW_STEP(S, DT, 12);                                                                            \
        wq += 16 << (DT);                                                                                 \
      }                                                                                                   \
      for (j = ctx->kw & 3; j > 0; --j, wq += 4 << (DT)) MT_PW_STEP(S, DT, 0);                            \
      {                                                                                                   \
        const int32_t lo_ = ctx->lo, hi_ = ctx->hi;                                                       \
        MT_PW_OUT12(YT, 1);                                                                               \
      }                                                                                                   \
      if (k == kend) break;                                                                               \
    }                                                                                                     \
  }
MT_DEFINE_PW_RUN_RV(mt_pw_run_s8_rv, int8_t, 1, 0)
MT_DEFINE_PW_RUN_RV(mt_pw_run_s16_rv, int16_t, 1, 0)
MT_DEFINE_PW_RUN_RV(mt_row_run_s8_rv, int8_t, 1, 1)
MT_DEFINE_PW_RUN_RV(mt_row_run_s16_rv, int16_t, 1, 1)
MT_DEFINE_PW_RUN_RV(mt_row_run2_s8_rv, int8_t, 2, 1)
MT_DEFINE_PW_RUN_RV(mt_row_run2_s16_rv, int16_t, 2, 1)

/* Output position q of row p of a 1-D layer (KH 1) for the four channels of ctx (their weights
 * interleaved at cw), the taps inside the input only; the row's input h, its output k */
#define MT_DEFINE_POS4_RV(NAME, YT)                                                                       \
  static __attribute__((noinline)) void NAME(const int8_t *x0, const int32_t *g, int h, int q, int k,     \
                                             const int8_t *cw, const mt_pw_ctx_rv *ctx) {                 \
    const int CG = g[MT_CONV_CG], W = g[MT_CONV_W], KW = g[MT_CONV_KW], DW = g[MT_CONV_DW];               \
    const int w0 = q * g[MT_CONV_SW] - g[MT_CONV_PW];                                                     \
    const int j0 = mt_tap_begin(w0, DW, KW), j1 = mt_tap_end(w0, DW, W, KW);                              \
    int32_t a0 = ctx->b[0], a1 = ctx->b[1], a2 = ctx->b[2], a3 = ctx->b[3];                               \
    int c, j;                                                                                             \
    for (c = 0; h >= 0 && h < g[MT_CONV_H] && c < CG; ++c) {                                              \
      const int8_t *xr = x0 + ((long)c * g[MT_CONV_H] + h) * W + w0, *wr = cw + 8 * c * KW;               \
      for (j = j0; j < j1; ++j) {                                                                         \
        const int32_t v = xr[j * DW];                                                                     \
        a0 += v * wr[8 * j], a1 += v * wr[8 * j + 1], a2 += v * wr[8 * j + 2], a3 += v * wr[8 * j + 3];   \
      }                                                                                                   \
    }                                                                                                     \
    const int32_t lo_ = ctx->lo, hi_ = ctx->hi;                                                           \
    ((YT *)ctx->y[0])[k] = (YT)mt_pw_out_rv(a0, ctx, 0, lo_, hi_, 1);                                     \
    ((YT *)ctx->y[1])[k] = (YT)mt_pw_out_rv(a1, ctx, 1, lo_, hi_, 1);                                     \
    ((YT *)ctx->y[2])[k] = (YT)mt_pw_out_rv(a2, ctx, 2, lo_, hi_, 1);                                     \
    ((YT *)ctx->y[3])[k] = (YT)mt_pw_out_rv(a3, ctx, 3, lo_, hi_, 1);                                     \
  }
MT_DEFINE_POS4_RV(mt_pos4_s8_rv, int8_t)
MT_DEFINE_POS4_RV(mt_pos4_s16_rv, int16_t)

/* The outputs of channel J of a pass (sums A, B, C of its three positions) */
#define MT_RV_CONV_OUT3(YT, YHI, J, A, B, C)                                                                      \
  do {                                                                                                    \
    const int cj_ = o + (J) < end ? o + (J) : end - 1;                                                    \
    const mt_rv_rq q_ = mt_rv_rq_init(rq + (rq_per_channel ? 2 * cj_ : 0), y_zero);                       \
    YT *yo_ = y + ((long)n * O + cj_) * P + k;                                                            \
    if (m == 3 && hq == 1)                                                                                \
      yo_[0] = (YT)mt_rv_rq_out_h(&q_, A, lo, YHI), yo_[1] = (YT)mt_rv_rq_out_h(&q_, B, lo, YHI),         \
      yo_[2] = (YT)mt_rv_rq_out_h(&q_, C, lo, YHI);                                                       \
    else if (m == 3 && hq == 2)                                                                           \
      yo_[0] = (YT)mt_rv_rq_out_hu(&q_, A, lo, YHI), yo_[1] = (YT)mt_rv_rq_out_hu(&q_, B, lo, YHI),       \
      yo_[2] = (YT)mt_rv_rq_out_hu(&q_, C, lo, YHI);                                                      \
    else {                                                                                                \
      yo_[0] = (YT)mt_rv_rq_out(&q_, A, lo, YHI);                                                         \
      if (m > 1) yo_[1] = (YT)mt_rv_rq_out(&q_, B, lo, YHI);                                              \
      if (m > 2) yo_[2] = (YT)mt_rv_rq_out(&q_, C, lo, YHI);                                              \
    }                                                                                                     \
  } while (0)

#define MT_DEFINE_CONV_RV(NAME, YT, YLO, YHI, DW3, RUN, ROW1, ROW2, POS4)                                             \
  static int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, const int32_t *g,            \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col) {   \
    const int N = g[MT_CONV_N], CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W];                   \
    const int OG = g[MT_CONV_OG], OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS];          \
    const int taps = CG * g[MT_CONV_KH] * g[MT_CONV_KW], O = OG * G, P = OH * OW;                         \
    const int32_t lo = y_min > (YLO) ? y_min : (YLO);                                                     \
    int8_t *const cv = (int8_t *)col;                                                                     \
    int n, grp, o, k, r, hq = 1; /* 1, 2: every channel's mt_rv_rq_h_ok, the largest */              \
    if (taps > 65536) return 0;                                                                           \
    for (o = 0; o < O; ++o) {                                                                             \
      const int32_t *ro = rq + (rq_per_channel ? 2 * o : 0);                                              \
      const uint32_t amax = ((uint32_t)taps << 14) + (b ? mt_mag32(b[o]) : 0u);                           \
      if ((b && mt_mag32(b[o]) >= 1u << 30) || !mt_rv_rq_ok(ro, y_zero, amax)) return 0;                  \
      if (hq) {                                                                                           \
        const mt_rv_rq q_ = mt_rv_rq_init(ro, y_zero);                                                    \
        const int h_ = mt_rv_rq_h_ok(&q_, amax);                                                          \
        hq = h_ == 0 ? 0 : h_ > hq ? h_ : hq;                                                             \
      }                                                                                                   \
    }                                                                                                     \
    if (OG == 1 && CG == 1) return DW3(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min, hq);             \
    if (hq == 1 && col && OG > 1 && g[MT_CONV_KH] == 1 &&                                                 \
        ((g[MT_CONV_KW] == 1 && g[MT_CONV_SH] == 1 && g[MT_CONV_SW] == 1 && g[MT_CONV_PH] == 0 &&          \
          g[MT_CONV_PW] == 0 && P >= 3) ||                                                                \
         ((g[MT_CONV_SW] == 1 || g[MT_CONV_SW] == 2) && OW >= 3))) {                                      \
      const int pw_ = g[MT_CONV_KW] == 1 && g[MT_CONV_SW] == 1 && g[MT_CONV_PW] == 0 && g[MT_CONV_PH] == 0 \
                      && g[MT_CONV_SH] == 1;                                                              \
      const int SW = g[MT_CONV_SW], PW = g[MT_CONV_PW], KW = g[MT_CONV_KW], DW = g[MT_CONV_DW];           \
      const int lw = W - 1 - (KW - 1) * DW + PW; /* q SW <= lw: the taps end inside the row */           \
      const int qa = SW == 2 ? (PW + 1) >> 1 : PW, qb_ = lw < 0 ? -1 : SW == 2 ? lw >> 1 : lw;           \
      const int qb = qb_ < OW - 1 ? qb_ : OW - 1; /* positions [qa, qb] read no padding */                \
      mt_pw_ctx_rv c_; /* x read in place (mt_pw_run_*) */                                                \
      c_.lo = lo, c_.hi = (YHI);                                                                          \
      c_.ds = (long)P, c_.kw = taps;                                                                      \
      for (n = 0; n < N; ++n)                                                                             \
        for (grp = 0; grp < G; ++grp) {                                                                   \
          const int8_t *x0 = x + ((long)n * CG * G + (long)grp * CG) * H * W;                             \
          const int end = (grp + 1) * OG;                                                                 \
          for (o = grp * OG; o < end; o += 4) {                                                           \
            const int8_t *wr_;                                                                            \
            int t, p, q;                                                                                  \
            for (r = 0; r < 4; ++r) {                                                                     \
              const int cj = o + r < end ? o + r : end - 1;                                               \
              const mt_rv_rq q_ = mt_rv_rq_init(rq + (rq_per_channel ? 2 * cj : 0), y_zero);              \
              c_.b[r] = b ? b[cj] : 0, c_.m[r] = q_.m, c_.c_hi[r] = q_.c_hi, c_.sh[r] = q_.sh;            \
              c_.y[r] = y + ((long)n * O + cj) * P, wr_ = w + (long)cj * taps;                            \
              if (pw_)                                                                                    \
                for (t = 0; t < taps; ++t) cv[4 * t + r] = wr_[t];                                        \
              else                                                                                        \
                for (t = 0; t < taps; ++t) cv[8 * t + r] = wr_[t];                                        \
            }                                                                                             \
            for (t = 0, q = 1; !pw_ && t < taps; ++t, q = q == KW ? 1 : q + 1) /* a tap's step: DW, */  \
              *(int32_t *)(void *)(cv + 8 * t + 4) = q < KW ? DW : H * W - (KW - 1) * DW; /* or a row's */ \
            if (pw_) {                                                                                    \
              RUN(x0, cv, &c_, 0, P);                                                                     \
              continue;                                                                                   \
            }                                                                                             \
            for (p = 0; p < OH; ++p) { /* the rows: the positions [qa, qb] in place, the others alone */  \
              const int h = p * g[MT_CONV_SH] - g[MT_CONV_PH];                                            \
              const int in = h >= 0 && h < H && qb - qa >= 2;                                             \
              for (q = 0; q < OW; ++q) {                                                                  \
                if (in && q == qa) {                                                                      \
                  if (SW == 2) ROW2(x0 + (long)h * W + 2 * qa - PW, cv, &c_, p * OW + qa, qb - qa + 1);   \
                  else ROW1(x0 + (long)h * W + qa - PW, cv, &c_, p * OW + qa, qb - qa + 1);                \
                  q = qb;                                                                                 \
                } else                                                                                    \
                  POS4(x0, g, h, q, p * OW + q, cv, &c_);                                                 \
              }                                                                                           \
            }                                                                                             \
          }                                                                                               \
        }                                                                                                 \
      return 1;                                                                                           \
    }                                                                                                     \
    if (!col || OG == 1) return 0; /* one channel per group: a column would serve one channel */          \
    for (n = 0; n < N; ++n)                                                                               \
      for (grp = 0; grp < G; ++grp) {                                                                     \
        const int8_t *x0 = x + ((long)n * CG * G + (long)grp * CG) * H * W;                               \
        const int end = (grp + 1) * OG;                                                                   \
        int pp = 0, qq = 0; /* position k + r = pp OW + qq */                                             \
        for (k = 0; k < P; k += 3) {                                                                      \
          const int m = P - k < 3 ? P - k : 3; /* positions of this chunk */                              \
          for (r = 0; r < 3; ++r) {                                                                       \
            mt_conv_column_rv(x0, g, pp, qq, cv + r);                                                     \
            if (r < m - 1 || m == 3) /* a short chunk's last position repeated */                         \
              if (++qq == OW) qq = 0, ++pp;                                                               \
          }                                                                                               \
          for (o = grp * OG; o < end; o += 4) {                                                           \
            const int c1 = o + 1 < end ? o + 1 : end - 1, c2 = o + 2 < end ? o + 2 : end - 1;             \
            const int c3 = o + 3 < end ? o + 3 : end - 1;                                                 \
            int32_t s_[12];                                                                               \
            s_[0] = b ? b[o] : 0, s_[1] = b ? b[c1] : 0, s_[2] = b ? b[c2] : 0, s_[3] = b ? b[c3] : 0;    \
            mt_conv_sums_rv(cv, w + (long)o * taps, w + (long)c1 * taps, w + (long)c2 * taps,             \
                            w + (long)c3 * taps, taps, s_);                                               \
            MT_RV_CONV_OUT3(YT, YHI, 0, s_[0], s_[4], s_[8]);                                                               \
            MT_RV_CONV_OUT3(YT, YHI, 1, s_[1], s_[5], s_[9]);                                                               \
            MT_RV_CONV_OUT3(YT, YHI, 2, s_[2], s_[6], s_[10]);                                                              \
            MT_RV_CONV_OUT3(YT, YHI, 3, s_[3], s_[7], s_[11]);                                                              \
          }                                                                                               \
        }                                                                                                 \
      }                                                                                                   \
    return 1;                                                                                             \
  }
MT_DEFINE_CONV_RV(mt_conv_rv_s8_s8_s8, int8_t, -128, 127, mt_conv_dw3_rv_s8_s8_s8, mt_pw_run_s8_rv, mt_row_run_s8_rv, mt_row_run2_s8_rv, mt_pos4_s8_rv)
MT_DEFINE_CONV_RV(mt_conv_rv_s8_s8_s16, int16_t, -32768, 32767, mt_conv_dw3_rv_s8_s8_s16, mt_pw_run_s16_rv, mt_row_run_s16_rv, mt_row_run2_s16_rv, mt_pos4_s16_rv)
#undef MT_RV_CONV_OUT3
/* the dispatch's variant (MT_DEFINE_CONV below) */
#undef mt_conv_dsp_s8_s8_s8
#undef mt_conv_dsp_s8_s8_s16
#define mt_conv_dsp_s8_s8_s8 mt_conv_rv_s8_s8_s8
#define mt_conv_dsp_s8_s8_s16 mt_conv_rv_s8_s8_s16
#endif

MT_DEFINE_CONV(mt_conv_s8_s8_s8, int8_t, int8_t, int8_t, int32_t, int32_t, mt_linear_out_s8, mt_conv_dsp_s8_s8_s8)
MT_DEFINE_CONV(mt_conv_s8_s8_s16, int8_t, int8_t, int16_t, int32_t, int32_t, mt_linear_out_s16, mt_conv_dsp_s8_s8_s16)
MT_DEFINE_CONV(mt_conv_s8_s16_s8, int8_t, int16_t, int8_t, int32_t, int64_t, mt_linear_out_s8, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s8_s16_s16, int8_t, int16_t, int16_t, int32_t, int64_t, mt_linear_out_s16, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s16_s8_s8, int16_t, int8_t, int8_t, int64_t, int64_t, mt_linear_out_s8, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s16_s8_s16, int16_t, int8_t, int16_t, int64_t, int64_t, mt_linear_out_s16, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s16_s16_s8, int16_t, int16_t, int8_t, int64_t, int64_t, mt_linear_out_s8, MT_NO_VARIANT)
MT_DEFINE_CONV(mt_conv_s16_s16_s16, int16_t, int16_t, int16_t, int64_t, int64_t, mt_linear_out_s16, MT_NO_VARIANT)

/* The window of output (p, q) of a pooling with table g, clipped to the input: rows
 * [*h0, *h1), columns [*w0, *w1); MT_POOL_MODE 2: adaptive, [floor(p H / OH), ceil((p + 1) H
 * / OH)), else the window at (p SH - PH, q SW - PW) of KH x KW. */
static void mt_pool_window(const int32_t *g, int p, int q, int *h0, int *h1, int *w0, int *w1) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W];
  if (g[MT_POOL_MODE] == 2) {
    const int OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
    *h0 = (int)mt_udiv_u32((uint32_t)(p * H), (uint32_t)OH);
    *h1 = (int)mt_udiv_u32((uint32_t)((p + 1) * H + OH - 1), (uint32_t)OH);
    *w0 = (int)mt_udiv_u32((uint32_t)(q * W), (uint32_t)OW);
    *w1 = (int)mt_udiv_u32((uint32_t)((q + 1) * W + OW - 1), (uint32_t)OW);
  } else {
    const int hs = p * g[MT_POOL_SH] - g[MT_POOL_PH], ws = q * g[MT_POOL_SW] - g[MT_POOL_PW];
    const int he = hs + g[MT_POOL_KH], we = ws + g[MT_POOL_KW];
    *h0 = hs < 0 ? 0 : hs, *h1 = he < H ? he : H;
    *w0 = ws < 0 ? 0 : ws, *w1 = we < W ? we : W;
  }
}

/* y = the largest x of each window (the padding never wins); y in x's format. Exact. */
#define MT_DEFINE_MAX_POOL(NAME, T)                                                                         \
  void NAME(const T *x, T *y, const int32_t *g) {                                                           \
    const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];                   \
    int t, p, q, i, j, h0, h1, w0, w1;                                                                      \
    for (t = 0; t < g[MT_POOL_PLANES]; ++t) {                                                               \
      const T *xp = x + (long)t * H * W;                                                                    \
      T *yp = y + (long)t * OH * OW;                                                                        \
      for (p = 0; p < OH; ++p)                                                                              \
        for (q = 0; q < OW; ++q) {                                                                          \
          T best;                                                                                           \
          mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);                                                      \
          best = xp[h0 * W + w0];                                                                           \
          for (i = h0; i < h1; ++i)                                                                         \
            for (j = w0; j < w1; ++j) best = xp[i * W + j] > best ? xp[i * W + j] : best;                   \
          yp[p * OW + q] = best;                                                                            \
        }                                                                                                   \
    }                                                                                                       \
  }
MT_DEFINE_MAX_POOL(mt_max_pool_s8, int8_t)
MT_DEFINE_MAX_POOL(mt_max_pool_s16, int16_t)

/* y = zero + round(sum of (x - zero) over the window / d), to nearest with ties away from zero,
 * d = KH KW (MT_POOL_MODE 0: the padding counts as zeros) or the window's area inside the
 * input (modes 1 and 2); y in x's format. The sum in int32: windows of at most 65535
 * elements (the lowering's bound). Exact. */
#define MT_DEFINE_AVG_POOL(NAME, T, OUT)                                                                    \
  void NAME(const T *x, T *y, const int32_t *g, int32_t zero) {                                             \
    const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];                   \
    int t, p, q, i, j, h0, h1, w0, w1;                                                                      \
    for (t = 0; t < g[MT_POOL_PLANES]; ++t) {                                                               \
      const T *xp = x + (long)t * H * W;                                                                    \
      T *yp = y + (long)t * OH * OW;                                                                        \
      for (p = 0; p < OH; ++p)                                                                              \
        for (q = 0; q < OW; ++q) {                                                                          \
          int32_t s = 0, d, m;                                                                              \
          mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);                                                      \
          for (i = h0; i < h1; ++i)                                                                         \
            for (j = w0; j < w1; ++j) s += (int32_t)xp[i * W + j] - zero;                                   \
          d = g[MT_POOL_MODE] == 0 ? g[MT_POOL_KH] * g[MT_POOL_KW] : (h1 - h0) * (w1 - w0);                 \
          m = (int32_t)mt_udiv_u32(mt_mag32(s) + ((uint32_t)d >> 1), (uint32_t)d);                          \
          yp[p * OW + q] = OUT(s < 0 ? -m : m, zero);                                                       \
        }                                                                                                   \
    }                                                                                                       \
  }
MT_DEFINE_AVG_POOL(mt_avg_pool_s8, int8_t, mt_out_s8)
MT_DEFINE_AVG_POOL(mt_avg_pool_s16, int16_t, mt_out_s16)

#if MT_F32
/* ==================================================================================== */
/* Float32 (training in float): convolution and pooling, and their backward             */
/* ==================================================================================== */
/* The same geometry tables as the integer kernels (MT_CONV_*, MT_POOL_*); every output one
 * sum in the order mt_kernels.h states. */

/* Output position p reads input row p S - P + i D for tap i: for input row h and tap i, the
 * p with p S = h + P - i D when there is one in [0, O), else -1. */
static int mt_conv_source(int h, int i, int S, int P, int D, int O) {
  const int t = h + P - i * D;
  int p;
  if (t < 0) return -1;
  p = (int)mt_udiv_u32((uint32_t)t, (uint32_t)S);
  return p * S == t && p < O ? p : -1;
}

void mt_conv_f32(const float *x, const float *w, const float *b, float *y, const int32_t *g) {
  const int CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W], OG = g[MT_CONV_OG], KH = g[MT_CONV_KH];
  const int KW = g[MT_CONV_KW], OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS];
  const int C = CG * G, O = OG * G;
  int n, o, p, q, c, i, j;
  for (n = 0; n < g[MT_CONV_N]; ++n)
    for (o = 0; o < O; ++o) {
      const float *xg = x + (long)(n * C + (o / OG) * CG) * H * W, *wo = w + (long)o * CG * KH * KW;
      for (p = 0; p < OH; ++p)
        for (q = 0; q < OW; ++q) {
          float s = b ? b[o] : 0.0f;
          for (c = 0; c < CG; ++c)
            for (i = 0; i < KH; ++i) {
              const int h = p * g[MT_CONV_SH] - g[MT_CONV_PH] + i * g[MT_CONV_DH];
              if (h < 0 || h >= H) continue;
              for (j = 0; j < KW; ++j) {
                const int v = q * g[MT_CONV_SW] - g[MT_CONV_PW] + j * g[MT_CONV_DW];
                if (v >= 0 && v < W) s += xg[(long)(c * H + h) * W + v] * wo[(c * KH + i) * KW + j];
              }
            }
          y[((long)(n * O + o) * OH + p) * OW + q] = s;
        }
    }
}

void mt_conv_backward_f32(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                          const int32_t *g, int acc) {
  const int N = g[MT_CONV_N], CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W], OG = g[MT_CONV_OG];
  const int KH = g[MT_CONV_KH], KW = g[MT_CONV_KW], OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS];
  const int SH = g[MT_CONV_SH], SW = g[MT_CONV_SW], PH = g[MT_CONV_PH], PW = g[MT_CONV_PW];
  const int DH = g[MT_CONV_DH], DW = g[MT_CONV_DW], C = CG * G, O = OG * G;
  int n, o, c, h, v, t, i, j, p, q;
  if (dx) /* dx[n, c, h, v] = sum over t, i, j of dy[n, o, p, q] w[o, c mod CG, i, j], o = (c / CG) OG + t */
    for (n = 0; n < N; ++n)
      for (c = 0; c < C; ++c)
        for (h = 0; h < H; ++h)
          for (v = 0; v < W; ++v) {
            float s = 0.0f;
            for (t = 0; t < OG; ++t) {
              o = (c / CG) * OG + t;
              for (i = 0; i < KH; ++i) {
                p = mt_conv_source(h, i, SH, PH, DH, OH);
                if (p < 0) continue;
                for (j = 0; j < KW; ++j) {
                  q = mt_conv_source(v, j, SW, PW, DW, OW);
                  if (q >= 0)
                    s += dy[((long)(n * O + o) * OH + p) * OW + q] * w[((long)(o * CG + c % CG) * KH + i) * KW + j];
                }
              }
            }
            mt_put_f32(dx + ((long)(n * C + c) * H + h) * W + v, s, acc & 1);
          }
  if (dw) /* dw[o, c, i, j] = sum over n, p, q of dy[n, o, p, q] x[n, (o / OG) CG + c, p SH - PH + i DH, q SW - PW + j DW] */
    for (o = 0; o < O; ++o)
      for (c = 0; c < CG; ++c)
        for (i = 0; i < KH; ++i)
          for (j = 0; j < KW; ++j) {
            float s = 0.0f;
            for (n = 0; n < N; ++n) {
              const float *xc = x + (long)(n * C + (o / OG) * CG + c) * H * W, *dyo = dy + (long)(n * O + o) * OH * OW;
              for (p = 0; p < OH; ++p) {
                h = p * SH - PH + i * DH;
                if (h < 0 || h >= H) continue;
                for (q = 0; q < OW; ++q) {
                  v = q * SW - PW + j * DW;
                  if (v >= 0 && v < W) s += dyo[p * OW + q] * xc[h * W + v];
                }
              }
            }
            mt_put_f32(dw + ((long)(o * CG + c) * KH + i) * KW + j, s, acc & 2);
          }
  if (db) /* db[o] = sum over n, p, q of dy[n, o, p, q] */
    for (o = 0; o < O; ++o) {
      float s = 0.0f;
      for (n = 0; n < N; ++n) s = mt_sumf(s, dy + (long)(n * O + o) * OH * OW, 1, OH * OW);
      mt_put_f32(db + o, s, acc & 2);
    }
}

void mt_max_pool_f32(const float *x, float *y, int32_t *idx, const int32_t *g) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
  int t, p, q, i, j, h0, h1, w0, w1;
  for (t = 0; t < g[MT_POOL_PLANES]; ++t) {
    const float *xp = x + (long)t * H * W;
    for (p = 0; p < OH; ++p)
      for (q = 0; q < OW; ++q) {
        int at;
        mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);
        at = h0 * W + w0;
        for (i = h0; i < h1; ++i)
          for (j = w0; j < w1; ++j)
            if (xp[i * W + j] > xp[at]) at = i * W + j; /* strictly greater: the first maximum stays */
        y[(long)t * OH * OW + p * OW + q] = xp[at];
        if (idx) idx[(long)t * OH * OW + p * OW + q] = at;
      }
  }
}

/* The windows (p, q) of table g that hold input element (h, v): within [*p0, *p1) x [*q0, *q1)
 * (a superset for the adaptive mode: the caller tests each with mt_pool_window). */
static void mt_pool_span(const int32_t *g, int h, int v, int *p0, int *p1, int *q0, int *q1) {
  if (g[MT_POOL_MODE] == 2) {
    *p0 = 0, *p1 = g[MT_POOL_OH], *q0 = 0, *q1 = g[MT_POOL_OW];
    return;
  }
  /* window p holds rows [p SH - PH, p SH - PH + KH): p SH in (h + PH - KH, h + PH] */
  {
    const int th = h + g[MT_POOL_PH], tv = v + g[MT_POOL_PW];
    const int lh = th - g[MT_POOL_KH] + 1, lv = tv - g[MT_POOL_KW] + 1;
    *p1 = (int)mt_udiv_u32((uint32_t)th, (uint32_t)g[MT_POOL_SH]) + 1;
    *q1 = (int)mt_udiv_u32((uint32_t)tv, (uint32_t)g[MT_POOL_SW]) + 1;
    *p0 = lh <= 0 ? 0 : (int)mt_udiv_u32((uint32_t)(lh + g[MT_POOL_SH] - 1), (uint32_t)g[MT_POOL_SH]);
    *q0 = lv <= 0 ? 0 : (int)mt_udiv_u32((uint32_t)(lv + g[MT_POOL_SW] - 1), (uint32_t)g[MT_POOL_SW]);
    if (*p1 > g[MT_POOL_OH]) *p1 = g[MT_POOL_OH];
    if (*q1 > g[MT_POOL_OW]) *q1 = g[MT_POOL_OW];
  }
}

void mt_max_pool_backward_f32(const int32_t *idx, const float *dy, float *dx, const int32_t *g, int acc) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
  int t, h, v, p, q, p0, p1, q0, q1;
  for (t = 0; t < g[MT_POOL_PLANES]; ++t)
    for (h = 0; h < H; ++h)
      for (v = 0; v < W; ++v) {
        float s = 0.0f;
        mt_pool_span(g, h, v, &p0, &p1, &q0, &q1);
        for (p = p0; p < p1; ++p)
          for (q = q0; q < q1; ++q)
            if (idx[(long)t * OH * OW + p * OW + q] == h * W + v) s += dy[(long)t * OH * OW + p * OW + q];
        mt_put_f32(dx + (long)t * H * W + h * W + v, s, acc & 1);
      }
}

void mt_avg_pool_f32(const float *x, float *y, const int32_t *g) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
  int t, p, q, i, h0, h1, w0, w1;
  for (t = 0; t < g[MT_POOL_PLANES]; ++t) {
    const float *xp = x + (long)t * H * W;
    for (p = 0; p < OH; ++p)
      for (q = 0; q < OW; ++q) {
        float s = 0.0f;
        int d;
        mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);
        for (i = h0; i < h1; ++i) s = mt_sumf(s, xp + i * W + w0, 1, w1 - w0);
        d = g[MT_POOL_MODE] == 0 ? g[MT_POOL_KH] * g[MT_POOL_KW] : (h1 - h0) * (w1 - w0);
        y[(long)t * OH * OW + p * OW + q] = s / (float)d;
      }
  }
}

void mt_avg_pool_backward_f32(const float *dy, float *dx, const int32_t *g, int acc) {
  const int H = g[MT_POOL_H], W = g[MT_POOL_W], OH = g[MT_POOL_OH], OW = g[MT_POOL_OW];
  int t, h, v, p, q, p0, p1, q0, q1, h0, h1, w0, w1;
  for (t = 0; t < g[MT_POOL_PLANES]; ++t)
    for (h = 0; h < H; ++h)
      for (v = 0; v < W; ++v) {
        float s = 0.0f;
        mt_pool_span(g, h, v, &p0, &p1, &q0, &q1);
        for (p = p0; p < p1; ++p)
          for (q = q0; q < q1; ++q) {
            int d;
            mt_pool_window(g, p, q, &h0, &h1, &w0, &w1);
            if (h < h0 || h >= h1 || v < w0 || v >= w1) continue;
            d = g[MT_POOL_MODE] == 0 ? g[MT_POOL_KH] * g[MT_POOL_KW] : (h1 - h0) * (w1 - w0);
            s += dy[(long)t * OH * OW + p * OW + q] / (float)d;
          }
        mt_put_f32(dx + (long)t * H * W + h * W + v, s, acc & 1);
      }
}
#endif
