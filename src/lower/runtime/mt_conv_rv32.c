/* mt_conv_rv32.c - the RISC-V (rv32imc, MT_RV32) variant of the int8 x int8 convolutions of
 * mt_conv.c, the same integers as mt_conv.c's reference. mt_conv.c includes this file (one
 * translation unit: mt_kernels.c) after its helpers and before its instantiations, which try
 * mt_conv_rv_s8_s8_* first. */

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
#endif /* MT_RV32 */
