/* mt_conv_arm.c - the Arm variants of the int8 x int8 convolutions of mt_conv.c: Armv7E-M
 * (MT_DSP: SXTB16 and SMLAD) and Armv8.1-M MVE (MT_MVE), the same integers as mt_conv.c's
 * reference. mt_conv.c includes this file (one translation unit: mt_kernels.c) after its
 * helpers and before its instantiations, which try mt_conv_dsp_s8_s8_* first. */

#if MT_DSP
/* The Armv7E-M variant of the int8 x int8 convolutions: im2col eight output positions at a
 * time into col (eight columns of the CG KH KW taps as int16, the padding's taps 0), then one
 * pass over the taps per output channel of the group (MT_COLS8_ASM: per 4 taps one word of
 * weights split by SXTB16, 8 LDRD and 16 SMLAD, 32 MACs in 27 instructions, the eight sums in
 * registers), so each column serves every channel of the group, each channel's set-up (its
 * bias, requantization and pointers) is shared by eight outputs, and no buffer holds more
 * than eight columns. The columns are interleaved by blocks of four taps (block b holds taps
 * 4b .. 4b + 3 of column 0, then of columns 1 .. 7: 64 bytes, eight LDRD), each block with its
 * middle two taps swapped (t0 t2 t1 t3), so that SXTB16's split of a word of weights in
 * order, (w0, w2) and (w1, w3), meets their halfword pairs as loaded; a last block of fewer
 * taps padded with zeros (Armv8.1-M MVE: four columns as int8 in order,
 * below). Sums in int32
 * from the bias (exact: |b| < 2^30, taps <= 65536), requantized per channel by mt_rq_chan
 * (every channel mt_rq_chan_fast), at least y_min. Depthwise layers of kernel width 3 take the
 * variant below; other calls (no col, another shift, a larger bias, other layers of one
 * output channel per group, where a column would serve one channel) go to the reference. The
 * same integers. */
#if MT_MVE
#define MT_CONV_COLS 4
#else
#define MT_CONV_COLS 8
#endif
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

/* a0 .. a7 = a0 + the taps4 (a multiple of 4, > 0) first taps of the eight columns of col
 * times the weights w (in order): per block, LDR of 4 weights, SXTB16 into (w0, w2) and (w1,
 * w3), LDRD of each column's two words and 2 SMLAD each. The first block starts a1 .. a7 from
 * a0 (its columns 1 .. 7 at offsets, column 0 last), the others four per iteration, the end
 * read from memory and compared; the r = (blocks - 1) % 4 blocks after the first enter the
 * loop at its block 4 - r (r = 0: at its first, unless none is left), by the flags of LSLS
 * #31 before the first block (C: bit 1 of r, N: bit 0; LDR, LDRD, SXTB16 and SMLAD leave
 * them). Inline assembly: 27 instructions per 32 MACs and the loop's 3 per 128, all 14
 * registers (the eight sums, the two pointers, the two halves of the weights, the two words of
 * a column). */
#define MT_COLS8_WEIGHTS                                                                                  \
  "ldr %[p], [%[wq]], #4\n\t"                                                                             \
  "sxtb16 %[pe], %[p]\n\t"                                                                                \
  "sxtb16 %[p], %[p], ror #8\n\t"
#define MT_COLS8_SMLAD(a)                                                                                 \
  "ldrd %[t0], %[t1], [%[xq]], #8\n\t"                                                                    \
  "smlad %[" a "], %[t0], %[pe], %[" a "]\n\t"                                                            \
  "smlad %[" a "], %[t1], %[p], %[" a "]\n\t"
#define MT_COLS8_BLOCK                                                                                    \
  MT_COLS8_WEIGHTS MT_COLS8_SMLAD("a0") MT_COLS8_SMLAD("a1") MT_COLS8_SMLAD("a2") MT_COLS8_SMLAD("a3")     \
      MT_COLS8_SMLAD("a4") MT_COLS8_SMLAD("a5") MT_COLS8_SMLAD("a6") MT_COLS8_SMLAD("a7")
#define MT_COLS8_FIRST1(a, off)                                                                           \
  "ldrd %[t0], %[t1], [%[xq], #" off "]\n\t"                                                              \
  "smlad %[" a "], %[t0], %[pe], %[a0]\n\t"                                                               \
  "smlad %[" a "], %[t1], %[p], %[" a "]\n\t"
#define MT_COLS8_FIRST                                                                                    \
  MT_COLS8_WEIGHTS MT_COLS8_FIRST1("a1", "8") MT_COLS8_FIRST1("a2", "16") MT_COLS8_FIRST1("a3", "24")       \
      MT_COLS8_FIRST1("a4", "32") MT_COLS8_FIRST1("a5", "40") MT_COLS8_FIRST1("a6", "48")                   \
          MT_COLS8_FIRST1("a7", "56") "ldrd %[t0], %[t1], [%[xq]], #64\n\t"                                \
                                      "smlad %[a0], %[t0], %[pe], %[a0]\n\t"                               \
                                      "smlad %[a0], %[t1], %[p], %[a0]\n\t"
/* The same, the weights' pointer w_ (an lvalue) advanced past them, the columns' x_ to end_ (an
 * lvalue: read from memory). Builds that keep a frame pointer (r7: -O0) leave 13 registers to
 * inline assembly: there, and where MT_COLS8_C asks for it (an optimizing build with
 * -fno-omit-frame-pointer), the same sums in C. */
