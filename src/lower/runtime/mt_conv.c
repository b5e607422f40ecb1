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
/* The Armv7E-M variant of the int8 x int8 convolutions: im2col two output positions at a
 * time into col (two columns of the CG KH KW taps as int16, the padding's taps 0), then the
 * linear layers' two-rows-by-two-channels loop (MT_ROWS_MAC_s16 of mt_linear.c: 8 SMLAD per 4
 * taps and 2 channels and 2 positions) over each pair of the group's output channels, so each
 * column serves every channel of the group and no buffer holds more than two columns. The
 * columns are stored with the middle two of every four taps swapped (t0 t2 t1 t3), so that
 * SXTB16's split of a word of weights in order, (w0, w2) and (w1, w3), meets their halfword
 * pairs as loaded; the last taps % 4 in order (a plain loop). Sums in int32 from the bias
 * (exact: |b| < 2^30, taps <= 65536), requantized per channel by mt_rq_chan (every channel
 * mt_rq_chan_fast), at least y_min. Depthwise layers of kernel width 3 take the variant
 * above; other calls (no col, another shift, a larger bias, other layers of one output channel
 * per group, where a column would serve one channel) go to the reference. The same integers. */

/* Column `dst` of the taps of output position (p, q) of group `grp` (its CG channels from x0)
 * in the order above. */
static void mt_conv_column_s8(const int8_t *x0, const int32_t *g, int p, int q, int16_t *dst) {
  const int CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W], KH = g[MT_CONV_KH], KW = g[MT_CONV_KW];
  const int h0 = p * g[MT_CONV_SH] - g[MT_CONV_PH], w0 = q * g[MT_CONV_SW] - g[MT_CONV_PW];
  const int DH = g[MT_CONV_DH], DW = g[MT_CONV_DW], taps4 = CG * KH * KW & ~3;
  int c, i, j, t = 0;
  if (KH == 1 && KW == 1 && h0 >= 0 && h0 < H && w0 >= 0 && w0 < W) { /* pointwise: a tap per channel */
    const long hw = (long)H * W;
    const int8_t *xp = x0 + (long)h0 * W + w0;
    for (c = 0; c + 4 <= CG; c += 4, xp += 4 * hw)
      dst[c] = xp[0], dst[c + 1] = xp[2 * hw], dst[c + 2] = xp[hw], dst[c + 3] = xp[3 * hw];
    for (; c < CG; ++c, xp += hw) dst[c] = xp[0];
    return;
  }
  for (c = 0; c < CG; ++c)
    for (i = 0; i < KH; ++i) {
      const int hi = h0 + i * DH;
      const int8_t *xr = x0 + ((long)c * H + hi) * W;
      const int row_in = hi >= 0 && hi < H;
      for (j = 0; j < KW; ++j, ++t) {
        const int wi = w0 + j * DW;
        const int at = t < taps4 ? (t & ~3) | ((t & 1) << 1) | ((t & 2) >> 1) : t; /* t0 t2 t1 t3 */
        dst[at] = (int16_t)(row_in && wi >= 0 && wi < W ? xr[wi] : 0);
      }
    }
}

/* One output of a depthwise channel (xc its input plane, wc its KH x KW weights) from the bias,
 * the taps inside the input only (the border outputs of the variant below). */
static int32_t mt_conv_dw_one_s8(const int8_t *xc, const int8_t *wc, const int32_t *g, int p, int q, int32_t acc) {
  const int H = g[MT_CONV_H], W = g[MT_CONV_W], KH = g[MT_CONV_KH], KW = g[MT_CONV_KW], DH = g[MT_CONV_DH];
  const int DW = g[MT_CONV_DW], h0 = p * g[MT_CONV_SH] - g[MT_CONV_PH], w0 = q * g[MT_CONV_SW] - g[MT_CONV_PW];
  const int i1 = mt_tap_end(h0, DH, H, KH), j0 = mt_tap_begin(w0, DW, KW), j1 = mt_tap_end(w0, DW, W, KW);
  int i, j;
  for (i = mt_tap_begin(h0, DH, KH); i < i1; ++i)
    for (j = j0; j < j1; ++j) acc += (int32_t)xc[(h0 + i * DH) * W + w0 + j * DW] * wc[i * KW + j];
  return acc;
}

/* Depthwise int8 x int8 convolutions of kernel width 3, stride and dilation 1 along W (one
 * input and one output channel per group; any KH <= 8, stride and dilation along H, padding):
 * two outputs (q, q + 1) per pass over each kernel row i, from one word of the input row
 * (x0 x1 x2 x3): SXTB16 gives (x0, x2) and (x1, x3), and with the row's weights as (w0, w2)
 * and w1,  y_q += SMLAD((x0, x2), (w0, w2)) + x1 w1 (SMLABB) and y_{q+1} += SMLAD((x1, x3),
 * (w0, w2)) + x2 w1 (SMLATB): 1 LDR, 2 SXTB16, 4 multiply-adds for 6 MACs. Outputs whose
 * window leaves the row: mt_conv_dw_one_s8. Sums in int32 from the bias, requantized by
 * mt_rq_chan; the caller checked the channels and biases. */
#define MT_DEFINE_CONV_DW3_DSP(NAME, YT, BITS)                                                            \
  static int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, const int32_t *g,            \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min) {                 \
    const int N = g[MT_CONV_N], H = g[MT_CONV_H], W = g[MT_CONV_W], KH = g[MT_CONV_KH];                   \
    const int OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS], PW = g[MT_CONV_PW];          \
    const int SH = g[MT_CONV_SH], PH = g[MT_CONV_PH], DH = g[MT_CONV_DH];                                 \
    const int q_lo = PW, q_hi = W + PW - 4; /* pairs (q, q + 1) with q_lo <= q <= q_hi read inside */    \
    int32_t wp[8], w1[8];                                                                                 \
    int n, o, p, q, i;                                                                                    \
    if (g[MT_CONV_KW] != 3 || g[MT_CONV_DW] != 1 || g[MT_CONV_SW] != 1 || KH > 8) return 0;               \
    for (n = 0; n < N; ++n)                                                                               \
      for (o = 0; o < G; ++o) {                                                                           \
        const int8_t *xc = x + ((long)n * G + o) * H * W, *wc = w + o * KH * 3;                           \
        const mt_rq_chan qc = mt_rq_chan_init(rq + (rq_per_channel ? 2 * o : 0), y_zero);                 \
        const int32_t bias = b ? b[o] : 0;                                                                \
        YT *yc = y + ((long)n * G + o) * OH * OW;                                                         \
        for (i = 0; i < KH; ++i) /* (w0, w2) as halfwords, and w1 */                                      \
          wp[i] = (int32_t)(((uint32_t)(uint16_t)wc[3 * i + 2] << 16) | (uint16_t)wc[3 * i]),             \
          w1[i] = wc[3 * i + 1];                                                                          \
        for (p = 0; p < OH; ++p) {                                                                        \
          const int h0 = p * SH - PH, i0 = mt_tap_begin(h0, DH, KH), i1 = mt_tap_end(h0, DH, H, KH);      \
          YT *yr = yc + p * OW;                                                                           \
          for (q = 0; q < OW;) {                                                                          \
            if (q < q_lo || q > q_hi || q + 1 >= OW) {                                                    \
              yr[q] = (YT)MT_CHAN_OUT(BITS, &qc, mt_conv_dw_one_s8(xc, wc, g, p, q, bias), y_min);        \
              ++q;                                                                                        \
              continue;                                                                                   \
            }                                                                                             \
            {                                                                                             \
              int32_t a0 = bias, a1 = bias;                                                               \
              const int8_t *xr = xc + (long)(h0 + i0 * DH) * W + (q - PW);                                \
              for (i = i0; i < i1; ++i, xr += DH * W) {                                                   \
                const int32_t v = mt_ld32(xr), e = __sxtb16(v), od = mt_odd_bytes(v);                     \
                a0 = __smlabb(od, w1[i], __smlad(e, wp[i], a0));                                          \
                a1 = __smlatb(e, w1[i], __smlad(od, wp[i], a1));                                          \
              }                                                                                           \
              yr[q] = (YT)MT_CHAN_OUT(BITS, &qc, a0, y_min);                                              \
              yr[q + 1] = (YT)MT_CHAN_OUT(BITS, &qc, a1, y_min);                                          \
              q += 2;                                                                                     \
            }                                                                                             \
          }                                                                                               \
        }                                                                                                 \
      }                                                                                                   \
    return 1;                                                                                             \
  }