#if defined(__OPTIMIZE__) && !defined(MT_COLS8_C)
#define MT_COLS8_ASM(x_, end_, w_, taps4, A)                                                              \
  do {                                                                                                    \
    int32_t p_, pe_, t0_ = ((taps4) / 4 - 1) & 3, t1_;                                                    \
    __asm__("lsls %[t0], %[t0], #31\n\t" MT_COLS8_FIRST                                                   \
            "bcc 5f\n\t"                                                                                  \
            "bmi 1f\n\t"                                                                                  \
            "b 2f\n"                                                                                      \
            "5:\n\t"                                                                                      \
            "bmi 3f\n\t"                                                                                  \
            "ldr %[t0], %[end]\n\t"                                                                       \
            "cmp %[xq], %[t0]\n\t"                                                                        \
            "beq 9f\n"                                                                                    \
            "0:\n\t" MT_COLS8_BLOCK                                                                       \
            "1:\n\t" MT_COLS8_BLOCK                                                                       \
            "2:\n\t" MT_COLS8_BLOCK                                                                       \
            "3:\n\t" MT_COLS8_BLOCK                                                                       \
            "ldr %[t0], %[end]\n\t"                                                                       \
            "cmp %[xq], %[t0]\n\t"                                                                        \
            "bne 0b\n"                                                                                    \
            "9:"                                                                                          \
            : [a0] "+r"(A##0), [a1] "=&r"(A##1), [a2] "=&r"(A##2), [a3] "=&r"(A##3), [a4] "=&r"(A##4),       \
              [a5] "=&r"(A##5), [a6] "=&r"(A##6), [a7] "=&r"(A##7), [xq] "+r"(x_), [wq] "+r"(w_),           \
              [p] "=&r"(p_), [pe] "=&r"(pe_), [t0] "+r"(t0_), [t1] "=&r"(t1_)                             \
            : [end] "m"(end_)                                                                             \
            : "cc", "memory");                                                                            \
  } while (0)
#else
#define MT_COLS8_SMLAD2(x, a, j) a = __smlad(mt_ld32((x) + 4 * (j) + 2), p_, __smlad(mt_ld32((x) + 4 * (j)), pe_, a))
#define MT_COLS8_ASM(x_, end_, w_, taps4, A)                                                              \
  do {                                                                                                    \
    A##1 = A##2 = A##3 = A##4 = A##5 = A##6 = A##7 = A##0;                                               \
    for ((void)(taps4); x_ != (end_); x_ += 4 * MT_CONV_COLS, w_ += 4) {                                  \
      const int32_t v_ = mt_ld32(w_), pe_ = __sxtb16(v_), p_ = mt_odd_bytes(v_);                          \
      MT_COLS8_SMLAD2(x_, A##0, 0), MT_COLS8_SMLAD2(x_, A##1, 1), MT_COLS8_SMLAD2(x_, A##2, 2), MT_COLS8_SMLAD2(x_, A##3, 3); \
      MT_COLS8_SMLAD2(x_, A##4, 4), MT_COLS8_SMLAD2(x_, A##5, 5), MT_COLS8_SMLAD2(x_, A##6, 6), MT_COLS8_SMLAD2(x_, A##7, 7); \
    }                                                                                                     \
  } while (0)
#endif

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
    if (!MT_CONV_DW3) return; /* (MT_DEFINE_CONV_DW3_DSP sends no call here then) */                     \
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
static inline int mt_rq_chan_h_ok(const int32_t *rq, uint32_t amax) { return MT_RQ_CHAN_H_OK(rq[0], rq[1], amax); }
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
 * the left padding as the previous word) in the same block (MT_DW1SP_ASM_FIRST), and after the
 * words y[W4 - 1] = x[W4 - 2] w0 + x[W4 - 1] w1 (W4 = W - W % 4: the row's last output when W %
 * 4 = 0, the right padding); else the last word (the W % 4 bytes after the words shifted down,
 * zeros above: y[W4 - 1] again .. y[W - 1]) in C (MT_DW1SP_WORD).
 * mt_dw1sp_ok, for a channel (m, s = sh + 1) whose sums a satisfy |a| <= amax, and the layer's
 * |y_zero + 128| <= 2^13 (with m > 0 and s >= 9 the channel's mt_rq_chan_fast): 9 <= s <= 17;
 * m > 0; amax < 2^(14+s) (a 2^kw still an int32, kw = 17 - s); no rounding tie
 * (mt_rq_chan_h_ok's amax 2^t < 2^(30+s), the high word of the 64-bit product below 2^(s-2)); and amax m < 2^(44+s): y =
 * y_zero + floor((a m + 2^(30+s)) / 2^(31+s)) (mt_rq_chan_h_ok) so |y - y_zero| < 2^13 + 1/2
 * and |y + 128| <= 2^14, far inside the int16 that PKHTB and USAT16 read. A channel's amax is
 * 3 2^14 + |b| (|x w| <= 2^14) when that passes, else mt_bound_s8's. */
static inline int mt_dw1sp_ok(const int32_t *rq, uint32_t amax) {
  const int s = rq[1];
  const uint32_t m = (uint32_t)rq[0], low = m & (0u - m);
  return (uint32_t)(s - 9) <= 8u && rq[0] > 0 && (amax >> (14 + s)) == 0 &&
         (uint32_t)(((uint64_t)amax * low) >> 32) >> (s - 2) == 0 && (uint32_t)(((uint64_t)amax * m) >> 32) >> (12 + s) == 0;
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
/* The row's first word (x0 x1 x2 x3) in assembly, after the left padding: y0 = x0 w1 + x1 w2,
 * y1 = SMLAD((x0, x2), (w0, w2)) + x1 w1, y2 = SMLAD((x1, x3), (w0, w2)) + x2 w1, packed as
 * the words above (y1's USAT16 leaves its fraction's half below 2^8: LSR 8 drops it) with a
 * fourth byte y3 = 0 that the next word or the row's last outputs overwrite (W >= 4): the
 * word stored, y advanced by 3; the word kept in (pe, po) */
#define MT_DW1SP_ASM_FIRST                                                                                \
  "ldr %[po], [%[x]], #4\n\t"                                                                            \
  "sxtb16 %[pe], %[po]\n\t"                                                                              \
  "sxtb16 %[po], %[po], ror #8\n\t"                                                                      \
  "smlabt %[t], %[pe], %[w1], %[b]\n\t"                                                                  \
  "smlabt %[t], %[po], %[wp], %[t]\n\t"                                                                  \
  "smmla %[t], %[t], %[m], %[c]\n\t"                                                                     \
  "smlad %[e], %[po], %[wp], %[b]\n\t"                                                                   \
  "smlatt %[e], %[pe], %[w1], %[e]\n\t"                                                                  \
  "smmla %[e], %[e], %[m], %[c]\n\t"                                                                     \
  "pkhtb %[t], %[e], %[t], asr #16\n\t"                                                                  \
  "usat16 %[t], #8, %[t]\n\t"                                                                            \
  "smlad %[e], %[pe], %[wp], %[b]\n\t"                                                                   \
  "smlabt %[e], %[po], %[w1], %[e]\n\t"                                                                  \
  "smmla %[e], %[e], %[m], %[c]\n\t"                                                                     \
  "usat16 %[e], #8, %[e]\n\t"                                                                            \
  "orr %[t], %[t], %[e], lsr #8\n\t"                                                                     \
  "eor %[t], %[t], #0x80808080\n\t"                                                                      \
  "str %[t], [%[y]], #3\n\t"
/* The requantization a convolution's variants take: every channel's mt_rq_chan_fast and |b| <
 * 2^30 (a sum of at most 65536 products |x w| <= 2^14 and the bias stays an int32); the largest
 * |b| to *bmax */
static inline __attribute__((always_inline)) int mt_conv_rq_ok(const int32_t *rq, int rq_per_channel, const int32_t *b,
                                                               int O, int32_t y_zero, uint32_t *bmax) {
  uint32_t bm = 0;
  int o;
  for (o = 0; o < (rq_per_channel ? O : 1); ++o)
    if (!mt_rq_chan_fast(rq + 2 * o, y_zero)) return 0;
  for (o = 0; b && o < O; ++o) {
    const uint32_t m_ = mt_mag32(b[o]);
    if (m_ >= 1u << 30) return 0;
    bm = m_ > bm ? m_ : bm;
  }
  *bmax = bm;
  return 1;
}

/* A channel of mt_dw1sp_layer_s8 that mt_dw1sp_ok does not take: after mt_conv_rq_ok's
 * checks (else 0), by mt_dw1s_rows_s8 where no rounding tie can occur, else by the exact
 * mt_conv_dw3_chan_s8 */
static __attribute__((noinline)) int mt_dw1s_chan_s8(const int8_t *x, const int8_t *w, int32_t bias, const int32_t *g,
                                                     const int32_t *rq, int32_t y_zero, int32_t y_min, int8_t *y) {
  uint32_t bmax = 0;
  mt_rq_chan qc;
  if (!mt_conv_rq_ok(rq, 0, &bias, 1, y_zero, &bmax)) return 0;
  qc = mt_rq_chan_init(rq, y_zero);
  if (mt_rq_chan_h_ok(rq, mt_bound_s8(w, 3, bias))) {
    const mt_dw1s_k k = {mt_pair16(w[0], w[2]), (int32_t)(((uint32_t)w[1] << 16) | (uint32_t)qc.sh), qc.m, qc.c_hi, bias};
    mt_dw1s_rows_s8(x, g[MT_CONV_W], g[MT_CONV_H], &k, y);
  } else {
    mt_conv_dw3_chan_s8(x, w, g, bias, &qc, y_min, y);
  }
  return 1;
}
/* An int8 'same' 1-D depthwise layer (MT_DEFINE_CONV_DW3_DSP checked its shape, not the
 * requantization; y_min is the caller's): each channel by the word loop above where
 * mt_dw1sp_ok, else by mt_dw1s_chan_s8; 0 when a channel fails mt_conv_rq_ok (the portable
 * loop then writes every output again: y never overlaps x); one function, so that a
 * channel's set-up (its bound, checks and scaled constants: about 90 instructions on
 * Cortex-M4 beside the assembly's 419 for a row of 64) costs little beside its row; the
 * layer's y_zero test once per call; the row's W % 4 outputs after its words marked unlikely
 * (__builtin_expect: GCC then keeps the loop's registers, 8,821 -> 8,530 instructions a
 * conv_dw call) */
static __attribute__((noinline)) int mt_dw1sp_layer_s8(const int8_t *x, const int8_t *w, const int32_t *b, int8_t *y,
                                                       const int32_t *g, const int32_t *rq, int rq_per_channel,
                                                       int32_t y_zero, int32_t y_min) {
  const int N = g[MT_CONV_N], G = g[MT_CONV_GROUPS], H = g[MT_CONV_H], W = g[MT_CONV_W];
  const int HW = H * W, W4 = W & ~3, rest = W & 3, rs = rq_per_channel ? 2 : 0;
  const int32_t cq = (int32_t)((1u << 15) + ((uint32_t)y_zero + 128u) * 65536u); /* c' */
  const int yz_ok = mt_mag32(y_zero + 128) <= 1u << 13; /* (mt_dw1sp_ok) */
  int n, o;
  for (n = 0; n < N; ++n)
    for (o = 0; o < G; ++o, x += HW, y += HW) {
      const int32_t *r_ = rq + rs * o, bias = b ? b[o] : 0;
      const int32_t w0 = w[3 * o], w1 = w[3 * o + 1], w2 = w[3 * o + 2];
      const int8_t *xr = x, *const xe = x + HW;
      int8_t *yr = y;
      if (!yz_ok || !(mt_dw1sp_ok(r_, (3u << 14) + mt_mag32(bias)) || /* |x w| <= 2^14, else mt_bound_s8 */
                      mt_dw1sp_ok(r_, ((mt_mag32(w0) + mt_mag32(w1) + mt_mag32(w2)) << 7) + mt_mag32(bias)))) {
        if (!mt_dw1s_chan_s8(x, w + 3 * o, bias, g, r_, y_zero, y_min, y)) return 0;
      } else {
        const int kw = 17 - r_[1]; /* the weights, bias and c_hi 2^kw, kw = 16 - sh */
        const mt_dw1s_k k = {mt_pair16(w0 * (1 << kw), w2 * (1 << kw)), (int32_t)((uint32_t)w1 << (16 + kw)), r_[0],
                             cq, (int32_t)((uint32_t)bias << kw)};
        for (; xr != xe; xr += W) {
          const int8_t *xq = xr, *const end = xr + W4;
          int32_t v, pe, po, e, o_, t;
          __asm__(MT_DW1SP_ASM_FIRST
                  "ldr %[t], %[end]\n\t" /* 4 words after the first */
                  "subs %[t], %[t], %[x]\n\t"
                  "beq 3f\n\t"
                  "tst %[t], #4\n\t" /* an odd number of words enters at the second, the previous word in (e, o) */
                  "beq 1f\n\t"
                  "mov %[e], %[pe]\n\t"
                  "mov %[o], %[po]\n\t"
                  "b 2f\n"
                  "1:\n\t" MT_DW1SP_ASM_WORD("%[pe]", "%[po]", "%[e]", "%[o]", "%[t]")
                  "2:\n\t" MT_DW1SP_ASM_WORD("%[e]", "%[o]", "%[pe]", "%[po]", "%[t]")
                  "ldr %[t], %[end]\n\t" /* (12 registers: the end from memory) */
                  "cmp %[x], %[t]\n\t"
                  "bne 1b\n"
                  "3:\n\t" /* y[W4 - 1] = x[W4 - 2] w0 + x[W4 - 1] w1 (the row's last when rest = 0) */
                  "smlatb %[t], %[pe], %[wp], %[b]\n\t"
                  "smlatt %[t], %[po], %[w1], %[t]\n\t"
                  "smmla %[t], %[t], %[m], %[c]\n\t"
                  "usat %[t], #8, %[t], asr #16\n\t"
                  "eor %[t], %[t], #0x80\n\t"
                  "strb %[t], [%[y]], #1"
                  : [x] "+r"(xq), [y] "+r"(yr), [pe] "=&r"(pe), [po] "=&r"(po), [e] "=&r"(e), [o] "=&r"(o_), [t] "=&r"(t)
                  : [wp] "r"(k.wp), [w1] "r"(k.w1s), [m] "r"(k.m), [c] "r"(k.c_hi), [b] "r"(k.bias), [end] "m"(end)
                  : "cc", "memory");
          if (__builtin_expect(rest != 0, 0)) { /* y[W4 - 1] again with the last rest bytes, zeros past the row */
            v = (int32_t)((uint32_t)mt_ld32(xr + W - 4) >> (32 - 8 * rest)), e = __sxtb16(v), o_ = mt_odd_bytes(v);
            MT_DW1SP_WORD(pe, po, e, o_, 0, 1 + rest, yr - 1);
            yr += rest;
          }
        }
      }
    }
  return 1;
}
#undef MT_DW1SP_OUT

/* Depthwise layers of kernel width 3 (above), after mt_conv_rq_ok (mt_dw1sp_layer_s8 checks
 * its channels itself, so that its layers skip that pass): the 'same' 3 x 3 ones by
 * mt_dw3s_chan_* (SMMLA for each channel that mt_rq_chan_h_ok allows, amax = 9 2^14 + |b| or,
 * when that is too coarse, mt_bound_s8 of its nine weights and bias;
 * a y_min above the type's minimum applied afterwards by RAISE, as the linear layers do), the
 * others a row at a time by CHAN */
#define MT_DEFINE_CONV_DW3_DSP(NAME, YT, CHAN, SAME_H, SAME_X, ROWS, PACKED, RAISE, BITS)                               \
  static __attribute__((noinline)) int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, const int32_t *g, \
                                             const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min) { \
    const int N = g[MT_CONV_N], H = g[MT_CONV_H], HW = g[MT_CONV_H] * g[MT_CONV_W], KH = g[MT_CONV_KH];    \
    const int G = g[MT_CONV_GROUPS], OHW = g[MT_CONV_OH] * g[MT_CONV_OW], W = g[MT_CONV_W];               \
    const int same1x3 = MT_CONV_SAME1X3 && MT_CONV_SAME1X3_FITS(g);                                       \
    uint32_t bmax_ = 0;                                                                                   \
    int n, o;                                                                                             \
    if (!MT_CONV_DW3_FITS(g)) return 0;                                                                   \
    if (same1x3) {                                                                                        \
      for (o = 0; !MT_CONV_DW3 && o < G; ++o) /* a channel that can meet a tie takes the generic rows */  \
        if (!mt_rq_chan_h_ok(rq + (rq_per_channel ? 2 * o : 0), mt_bound_s8(w + 3 * o, 3, b ? b[o] : 0))) \
          return 0;                                                                                       \
      if (PACKED) { /* int8: mt_dw1sp_layer_s8, its own requantization checks */                          \
        if (!mt_dw1sp_layer_s8(x, w, b, (int8_t *)(void *)y, g, rq, rq_per_channel, y_zero, y_min)) return 0; \
        if (y_min > -(1 << ((BITS) - 1))) RAISE(y, N * G * HW, y_min);                                    \
        return 1;                                                                                         \
      }                                                                                                   \
    }                                                                                                     \
    if (!mt_conv_rq_ok(rq, rq_per_channel, b, G, y_zero, &bmax_)) return 0;                               \
    if (MT_CONV_SAME3X3 && MT_CONV_SAME3X3_FITS(g)) {                                                     \
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
    if (same1x3) {                                                                                        \
      for (n = 0; n < N; ++n) /* each row by ROWS where no tie can occur, else by CHAN */                 \
        for (o = 0; o < G; ++o) {                                                                         \
          const int32_t *r_ = rq + (rq_per_channel ? 2 * o : 0), bias = b ? b[o] : 0;                     \
          const mt_rq_chan qc = mt_rq_chan_init(r_, y_zero);                                              \
          const long at_ = ((long)n * G + o) * HW;                                                        \
          if (mt_rq_chan_h_ok(r_, mt_bound_s8(w + 3 * o, 3, bias))) {                                     \
            const mt_dw1s_k k_ = {mt_pair16(w[3 * o], w[3 * o + 2]),                                      \
                                  (int32_t)(((uint32_t)w[3 * o + 1] << 16) | (uint32_t)qc.sh), qc.m, qc.c_hi, bias}; \
            ROWS(x + at_, W, H, &k_, y + at_);                                                            \
          } else {                                                                                        \
            CHAN(x + at_, w + 3 * o, g, bias, &qc, y_min, y + at_);                                       \
          }                                                                                               \
        }                                                                                                 \
      if (y_min > -(1 << ((BITS) - 1))) RAISE(y, N * G * HW, y_min);                                      \
      return 1;                                                                                           \
    }                                                                                                     \
    if (!MT_CONV_DW3) return 0;                                                                           \
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
    if (taps > MT_LINEAR_MAX_IN_S8) return 0; /* the int8 sums' bound, as the emitter's switches read it */ \
    if (OG == 1 && CG == 1) return DW3(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min); /* its own checks */ \
    if (!mt_conv_rq_ok(rq, rq_per_channel, b, O, y_zero, &bmax)) return 0;                               \
    if (!col || OG == 1) return 0; /* one channel per group: a column would serve one channel */          \
    for (o = 0; o < (rq_per_channel ? O : 1); ++o) /* |sum| <= taps 2^14 + |b| */                         \
      hq = hq && mt_rq_chan_h_ok(rq + 2 * o, ((uint32_t)taps << 14) + bmax);                              \
    for (n = 0; n < N; ++n)                                                                               \
      for (grp = 0; grp < G; ++grp) {                                                                     \
        const int8_t *x0 = x + ((long)n * CG * G + (long)grp * CG) * H * W;                               \
        int p = 0, q = 0; /* position k = p OW + q */                                                     \
        for (k = 0; k < P; k += MT_CONV_COLS) {                                                           \
          int cnt = P - k < MT_CONV_COLS ? P - k : MT_CONV_COLS; /* a last block of fewer: its last column again */ \
          if (cnt < MT_CONV_COLS && P >= MT_CONV_COLS) /* or the last MT_CONV_COLS (some again) */ \
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
/* Armv7E-M: the eight columns hold every tap in blocks, the last block's taps past CG KH KW zeros
 * (written once per call), so that each channel's sums are MT_COLS8_ASM over (taps + 3) & ~3
 * taps: the word of weights of the last block reaches up to 3 bytes into the next channel's,
 * which meet those zeros. The channel whose weights end the array takes its last block here
 * instead (a word read past the array could leave the memory): its taps % 4 weights as a word
 * (the rest zeros), SXTB16 into (w0, w2) and (w1, w3), 2 SMLAD per column (cb: the block). */
#define MT_COLS8_LAST(cb, w, n, a)                                                                        \
  do {                                                                                                    \
    uint32_t wt_ = 0;                                                                                     \
    int32_t pe_, po_;                                                                                     \
    int j_;                                                                                               \
    for (j_ = 0; j_ < (n); ++j_) wt_ |= (uint32_t)(uint8_t)(w)[j_] << (8 * j_);                           \
    pe_ = __sxtb16((int32_t)wt_), po_ = mt_odd_bytes((int32_t)wt_);                                       \
    for (j_ = 0; j_ < MT_CONV_COLS; ++j_)                                                                 \
      a[j_] = __smlad(mt_ld32((cb) + 4 * j_ + 2), po_, __smlad(mt_ld32((cb) + 4 * j_), pe_, a[j_]));       \
  } while (0)

/* A word to col (no alignment asked: one STR) */
static inline void mt_st32(int16_t *d, int32_t v) { __builtin_memcpy(d, &v, 4); }

/* The eight columns of a pointwise layer of stride 1 without padding at positions k .. k + 7,
 * the inputs of a channel two words (xk = x0 + k, channels hw apart): per block of four
 * channels c0 .. c3 and word (positions k .. k + 3, then k + 4 .. k + 7), the words of each
 * split by SXTB16 into (position 0, 2) and (1, 3), then paired channel by channel (PKHBT, PKHTB
 * of mt_attention.c): column j's words (c0, c2) and (c1, c3), the block's layout. 4 LDR, 8
 * SXTB16, 8 PKH and 8 STR per 16 taps; channels past CG zeros. */
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
  int c, h;
  for (c = 0; c + 4 <= CG; c += 4, xk += 4 * hw, col += 4 * MT_CONV_COLS)
    for (h = 0; h < MT_CONV_COLS; h += 4)
      MT_PW_BLOCK(mt_ld32(xk + h), mt_ld32(xk + hw + h), mt_ld32(xk + 2 * hw + h), mt_ld32(xk + 3 * hw + h), col + 4 * h);
  if (c < CG)
    for (h = 0; h < MT_CONV_COLS; h += 4)
      MT_PW_BLOCK(mt_ld32(xk + h), c + 1 < CG ? mt_ld32(xk + hw + h) : 0, c + 2 < CG ? mt_ld32(xk + 2 * hw + h) : 0, 0,
                  col + 4 * h);
}

/* Windows inside the input: off[s] = the input offset of the tap in place s of col's blocks
 * (t0 t2 t1 t3) from the window's first, -1 for the last block's padding; 0 when the taps are
 * more than MT_CONV_TAB or an offset does not fit int16 (those windows take
 * mt_conv_column_s8). Then a column is a load of each offset, the input and a store. */
#define MT_CONV_TAB 128
static int mt_conv_tab(const int32_t *g, int H, int W, int16_t *off) { /* an input of H x W (g's or xb's) */
  const int CG = g[MT_CONV_CG], KH = g[MT_CONV_KH], KW = g[MT_CONV_KW];
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
  for (s = 0; s < taps4; s += 4, d += 4 * MT_CONV_COLS) d[0] = xo[off[s]], d[1] = xo[off[s + 1]], d[2] = xo[off[s + 2]], d[3] = xo[off[s + 3]];
  for (; s < tapsr; ++s)
    if (off[s] >= 0) d[s & 3] = xo[off[s]];
}
/* The eight columns at once, windows inside the input sw apart (eight positions of a row):
 * per place of a block one offset, eight loads and eight stores */
#define MT_TAB8(i)                                                                                        \
  do {                                                                                                    \
    const int8_t *xs_ = xo + off[s + (i)];                                                                \
    d[(i)] = xs_[0], d[(i) + 4] = xs_[sw], d[(i) + 8] = xs_[s2], d[(i) + 12] = xs_[s3];                     \
    xs_ += s4;                                                                                            \
    d[(i) + 16] = xs_[0], d[(i) + 20] = xs_[sw], d[(i) + 24] = xs_[s2], d[(i) + 28] = xs_[s3];              \
  } while (0)
static void mt_conv_cols8_tab(const int8_t *xo, int sw, const int16_t *off, int taps4, int tapsr, int16_t *d) {
  const int s2 = 2 * sw, s3 = 3 * sw, s4 = 4 * sw;
  int s, i;
  for (s = 0; s < taps4; s += 4, d += 4 * MT_CONV_COLS) {
    MT_TAB8(0);
    MT_TAB8(1);
    MT_TAB8(2);
    MT_TAB8(3);
  }
  for (i = 0; s < tapsr && i < 4; ++i) /* the last block (s = taps4) */
    if (off[s + i] >= 0) MT_TAB8(i);
}

/* Eight windows in a row that reach past the row's ends (padding along W; their rows inside the
 * input): their inputs, the rows hs + 1 of each channel from the first window's start w0 on,
 * span = 7 SW + ws + 1 bytes each, copied into xb (zeros past the row: the padding's taps) as an
 * input of CG (hs + 1) rows of span (mt_conv_tab's offsets for that shape, offb), then
 * mt_conv_cols8_tab from xb: a copy of CG (hs + 1) span bytes instead of the padded windows'
 * taps one by one. MT_CONV_PAD bounds xb, half of it the taps (offb). */
#define MT_CONV_PAD 128
static void mt_conv_cols8_pad(const int8_t *xr, int W, long hw, int rows, int CG, int w0, int sw, int span,
                              const int16_t *offb, int taps4, int tapsr, int8_t *xb, int16_t *col) {
  const int lo = w0 < 0 ? -w0 : 0, hi = W - w0 < span ? W - w0 : span; /* [lo, hi): inside the row */
  int c, i, u;
  int8_t *d = xb;
  for (c = 0; c < CG; ++c, xr += hw)
    for (i = 0; i < rows; ++i, d += span) {
      const int8_t *s = xr + (long)i * W + w0;
      for (u = 0; u < lo; ++u) d[u] = 0;
      for (; u < hi; ++u) d[u] = s[u];
      for (; u < span; ++u) d[u] = 0;
    }
  mt_conv_cols8_tab(xb, sw, offb, taps4, tapsr, col);
}

/* The channels [0, og) of a group against the eight columns (channel o: its weights w + o taps,
 * its constants qt + 4 o: mt_conv_qt's), every channel's sums free of rounding ties
 * (mt_rq_chan_h_ok), the outputs of eight positions to y + o P .. + 7: per channel the bias
 * eight times, MT_COLS8_ASM over the blocks and per output SMMLA, ASR, SSAT (and the y_min clamp
 * where CLAMP), the store: the channel's set-up (four loads) shared by eight outputs. Not
 * inlined, so that few values live through its loop. */
#define MT_DEFINE_CONV_CHANS8(NAME, YT, BITS, CLAMP)                                                      \
  static __attribute__((noinline)) void NAME(const int16_t *col, const int8_t *w, const int32_t *qt, YT *y, \
                                             int P, int og, int taps, int32_t y_min) {                    \
    const int tapsr = (taps + 3) & ~3, wd = taps - tapsr;                                                 \
    const int16_t *const cend = col + MT_CONV_COLS * tapsr;                                               \
    YT *const end = y + (long)og * P;                                                                     \
    for (; y != end; y += P, qt += 4) {                                                                   \
      int32_t a0 = qt[0], a1, a2, a3, a4, a5, a6, a7; /* a1 .. a7 from a0 by MT_COLS8_ASM */             \
      const int16_t *xq = col;                                                                            \
      mt_rq_chan q;                                                                                       \
      MT_COLS8_ASM(xq, cend, w, tapsr, a);                                                                \
      w += wd; /* the next channel's weights */                                                           \
      q.c_lo = 0, q.m = qt[1], q.c_hi = qt[2], q.sh = qt[3];                                              \
      MT_CONV_OUT4(BITS, YT, &q, y, 4, a0, a1, a2, a3, y_min, CLAMP, 1);                                  \
      MT_CONV_OUT4(BITS, YT, &q, (y + 4), 4, a4, a5, a6, a7, y_min, CLAMP, 1);                            \
    }                                                                                                     \
  }
/* The constants of channels o .. o + n - 1 for MT_DEFINE_CONV_CHANS8 (their rq pairs r + o rs),
 * 4 words each: the bias, m, c_hi = (2 y_zero + 1) 2^(s-2) (mt_rq_chan_init's for s >= 2, yz21 =
 * 2 y_zero + 1) and the shift s - 1 of SMMLA's high word. A table of MT_CONV_QT channels on the
 * stack (1 KB), filled once per group of at most that many output channels, else per chunk and
 * block of eight positions. */
#define MT_CONV_QT 64
static void mt_conv_qt(const int32_t *b, const int32_t *r, int rs, int n, uint32_t yz21, int32_t *qt) {
  for (; n > 0; --n, r += rs, qt += 4) qt[0] = *b++, qt[1] = r[0], qt[2] = (int32_t)(yz21 << (r[1] - 2)), qt[3] = r[1] - 1;
}
MT_DEFINE_CONV_CHANS8(mt_conv_chans8_s8, int8_t, 8, 0)
MT_DEFINE_CONV_CHANS8(mt_conv_chans8_s8c, int8_t, 8, 1)
MT_DEFINE_CONV_CHANS8(mt_conv_chans8_s16, int16_t, 16, 0)
MT_DEFINE_CONV_CHANS8(mt_conv_chans8_s16c, int16_t, 16, 1)
/* The eight columns of the positions k = p OW + q .. k + cnt - 1 (cnt < 8: the last one again),
 * (*pp, *qp) = (p, q) moved past them: a pointwise layer of stride 1 without padding
 * (pw) by mt_conv_cols_pw, eight windows inside the input in a row by mt_conv_cols8_tab, other
 * windows in a row past the row's ends (rows inside) by mt_conv_cols8_pad (offb: its offsets, or
 * 0), other windows inside one by one by mt_conv_column_tab (off: mt_conv_tab's, or 0), the rest
 * tap by tap (mt_conv_column_s8). */
static void mt_conv_cols8(const int8_t *x0, const int32_t *g, int pw, const int16_t *off, const int16_t *offb,
                          int8_t *xb, int k, int cnt, int *pp, int *qp, int16_t *col) {
  const int H = g[MT_CONV_H], W = g[MT_CONV_W], OW = g[MT_CONV_OW], SH = g[MT_CONV_SH], SW = g[MT_CONV_SW];
  const int PH = g[MT_CONV_PH], PW = g[MT_CONV_PW], taps = g[MT_CONV_CG] * g[MT_CONV_KH] * g[MT_CONV_KW];
  const int hs = (g[MT_CONV_KH] - 1) * g[MT_CONV_DH], ws = (g[MT_CONV_KW] - 1) * g[MT_CONV_DW]; /* extents - 1 */
  const int taps4 = taps & ~3, tapsr = (taps + 3) & ~3;
  int p = *pp, q = *qp, c;
  if (pw && cnt == MT_CONV_COLS) {
    mt_conv_cols_pw(x0 + k, (long)H * W, g[MT_CONV_CG], col);
    for (q += MT_CONV_COLS; q >= OW; q -= OW) ++p;
  } else if (off && cnt == MT_CONV_COLS && q + MT_CONV_COLS - 1 < OW && p * SH - PH >= 0 && p * SH - PH + hs < H &&
             q * SW - PW >= 0 && (q + MT_CONV_COLS - 1) * SW - PW + ws < W) {
    mt_conv_cols8_tab(x0 + (long)(p * SH - PH) * W + q * SW - PW, SW, off, taps4, tapsr, col);
    if ((q += MT_CONV_COLS) == OW) q = 0, ++p;
  } else if (offb && cnt == MT_CONV_COLS && q + MT_CONV_COLS - 1 < OW && p * SH - PH >= 0 && p * SH - PH + hs < H) {
    mt_conv_cols8_pad(x0 + (long)(p * SH - PH) * W, W, (long)H * W, hs + 1, g[MT_CONV_CG], q * SW - PW, SW,
                      (MT_CONV_COLS - 1) * SW + ws + 1, offb, taps4, tapsr, xb, col);
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

/* One channel (any: the array's last too, safe 0: its weights end the array) against the eight
 * columns from its bias, its outputs of positions 0 .. cnt - 1 (requantized by SMMLA where hq,
 * else by mt_rq_chan_apply; at least y_min) */
#define MT_DEFINE_CONV_CHAN1(NAME, YT, BITS)                                                              \
  static __attribute__((noinline)) void NAME(const int16_t *col, const int8_t *w, int32_t bias,          \
                                             const int32_t *r, int32_t y_zero, int32_t y_min, YT *y,       \
                                             int cnt, int taps, int safe, int hq) {                        \
    const int nb = safe ? (taps + 3) & ~3 : taps & ~3; /* the taps of whole words of weights */          \
    const mt_rq_chan q = mt_rq_chan_init(r, y_zero);                                                      \
    int32_t a0 = bias, a1 = bias, a2 = bias, a3 = bias, a4 = bias, a5 = bias, a6 = bias, a7 = bias;       \
    if (nb) {                                                                                             \
      const int16_t *x_ = col, *const e_ = col + MT_CONV_COLS * nb;                                       \
      const int8_t *w_ = w;                                                                               \
      MT_COLS8_ASM(x_, e_, w_, nb, a);                                                                    \
    }                                                                                                     \
    {                                                                                                     \
      int32_t a[MT_CONV_COLS] = {a0, a1, a2, a3, a4, a5, a6, a7};                                         \
      int j;                                                                                              \
      if (nb < taps) MT_COLS8_LAST(col + MT_CONV_COLS * nb, w + nb, taps - nb, a);                        \
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
  (MT_CONV_ONE_CHAN ? CHAN1(col, w0 + (long)o * taps, bg ? bg[o] : 0, rq + (rq_per_channel ? 2 * (grp * OG + o) : 0), \
                            y_zero, y_min, y0 + (long)o * P + k, cnt, taps, grp * OG + o + 1 < O, hq) : (void)0)
/* The channels eight outputs at a time (MT_CONV_COLS8_CHANS) where the variant of the call's y_min is on */
#define MT_CONV_CHANS8_ON(y_min, BITS) ((y_min) <= -(1 << ((BITS) - 1)) ? MT_CONV_CHANS8 : MT_CONV_CHANS8_CLAMP)
/* The calls of MT_DEFINE_CONV_DSP that take the columns (hq: every channel's sums free of rounding
 * ties), in a function of their own: the checks and the depthwise variant stay small */
#define MT_DEFINE_CONV_DSP(NAME, YT, BITS, DW3, CHANS8, CHANS8C, CHAN1)                                    \
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
    int16_t off[MT_CONV_TAB], offb[MT_CONV_PAD / 2];                                                      \
    int8_t wl[MT_CONV_TAB], xb[MT_CONV_PAD];                                                              \
    int32_t qt[4 * MT_CONV_QT], ql[4];                                                                    \
    int n, grp, o, k, c, tab, tabb = 0;                                                                   \
    for (k = taps; k < tapsr; ++k) /* the last block's padding */                                         \
      for (c = 0; c < MT_CONV_COLS; ++c) col[MT_CONV_COLS * taps4 + 4 * c + MT_SLOT(k)] = 0;              \
    tab = !pw && mt_conv_tab(g, H, W, off);                                                               \
    if (tab && PW > 0 && OW >= MT_CONV_COLS && tapsr <= MT_CONV_PAD / 2) { /* xb: rows of span bytes */   \
      const int rows = (KH - 1) * g[MT_CONV_DH] + 1, span = (MT_CONV_COLS - 1) * SW + (KW - 1) * g[MT_CONV_DW] + 1; \
      tabb = (long)CG * rows * span <= MT_CONV_PAD && mt_conv_tab(g, rows, span, offb);                   \
    }                                                                                                     \
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
          if (cnt < MT_CONV_COLS && P >= MT_CONV_COLS) /* or, P >= 8, the last eight positions (some again) */ \
            for (; cnt < MT_CONV_COLS; ++cnt, --k)                                                        \
              if (q-- == 0) q = OW - 1, --p;                                                              \
          mt_conv_cols8(x0, g, pw, tab ? off : 0, tabb ? offb : 0, xb, k, cnt, &p, &q, col);              \
          if (MT_CONV_COLS8_CHANS(cnt, hq, b) && MT_CONV_CHANS8_ON(y_min, BITS)) {                        \
            const int rs = rq_per_channel ? 2 : 0;                                                        \
            const int32_t *rg = rq + rs * grp * OG;                                                       \
            void (*const chans)(const int16_t *, const int8_t *, const int32_t *, YT *, int, int, int, int32_t) = \
                y_min <= -(1 << ((BITS) - 1)) ? CHANS8 : CHANS8C;                                         \
            for (o = 0; o < og; o += MT_CONV_QT) { /* og <= MT_CONV_QT: qt filled once per group */       \
              const int n_ = og - o < MT_CONV_QT ? og - o : MT_CONV_QT;                                   \
              if (og > MT_CONV_QT || k == 0) mt_conv_qt(bg + o, rg + rs * o, rs, n_, yz21, qt);           \
              chans(col, w0 + (long)o * taps, qt, y0 + (long)o * P + k, P, n_, taps, y_min);              \
            }                                                                                             \
            if (og < OG && wl_ok) { /* the last channel of the array, its weights from wl */              \
              if (k == 0) mt_conv_qt(bg + og, rg + rs * og, rs, 1, yz21, ql);                             \
              chans(col, wl, ql, y0 + (long)og * P + k, P, 1, taps, y_min);                               \
            } else                                                                                        \
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
    if (taps > MT_LINEAR_MAX_IN_S8) return 0; /* the int8 sums' bound, as the emitter's switches read it */ \
    if (OG == 1 && CG == 1) return DW3(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min); /* its own checks */ \
    if (!mt_conv_rq_ok(rq, rq_per_channel, b, O, y_zero, &bmax)) return 0;                                \
    if (!MT_CONV_COLS8 || !col || OG == 1) return 0; /* one channel per group: a column would serve one */ \
    for (o = 0; o < (rq_per_channel ? O : 1); ++o) /* |sum| <= taps 2^14 + |b| */                         \
      hq = hq && mt_rq_chan_h_ok(rq + 2 * o, ((uint32_t)taps << 14) + bmax);                              \
    if (!MT_CONV_ONE_CHAN && /* a channel that only CHAN1 takes: the reference */                        \
        (!(MT_CONV_COLS8_CHANS(g[MT_CONV_OH] * g[MT_CONV_OW], hq, b) && MT_CONV_CHANS8_ON(y_min, BITS)) ||   \
         MT_CONV_COLS8_LAST1(taps)))                                                                      \
      return 0;                                                                                           \
    return NAME##_cols(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min, col, hq);                        \
  }
MT_DEFINE_CONV_DSP(mt_conv_dsp_s8_s8_s8, int8_t, 8, mt_conv_dw3_s8_s8_s8, mt_conv_chans8_s8, mt_conv_chans8_s8c,
                   mt_conv_chan1_s8)
MT_DEFINE_CONV_DSP(mt_conv_dsp_s8_s8_s16, int16_t, 16, mt_conv_dw3_s8_s8_s16, mt_conv_chans8_s16, mt_conv_chans8_s16c,
                   mt_conv_chan1_s16)
#endif
#endif /* MT_DSP */