MT_DEFINE_CONV_DW3_DSP(mt_conv_dw3_s8_s8_s8, int8_t, 8)
MT_DEFINE_CONV_DW3_DSP(mt_conv_dw3_s8_s8_s16, int16_t, 16)

#define MT_DEFINE_CONV_DSP(NAME, YT, BITS, DW3)                                                            \
  static int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, const int32_t *g,            \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col) {   \
    const int N = g[MT_CONV_N], CG = g[MT_CONV_CG], H = g[MT_CONV_H], W = g[MT_CONV_W];                   \
    const int OG = g[MT_CONV_OG], OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS];          \
    const int taps = CG * g[MT_CONV_KH] * g[MT_CONV_KW], taps4 = taps & ~3, span = (taps + 3) & ~3;       \
    const int O = OG * G, P = OH * OW;                                                                    \
    int n, grp, o, k, j;                                                                                  \
    if (taps > 65536) return 0;                                                                           \
    for (o = 0; o < (rq_per_channel ? O : 1); ++o)                                                        \
      if (!mt_rq_chan_fast(rq + 2 * o, y_zero)) return 0;                                                 \
    for (o = 0; b && o < O; ++o)                                                                          \
      if (mt_mag32(b[o]) >= 1u << 30) return 0;                                                           \
    if (OG == 1 && CG == 1) return DW3(x, w, b, y, g, rq, rq_per_channel, y_zero, y_min);                 \
    if (!col || OG == 1) return 0; /* one channel per group: a column would serve one channel */          \
    for (n = 0; n < N; ++n)                                                                               \
      for (grp = 0; grp < G; ++grp) {                                                                     \
        const int8_t *x0 = x + ((long)n * CG * G + (long)grp * CG) * H * W;                               \
        int p = 0, q = 0; /* position k = p OW + q */                                                     \
        for (k = 0; k < P; k += 2) {                                                                      \
          const int two = k + 1 < P; /* an odd last position: its column twice, stored once */           \
          int16_t *c0 = col, *c1 = col + span;                                                            \
          mt_conv_column_s8(x0, g, p, q, c0);                                                             \
          if (++q == OW) q = 0, ++p;                                                                      \
          if (two) {                                                                                      \
            mt_conv_column_s8(x0, g, p, q, c1);                                                           \
            if (++q == OW) q = 0, ++p;                                                                    \
          } else {                                                                                        \
            c1 = c0;                                                                                      \
          }                                                                                               \
          for (o = grp * OG; o < (grp + 1) * OG; o += 2) {                                                \
            const int o1 = o + 1 < (grp + 1) * OG ? o + 1 : o; /* an odd last channel: computed twice */  \
            const int8_t *w0 = w + (long)o * taps, *w1 = w + (long)o1 * taps;                             \
            const mt_rq_chan q0 = mt_rq_chan_init(rq + (rq_per_channel ? 2 * o : 0), y_zero);             \
            const mt_rq_chan q1 = mt_rq_chan_init(rq + (rq_per_channel ? 2 * o1 : 0), y_zero);            \
            int32_t a00 = b ? b[o] : 0, a01 = b ? b[o1] : 0, a10 = a00, a11 = a01;                        \
            YT *y0 = y + ((long)n * O + o) * P + k, *y1 = y + ((long)n * O + o1) * P + k;                 \
            const int16_t *xa = c0, *xb = c1; /* the names MT_ROWS_MAC_s16's operands take */             \
            MT_ROWS_MAC_s16(xa, xb, w0, w1, taps4, a00, a01, a10, a11);                                   \
            for (j = taps4; j < taps; ++j) {                                                              \
              a00 += (int32_t)c0[j] * w0[j], a01 += (int32_t)c0[j] * w1[j];                               \
              a10 += (int32_t)c1[j] * w0[j], a11 += (int32_t)c1[j] * w1[j];                               \
            }                                                                                             \
            y0[0] = (YT)MT_CHAN_OUT(BITS, &q0, a00, y_min);                                               \
            y1[0] = (YT)MT_CHAN_OUT(BITS, &q1, a01, y_min);                                               \
            if (two) {                                                                                    \
              y0[1] = (YT)MT_CHAN_OUT(BITS, &q0, a10, y_min);                                             \
              y1[1] = (YT)MT_CHAN_OUT(BITS, &q1, a11, y_min);                                             \
            }                                                                                             \
          }                                                                                               \
        }                                                                                                 \
      }                                                                                                   \
    return 1;                                                                                             \
  }
MT_DEFINE_CONV_DSP(mt_conv_dsp_s8_s8_s8, int8_t, 8, mt_conv_dw3_s8_s8_s8)
MT_DEFINE_CONV_DSP(mt_conv_dsp_s8_s8_s16, int16_t, 16, mt_conv_dw3_s8_s8_s16)
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
 * chunk of fewer than three positions its last column (neither stored twice). Depthwise layers
 * of kernel width 3 take mt_conv_dw3_rv; other calls (no col, other layers of one output
 * channel per group, a larger bias, a channel not mt_rv_rq's) go to the reference. The same
 * integers. */

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

/* Depthwise int8 x int8 convolutions of kernel width 3, stride and dilation 1 along W (one
 * input and one output channel per group; any KH, stride and dilation along H, padding): four
 * outputs (q .. q + 3) per pass over each kernel row i inside the input, from the six inputs
 * they cover: 3 + 6 loads, 12 MUL, 12 ADD for 12 MACs; an output whose pass would leave the row
 * alone, its three taps unrolled where they are inside, else the taps inside only. Sums in
 * int32 from the bias, requantized by mt_rv_rq (MULH when HQ is 1, as above); the caller checked
 * the channels and biases. */
#define MT_DEFINE_CONV_DW3_RV(NAME, YT, YLO, YHI)                                                         \
  static int NAME(const int8_t *x, const int8_t *w, const int32_t *b, YT *y, const int32_t *g,            \
                  const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int hq) {         \
    const int N = g[MT_CONV_N], H = g[MT_CONV_H], W = g[MT_CONV_W], KH = g[MT_CONV_KH];                   \
    const int OH = g[MT_CONV_OH], OW = g[MT_CONV_OW], G = g[MT_CONV_GROUPS], PW = g[MT_CONV_PW];          \
    const int SH = g[MT_CONV_SH], PH = g[MT_CONV_PH], DH = g[MT_CONV_DH];                                 \
    const int32_t lo = y_min > (YLO) ? y_min : (YLO);                                                     \
    int n, o, p, q, i;                                                                                    \
    if (g[MT_CONV_KW] != 3 || g[MT_CONV_DW] != 1 || g[MT_CONV_SW] != 1) return 0;                         \
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
MT_DEFINE_CONV_DW3_RV(mt_conv_dw3_rv_s8_s8_s8, int8_t, -128, 127)
MT_DEFINE_CONV_DW3_RV(mt_conv_dw3_rv_s8_s8_s16, int16_t, -32768, 32767)

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

#define MT_DEFINE_CONV_RV(NAME, YT, YLO, YHI, DW3)                                                        \
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
MT_DEFINE_CONV_RV(mt_conv_rv_s8_s8_s8, int8_t, -128, 127, mt_conv_dw3_rv_s8_s8_s8)
MT_DEFINE_CONV_RV(mt_conv_rv_s8_s8_s16, int16_t, -32768, 32767, mt_conv_dw3_rv_s8_s8_s16)
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
