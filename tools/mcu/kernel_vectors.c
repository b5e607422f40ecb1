/* kernel_vectors.c - runs every microtorch runtime kernel on fixed pseudo-random and extreme
 * inputs and prints one FNV-1a hash per case. Built for the host and for Cortex-M0/M4/M7/M33 by
 * tools/mcu/run_kernels_qemu.sh, which requires the printed text to be byte-identical.
 *
 * Inputs come from a 32-bit LCG (lcg_inputs.h: no libc rand), hashes are over the values
 * serialised little-endian, so the text depends only on the kernels' integer results.
 * Static buffers only (fits the 64 KB RAM of the mps2 recipe). */
#include <stdint.h>
#include <stdio.h>

#include "mt_kernels.h"

/* ---- inputs ---------------------------------------------------------------------- */

#define LCG_SEED 12345u
#include "lcg_inputs.h"

static void fill32(int32_t *x, int n) {
  int i;
  for (i = 0; i < n; ++i) {
    int32_t hi = (int32_t)(lcg() >> 1); /* two statements: C leaves the order of operands open */
    x[i] = hi - (int32_t)(lcg() >> 1);
  }
}

/* ---- hashing --------------------------------------------------------------------- */

static uint32_t hash;

static void h_begin(void) { hash = 2166136261u; }

static void h_u32(uint32_t v) {
  int b;
  for (b = 0; b < 4; ++b) {
    hash ^= (v >> (8 * b)) & 0xFFu;
    hash *= 16777619u;
  }
}

static void h16(const int16_t *x, int n) {
  int i;
  for (i = 0; i < n; ++i) h_u32((uint32_t)(int32_t)x[i]);
}

static void h8(const int8_t *x, int n) {
  int i;
  for (i = 0; i < n; ++i) h_u32((uint32_t)(int32_t)x[i]);
}

static void h32(const int32_t *x, int n) {
  int i;
  for (i = 0; i < n; ++i) h_u32((uint32_t)x[i]);
}

static int cases;

static void h_end(const char *name) {
  printf("%-34s %08lx\n", name, (unsigned long)hash);
  ++cases;
}

/* ---- buffers --------------------------------------------------------------------- */

#define NBUF 4096
static MT_WORD_ALIGNED int16_t a16[NBUF], b16[NBUF], y16[NBUF]; /* (the LDRD paths) */
static int8_t a8[NBUF], b8[NBUF], y8[NBUF];
static int32_t a32[1024];
static int32_t scores[8 * 300];
static int64_t acc64[32];
static int32_t acc32[32];
static uint8_t keep[(48 * 300 + 7) / 8];

/* ---- cases ----------------------------------------------------------------------- */

static void primitives(void) {
  uint32_t d;
  int e;
  h_begin();
  for (d = 1; d < 70000u; d += 7u) h_u32(mt_recip_u32(d, &e)), h_u32((uint32_t)e);
  for (d = 70000u; d < 0xFFFFF000u; d += 9876543u) h_u32(mt_recip_u32(d, &e)), h_u32((uint32_t)e);
  h_u32(mt_recip_u32(0, &e));
  h_end("recip_u32");
  h_begin();
  {
    uint64_t v;
    for (v = 1; v < ((uint64_t)1 << 62); v = v * 3u + (v >> 3) + 1u) h_u32(mt_rsqrt_u64(v, &e)), h_u32((uint32_t)e);
  }
  h_end("rsqrt_u64");
  h_begin();
  for (d = 0; d < 18u * 65536u; d += 13u) h_u32(mt_exp2neg_q16(d));
  h_end("exp2neg_q16");
  h_begin();
  fill32(a32, 64);
  for (e = -70; e <= 70; e += 3) {
    int i;
    for (i = 0; i < 64; ++i) {
      h_u32((uint32_t)mt_rshift_s32(a32[i], e));
      h_u32((uint32_t)mt_rshift_s64((int64_t)a32[i] * a32[63 - i], e));
    }
  }
  h_u32((uint32_t)mt_rshift_s32(INT32_MIN, 32));
  h_u32((uint32_t)mt_rshift_s64(INT64_MIN, 64));
  h_u32((uint32_t)mt_rshift_s64(INT64_MIN, -5));
  h_end("rshift");
  h_begin();
  for (e = -34; e <= 70; e += 5) {
    int i;
    for (i = 0; i < 64; ++i) {
      const int32_t m = (int32_t)((1u << 30) | ((uint32_t)a32[i] >> 2));
      h_u32((uint32_t)mt_rq32(a32[i], m, e));
      h_u32((uint32_t)mt_rq32(a32[i], -m, e));
      h_u32((uint32_t)mt_rq((int64_t)a32[i] * a32[63 - i], m, e));
      h_u32((uint32_t)mt_rq((int64_t)a32[i] * a32[63 - i], 0, e));
    }
  }
  h_u32((uint32_t)mt_rq(INT64_MIN, INT32_MIN, -31));
  h_u32((uint32_t)mt_rq(INT64_MAX, 1 << 30, 80));
  h_end("rq");
}

/* a multiplier (m in [2^30, 2^31), or 0 one time in four) and a shift in [lo, hi] */
static int32_t rnd_m(void) { return (lcg() & 3u) ? (int32_t)((1u << 30) | (lcg() >> 2)) : 0; }

static void linear(void) {
  static int32_t bias32[16], rq[32];
  static int64_t bias64[16];
  int i;
  fill32(bias32, 16);
  for (i = 0; i < 16; ++i) bias64[i] = (int64_t)bias32[i] * 8, rq[2 * i] = rnd_m(), rq[2 * i + 1] = rnd(4, 20);
  fill16(a16, 4 * 600, -32768, 32767);
  fill16(b16, NBUF, -32768, 32767);
  fill8(a8, 4 * 600, -128, 127);
  fill8(b8, NBUF, -128, 127);
  h_begin(); /* int8 x int8: int32 accumulators, per-channel and per-tensor, zero point, relu */
  mt_linear_s8_s8_s8(a8, b8, bias32, y8, 4, 40, 16, 0, rq, 1, -5, -128), h8(y8, 64);
  mt_linear_s8_s8_s8(a8, b8, 0, y8, 4, 40, 16, 0, rq, 0, 0, 0), h8(y8, 64);
  mt_linear_s8_s8_s16(a8, b8, bias32, y16, 4, 40, 16, 50, rq, 1, 0, -32768), h16(y16, 64); /* rows at stride 50 */
  mt_linear_s8_s16_s8(a8, b16, bias32, y8, 4, 40, 16, 0, rq, 1, 7, -128), h8(y8, 64);
  mt_linear_s8_s16_s16(a8, b16, bias32, y16, 2, 600, 3, 0, rq, 1, 0, -32768), h16(y16, 6);
  h_end("linear s8 in");
  h_begin(); /* int16 inputs: int32 chunks of 511 terms into int64, int64 for int16 weights */
  mt_linear_s16_s8_s8(a16, b8, bias64, y8, 4, 24, 16, 0, rq, 1, 3, -128), h8(y8, 64);
  mt_linear_s16_s8_s16(a16, b8, bias64, y16, 2, 600, 3, 0, rq, 1, 0, -32768), h16(y16, 6);
  mt_linear_s16_s8_s16(a16, b8, 0, y16, 4, 16, 8, 40, rq, 0, 0, 0), h16(y16, 32);
  mt_linear_s16_s16_s8(a16, b16, bias64, y8, 4, 32, 16, 0, rq, 1, -9, -128), h8(y8, 64);
  mt_linear_s16_s16_s16(a16, b16, bias64, y16, 4, 32, 16, 0, rq, 1, 0, -32768), h16(y16, 64);
  h_end("linear s16 in");
  /* int16 x int16 and the Armv7E-M LDRD loop's conditions (in a multiple of 8, rows and weight
   * rows on word boundaries): rows 4 bytes past a multiple of 8, then each condition broken */
  h_begin();
  mt_linear_s16_s16_s16(a16, b16, bias64, y16, 3, 40, 6, 42, rq, 1, 0, -32768), h16(y16, 18);
  mt_linear_s16_s16_s16(a16, b16, bias64, y16, 3, 20, 6, 0, rq, 1, 0, -32768), h16(y16, 18); /* in % 8 */
  mt_linear_s16_s16_s16(a16 + 1, b16, bias64, y16, 3, 24, 6, 0, rq, 1, 0, -32768), h16(y16, 18);
  mt_linear_s16_s16_s16(a16, b16 + 1, bias64, y16, 3, 24, 6, 0, rq, 1, 0, -32768), h16(y16, 18);
  mt_linear_s16_s16_s8(a16, b16, bias64, y8, 3, 24, 6, 25, rq, 1, 0, -128), h8(y8, 18); /* odd stride */
  h_end("linear s16 words");
  /* int16 x int16 sums within int32 (inputs within +-2000, biases below 2^19): the two-row
   * int32 loop; rows 6 and 7 at 32767 sign(w) of channel 0, whose sums overflow int32 (the
   * int64 loop from that pair on); an odd last row; no bias; y_min above the minimum */
  {
    static int64_t small[16];
    int16_t *const xs16 = a16 + 2400;
    for (i = 0; i < 16; ++i) small[i] = bias32[i] / 4096;
    fill16(xs16, 10 * 32, -2000, 2000);
    for (i = 0; i < 32; ++i) xs16[6 * 32 + i] = xs16[7 * 32 + i] = b16[i] < 0 ? -32768 : 32767;
    h_begin();
    mt_linear_s16_s16_s16(xs16, b16, small, y16, 10, 32, 6, 0, rq, 1, 0, -32768), h16(y16, 60);
    mt_linear_s16_s16_s8(xs16, b16, small, y8, 5, 32, 6, 0, rq, 1, -3, -128), h8(y8, 30);
    mt_linear_s16_s16_s16(xs16, b16, 0, y16, 6, 32, 6, 0, rq, 1, 0, -1000), h16(y16, 36);
    h_end("linear s16 words int32");
  }
  /* the same loop's exact ties of both signs (x = 0, acc = b): acc = 4 (2k + 1) at s = 2 with
   * m = 2^30 (a rounding constant whose low word is 0: one channel pair), acc = 2 (2k + 1) at
   * s = 1 (the other) */
  {
    static MT_WORD_ALIGNED int16_t zero_rows[4 * 16];
    static const int64_t tie[4] = {-12, 20, -6, 10};
    static const int32_t rq_tie[8] = {1 << 30, 2, 1 << 30, 2, 1 << 30, 1, 1 << 30, 1};
    h_begin();
    mt_linear_s16_s16_s16(zero_rows, b16, tie, y16, 4, 16, 4, 0, rq_tie, 1, 0, -32768), h16(y16, 16);
    h_end("linear s16 words int32 ties");
  }
  /* the shapes of the DSP variants' edges: inputs not a multiple of 8 / 4 / 2, an odd channel
   * count, biases below 2^30, per-channel shifts outside [1, 31] and m = 0 */
  for (i = 0; i < 16; ++i) bias32[i] = bias32[i] / 4, bias64[i] = bias64[i] / 4, rq[2 * i + 1] = rnd(-2, 40);
  h_begin();
  for (i = 1; i <= 27; i += 2) {
    mt_linear_s8_s8_s8(a8, b8, bias32, y8, 3, i, 15, 0, rq, 1, -7, -128), h8(y8, 45);
    mt_linear_s8_s8_s16(a8, b8, bias32, y16, 2, i + 1, 5, i + 3, rq, 0, 0, -32768), h16(y16, 10);
    mt_linear_s16_s16_s8(a16, b16, bias64, y8, 3, i, 15, 0, rq, 1, 4, -128), h8(y8, 45);
    mt_linear_s16_s16_s16(a16, b16, 0, y16, 2, i + 1, 5, i + 2, rq, 1, 0, -32768), h16(y16, 10);
    mt_linear_s16_s8_s16(a16, b8, bias64, y16, 3, i + 2, 7, 0, rq, 1, 0, -32768), h16(y16, 21);
    mt_linear_s16_s8_s8(a16, b8, 0, y8, 2, i + 3, 4, i + 5, rq, 0, 1, -128), h8(y8, 8);
    mt_linear_s8_s16_s8(a8, b16, bias32, y8, 3, i, 9, 0, rq, 1, 2, -128), h8(y8, 27);
    mt_linear_s8_s16_s16(a8, b16, 0, y16, 2, i + 1, 3, i + 1, rq, 1, 0, -32768), h16(y16, 6);
    /* one row (a decoder's step): every output by the one-row variant's requantization, the
     * int64 sums within int32 and beyond it (full-range int16 x int16 from about 8 inputs), in a
     * multiple of 8 (the two-word loads) and not */
    mt_linear_s16_s16_s16(a16, b16, bias64, y16, 1, 4 * i + 4, 15, 0, rq, 1, 3, -32768), h16(y16, 15);
    mt_linear_s16_s16_s8(a16, b16, 0, y8, 1, 4 * i + 2, 15, 0, rq, 1, -2, -100), h8(y8, 15);
    mt_linear_s16_s8_s16(a16, b8, bias64, y16, 1, i + 4, 15, 0, rq, 1, 0, -32768), h16(y16, 15);
    mt_linear_s8_s16_s8(a8, b16, bias32, y8, 1, i + 4, 15, 0, rq, 1, 5, -128), h8(y8, 15);
  }
  h_end("linear odd shapes");
}

/* int8 x int8 and int16 x int8 with every channel's requantization on the fast path of the
 * Armv7E-M two-row variant (shift in [1, 31], m > 0): odd and even rows, inputs, channels and
 * row strides, the ends of the shift range and of the multiplier, biases at +-(2^30 - 1),
 * saturation both ways, zero points (those of int16 outputs up to 25,400: beyond the 2^(31-s)
 * that mt_rq_chan folds in at large shifts) and a fused relu (a bound the rows apply
 * afterwards); int16 x through the inline assembly loop; then one channel outside that range
 * (s = 0: int8 x int8 with int16 outputs through mt_rq_up, the other types the one-row
 * variant; s = 32, m < 0: the one-row variant), shifts in [-30, 31] (the same), exact ties of both signs (x = 0, acc = b =
 * 4 (2k + 1) at s = 2 with m = +-2^30, acc = 2 (2k + 1) at s = 1), and int16 x int8 at the
 * int32 sum's edge: 256 products of -2^15 and -2^7 plus a bias of 2^30 - 1 is 2^31 - 1 (two
 * rows), 257 of them or a bias of 2^30 take the one-row variant's int64 sums. */
static void linear_two_rows(void) {
  static const int ins[] = {1, 3, 4, 5, 8, 16, 27, 40};
  static const int32_t zero_min[][2] = {{-5, -128}, {0, 0}, {7, 7}, {-128, -128}, {127, 127}};
  static int32_t bias[16], rq[32];
  static int64_t bias64[16];
  static int8_t zero8[5 * 43];
  int i, k, c;
  fill8(a8, 5 * 43, -128, 127);
  fill16(a16, 5 * 43, -32768, 32767);
  fill8(b8, 16 * 40, -128, 127);
  h_begin();
  for (k = 0; k < 4; ++k) {
    fill32(bias, 16);
    for (c = 0; c < 16; ++c)
      bias[c] /= 2 << (2 * k), rq[2 * c] = (int32_t)((1u << 30) | (lcg() >> 2)), rq[2 * c + 1] = rnd(1, 31);
    rq[0] = 1 << 30, rq[1] = 2, rq[2] = INT32_MAX, rq[3] = 31, rq[4] = INT32_MAX, rq[5] = 2, rq[6] = INT32_MAX, rq[7] = 1;
    bias[3] = (1 << 30) - 1, bias[4] = -(1 << 30) + 1;
    for (c = 0; c < 16; ++c) bias64[c] = bias[c];
    if (k == 1) rq[2 * 5 + 1] = 0;  /* below the range */
    if (k == 2) rq[2 * 6 + 1] = 32; /* above it */
    if (k == 3) rq[2 * 7] = -rq[2 * 7];
    for (i = 0; i < 8; ++i) {
      const int in = ins[i], rows = 2 + i % 4, out = i % 2 ? 15 : 16, xs = i % 3 ? 0 : in + 3;
      const int32_t *zm = zero_min[(i + k) % 5];
      mt_linear_s8_s8_s8(a8, b8, bias, y8, rows, in, out, xs, rq, 1, zm[0], zm[1]), h8(y8, rows * out);
      mt_linear_s8_s8_s8(a8, b8, i % 2 ? bias : 0, y8, rows, in, out, xs, rq + 2 * (i % 3), 0, zm[0], zm[1]),
          h8(y8, rows * out);
      mt_linear_s8_s8_s16(a8, b8, bias, y16, rows, in, out, xs, rq, 1, zm[0] * 200, zm[1] == -128 ? -32768 : zm[1] * 200),
          h16(y16, rows * out);
      mt_linear_s16_s8_s8(a16, b8, bias64, y8, rows, in, out, xs, rq, 1, zm[0], zm[1]), h8(y8, rows * out);
      mt_linear_s16_s8_s16(a16, b8, i % 2 ? bias64 : 0, y16, rows, in, out, xs, rq + 2 * (i % 3), 0, zm[0] * 200,
                           zm[1] == -128 ? -32768 : zm[1] * 200),
          h16(y16, rows * out);
    }
  }
  /* shifts of 0 or less (a ratio of 1/2 or more, as int8 layers with int16 outputs have:
   * mt_rq_up), then any shift in [-30, 31] per channel (the two-row pass where every
   * channel's sums stay within 2^(30+s), else the one-row variant); outputs from small to
   * saturated both ways */
  for (k = 0; k < 3; ++k) {
    fill32(bias, 16);
    for (c = 0; c < 16; ++c)
      bias[c] /= 1 << (12 + 4 * k), rq[2 * c] = (int32_t)((1u << 30) | (lcg() >> 2)),
      rq[2 * c + 1] = k == 0 ? rnd(-2, 0) : k == 1 ? rnd(-30, 0) : rnd(-30, 31);
    for (c = 0; c < 16; ++c) bias64[c] = bias[c];
    for (i = 0; i < 8; ++i) {
      const int in = ins[i], rows = 2 + i % 4, out = i % 2 ? 15 : 16, xs = i % 3 ? 0 : in + 3;
      const int32_t *zm = zero_min[(i + k) % 5];
      mt_linear_s8_s8_s16(a8, b8, bias, y16, rows, in, out, xs, rq, 1, zm[0] * 200, zm[1] == -128 ? -32768 : zm[1] * 200),
          h16(y16, rows * out);
      mt_linear_s8_s8_s8(a8, b8, bias, y8, rows, in, out, xs, rq, 1, zm[0], zm[1]), h8(y8, rows * out);
      mt_linear_s16_s8_s16(a16, b8, bias64, y16, rows, in, out, xs, rq + 2 * (i % 3), 0, zm[0] * 200,
                           zm[1] == -128 ? -32768 : zm[1] * 200),
          h16(y16, rows * out);
    }
    /* 8 rows or more with xs = in, a multiple of 16: the pass of their own for layers whose
     * every shift is 1 or less (mt_linear_up1_s8_s8_s16 at k = 0, every shift in [-2, 0]; at
     * k = 2 shifts in [-1, 2] take the rows for any shift), odd and even rows and channels, the
     * zero points and bounds above; x in [-6, 6] and smaller biases, so that most outputs lie
     * inside the int16 range */
    fill8(a8 + 256, 9 * 32, -6, 6);
    for (c = 0; c < 16; ++c) bias[c] /= 64, rq[2 * c + 1] = k == 2 ? rnd(-1, 2) : rq[2 * c + 1];
    for (i = 0; i < 5; ++i) { /* then rows at a stride of in + 3, in = 24, one channel: not the pass */
      static const int shape[5][4] = {{9, 16, 15, 0}, {8, 32, 16, 32}, {8, 16, 3, 19}, {10, 24, 2, 0}, {8, 16, 1, 0}};
      const int32_t *zm = zero_min[(k + 2 * i) % 5];
      const int rows = shape[i][0], in = shape[i][1], out = shape[i][2];
      mt_linear_s8_s8_s16(a8 + 256, b8, bias, y16, rows, in, out, shape[i][3], rq, 1, zm[0] * 200,
                          zm[1] == -128 ? -32768 : zm[1] * 200),
          h16(y16, rows * out);
    }
  }
  for (i = 0; i < 2 * 257; ++i) a16[i] = -32768;
  for (i = 0; i < 4 * 257; ++i) b8[i] = -128;
  for (c = 0; c < 4; ++c) bias64[c] = (1 << 30) - 1 - c % 2, rq[2 * c] = INT32_MAX, rq[2 * c + 1] = 1 + c;
  mt_linear_s16_s8_s16(a16, b8, bias64, y16, 2, 256, 4, 0, rq, 1, 0, -32768), h16(y16, 8);
  mt_linear_s16_s8_s8(a16, b8, bias64, y8, 2, 256, 3, 0, rq, 1, 0, -128), h8(y8, 6);
  mt_linear_s16_s8_s16(a16, b8, bias64, y16, 2, 257, 4, 0, rq, 1, 0, -32768), h16(y16, 8);
  bias64[1] = 1 << 30;
  mt_linear_s16_s8_s16(a16, b8, bias64, y16, 2, 256, 4, 0, rq, 1, 0, -32768), h16(y16, 8);
  fill8(b8, 16 * 40, -128, 127);
  for (c = 0; c < 16; ++c) bias[c] = 4 * (2 * (c - 8) + 1), rq[2 * c] = 1 << 30, rq[2 * c + 1] = 2;
  mt_linear_s8_s8_s8(zero8, b8, bias, y8, 3, 8, 16, 0, rq, 1, 0, -128), h8(y8, 48);
  mt_linear_s8_s8_s16(zero8, b8, bias, y16, 4, 8, 16, 0, rq, 1, 0, -32768), h16(y16, 64);
  for (c = 0; c < 16; ++c) rq[2 * c] = -(1 << 30); /* m < 0: ties of the other sign */
  mt_linear_s8_s8_s8(zero8, b8, bias, y8, 2, 8, 16, 0, rq, 1, 0, -128), h8(y8, 32);
  for (c = 0; c < 16; ++c) bias[c] /= 2, rq[2 * c] = 1 << 30, rq[2 * c + 1] = 1; /* s = 1: acc = 2 (2k + 1) */
  mt_linear_s8_s8_s8(zero8, b8, bias, y8, 2, 8, 16, 0, rq, 1, 0, -128), h8(y8, 32);
  /* a shift of 0 or less at the edge of the sums' bound (mt_rq_up_ok), s = -20: |b| + 2^7 sum
   * |w| = 1023 (the two-row variant: the sum shifted left by 21 within int32), 1024 and 1152
   * (the one-row variant: shifted, 1152 2^21 would overflow), x at both ends */
  for (i = 0; i < 18; ++i) a8[i] = (int8_t)(i < 9 ? -128 : 127);
  for (k = 0; k < 9; ++k) b8[k] = (int8_t)(k < 7), b8[9 + k] = (int8_t)(k < 8), b8[18 + k] = -1;
  bias[0] = 127, bias[1] = bias[2] = 0;
  for (c = 0; c < 3; ++c) rq[2 * c] = 1 << 30, rq[2 * c + 1] = -20;
  for (c = 0; c < 3; ++c)
    mt_linear_s8_s8_s16(a8, b8 + 9 * c, bias + c, y16, 2, 9, 1, 0, rq, 1, 0, -32768), h16(y16, 2);
  mt_linear_s8_s8_s16(a8, b8, bias, y16, 2, 9, 3, 0, rq, 1, 0, -32768), h16(y16, 6);
  /* exact ties of both signs at s = 0 (the two-row pass of shifts <= 1, mt_rows2_s8_up1): x = 0,
   * acc = b odd, m = 2^30, so acc 2^up m = (2k + 1) 2^31 */
  for (c = 0; c < 16; ++c) bias[c] = 2 * (c - 8) + 1, rq[2 * c] = 1 << 30, rq[2 * c + 1] = 0;
  mt_linear_s8_s8_s16(zero8, b8, bias, y16, 8, 16, 16, 0, rq, 1, 0, -32768), h16(y16, 128);
  h_end("linear two rows");
}

/* The two-row pass's inner loops at an encoder layer's shapes (in 32 and 64, 5 rows, 6 channels
 * and 7: an odd last channel, its weight rows not one distance apart): int8 x int8 by 16 inputs
 * at a time where row b and channel 1 lie one distance from row a and channel 0 (xs = in; in =
 * 40 and 36 leave 8 and 4 inputs to the C loop; xs = in + 16 does not take it); int16 x int8
 * with both rows on word boundaries and in a multiple of 8 by LDRD (in 32, 64, 40; in 36 and
 * 28, an odd row stride, or x from a16 + 1 take the one-word loop); full-range x and w,
 * biases up to 2^30 - 1, shifts from 1 to 14, int8 and int16 outputs, a fused relu. */
static void linear_encoder_rows(void) {
  static const int ins[] = {32, 64, 40, 36, 28};
  static int32_t bias[7], rq[14];
  static int64_t bias64[7];
  int i, c, v;
  fill8(a8, 5 * 96, -128, 127);
  fill16(a16, 5 * 96, -32768, 32767);
  fill8(b8, 7 * 64, -128, 127);
  h_begin();
  for (c = 0; c < 7; ++c)
    bias[c] = (int32_t)(lcg() >> 2) - (1 << 29), bias64[c] = bias[c], rq[2 * c] = (int32_t)((1u << 30) | (lcg() >> 2)),
    rq[2 * c + 1] = rnd(1, 14);
  bias[2] = (1 << 30) - 1, bias64[2] = bias[2], rq[3] = 1;
  for (i = 0; i < 5; ++i)
    for (v = 0; v < 4; ++v) {
      const int in = ins[i], out = 6 + v % 2, xs = v < 2 ? 0 : v == 2 ? in + 16 : in + 1;
      mt_linear_s8_s8_s8(a8, b8, bias, y8, 5, in, out, xs, rq, 1, -7, v ? -128 : -7), h8(y8, 5 * out);
      mt_linear_s8_s8_s16(a8, b8, bias, y16, 5, in, out, xs, rq, 1, 300, -32768), h16(y16, 5 * out);
      mt_linear_s16_s8_s16(a16 + (v == 3), b8, bias64, y16, 5, in, out, xs, rq, 1, -300, v ? -32768 : -300),
          h16(y16, 5 * out);
      mt_linear_s16_s8_s8(a16, b8, v % 2 ? 0 : bias64, y8, 4, in, out, xs, rq, 1, 3, -128), h8(y8, 4 * out);
    }
  h_end("linear encoder rows");
}

/* int8 x int8 layers whose every channel has a shift in [2, 31] and a positive multiplier (the
 * Armv8.1-M MVE variant: four channels per pass): in from 1 to 40 (in % 16 of 0, 1, 5, 8 and
 * 15: the tail predicate), 1 to 13 channels (a last group of 1 to 3), 1 to 3 rows, a row stride,
 * per-channel and shared requantization, int8 and int16 outputs with zero points and relu
 * bounds, full-range x and w (outputs saturating both ways, int16 ones beyond 2^14); then biases
 * of 2^30 - 1 (the exact int32 sums' edge) and 2^31 - 1 - c with all-positive products (sums
 * beyond int32: the DSP variant's call, else they would wrap). */
static void linear_four_channels(void) {
  static const int ins[6] = {1, 5, 15, 16, 24, 40};
  static const int32_t zero_min[][2] = {{-5, -128}, {0, 0}, {7, 7}, {-128, -128}, {100, 120}};
  static int32_t bias[16], rq[32];
  int i, c;
  h_begin();
  for (i = 0; i < 24; ++i) {
    const int in = ins[i % 6], out = 1 + (i * 5) % 13, rows = 1 + i % 3, xs = i % 4 ? 0 : in + 3;
    const int32_t *zm = zero_min[i % 5];
    fill8(a8, 3 * 43, -128, 127), fill8(b8, 13 * 40, -128, 127);
    for (c = 0; c < 16; ++c)
      bias[c] = rnd(-40000, 40000), rq[2 * c] = (int32_t)((1u << 30) | (lcg() >> 2)), rq[2 * c + 1] = rnd(2, i % 2 ? 31 : 12);
    mt_linear_s8_s8_s8(a8, b8, bias, y8, rows, in, out, xs, rq, i % 5 != 4, zm[0], zm[1]), h8(y8, rows * out);
    mt_linear_s8_s8_s16(a8, b8, i % 3 ? bias : 0, y16, rows, in, out, xs, rq, i % 5 != 4, zm[0] * 200,
                        zm[1] == -128 ? -32768 : zm[1] * 200),
        h16(y16, rows * out);
  }
  for (i = 0; i < 2 * 40; ++i) a8[i] = 127;
  for (i = 0; i < 5 * 40; ++i) b8[i] = 127;
  for (c = 0; c < 5; ++c) rq[2 * c] = 1 << 30, rq[2 * c + 1] = 31;
  for (c = 0; c < 5; ++c) bias[c] = (1 << 30) - 1;
  mt_linear_s8_s8_s8(a8, b8, bias, y8, 2, 40, 5, 0, rq, 1, 0, -128), h8(y8, 10);
  for (c = 0; c < 5; ++c) bias[c] = INT32_MAX - c;
  mt_linear_s8_s8_s8(a8, b8, bias, y8, 2, 40, 5, 0, rq, 1, 0, -128), h8(y8, 10);
  mt_linear_s8_s8_s16(a8, b8, bias, y16, 2, 40, 5, 0, rq, 1, 0, -32768), h16(y16, 10);
  h_end("linear four channels");
}

/* int16 x int16 sums beyond int32 on a fast channel (the Armv7E-M two-row variant's 96-bit
 * requantization, mt_rq_chan_apply64): with x = 0 each sum is its bias, so the sums are chosen
 * exactly: either side of int32's ends, exact ties of both signs (acc = +-(2^33 + 4) at s = 2,
 * m = 2^30), 2^40 to 2^62, INT64_MAX and INT64_MIN; each meets every one of 16 channels (shifts
 * 1 to 31, multipliers 1 to 2^31 - 1), with zero points (beyond 2^(31-s) at large shifts: the
 * one-row path) and a relu, int16 and int8 outputs; then full-range rows at shifts 20 to 31,
 * where sums beyond int32 are not saturated, through the LDRD loop (in = 24) and the C loops
 * (in = 20). */
static void linear_wide_sums(void) {
  static const int64_t sums[16] = {
      (int64_t)1 << 31,          ((int64_t)1 << 31) - 1,     -((int64_t)1 << 31),        -((int64_t)1 << 31) - 1,
      ((int64_t)1 << 31) + 1,    ((int64_t)1 << 33) + 4,     -((int64_t)1 << 33) - 4,    3 * ((int64_t)1 << 32) + 12345,
      -5 * ((int64_t)1 << 32) - 7, ((int64_t)1 << 40) + 1,   -((int64_t)1 << 40),        -((int64_t)1 << 50) - 3,
      ((int64_t)1 << 62) - 1,    -((int64_t)1 << 62),        INT64_MAX,                  INT64_MIN};
  static const int32_t ms[16][2] = {{1 << 30, 2},   {INT32_MAX, 1},   {INT32_MAX, 31}, {1, 1},
                                    {1 << 30, 31},  {12345, 5},       {INT32_MAX, 16}, {0x6ACE1234, 30},
                                    {3, 7},         {1 << 30, 1},     {0x5A5A5A5A, 24}, {INT32_MAX, 2},
                                    {1 << 30, 17},  {0x40000001, 8},  {1 << 30, 3},    {7, 31}};
  static const int32_t zero_min[3][2] = {{0, -32768}, {100, -32768}, {-7, 0}};
  static MT_WORD_ALIGNED int16_t zero16[2 * 8];
  static int64_t bias64[16];
  static int32_t rq[32];
  int i, j, c;
  for (c = 0; c < 16; ++c) rq[2 * c] = ms[c][0], rq[2 * c + 1] = ms[c][1];
  h_begin();
  for (j = 0; j < 16; ++j) {
    for (c = 0; c < 16; ++c) bias64[c] = sums[(c + j) % 16];
    for (i = 0; i < 3; ++i) {
      mt_linear_s16_s16_s16(zero16, b16, bias64, y16, 2, 8, 16, 0, rq, 1, zero_min[i][0], zero_min[i][1]),
          h16(y16, 32);
      mt_linear_s16_s16_s8(zero16, b16, bias64, y8, 2, 8, 16, 0, rq, 1, zero_min[i][0] / 20,
                           zero_min[i][1] == 0 ? 0 : -128),
          h8(y8, 32);
    }
  }
  fill16(a16, 3 * 24, -32768, 32767);
  fill16(b16, 16 * 24, -32768, 32767);
  for (j = 0; j < 4; ++j) {
    for (c = 0; c < 16; ++c)
      rq[2 * c] = (int32_t)((1u << 30) | (lcg() >> 2)), rq[2 * c + 1] = rnd(20, 31), bias64[c] = (int64_t)c << 33;
    mt_linear_s16_s16_s16(a16, b16, bias64, y16, 3, 24, 16, 0, rq, 1, 0, -32768), h16(y16, 48);
    mt_linear_s16_s16_s16(a16, b16, bias64, y16, 3, 20, 16, 0, rq, 1, 0, -32768), h16(y16, 48);
  }
  h_end("linear wide sums");
}

static void matmul(void) {
  int bt;
  fill16(a16, 2 * 9 * 17, -32768, 32767);
  fill16(b16, 2 * 17 * 11, -32768, 32767);
  fill8(a8, 2 * 9 * 17, -128, 127);
  fill8(b8, 2 * 17 * 11, -128, 127);
  h_begin();
  for (bt = 0; bt < 2; ++bt) {
    mt_matmul_s16(a16, b16, y16, 2, 9, 17, 11, bt, rnd_m(), 21), h16(y16, 2 * 9 * 11);
    mt_matmul_s8(a8, b8, y8, 2, 9, 17, 11, bt, rnd_m(), 8), h8(y8, 2 * 9 * 11);
  }
  h_end("matmul");
}

static void elementwise(void) {
  static const int nbs[] = {1, 7, 64, 2048};
  int k, c;
  fill16(a16, 2048, -32768, 32767);
  fill16(b16, 2048, -32768, 32767);
  fill8(a8, 2048, -128, 127);
  fill8(b8, 2048, -128, 127);
  h_begin();
  for (k = 0; k < 4; ++k)
    for (c = 0; c < 4; ++c) {
      const int32_t ma = rnd(-1048575, 1048575), mb = rnd(-1048575, 1048575), cc = rnd(-30000, 30000);
      const int32_t wa = ma * 512, wb = mb * 512;
      const int sh = 12 + 3 * c;
      mt_add_s8_s8_s8(a8, b8, nbs[k], y8, 2048, ma, mb, cc, sh, -3), h8(y8, 2048);
      mt_add_s8_s8_s16(a8, b8, nbs[k], y16, 2048, ma, mb, cc, sh - 6, 0), h16(y16, 2048);
      mt_add_s8_s16_s8(a8, b16, nbs[k], y8, 2048, wa, wb, cc, sh + 14, 5), h8(y8, 2048);
      mt_add_s8_s16_s16(a8, b16, nbs[k], y16, 2048, wa, wb, cc, sh + 9, 0), h16(y16, 2048);
      mt_add_s16_s8_s8(a16, b8, nbs[k], y8, 2048, wa, wb, cc, sh + 14, 5), h8(y8, 2048);
      mt_add_s16_s8_s16(a16, b8, nbs[k], y16, 2048, wa, wb, cc, sh + 9, 0), h16(y16, 2048);
      mt_add_s16_s16_s8(a16, b16, nbs[k], y8, 2048, wa, wb, cc, sh + 16, -1), h8(y8, 2048);
      mt_add_s16_s16_s16(a16, b16, nbs[k], y16, 2048, wa, wb, cc, sh + 9, 0), h16(y16, 2048);
    }
  h_end("add");
  /* exact ties of both signs (a 2^(s-1) with odd a, b 2^(s-2) in pairs), sums just below zero
   * (c = -1), the largest products (m = -2^31 times -2^15), zero points, s = 18 and s = 31 */
  h_begin();
  for (c = 0; c < 4; ++c) {
    const int sh = c % 2 ? 31 : 18, zy = c < 2 ? 0 : 3 - 2 * c;
    const int32_t ma = c == 3 ? INT32_MIN : (int32_t)(1u << (sh - 1)), mb = c == 3 ? INT32_MIN : (int32_t)(1u << (sh - 2));
    for (k = -1; k <= 1; ++k) {
      mt_add_s16_s16_s16(a16, b16, 2048, y16, 2048, ma, mb, k, sh, zy * 100), h16(y16, 2048);
      mt_add_s16_s8_s16(a16, b8, 2048, y16, 2048, ma, mb, k, sh, zy), h16(y16, 2048);
      mt_add_s8_s16_s8(a8, b16, 2048, y8, 2048, ma, mb, k, sh, zy), h8(y8, 2048);
      mt_add_s16_s16_s8(a16, b16, 2048, y8, 2048, ma >> 8, mb >> 8, k, sh, zy), h8(y8, 2048);
    }
  }
  for (k = 0; k < 2048; ++k) a16[k] = (int16_t)(k % 2 ? -32768 : k % 7 - 3), b16[k] = (int16_t)(k % 3 ? -32768 : k % 5 - 2);
  mt_add_s16_s16_s16(a16, b16, 2048, y16, 2048, INT32_MIN, INT32_MIN, -1, 31, 0), h16(y16, 2048);
  mt_add_s16_s16_s16(a16, b16, 2048, y16, 2048, 1 << 17, -(1 << 17), 0, 18, 0), h16(y16, 2048);
  mt_add_s16_s16_s16(a16, b16, 2048, y16, 2048, 1 << 17, 1 << 16, -1, 18, -7), h16(y16, 2048);
  fill16(a16, 2048, -32768, 32767);
  fill16(b16, 2048, -32768, 32767);
  h_end("add ties");
  h_begin();
  for (k = 0; k < 4; ++k)
    for (c = -3; c <= 33; c += 4) { /* draws in declarations: C leaves the order of arguments open */
      const int32_t m = rnd_m(), za = rnd(-128, 127), zb = rnd(-128, 127), zy = rnd(-128, 127);
      mt_mul_s16(a16, b16, nbs[k], y16, 2048, 0, 0, m, c, 0), h16(y16, 2048);
      mt_mul_s8(a8, b8, nbs[k], y8, 2048, za, zb, m, c / 2, zy), h8(y8, 2048);
    }
  mt_mul_s16(a16, b16, 7, a16, 2048, 0, 0, 0, 15, 0), h16(a16, 2048); /* in place */
  h_end("mul");
  fill16(a16, 2048, -32768, 32767);
  h_begin();
  for (c = 0; c < 2; ++c) {
    const int32_t m = rnd_m(), zx = rnd(-128, 127), zy = rnd(-128, 127);
    mt_requant_s8_s8(a8, y8, 2048, zx, m, 2, zy, c), h8(y8, 2048);
    mt_requant_s8_s16(a8, y16, 2048, zx, m, -6, 0, c), h16(y16, 2048);
    mt_requant_s16_s8(a16, y8, 2048, 0, m, 9, zy, c), h8(y8, 2048);
    mt_requant_s16_s16(a16, y16, 2048, 0, -m, 1, 0, c), h16(y16, 2048);
  }
  for (c = 0; c < 256; ++c) b8[c] = (int8_t)(lcg() >> 24), b16[c] = (int16_t)(lcg() >> 16);
  mt_lut_s8_s8(a8, y8, 2048, b8), h8(y8, 2048);
  mt_lut_s8_s16(a8, y16, 2048, b16), h16(y16, 2048);
  h_end("requant lut");
  /* the Armv7E-M loop of the usual format (shifts 2 to 31, m != 0, |y_zero| <= 2^15) and its
   * edges: shifts 1, 2, 3, 16, 31 and 32; both signs of m, INT32_MIN, 2^30 (ties at every
   * eighth x for s = 2), 0; zero points +-2^15 (inside) and +-(2^15 + 1) (the general loop),
   * and x's zero point; relu; inputs over the whole range with their limits */
  fill16(a16, 2048, -32768, 32767);
  a16[0] = -32768, a16[1] = 32767, a16[2] = 0, a16[3] = -1, a16[4] = 4, a16[5] = -4, a16[6] = 12, a16[7] = -12;
  fill8(a8, 2048, -128, 127);
  a8[0] = -128, a8[1] = 127, a8[2] = 0;
  h_begin();
  {
    static const int sh[6] = {1, 2, 3, 16, 31, 32};
    static const int32_t zs[5] = {0, 32768, -32768, 32769, -32769};
    int f, z;
    for (f = 0; f < 6; ++f)
      for (z = 0; z < 5; ++z)
        for (c = 0; c < 2; ++c) {
          const int32_t r1 = rnd_m() | 1, r2 = -(rnd_m() | 1); /* one draw per declaration */
          const int32_t ms[5] = {1073741824, r1, r2, INT32_MIN, 0};
          const int32_t m = ms[(f + z + c) % 5], zy = zs[z] + (z == 0 ? rnd(-128, 127) : 0);
          mt_requant_s16_s8(a16, y8, 2048, 0, m, sh[f], zy, c), h8(y8, 2048);
          mt_requant_s16_s8(a16, y8, 2048, rnd(-300, 300), (int32_t)(0u - (uint32_t)m), sh[f], zy, c), h8(y8, 2048);
          mt_requant_s16_s16(a16, y16, 2048, 0, m, sh[f], zy, c), h16(y16, 2048);
          mt_requant_s8_s8(a8, y8, 2048, rnd(-128, 127), m, sh[f], zy, c), h8(y8, 2048);
          mt_requant_s8_s16(a8, y16, 2048, 0, m, sh[f] - 8, zy, c), h16(y16, 2048);
        }
  }
  h_end("requant usual format");
  /* the Armv7E-M loop of a widening by a power of two (m = 0, -14 <= s <= 0, |x_zero| and
   * |y_zero| <= 2^15) and its edges: shifts 1, 0, -1, -8, -14 and -15, zero points +-2^15
   * (inside) and +-(2^15 + 1) (the general loop) on x and on y, relu, saturation at both ends */
  h_begin();
  {
    static const int sh[6] = {1, 0, -1, -8, -14, -15};
    static const int32_t zs[5] = {0, 32768, -32768, 32769, -32769};
    int f, z;
    for (f = 0; f < 6; ++f)
      for (z = 0; z < 5; ++z)
        for (c = 0; c < 2; ++c) {
          const int32_t zx = zs[(z + c) % 5], zy = zs[z] + (z == 0 ? rnd(-128, 127) : 0);
          mt_requant_s8_s16(a8, y16, 2048, zx, 0, sh[f], zy, c), h16(y16, 2048);
          mt_requant_s8_s8(a8, y8, 2048, rnd(-128, 127), 0, sh[f], zy, c), h8(y8, 2048);
          mt_requant_s16_s16(a16, y16, 2048, zx, 0, sh[f], zy, c), h16(y16, 2048);
          mt_requant_s16_s8(a16, y8, 2048, zx, 0, sh[f], zy, c), h8(y8, 2048);
        }
  }
  h_end("requant widening");
}

static void activations(void) {
  /* the table argument |x| scale_x in Q20 for scales 2^-15, 2^-12, 2^-8, 1.7e-4, 2^-3 */
  static const int32_t in_m[] = {0, 0, 0, 1531911391, 0};
  static const int in_s[] = {-5, -8, -12, -9, -17};
  int c, base;
  for (c = 0; c < 5; ++c) {
    char name[40];
    const int32_t om = rnd_m();
    h_begin();
    for (base = -32768; base < 32768; base += 2048) { /* every int16 input */
      int i;
      for (i = 0; i < 2048; ++i) a16[i] = (int16_t)(base + i);
      mt_tanh_s16_s16(a16, y16, 2048, in_m[c], in_s[c], om, 5, 0), h16(y16, 2048);
      mt_tanh_s16_s8(a16, y8, 2048, in_m[c], in_s[c], om, 13, 0), h8(y8, 2048);
      mt_sigmoid_s16_s16(a16, y16, 2048, in_m[c], in_s[c], om, 6, 0), h16(y16, 2048);
      mt_sigmoid_s16_s8(a16, y8, 2048, in_m[c], in_s[c], om, 14, -128), h8(y8, 2048);
      mt_gelu_s16_s16(a16, y16, 2048, in_m[c], in_s[c], om, 16, 0), h16(y16, 2048);
      mt_gelu_s16_s8(a16, y8, 2048, in_m[c], in_s[c], om, 24, -100), h8(y8, 2048);
    }
    sprintf(name, "tanh sigmoid gelu %d", c);
    h_end(name);
  }
}

static void softmax(void) {
  int t;
  h_begin();
  for (t = 0; t < 40; ++t) {
    int n = 1 + (t * 37) % 200, spread = 64 << (t % 8);
    const int32_t m = (int32_t)((1u << 30) | (lcg() >> 2));
    fill16(a16, 3 * n, -spread, spread);
    mt_softmax_s16_s16(a16, y16, 3, n, m, 8 + t % 6, 15, 0), h16(y16, 3 * n);
    mt_softmax_s16_s8(a16, y8, 3, n, m, 8 + t % 6, 8, -128), h8(y8, 3 * n);
    /* ratios of 1/2 and more (s in [-30, 0]: logits at 2^-15 or coarser), exponents that
     * saturate int32 */
    mt_softmax_s16_s16(a16, y16, 3, n, m, -((t * 7) % 31), 15, 0), h16(y16, 3 * n);
    mt_softmax_s16_s8(a16, y8, 3, n, m, -((t * 11) % 31), 8, -128), h8(y8, 3 * n);
    fill8(a8, 3 * n, -128, 127);
    mt_softmax_s8_s8(a8, y8, 3, n, m, t % 6, 7, 0), h8(y8, 3 * n);
    mt_softmax_s8_s16(a8, y16, 3, n, m, t % 6, 15, 0), h16(y16, 3 * n);
  }
  /* extremes: full range, constant rows */
  a16[0] = -32768, a16[1] = 32767, a16[2] = 32767, a16[3] = 0;
  mt_softmax_s16_s16(a16, y16, 1, 4, 0, -16, 15, 0), h16(y16, 4);
  mt_softmax_s16_s16(a16, y16, 1, 4, 0, 0, 15, 0), h16(y16, 4);
  mt_softmax_s16_s16(a16, y16, 1, 4, INT32_MAX, -30, 15, 0), h16(y16, 4);
  mt_softmax_s16_s16(a16, y16, 1, 4, 1 << 30, 0, 15, 0), h16(y16, 4);
  a16[1] = -32767;
  mt_softmax_s16_s16(a16, y16, 1, 4, 1 << 30, -15, 15, 0), h16(y16, 4);
  h_end("softmax");
}

static void layernorm(void) {
  int t;
  static int32_t g[256], be[256];
  fill32(g, 256);
  fill32(be, 256);
  for (t = 0; t < 256; ++t) g[t] /= 4, be[t] /= 4;
  h_begin();
  for (t = 0; t < 24; ++t) {
    int n = 2 + (t * 29) % 255;
    int32_t center = rnd(-20000, 20000), spread = 1 + (int32_t)(1u << (t % 14));
    int i;
    for (i = 0; i < 2 * n; ++i) {
      int32_t v = center + rnd(-spread, spread);
      a16[i] = (int16_t)(v > 32767 ? 32767 : (v < -32768 ? -32768 : v));
    }
    mt_layernorm_s16_s16(a16, y16, 2, n, 21475, 31 - t % 5, g, 40, be, 30, 0), h16(y16, 2 * n);
    mt_layernorm_s16_s8(a16, y8, 2, n, 21475, 31, g, 45, be, 40, -7), h8(y8, 2 * n);
    fill8(a8, 2 * n, -128, 127);
    mt_layernorm_s8_s8(a8, y8, 2, n, 1, 10, g, 46, be, 40, 3), h8(y8, 2 * n);
    mt_layernorm_s8_s16(a8, y16, 2, n, 1, 10, g, 40, be, 30, 0), h16(y16, 2 * n);
  }
  for (t = 0; t < 64; ++t) a16[t] = 1234;
  mt_layernorm_s16_s16(a16, y16, 1, 64, 0, 0, g, 40, be, 30, 0), h16(y16, 64); /* var = 0 */
  /* rows at the ends of the range, constant and alternating (the Armv7E-M sum of squares from
   * the one pass's sums: large terms that cancel) */
  for (t = 0; t < 256; ++t) {
    a16[t] = 32767, a16[256 + t] = (int16_t)(t % 2 ? -32768 : 32767);
    a8[t] = -128, a8[256 + t] = (int8_t)(t % 2 ? 127 : -128);
  }
  mt_layernorm_s16_s16(a16, y16, 2, 256, 21475, 31, g, 40, be, 30, 0), h16(y16, 512);
  mt_layernorm_s16_s8(a16 + 1, y8, 2, 255, 21475, 31, g, 45, be, 40, -7), h8(y8, 510);
  mt_layernorm_s8_s8(a8, y8, 2, 256, 1, 10, g, 46, be, 40, 3), h8(y8, 512);
  mt_layernorm_s8_s16(a8 + 1, y16, 2, 255, 1, 10, g, 40, be, 30, 0), h16(y16, 510);
  /* the edges of the Armv7E-M row variant: exact ties of both signs (g = 0, b 2^30 at g_shift
   * 32: b / 4), ties moved by xhat's sign (g = +-1), zero points, g_shift 61, and b_shift 1
   * at g_shift 32 or 31 (both the reference's) */
  for (t = 0; t < 256; ++t) g[t] = t % 3 == 0 ? 0 : (t % 3 == 1 ? 1 : -1), be[t] = t % 11 - 5;
  for (t = 0; t < 4; ++t) {
    const int n = 16 << t;
    fill16(a16, 2 * n, -3000, 3000);
    fill8(a8, 2 * n, -128, 127);
    mt_layernorm_s16_s16(a16, y16, 2, n, 21475, 31, g, 32, be, 2, t - 2), h16(y16, 2 * n);
    mt_layernorm_s16_s8(a16, y8, 2, n, 21475, 31, g, 32, be, 2, 1 - t), h8(y8, 2 * n);
    mt_layernorm_s16_s16(a16, y16, 2, n, 21475, 31, g, 32, be, 1, 0), h16(y16, 2 * n);
    mt_layernorm_s16_s16(a16, y16, 2, n, 21475, 31, g, 31, be, 1, 0), h16(y16, 2 * n);
    mt_layernorm_s8_s16(a8, y16, 2, n, 1, 10, g, 61, be, 31, 0), h16(y16, 2 * n);
  }
  h_end("layernorm");
}

static void sum_argmax(void) {
  static int32_t idx[64];
  static const int ns[] = {1, 3, 10, 33, 100};
  int c, s, i;
  h_begin();
  for (c = 0; c < 5; ++c) {
    fill16(a16, 4 * ns[c] * 7, -32768, 32767);
    fill8(a8, 4 * ns[c] * 7, -128, 127);
    for (s = -3; s <= 18; s += 3) {
      const int32_t m = rnd_m(), zx = rnd(-128, 127), zy = rnd(-128, 127);
      mt_sum_s16_s16(a16, y16, 4, ns[c], 7, 0, m, s, 0), h16(y16, 28);
      mt_sum_s16_s8(a16, y8, 4, ns[c], 7, 0, m, s + 8, 9), h8(y8, 28);
      mt_sum_s8_s8(a8, y8, 4, ns[c], 7, zx, m, s, zy), h8(y8, 28);
      mt_sum_s8_s16(a8, y16, 4, ns[c], 7, zx, m, s - 8, 0), h16(y16, 28);
    }
    mt_argmax_s16(a16, idx, 4, ns[c] * 7), h32(idx, 4);
    mt_argmax_s8(a8, idx, 4, ns[c] * 7), h32(idx, 4);
  }
  for (i = 0; i < 4096; ++i) a16[i] = -32768, a8[i] = -128;
  mt_sum_s16_s16(a16, y16, 1, 4096, 1, 0, 0, 12, 0), h16(y16, 1); /* -2^27 >> 12 */
  mt_sum_s16_s16(a16, y16, 2, 2048, 1, 0, 0, 0, 0), h16(y16, 2);  /* saturates */
  mt_sum_s8_s8(a8, y8, 1, 4096, 1, 0, 0, 12, 0), h8(y8, 1);
  h_end("sum argmax");
}

/* One case of the logit-format runs below: L = 6 queries, S = 70 keys (several blocks of keys,
 * an odd last one), k at stride 17 and v at stride vs, the logit format lm = {m, s}; the
 * output's shift 46 + out_s[f] (64, 33, 63, 32: both sides of the 32-bit normaliser's
 * range), output multiplier 0 for f = 7; causal for f % 3 == 1 (the caller masks f % 3 == 2). */
static void attn_format(int32_t *p, int D, int Dv, int vs, const int32_t *lm, int f) {
  static const int32_t out_s[8] = {18, 0, -13, 0, 17, 0, -14, 0};
  int i;
  for (i = 0; i < MT_ATTN_PARAMS; ++i) p[i] = 0;
  p[MT_ATTN_L] = 6, p[MT_ATTN_S] = 70, p[MT_ATTN_D] = D, p[MT_ATTN_DV] = Dv;
  p[MT_ATTN_K_STRIDE] = 17, p[MT_ATTN_V_STRIDE] = vs;
  p[MT_ATTN_LOGIT_M] = lm[0], p[MT_ATTN_LOGIT_S] = lm[1];
  p[MT_ATTN_OUT_M] = f == 7 ? 0 : 1431655765, p[MT_ATTN_OUT_S] = out_s[f];
  p[MT_ATTN_FLAGS] = f % 3 == 1 ? MT_ATTN_CAUSAL : 0;
}

static void attention(void) {
  static const struct {
    int L, S, D, Dv, mask;
  } cfg[] = {{16, 16, 16, 16, 0}, {16, 16, 16, 16, 1}, {12, 20, 8, 12, 2}, {12, 12, 8, 8, 3},
             /* the unrolled head dimensions over several blocks of keys, an odd last one */
             {16, 70, 4, 4, 0}, {10, 69, 8, 8, 2}, {12, 40, 32, 32, 1},
             /* mask & 4: q, k over the whole int16 range, logits spread widely (most keys of a
              * small weight: the RISC-V variant's sums of eight keys in one word) */
             {8, 96, 16, 16, 4}, {6, 100, 16, 16, 7}};
  int32_t p[MT_ATTN_PARAMS];
  int c, i;
  for (i = 0; i < (int)sizeof keep; ++i) keep[i] = (uint8_t)(lcg() >> 24);
  for (i = 0; i < 4; ++i) keep[i] = 0; /* query 0 fully masked where the bit mask is used */
  for (c = 0; c < (int)(sizeof cfg / sizeof cfg[0]); ++c) {
    const int L = cfg[c].L, S = cfg[c].S, D = cfg[c].D, Dv = cfg[c].Dv;
    const uint8_t *k = (cfg[c].mask & 2) ? keep : 0;
    char name[48];
    for (i = 0; i < MT_ATTN_PARAMS; ++i) p[i] = 0;
    p[MT_ATTN_L] = L, p[MT_ATTN_S] = S, p[MT_ATTN_D] = D, p[MT_ATTN_DV] = Dv;
    p[MT_ATTN_FLAGS] = (cfg[c].mask & 1) ? MT_ATTN_CAUSAL : 0;
    /* q, k at 2^-13, 1/sqrt(D) * log2(e) * 2^16: 2^-26 * 0.36067 * 2^16 (D = 16) */
    p[MT_ATTN_LOGIT_M] = 1548970010, p[MT_ATTN_LOGIT_S] = 11 + (D == 16 ? 0 : -1);
    p[MT_ATTN_OUT_M] = rnd_m(), p[MT_ATTN_OUT_S] = 0;
    h_begin();
    fill16(a16, L * D, (cfg[c].mask & 4) ? -32767 : -12000, (cfg[c].mask & 4) ? 32767 : 12000); /* q */
    fill16(b16, S * D, (cfg[c].mask & 4) ? -32767 : -12000, (cfg[c].mask & 4) ? 32767 : 12000); /* k */
    fill16(y16 + 2048, S * Dv, -32768, 32767); /* v */
    mt_attention_stream_s16(p, k, a16, b16, y16 + 2048, y16, acc64), h16(y16, L * Dv);
    mt_attention_twopass_s16(p, k, a16, b16, y16 + 2048, y16, scores), h16(y16, L * Dv);
    p[MT_ATTN_LOGIT_S] -= 16; /* q, k at 2^-5 */
    fill8(a8, L * D, -128, 127);
    fill8(b8, S * D, -128, 127);
    fill8(y8 + 2048, S * Dv, -128, 127);
    mt_attention_stream_s8(p, k, a8, b8, y8 + 2048, y8, acc32), h8(y8, L * Dv);
    mt_attention_twopass_s8(p, k, a8, b8, y8 + 2048, y8, scores), h8(y8, L * Dv);
    sprintf(name, "attention L%d S%d D%d mask%d", L, S, D, cfg[c].mask);
    h_end(name);
  }
  /* int8 with S > 256 (guard bits), bit mask */
  for (i = 0; i < MT_ATTN_PARAMS; ++i) p[i] = 0;
  p[MT_ATTN_L] = 8, p[MT_ATTN_S] = 300, p[MT_ATTN_D] = 8, p[MT_ATTN_DV] = 8;
  p[MT_ATTN_LOGIT_M] = 1548970010, p[MT_ATTN_LOGIT_S] = -6, p[MT_ATTN_OUT_S] = 0;
  fill8(a8, 8 * 8, -128, 127);
  fill8(b8, 300 * 8, -128, 127);
  fill8(y8 + 1024, 300 * 8, -128, 127);
  h_begin();
  mt_attention_stream_s8(p, keep, a8, b8, y8 + 1024, y8, acc32), h8(y8, 64);
  mt_attention_twopass_s8(p, keep, a8, b8, y8 + 1024, y8, scores), h8(y8, 64);
  h_end("attention s8 S300");
  /* int16 logit formats: full-range q, k (scores beyond int32), D odd and 2 mod 4, several
   * blocks of keys (an odd last one), read through strides; logit shifts inside and outside
   * [1, 31], both signs of m, m = 0; no mask, causal, bit mask; and q, k within +-400, where
   * the small shifts give logits a few units apart (one unit off changes some outputs); the
   * output formats of attn_format; head dim 16 at k's stride 17 and at 18 (word-aligned rows: the
   * usual case, mt_attn_logits16s_s16, which takes only shifts in [2, 31]) */
  {
    static const int32_t lm[][2] = {{1548970010, 11}, {-1548970010, 9}, {1073741824, 1}, {2147483647, 2},
                                    {1548970010, 31}, {1548970010, 0}, {1548970010, 40}, {0, 20}};
    static const int dv[][2] = {{7, 5}, {10, 10}, {16, 3}, {16, 3}};
    int f, r;
    h_begin();
    for (r = 0; r < 2; ++r) {
      fill16(a16, 6 * 16, r ? -400 : -32768, r ? 400 : 32767);
      fill16(b16, 70 * 18, r ? -400 : -32768, r ? 400 : 32767);
      fill16(y16 + 2048, 70 * 11, -32768, 32767);
      for (c = 0; c < 4; ++c)
        for (f = 0; f < 8; ++f) {
          attn_format(p, dv[c][0], dv[c][1], 11, lm[f], f);
          if (c == 3) p[MT_ATTN_K_STRIDE] = 18;
          mt_attention_stream_s16(p, f % 3 == 2 ? keep : 0, a16, b16, y16 + 2048, y16, acc64), h16(y16, 6 * dv[c][1]);
        }
    }
    h_end("attention s16 formats");
  }
  /* int8 logit formats: the same shapes (D odd and 2 mod 4, Dv odd, an odd last key, several
   * blocks of keys, strides); logit shifts for the one-SMLAL logit (s <= 1) and beyond it, both
   * signs of m, m = 0; no mask, causal, bit mask; q, k full range or within +-3, where many
   * logits tie with the max (weight 1, beyond SMLAD's halfwords); the output formats of
   * attn_format */
  {
    static const int32_t lm[][2] = {{1548970010, -5}, {-1548970010, -7}, {1073741824, 1}, {2147483647, -20},
                                    {1548970010, 2}, {1548970010, 12}, {1548970010, -30}, {0, -6}};
    static const int dv[][2] = {{7, 5}, {10, 10}, {16, 3}, {16, 16}};
    int f, r;
    h_begin();
    for (r = 0; r < 2; ++r) {
      fill8(a8, 6 * 16, r ? -3 : -128, r ? 3 : 127);
      fill8(b8, 70 * 17, r ? -3 : -128, r ? 3 : 127);
      fill8(y8 + 2048, 70 * 17, -128, 127);
      for (c = 0; c < 4; ++c)
        for (f = 0; f < 8; ++f) {
          attn_format(p, dv[c][0], dv[c][1], 17, lm[f], f);
          mt_attention_stream_s8(p, f % 3 == 2 ? keep : 0, a8, b8, y8 + 2048, y8, acc32), h8(y8, 6 * dv[c][1]);
        }
    }
    h_end("attention s8 formats");
  }
  /* int8 head dims 4 and 8 (one key per pass with q's lanes times 2^k, k = 1 - s): shifts 1, 0,
   * -7, -8 (k = 0, 1, 8, 9: k = 9 takes the two-key loop), both signs of m; q, k over the whole
   * range, all at -128 (q 2^8 = -2^15 in a lane: the largest score), and within +-3 (ties with
   * the max); keys contiguous (stride D, word-aligned rows) and at stride 17; one key and 70
   * (two blocks, an odd last one) */
  {
    static const int32_t lm[][2] = {{1548970010, 1}, {-1548970010, 0}, {1073741824, -7}, {2147483647, -8},
                                    {-1548970010, -7}, {1548970010, -3}};
    static const int dims[2] = {4, 8}, keys[2] = {1, 70};
    int f, r, d, sk, st;
    h_begin();
    for (r = 0; r < 3; ++r) {
      if (r == 1) {
        for (i = 0; i < 6 * 8; ++i) a8[i] = -128;
        for (i = 0; i < 70 * 17; ++i) b8[i] = -128;
      } else {
        fill8(a8, 6 * 8, r ? -3 : -128, r ? 3 : 127);
        fill8(b8, 70 * 17, r ? -3 : -128, r ? 3 : 127);
      }
      fill8(y8 + 2048, 70 * 17, -128, 127);
      for (d = 0; d < 2; ++d)
        for (sk = 0; sk < 2; ++sk)
          for (st = 0; st < 2; ++st)
            for (f = 0; f < 6; ++f) {
              attn_format(p, dims[d], dims[d], 17, lm[f], f);
              p[MT_ATTN_S] = keys[sk], p[MT_ATTN_K_STRIDE] = st ? 17 : dims[d];
              mt_attention_stream_s8(p, f % 3 == 2 ? keep : 0, a8, b8, y8 + 2048, y8, acc32), h8(y8, 6 * dims[d]);
            }
    }
    h_end("attention s8 head dims 4 8");
  }
  /* extremes: saturated logits, in place (out = q) */
  for (i = 0; i < MT_ATTN_PARAMS; ++i) p[i] = 0;
  p[MT_ATTN_L] = 12, p[MT_ATTN_S] = 12, p[MT_ATTN_D] = 8, p[MT_ATTN_DV] = 8, p[MT_ATTN_FLAGS] = MT_ATTN_CAUSAL;
  p[MT_ATTN_LOGIT_M] = 0, p[MT_ATTN_LOGIT_S] = -10;
  for (i = 0; i < 96; ++i) a16[i] = (int16_t)(i % 2 ? -32768 : 32767), b16[i] = a16[i];
  fill16(y16 + 2048, 96, -32768, 32767);
  h_begin();
  mt_attention_stream_s16(p, 0, a16, b16, y16 + 2048, a16, acc64), h16(a16, 96);
  for (i = 0; i < 96; ++i) a8[i] = -128, b8[i] = -128;
  mt_attention_stream_s8(p, 0, a8, b8, y8 + 2048, a8, acc32), h8(a8, 96);
  /* int16 scores of pairs (-2^15)(-2^15) + (-2^15)(-2^15) = 2^31 (the portable sum's pairs at
   * their end), keys a few units apart, v = -2^15 at weight 1 (products of -2^31) */
  p[MT_ATTN_LOGIT_M] = 1548970010, p[MT_ATTN_LOGIT_S] = 12;
  for (i = 0; i < 96; ++i)
    a16[i] = -32768, b16[i] = (int16_t)(i % 8 < (i / 8) % 9 ? -32768 : 32767), y16[2048 + i] = -32768;
  mt_attention_stream_s16(p, 0, a16, b16, y16 + 2048, y16, acc64), h16(y16, 96);
  h_end("attention extremes");
  /* one unit of a logit (2^-16) seen at the output: two keys with opposite v rows (out ~
   * w0 - w1 at full scale), 64 queries each, scores within int32 of both signs; logit shifts 1
   * (c_lo = 2^31), 2 (the rounding's high word shifted by one) and 11, head dims 16 and 4 */
  h_begin();
  for (c = 0; c < 7; ++c) {
    static const int32_t ms[7][4] = {{16, -1548970010, 2, 60},  {4, -1548970010, 2, 60}, {16, 1548970010, 11, 12000},
                                     {4, 1548970010, 11, 12000}, {16, 1548970010, 1, 60}, {16, -1548970010, 1, 60},
                                     {4, 1073741824, 1, 600}};
    const int D = ms[c][0], x = ms[c][3];
    for (i = 0; i < MT_ATTN_PARAMS; ++i) p[i] = 0;
    p[MT_ATTN_L] = 64, p[MT_ATTN_S] = 2, p[MT_ATTN_D] = D, p[MT_ATTN_DV] = 1;
    p[MT_ATTN_LOGIT_M] = ms[c][1], p[MT_ATTN_LOGIT_S] = ms[c][2];
    fill16(a16, 64 * D, -x, x), fill16(b16, 2 * D, -x, x);
    y16[2048] = 32767, y16[2049] = -32768;
    mt_attention_stream_s16(p, 0, a16, b16, y16 + 2048, y16, acc64), h16(y16, 64);
  }
  h_end("attention logit units");
  /* int16 scores beyond int32 (full-range q and k, head dim 16: |q . k| up to 2^34) among
   * narrow ones, both signs of the multiplier; then keys at a stride of 48 (a lowered MHA's
   * projection) over two blocks, whose first 9 or 40 rows are narrow: scores within int32 up
   * to a key whose sum overflows, then all kinds (the int32-score loop and its way out) */
  h_begin();
  for (c = 0; c < 4; ++c) {
    const int S = c < 2 ? 40 : 70, ks = c < 2 ? 16 : 48;
    for (i = 0; i < MT_ATTN_PARAMS; ++i) p[i] = 0;
    p[MT_ATTN_L] = 6, p[MT_ATTN_S] = S, p[MT_ATTN_D] = 16, p[MT_ATTN_DV] = 4, p[MT_ATTN_K_STRIDE] = ks;
    p[MT_ATTN_LOGIT_M] = c & 1 ? -1548970010 : 1548970010, p[MT_ATTN_LOGIT_S] = 21;
    p[MT_ATTN_OUT_M] = rnd_m();
    fill16(a16, 6 * 16, -32768, 32767), fill16(b16, S * ks, -32768, 32767);
    if (c < 2)
      for (i = 0; i < 40 * 16; i += 48) b16[i] = b16[i + 1] = 0; /* some rows narrower */
    else
      fill16(b16, (c == 2 ? 9 : 40) * ks, -3000, 3000);
    fill16(y16 + 2048, S * 4, -32768, 32767);
    mt_attention_stream_s16(p, 0, a16, b16, y16 + 2048, y16, acc64), h16(y16, 24);
  }
  h_end("attention s16 wide scores");
  /* int16 v within +-V below 2^15 (the RISC-V sums take keys whose weights add up to
   * floor((2^31 - 1) / V)): equal logits (q = 0: every weight 2^16) with v = +-V at the bound
   * (V = 16383: two keys in one word, |sum| = 2^31 - 2^17; 16384: not), then spread logits
   * (q, k within +-400 and +-3000: sum |q| max |k| below 2^31, no check per key) with v within
   * +-V for several V; head dims 16, 8 and 4 */
  h_begin();
  for (c = 0; c < 12; ++c) {
    static const int vmax[4] = {16383, 16384, 3000, 21000};
    static const int dims[3] = {16, 8, 4};
    const int D = dims[c % 3], V = vmax[c / 3], S = 72;
    for (i = 0; i < MT_ATTN_PARAMS; ++i) p[i] = 0;
    p[MT_ATTN_L] = 6, p[MT_ATTN_S] = S, p[MT_ATTN_D] = D, p[MT_ATTN_DV] = D;
    p[MT_ATTN_LOGIT_M] = 1548970010, p[MT_ATTN_LOGIT_S] = 11 + (D == 16 ? 0 : -1);
    p[MT_ATTN_OUT_M] = rnd_m(), p[MT_ATTN_OUT_S] = 0;
    if (c < 6) {
      for (i = 0; i < 6 * D; ++i) a16[i] = 0;
      fill16(b16, S * D, -12000, 12000);
      for (i = 0; i < S * D; ++i) y16[2048 + i] = (int16_t)((lcg() >> 31) ? V : -V);
    } else {
      fill16(a16, 6 * D, -400, 400), fill16(b16, S * D, -3000, 3000);
      fill16(y16 + 2048, S * D, -V, V);
    }
    mt_attention_stream_s16(p, 0, a16, b16, y16 + 2048, y16, acc64), h16(y16, 6 * D);
  }
  h_end("attention s16 narrow v");
}

static void copy_embedding(void) {
  /* layouts: {ndim, shape, src strides, dst strides, src offset, dst offset} */
  static const struct {
    int nd;
    int32_t shape[MT_MAX_DIMS], ss[MT_MAX_DIMS], ds[MT_MAX_DIMS];
    int32_t so, dof;
  } cfg[] = {
      {2, {37, 53}, {1, 37}, {53, 1}, 0, 0},                               /* transpose */
      {4, {4, 2, 5, 3}, {5, 60, 1, 20}, {30, 15, 3, 1}, 0, 0},              /* permute (2,0,3,1) */
      {6, {2, 3, 2, 3, 2, 4}, {1, 2, 6, 12, 36, 72}, {144, 48, 24, 8, 4, 1}, 0, 0}, /* reverse */
      {3, {3, 4, 5}, {120, 20, 2}, {20, 5, 1}, 27, 0},                      /* slice, step 2 */
      {3, {4, 6, 8}, {8, 0, 1}, {48, 8, 1}, 0, 0},                          /* expand */
      {2, {5, 7}, {7, 1}, {19, 1}, 0, 6},                                   /* concat part */
      {2, {64, 30}, {30, 1}, {30, 1}, 0, 0},                                /* contiguous */
      {2, {6, 9}, {9, -1}, {9, 1}, 8, 0},                                   /* flip */
      {0, {1}, {1}, {1}, 0, 0},                                             /* ndim 0: no-op */
      {2, {3, 0}, {1, 1}, {1, 1}, 0, 0},                                    /* empty: no-op */
  };
  int c, i, bad;
  fill16(a16, 2048, -32768, 32767);
  fill8(a8, 2048, -128, 127);
  fill32(a32, 1024);
  h_begin();
  for (c = 0; c < (int)(sizeof cfg / sizeof cfg[0]); ++c) {
    for (i = 0; i < 2048; ++i) y16[i] = -1, y8[i] = -1, scores[i] = -1;
    mt_copy_strided_s16(a16 + cfg[c].so, y16 + cfg[c].dof, cfg[c].nd, cfg[c].shape, cfg[c].ss, cfg[c].ds);
    mt_copy_strided_s8(a8 + cfg[c].so, y8 + cfg[c].dof, cfg[c].nd, cfg[c].shape, cfg[c].ss, cfg[c].ds);
    h16(y16, 2048), h8(y8, 2048);
    if (c != 0 && c != 6) { /* the others read < 1024 elements: fit a32 */
      mt_copy_strided_s32(a32 + cfg[c].so, scores + cfg[c].dof, cfg[c].nd, cfg[c].shape, cfg[c].ss, cfg[c].ds);
      h32(scores, 2048);
    }
  }
  h_end("copy_strided");
  h_begin(); /* {planes, h, w, top, left, bottom, right, fill}: conv1d, conv2d, one side, none */
  {
    static const int32_t pad[][8] = {{16, 1, 64, 0, 1, 0, 1, -128}, {3, 7, 9, 2, 1, 1, 2, 5},
                                     {2, 5, 5, 0, 0, 3, 0, 127},    {4, 6, 6, 0, 0, 0, 0, -7},
                                     {2, 4, 4, 1, 1, 1, 1, 300}}; /* fill saturates to 127 */
    for (c = 0; c < (int)(sizeof pad / sizeof pad[0]); ++c) {
      for (i = 0; i < 2048; ++i) y8[i] = -1;
      mt_pad_s8(a8, y8, (int)pad[c][0], (int)pad[c][1], (int)pad[c][2], (int)pad[c][3], (int)pad[c][4],
                (int)pad[c][5], (int)pad[c][6], pad[c][7]);
      h8(y8, 2048);
    }
  }
  h_end("pad");
  h_begin(); /* table [200, 16]; 64 ids, some outside [0, 200) */
  fill16(a16, 200 * 16, -32768, 32767);
  fill8(a8, 200 * 16, -128, 127);
  for (i = 0; i < 64; ++i) a32[i] = rnd(-5, 204);
  a32[0] = INT32_MIN, a32[1] = INT32_MAX, a32[2] = 199, a32[3] = 200;
  bad = mt_embedding_s16(a32, 64, a16, 200, 16, y16), h16(y16, 64 * 16), h_u32((uint32_t)bad);
  bad = mt_embedding_s8(a32, 64, a8, 200, 16, y8), h8(y8, 64 * 16), h_u32((uint32_t)bad);
  h_end("embedding");
}

static void div_rows(void) {
  int c;
  h_begin(); /* x [64, 32], d [64] with zeros and powers of two */
  for (c = 0; c < 6; ++c) {
    const int32_t m = rnd_m();
    fill16(a16, 64 * 32, -32768, 32767);
    fill16(b16, 64, -32768, 32767);
    fill8(a8, 64 * 32, -128, 127);
    fill8(b8, 64, -128, 127);
    b16[0] = 0, b16[1] = 1, b16[2] = -1, b16[3] = -32768, b16[4] = 3, b16[5] = 4096;
    b8[0] = 0, b8[1] = 1, b8[2] = -1, b8[3] = -128, b8[4] = 3, b8[5] = 64;
    a16[0] = 0, a16[32] = 0, a8[0] = 0;
    mt_div_rows_s16(a16, b16, y16, 64, 32, m, 3 * c - 6), h16(y16, 64 * 32);
    mt_div_rows_s8(a8, b8, y8, 64, 32, m, 3 * c - 6), h8(y8, 64 * 32);
  }
  mt_div_rows_s16(a16, b16, a16, 64, 32, 0, 0), h16(a16, 64 * 32); /* in place */
  h_end("div_rows");
}

/* Convolutions (standard with stride and padding, depthwise, pointwise, dilated 2-D with groups)
 * and the poolings, every type combination of the convolution. */
static void conv(void) {
  static int32_t bias32[16], rq[32], rqf[32]; /* rqf: every channel the usual positive m, shift 6..12 */
  static int64_t bias64[16];
  static MT_WORD_ALIGNED int16_t col[8 * 48]; /* eight im2col columns of up to 48 taps (the DSP variant) */
  /* N CG H W OG KH KW OH OW SH SW PH PW DH DW GROUPS */
  static const int32_t stem[MT_CONV_FIELDS] = {2, 3, 1, 32, 16, 1, 5, 1, 16, 1, 2, 0, 2, 1, 1, 1};
  static const int32_t depthwise[MT_CONV_FIELDS] = {1, 1, 1, 16, 1, 1, 3, 1, 16, 1, 1, 0, 1, 1, 1, 16};
  static const int32_t pointwise[MT_CONV_FIELDS] = {1, 16, 1, 16, 12, 1, 1, 1, 16, 1, 1, 0, 0, 1, 1, 1};
  static const int32_t grouped[MT_CONV_FIELDS] = {1, 2, 7, 6, 3, 3, 2, 3, 7, 2, 1, 1, 1, 2, 1, 2};
  static const int32_t dw2d[MT_CONV_FIELDS] = {1, 1, 6, 5, 1, 3, 3, 3, 3, 2, 2, 1, 1, 1, 1, 8};
  static const int32_t dw3x3[MT_CONV_FIELDS] = {1, 1, 5, 7, 1, 3, 3, 5, 7, 1, 1, 1, 1, 1, 1, 8};
  /* the RISC-V variant's taps read in place: 1-D rows of stride 1 and 2 (padding at both ends, a
   * padding row, dilation, channels not a multiple of 4, odd lengths, 9 taps a row), pointwise
   * maps of 3 and 5 positions, 1-D depthwise rows of 2 and 5 */
  static const int32_t row1[MT_CONV_FIELDS] = {1, 3, 2, 13, 5, 1, 3, 2, 13, 1, 1, 0, 1, 1, 1, 1};
  static const int32_t row2[MT_CONV_FIELDS] = {2, 2, 3, 17, 6, 1, 3, 3, 8, 2, 2, 1, 1, 1, 2, 1};
  static const int32_t row9[MT_CONV_FIELDS] = {1, 2, 1, 40, 5, 1, 9, 1, 20, 1, 2, 0, 4, 1, 1, 1};
  static const int32_t pw3[MT_CONV_FIELDS] = {1, 5, 1, 3, 6, 1, 1, 1, 3, 1, 1, 0, 0, 1, 1, 1};
  static const int32_t pw5[MT_CONV_FIELDS] = {1, 9, 5, 1, 7, 1, 1, 5, 1, 1, 1, 0, 0, 1, 1, 1};
  static const int32_t dw1w2[MT_CONV_FIELDS] = {1, 1, 1, 2, 1, 1, 3, 1, 2, 1, 1, 0, 1, 1, 1, 3};
  static const int32_t dw1w5[MT_CONV_FIELDS] = {2, 1, 2, 5, 1, 1, 3, 2, 5, 1, 1, 0, 1, 1, 1, 4};
  static const int32_t *const geoms[] = {stem, depthwise, pointwise, grouped, dw2d, dw3x3, row1, row2, row9, pw3,
                                         pw5, dw1w2, dw1w5};
  /* PLANES H W OH OW KH KW SH SW PH PW MODE */
  static const int32_t pools[4][MT_POOL_FIELDS] = {{16, 1, 16, 1, 8, 1, 2, 1, 2, 0, 0, 0},
                                                   {6, 5, 6, 3, 4, 3, 2, 2, 2, 1, 1, 0},
                                                   {6, 5, 6, 3, 4, 3, 2, 2, 2, 1, 1, 1},
                                                   {6, 5, 6, 2, 4, 0, 0, 0, 0, 0, 0, 2}};
  int i;
  fill32(bias32, 16);
  for (i = 0; i < 16; ++i) bias32[i] /= 64, bias64[i] = (int64_t)bias32[i] * 8, rq[2 * i] = rnd_m(), rq[2 * i + 1] = rnd(6, 20);
  for (i = 0; i < 16; ++i) rqf[2 * i] = (int32_t)((1u << 30) | (lcg() >> 2)), rqf[2 * i + 1] = rnd(6, 12);
  fill16(a16, 2 * 3 * 32 + 16 * 16, -32768, 32767);
  fill16(b16, 16 * 16, -32768, 32767);
  fill8(a8, 2 * 3 * 32 + 16 * 16, -128, 127);
  fill8(b8, 16 * 16, -128, 127);
  h_begin();
  for (i = 0; i < (int)(sizeof geoms / sizeof geoms[0]); ++i) {
    const int32_t *g = geoms[i];
    const int n = g[MT_CONV_N] * g[MT_CONV_OG] * g[MT_CONV_GROUPS] * g[MT_CONV_OH] * g[MT_CONV_OW];
    mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, -3, -128, col), h8(y8, n);
    mt_conv_s8_s8_s8(a8, b8, 0, y8, g, rq, 0, 0, 0, col), h8(y8, n); /* per tensor, fused relu */
    /* the Armv7E-M variant's requantization: every channel fast, zero point, relu, odd channels and positions */
    mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rqf, 1, -3, -128, col), h8(y8, n);
    mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rqf, 1, 5, 5, col), h8(y8, n);
    mt_conv_s8_s8_s8(a8, b8, 0, y8, g, rqf, 0, 0, -128, col), h8(y8, n);
    mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rqf, 1, 0, -32768, col), h16(y16, n);
    mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rqf, 1, 0, 0, col), h16(y16, n);
    mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rq, 1, 0, -32768, col), h16(y16, n);
    mt_conv_s8_s16_s8(a8, b16, bias32, y8, g, rq, 1, 0, -128, col), h8(y8, n);
    mt_conv_s8_s16_s16(a8, b16, bias32, y16, g, rq, 1, 0, 0, col), h16(y16, n);
    mt_conv_s16_s8_s8(a16, b8, bias64, y8, g, rq, 1, 2, -128, col), h8(y8, n);
    mt_conv_s16_s8_s16(a16, b8, bias64, y16, g, rq, 1, 0, -32768, col), h16(y16, n);
    mt_conv_s16_s16_s8(a16, b16, bias64, y8, g, rq, 1, 0, -128, col), h8(y8, n);
    mt_conv_s16_s16_s16(a16, b16, bias64, y16, g, rq, 1, 0, -32768, col), h16(y16, n);
  }
  h_end("conv");
  h_begin();
  for (i = 0; i < 4; ++i) {
    const int32_t *g = pools[i];
    const int n = g[MT_POOL_PLANES] * g[MT_POOL_OH] * g[MT_POOL_OW];
    if (g[MT_POOL_MODE] == 0) mt_max_pool_s8(a8, y8, g), h8(y8, n), mt_max_pool_s16(a16, y16, g), h16(y16, n);
    mt_avg_pool_s8(a8, y8, g, -7), h8(y8, n);
    mt_avg_pool_s16(a16, y16, g, 0), h16(y16, n);
  }
  h_end("pool");
}

/* 'Same' 3 x 3 depthwise layers (stride, dilation and padding 1: the Armv7E-M variant's row
 * pass): widths 4 to 7 and the DS-CNN's 5 (a row's first words, pairs, last one or two
 * outputs), heights 3 to 25 (top, middle and bottom rows), one and two images, channel counts
 * 3 to 8; random, int8-extreme (-128 everywhere: the largest sums) and 127 inputs; per channel
 * and per tensor; a zero point, y_min at the type's minimum and above it (relu), int8 and int16
 * outputs; multipliers with many trailing zeros (a power of two: sums that can meet a rounding
 * tie, its exact requantization), shifts 1 (a rounding constant in the low word), 2 and 28,
 * and biases up to 2^30 - 1. */
static void conv_dw3s(void) {
  static int32_t bias32[8], rq[16];
  /* N CG H W OG KH KW OH OW SH SW PH PW DH DW GROUPS */
  static const int32_t geoms[6][MT_CONV_FIELDS] = {
      {2, 1, 3, 4, 1, 3, 3, 3, 4, 1, 1, 1, 1, 1, 1, 5}, {1, 1, 4, 5, 1, 3, 3, 4, 5, 1, 1, 1, 1, 1, 1, 8},
      {1, 1, 3, 6, 1, 3, 3, 3, 6, 1, 1, 1, 1, 1, 1, 3}, {2, 1, 5, 7, 1, 3, 3, 5, 7, 1, 1, 1, 1, 1, 1, 4},
      {1, 1, 25, 5, 1, 3, 3, 25, 5, 1, 1, 1, 1, 1, 1, 3}, {1, 1, 6, 9, 1, 3, 3, 6, 9, 1, 1, 1, 1, 1, 1, 7}};
  int i, c, k;
  h_begin();
  for (i = 0; i < 6; ++i) {
    const int32_t *g = geoms[i];
    const int n = g[MT_CONV_N] * g[MT_CONV_GROUPS] * g[MT_CONV_H] * g[MT_CONV_W];
    for (c = 0; c < 4; ++c) {
      fill8(b8, 9 * 8, -128, 127);
      fill32(bias32, 8);
      for (k = 0; k < 8; ++k) {
        bias32[k] /= 256;
        rq[2 * k] = (int32_t)((1u << 30) | (lcg() >> 2)), rq[2 * k + 1] = rnd(6, 12);
      }
      if (c == 0) fill8(a8, n, -128, 127);
      if (c == 1) /* extremes: -128 inputs and weights, the largest biases */
        for (k = 0; k < n; ++k) a8[k] = (int8_t)(k % 7 == 3 ? 127 : -128);
      if (c == 1)
        for (k = 0; k < 9 * 8; ++k) b8[k] = (int8_t)(k % 5 == 1 ? 127 : -128);
      if (c == 1) bias32[0] = (1 << 30) - 1, bias32[1] = -(1 << 30) + 1;
      if (c == 2) /* multipliers of many trailing zeros, shifts 1, 2 and 31 */
        rq[0] = 1 << 30, rq[1] = 12, rq[2] = 1 << 30, rq[3] = 1, rq[4] = (int32_t)((1u << 30) | (lcg() >> 2)),
        rq[5] = 1, rq[6] = 3 << 28, rq[7] = 2, rq[8] = (int32_t)((1u << 30) | (lcg() >> 2)), rq[9] = 28,
        rq[10] = 1 << 30, rq[11] = 2;
      if (c == 2) /* channel 5: every sum -4, a tie (-4 2^30 + 2^32 = 0), so y_zero - 1, not y_zero */
        for (k = 0; k < 9; ++k) b8[45 + k] = 0, bias32[5] = -4;
      if (c == 3) fill8(a8, n, 120, 127);
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, -3, -128, 0), h8(y8, n);
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, 5, 5, 0), h8(y8, n); /* relu above the minimum */
      mt_conv_s8_s8_s8(a8, b8, 0, y8, g, rq + 2, 0, -128, -128, 0), h8(y8, n); /* per tensor */
      mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rq, 1, 7, -32768, 0), h16(y16, n);
      mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rq, 1, 0, 0, 0), h16(y16, n);
    }
  }
  h_end("conv dw3 same");
}

/* 'Same' 1-D depthwise layers of kernel 3 (stride and dilation 1, padding 1 along W, none along
 * H: the Armv7E-M variant's rows, mt_dw1s_*): lengths 1 to 9 (below 4: the reference; a row's
 * first word, the words of the assembly loop in odd and even numbers, the last word and the W %
 * 4 outputs after it) and 64, rows of 2-D maps (H 3, 1 x 3 kernels), one and two images;
 * random, int8-extreme (-128 and 127 inputs and weights, biases of 2^30 - 1) and 127 inputs;
 * per channel and per tensor; a zero point, y_min at the type's minimum and above it (relu),
 * int8 and int16 outputs; multipliers with trailing zeros (a power of two: a constructed
 * rounding tie, channel 5, its exact requantization) and shifts 1, 2, 6 to 12 and 28; the
 * packed path's edges (shifts 8, 9, 16, 17 and 18, sums bounded by 2^(14+s) - 1 and 2^(14+s)
 * with m = 2^30 + 1, the first passing only with the weights' bound, m = 2^31 - 1; |y_zero + 128|
 * 2^13 and 2^13 + 1, both signs); a channel that no variant takes (m = 0, m = -2^30, shift 0,
 * |b| = 2^30 on shift 6) after channels of the packed path, per channel and per tensor (the
 * variant leaves the layer to the portable loop); and the layers next to the path (stride 2,
 * no padding, dilation 2) that take the others. */
static void conv_dw1s(void) {
  static int32_t bias32[8], rq[16];
  /* N CG H W OG KH KW OH OW SH SW PH PW DH DW GROUPS */
  static const int32_t other[3][MT_CONV_FIELDS] = {{1, 1, 1, 9, 1, 1, 3, 1, 5, 1, 2, 0, 1, 1, 1, 6},
                                                   {2, 1, 1, 9, 1, 1, 3, 1, 7, 1, 1, 0, 0, 1, 1, 5},
                                                   {1, 1, 2, 8, 1, 1, 3, 2, 8, 1, 1, 0, 2, 1, 2, 4}};
  int32_t g[MT_CONV_FIELDS];
  int i, c, k;
  h_begin();
  for (i = 0; i < 14; ++i) {
    if (i < 11) { /* W = 1 .. 9, 64 (N 2 from 5 on, 8 channels), then H 3 W 13 */
      const int W = i < 9 ? i + 1 : i == 9 ? 64 : 13, H = i == 10 ? 3 : 1;
      const int32_t geom[MT_CONV_FIELDS] = {i >= 4 ? 2 : 1, 1, H, W, 1, 1, 3, H, W, 1, 1, 0, 1, 1, 1, 8};
      for (k = 0; k < MT_CONV_FIELDS; ++k) g[k] = geom[k];
    } else {
      for (k = 0; k < MT_CONV_FIELDS; ++k) g[k] = other[i - 11][k];
    }
    for (c = 0; c < 6; ++c) {
      const int n = g[MT_CONV_N] * g[MT_CONV_GROUPS] * g[MT_CONV_OH] * g[MT_CONV_OW];
      const int nx = g[MT_CONV_N] * g[MT_CONV_GROUPS] * g[MT_CONV_H] * g[MT_CONV_W];
      fill8(b8, 3 * 8, -128, 127);
      fill32(bias32, 8);
      for (k = 0; k < 8; ++k) {
        bias32[k] /= 256;
        rq[2 * k] = (int32_t)((1u << 30) | (lcg() >> 2)), rq[2 * k + 1] = rnd(6, 12);
      }
      if (c == 0) fill8(a8, nx, -128, 127);
      if (c == 1) /* extremes: -128 inputs and weights, the largest biases */
        for (k = 0; k < nx; ++k) a8[k] = (int8_t)(k % 7 == 3 ? 127 : -128);
      if (c == 1)
        for (k = 0; k < 3 * 8; ++k) b8[k] = (int8_t)(k % 5 == 1 ? 127 : -128);
      if (c == 1) bias32[0] = (1 << 30) - 1, bias32[1] = -(1 << 30) + 1;
      if (c == 2) /* multipliers of trailing zeros, shifts 1, 2 and 28 */
        rq[0] = 1 << 30, rq[1] = 12, rq[2] = 1 << 30, rq[3] = 1, rq[4] = (int32_t)((1u << 30) | (lcg() >> 2)),
        rq[5] = 1, rq[6] = 3 << 28, rq[7] = 2, rq[8] = (int32_t)((1u << 30) | (lcg() >> 2)), rq[9] = 28,
        rq[10] = 1 << 30, rq[11] = 2;
      if (c == 2) /* channel 5: every sum -4, a tie (-4 2^30 + 2^32 = 0), so y_zero - 1, not y_zero */
        b8[15] = b8[16] = b8[17] = 0, bias32[5] = -4;
      if (c == 3) fill8(a8, nx, 120, 127);
      if (c == 4) { /* the packed path's edges: shifts 8, 9 and 17, 18; bounds 2^(14+s) at and below */
        static const int32_t sh[8] = {8, 9, 9, 17, 18, 9, 16, 9};
        static const int32_t bs[8] = {0, (1 << 23) - 385, (1 << 23) - 384, 0, 0, -(1 << 23) + 385, 1 << 20, -(3 << 20)};
        for (k = 0; k < 8; ++k) rq[2 * k + 1] = sh[k], bias32[k] = bs[k];
        rq[2] = rq[4] = rq[10] = (1 << 30) + 1, rq[14] = 0x7fffffff; /* (3 2^7 + |b|)(2^30 + 1) vs 2^53 */
        for (k = 3; k < 6; ++k) b8[k] = (int8_t)(k == 4 ? -1 : 1), b8[k + 3] = (int8_t)(k == 4 ? -1 : 1);
        b8[15] = 1, b8[16] = -1, b8[17] = 1;
        mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, 8064, -128, 0), h8(y8, n); /* |y_zero + 128| = 2^13 */
        mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, 8065, -128, 0), h8(y8, n);
        mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, -8320, -128, 0), h8(y8, n);
        mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, -8321, -128, 0), h8(y8, n);
      }
      if (c == 5) { /* channel 6 not taken, channels 0 .. 5 on the packed path (shift 9); then channel 1 */
        static const int32_t m6[4] = {0, -(1 << 30), (1 << 30) + 7, (1 << 30) + 7}, s6[4] = {9, 9, 0, 6};
        for (k = 0; k < 8; ++k) rq[2 * k + 1] = 9, bias32[k] = 1000 * k - 3000;
        for (k = 0; k < 4; ++k) {
          rq[12] = m6[k], rq[13] = s6[k], bias32[6] = k == 3 ? 1 << 30 : 0;
          mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, -3, -128, 0), h8(y8, n);
        }
        rq[2] = -(1 << 30); /* (per tensor: rq + 2 below) */
      }
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, -3, -128, 0), h8(y8, n);
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, -128, -128, 0), h8(y8, n); /* relu at the minimum */
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, 5, 5, 0), h8(y8, n); /* relu above the minimum */
      mt_conv_s8_s8_s8(a8, b8, 0, y8, g, rq + 2, 0, -128, -128, 0), h8(y8, n); /* per tensor */
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq + 8, 0, 7, -128, 0), h8(y8, n); /* per tensor, a random m */
      mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rq, 1, 7, -32768, 0), h16(y16, n);
      mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rq, 1, 0, 0, 0), h16(y16, n);
    }
  }
  h_end("conv dw1 same");
}

/* The requantization of the Armv7E-M convolutions' four-column pass in one SMMLA (every channel
 * of the call free of rounding ties) or exactly (a multiplier of many trailing zeros, shift 1,
 * a tie): pointwise and standard layers of 3, 5, 8 and 12 taps (no block of four, an odd and
 * even number of them, a last tap), positions not a multiple of four (the last block moved
 * back) and fewer than four (3 and 1), relu above the type's minimum. */
static void conv_rq_paths(void) {
  static int32_t bias32[8], rq[16];
  static MT_WORD_ALIGNED int16_t col[8 * 16];
  /* N CG H W OG KH KW OH OW SH SW PH PW DH DW GROUPS */
  static const int32_t geoms[5][MT_CONV_FIELDS] = {{1, 5, 3, 5, 7, 1, 1, 3, 5, 1, 1, 0, 0, 1, 1, 1},
                                                   {2, 8, 2, 3, 6, 1, 1, 2, 3, 1, 1, 0, 0, 1, 1, 1},
                                                   {1, 2, 4, 5, 8, 3, 2, 2, 3, 2, 2, 1, 1, 1, 1, 1},
                                                   {1, 3, 1, 3, 5, 1, 1, 1, 3, 1, 1, 0, 0, 1, 1, 1},
                                                   {2, 8, 1, 1, 4, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1}};
  int i, c, k;
  h_begin();
  for (i = 0; i < 5; ++i) {
    const int32_t *g = geoms[i];
    const int n = g[MT_CONV_N] * g[MT_CONV_OG] * g[MT_CONV_OH] * g[MT_CONV_OW];
    const int taps = g[MT_CONV_CG] * g[MT_CONV_KH] * g[MT_CONV_KW];
    for (c = 0; c < 2; ++c) {
      fill8(a8, 2 * 8 * 6, -128, 127), fill8(b8, 8 * 12, -128, 127), fill32(bias32, 8);
      for (k = 0; k < 8; ++k) bias32[k] /= 256, rq[2 * k] = (int32_t)((1u << 30) | (lcg() >> 2)), rq[2 * k + 1] = rnd(6, 12);
      if (c == 1) rq[2] = 1 << 30, rq[3] = 2, rq[6] = 1 << 30, rq[7] = 1, bias32[1] = -4;
      if (c == 1) /* channel 1: every sum -4, a tie */
        for (k = 0; k < taps; ++k) b8[taps + k] = 0;
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, -3, -128, col), h8(y8, n);
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, 5, 5, col), h8(y8, n);
      mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rq, 1, 0, -32768, col), h16(y16, n);
    }
  }
  h_end("conv rq paths");
}

/* The Armv7E-M convolutions' column and channel paths against the reference (eight positions
 * a pass): pointwise layers of stride 1 (two words of four positions a channel: 5, 6 and 7
 * channels, a last block of 1, 2 and 3; 21, 9 and 23 positions, the last eight moved back; 8
 * positions exactly; 7, 6 and 4 positions, fewer than eight: channel by channel; two images),
 * windows inside the input eight at a time (1-D, stride 1 and 2, kernels 7, 5 and 3, padding at
 * both ends: 20, 17 and 30 positions) or one by one (2-D maps of rows of 7 and 11: eights
 * across a row), border windows tap by tap; taps not a multiple of 4
 * (14, 15, 27, 9: the array's last channel from a zero-padded copy of its weights; 147: past the
 * copy and the offset table, that channel's last block in C), two groups of 3 channels, one
 * position; random, int8-extreme (-128 and 127 inputs and weights, biases +-(2^30 - 1)) and
 * tie-prone (multipliers 2^30, shifts 1 and 2: the exact requantization) cases; per channel and
 * per tensor, no bias, a zero point, y_min at the type's minimum and above it, int8 and int16
 * outputs. */
static void conv_m4_paths(void) {
  static int32_t bias32[8], rq[16];
  static MT_WORD_ALIGNED int16_t col[8 * 148];
  /* N CG H W OG KH KW OH OW SH SW PH PW DH DW GROUPS */
  static const int32_t geoms[][MT_CONV_FIELDS] = {
      {1, 6, 3, 7, 5, 1, 1, 3, 7, 1, 1, 0, 0, 1, 1, 1},    {2, 7, 1, 9, 3, 1, 1, 1, 9, 1, 1, 0, 0, 1, 1, 1},
      {1, 2, 1, 20, 6, 1, 7, 1, 20, 1, 1, 0, 3, 1, 1, 1},  {1, 3, 1, 33, 4, 1, 5, 1, 17, 1, 2, 0, 2, 1, 1, 1},
      {1, 3, 6, 7, 4, 3, 3, 6, 7, 1, 1, 1, 1, 1, 1, 1},    {1, 3, 8, 8, 2, 7, 7, 8, 8, 1, 1, 3, 3, 1, 1, 1},
      {2, 3, 1, 12, 3, 1, 3, 1, 12, 1, 1, 0, 1, 1, 1, 2},  {1, 3, 1, 5, 4, 1, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {1, 4, 1, 10, 2, 1, 3, 1, 4, 1, 2, 0, 0, 1, 1, 1},   {1, 5, 1, 8, 3, 1, 1, 1, 8, 1, 1, 0, 0, 1, 1, 1},
      {2, 6, 1, 23, 4, 1, 1, 1, 23, 1, 1, 0, 0, 1, 1, 1},  {1, 4, 1, 6, 5, 1, 1, 1, 6, 1, 1, 0, 0, 1, 1, 1},
      {1, 3, 1, 40, 5, 1, 5, 1, 20, 1, 2, 0, 2, 1, 1, 1},  {1, 2, 1, 30, 3, 1, 3, 1, 30, 1, 1, 0, 1, 1, 1, 1},
      {1, 3, 2, 11, 4, 3, 3, 2, 11, 1, 1, 1, 1, 1, 1, 1},
      /* eight positions in a row past the row's ends (mt_conv_cols8_pad): both ends in one block,
       * rows inside with padding along W, a dilation, a copy too large for MT_CONV_PAD */
      {1, 2, 1, 9, 3, 1, 5, 1, 9, 1, 1, 0, 2, 1, 1, 1},    {1, 2, 3, 10, 3, 2, 3, 2, 10, 1, 1, 0, 1, 1, 1, 1},
      {1, 3, 1, 20, 4, 1, 3, 1, 20, 1, 1, 0, 2, 1, 2, 1},  {1, 8, 1, 24, 3, 1, 5, 1, 12, 1, 2, 0, 2, 1, 1, 1}};
  /* more output channels than MT_CONV_QT (the constants' table in chunks): 72 pointwise and 66 of
   * 7 taps (the last channel's weights from wl) */
  static const int32_t many[][MT_CONV_FIELDS] = {{1, 2, 1, 8, 72, 1, 1, 1, 8, 1, 1, 0, 0, 1, 1, 1},
                                                 {1, 1, 1, 12, 66, 1, 7, 1, 8, 1, 1, 0, 1, 1, 1, 1}};
  static int32_t bias72[72], rq72[144];
  int i, c, k;
  h_begin();
  for (i = 0; i < (int)(sizeof geoms / sizeof geoms[0]); ++i) {
    const int32_t *g = geoms[i];
    const int n = g[MT_CONV_N] * g[MT_CONV_OG] * g[MT_CONV_GROUPS] * g[MT_CONV_OH] * g[MT_CONV_OW];
    for (c = 0; c < 3; ++c) {
      fill8(a8, 512, -128, 127), fill8(b8, 512, -128, 127), fill32(bias32, 8);
      for (k = 0; k < 8; ++k) bias32[k] /= 256, rq[2 * k] = (int32_t)((1u << 30) | (lcg() >> 2)), rq[2 * k + 1] = rnd(6, 12);
      if (c == 1) {
        for (k = 0; k < 512; ++k) a8[k] = (int8_t)(k % 7 == 3 ? 127 : -128), b8[k] = (int8_t)(k % 5 == 1 ? 127 : -128);
        bias32[0] = (1 << 30) - 1, bias32[g[MT_CONV_OG] * g[MT_CONV_GROUPS] - 1] = -(1 << 30) + 1;
      }
      if (c == 2) rq[0] = 1 << 30, rq[1] = 2, rq[4] = 1 << 30, rq[5] = 1;
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, -3, -128, col), h8(y8, n);
      mt_conv_s8_s8_s8(a8, b8, bias32, y8, g, rq, 1, 5, 5, col), h8(y8, n);
      mt_conv_s8_s8_s8(a8, b8, 0, y8, g, rq + 2, 0, -128, -128, col), h8(y8, n);
      mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rq, 1, 7, -32768, col), h16(y16, n);
      mt_conv_s8_s8_s16(a8, b8, bias32, y16, g, rq, 1, 0, 0, col), h16(y16, n);
    }
  }
  for (i = 0; i < (int)(sizeof many / sizeof many[0]); ++i) {
    const int32_t *g = many[i];
    const int n = g[MT_CONV_OG] * g[MT_CONV_OH] * g[MT_CONV_OW];
    fill8(a8, 512, -128, 127), fill8(b8, 512, -128, 127), fill32(bias72, 72);
    for (k = 0; k < 72; ++k) bias72[k] /= 256, rq72[2 * k] = (int32_t)((1u << 30) | (lcg() >> 2)), rq72[2 * k + 1] = rnd(6, 12);
    mt_conv_s8_s8_s8(a8, b8, bias72, y8, g, rq72, 1, -3, -128, col), h8(y8, n);
    mt_conv_s8_s8_s8(a8, b8, bias72, y8, g, rq72, 1, 5, 5, col), h8(y8, n);
    mt_conv_s8_s8_s16(a8, b8, bias72, y16, g, rq72, 1, 7, -32768, col), h16(y16, n);
  }
  h_end("conv m4 paths");
}

/* integer training: the cross entropy, a linear layer's gradients, SGD on int32 masters, the
 * weights and bias tables re-derived from them */
static void train_int(void) {
  static int32_t g32[64], dw[64], db[8], mom[64], rq[16];
  static int64_t b64[8];
  int c, i;
  h_begin();
  for (c = 0; c < 6; ++c) {
    int32_t t[4], loss = 0;
    const int32_t m = (int32_t)((1u << 30) | (lcg() >> 2)), ml = (int32_t)((1u << 30) | (lcg() >> 2));
    fill16(a16, 40, -32768, 32767);
    fill8(a8, 40, -128, 127);
    t[0] = (int32_t)(lcg() % 10u), t[1] = 9, t[2] = 0, t[3] = c == 0 ? -1 : (int32_t)(lcg() % 10u);
    mt_cross_entropy_s16(a16, t, &loss, g32, 4, 10, m, -3 - c, ml, -c, 15 - c), h32(g32, 40), h32(&loss, 1);
    mt_cross_entropy_s8(a8, t, &loss, g32, 4, 10, m, -13 + c, ml, -10 + c, 8 + c), h32(g32, 40), h32(&loss, 1);
  }
  h_end("cross_entropy_q");
  h_begin();
  for (c = 0; c < 4; ++c) {
    const int32_t zx = c == 0 ? 0 : (int32_t)(lcg() % 256u) - 128;
    fill16(a16, 3 * 9, -32768, 32767);
    fill8(a8, 3 * 7, -128, 127);
    for (i = 0; i < 15; ++i) g32[i] = (int32_t)(lcg() % 2049u) - 1024;
    for (i = 0; i < 35; ++i) dw[i] = 0;
    for (i = 0; i < 5; ++i) db[i] = 0;
    mt_linear_grad_s16(a16, g32, dw, db, 3, 7, 5, 9, zx), h32(dw, 35), h32(db, 5);
    mt_linear_grad_s8(a8, g32, dw, 0, 3, 7, 5, 0, zx), h32(dw, 35);
  }
  h_end("linear_grad");
  h_begin();
  fill32(a32, 64);
  for (i = 0; i < 64; ++i) mom[i] = 0, dw[i] = a32[i] >> 2;
  for (i = 0; i < 8; ++i) rq[2 * i] = rnd_m(), rq[2 * i + 1] = (int32_t)(lcg() % 40u) - 20;
  for (c = 0; c < 4; ++c) {
    fill32(g32, 64);
    mt_sgd_s32(dw, g32, c < 2 ? mom : 0, 64, 8, rq, (int32_t)((1u << 30) | (lcg() >> 2)), 0, -(1 << 30), 1 << 30);
    h32(dw, 64), h32(mom, 64);
  }
  mt_master_s8(dw, a8, 64, 23), h8(a8, 64);
  mt_master_s16(dw, a16, 64, 15), h16(a16, 64);
  mt_linear_bias_s8(dw, a8, db, 8, 8, 3, -7), h32(db, 8);
  mt_linear_bias_s8(0, a8, db, 8, 8, 3, 100), h32(db, 8);
  mt_linear_bias_s16(dw, a16, b64, 8, 8, -9, 5);
  for (i = 0; i < 8; ++i) h_u32((uint32_t)b64[i]), h_u32((uint32_t)(b64[i] >> 32));
  mt_scale_s32(dw, 64, (int32_t)((1u << 30) | (lcg() >> 2)), 2), h32(dw, 64);
  mt_fill_s32(dw, 64, -3), h32(dw, 64);
  for (c = 0; c < 3; ++c) {
    for (i = 0; i < 8; ++i) rq[2 * i] = rnd_m(), rq[2 * i + 1] = (int32_t)(lcg() % 4u);
    fill32(g32, 16);
    for (i = 0; i < 16; ++i) g32[i] >>= 12;
    fill16(a16, 64, -32768, 32767);
    fill8(a8, 64, -128, 127);
    fill16(b16, 16, -2, 2);
    fill8(b8, 16, -128, -126);
    mt_linear_dx_s16(g32, a16, dw, 2, 8, 8, rq, (int32_t)((1u << 30) | (lcg() >> 2)), 8 + c, c ? b16 : 0, 0, 0), h32(dw, 16);
    mt_linear_dx_s8(g32, a8, dw, 2, 8, 8, rq, (int32_t)((1u << 30) | (lcg() >> 2)), 4 + c, b8, 8, -127), h32(dw, 16);
  }
  h_end("train_int");
}

/* A decoder's step (mt_rmsnorm_s16 and mt_decode.c): RMS norm over rows of every spread, RoPE
 * in both pair layouts, the cache append and the position counter up to and past a full
 * cache, attention over int16 and int8 caches (one key/value head, several, groups of one and
 * of several query heads) at the first, a middle and the last position and with the cache full,
 * a few whole steps, and the sampler. */
static void decode(void) {
  static const struct {
    int kv, group, D, Dv, cap;
  } acfg[] = {{2, 1, 8, 8, 70}, {2, 3, 16, 16, 70}, {1, 4, 8, 8, 9}, {3, 2, 6, 5, 40}};
  int32_t p[MT_ATTN_PARAMS], pos;
  int c, i, r;
  /* RMS norm: rows full range, within +-300 and +-3 (where eps dominates), and zero (v = eps
   * alone; v = 0 when eps_q = 0: the inverse square root's 0); per-channel gains of both signs
   * (|m| in [2^30, 2^31), shifts -24 to -12: outputs from a few units to saturated); eps_q
   * 2^eps_shift from 0 to the lowering's cap of 2^61; n from 1 to 300; then in place */
  {
    static const int ns[4] = {1, 7, 64, 300};
    static const uint32_t eps_q[4] = {0u, 100u, 2748779u, 4294967295u};
    static const int eps_shift[4] = {0, 0, 0, 29};
    h_begin();
    for (c = 0; c < 4; ++c) {
      const int n = ns[c];
      for (i = 0; i < n; ++i) {
        const int32_t m = (int32_t)((1u << 30) | (lcg() >> 2));
        a32[2 * i] = i % 3 == 1 ? -m : m, a32[2 * i + 1] = rnd(-24, -12);
      }
      fill16(a16, n, -32768, 32767);
      fill16(a16 + n, n, -300, 300);
      fill16(a16 + 2 * n, n, -3, 3);
      for (i = 0; i < n; ++i) a16[3 * n + i] = 0;
      a16[0] = -32768;
      for (r = 0; r < 4; ++r) mt_rmsnorm_s16(a16, y16, 4, n, eps_q[r], eps_shift[r], a32), h16(y16, 4 * n);
    }
    mt_rmsnorm_s16(a16, a16, 4, 300, 2748779u, 0, a32), h16(a16, 4 * 300);
    h_end("rmsnorm");
  }
  /* RoPE: cos and sin tables [9, dim / 2] in Q14 (row 0 the identity, row 1 at +-2^14: a' and
   * b' that saturate both ways), three heads of dim 16, 6 (an odd number of pairs) and 2, both
   * layouts, positions 0, 4, 8 (the last row) and 9 (a full cache: the last row again) */
  {
    static const int dims[3] = {16, 6, 2};
    static const int32_t rope_pos[4] = {0, 4, 8, 9};
    int16_t *const cos_q14 = b16, *const sin_q14 = b16 + 512;
    int d, il;
    h_begin();
    for (d = 0; d < 3; ++d) {
      const int dim = dims[d], half = dim / 2;
      fill16(cos_q14, 9 * half, -16384, 16384);
      fill16(sin_q14, 9 * half, -16384, 16384);
      for (i = 0; i < half; ++i) {
        cos_q14[i] = 16384, sin_q14[i] = 0;
        cos_q14[half + i] = (int16_t)(i % 2 ? -16384 : 16384);
        sin_q14[half + i] = (int16_t)(i % 4 < 2 ? 16384 : -16384);
      }
      for (il = 0; il < 2; ++il)
        for (r = 0; r < 4; ++r) {
          fill16(a16, 3 * dim, -32768, 32767);
          a16[0] = a16[half] = a16[1] = -32768, a16[dim - 1] = 32767;
          mt_rope_s16(a16, 3, dim, cos_q14, sin_q14, &rope_pos[r], 9, il), h16(a16, 3 * dim);
        }
    }
    h_end("rope");
  }
  /* the cache append at -1 (outside: nothing written), 0, 4, 8 (the last row) and 9 (full),
   * int16 and int8; then the counter from 0 past a full cache of 9 rows, one append a step */
  {
    static const int32_t app_pos[5] = {-1, 0, 4, 8, 9};
    h_begin();
    fill16(y16, 9 * 12, -32768, 32767);
    fill8(y8, 9 * 12, -128, 127);
    for (r = 0; r < 5; ++r) {
      fill16(a16, 12, -32768, 32767);
      fill8(a8, 12, -128, 127);
      h_u32((uint32_t)mt_cache_append_s16(a16, y16, 12, &app_pos[r], 9)), h16(y16, 9 * 12);
      h_u32((uint32_t)mt_cache_append_s8(a8, y8, 12, &app_pos[r], 9)), h8(y8, 9 * 12);
    }
    for (pos = 0, i = 0; i < 12; ++i) {
      fill16(a16, 12, -32768, 32767);
      fill8(a8, 12, -128, 127);
      h_u32((uint32_t)mt_cache_append_s16(a16, y16, 12, &pos, 9));
      h_u32((uint32_t)mt_cache_append_s8(a8, y8, 12, &pos, 9));
      mt_position_next(&pos, 9), h32(&pos, 1);
    }
    h16(y16, 9 * 12), h8(y8, 9 * 12);
    h_end("cache append position");
  }
  /* attention over the cache: kv_heads key/value heads of `group` query heads each (one head
   * with one query; two heads, groups of one and of three; one head, a group of four; three
   * heads, groups of two, D 6 and Dv 5), caches of 70 rows (two blocks of keys), 9 and 40;
   * positions 0, the middle, the last row and a full cache; q and k within +-12000, then over
   * the whole range */
  h_begin();
  for (c = 0; c < 4; ++c) {
    const int kv = acfg[c].kv, G = acfg[c].group, D = acfg[c].D, Dv = acfg[c].Dv, cap = acfg[c].cap;
    const int32_t at_pos[4] = {0, cap / 2, cap - 1, cap};
    for (i = 0; i < MT_ATTN_PARAMS; ++i) p[i] = 0;
    p[MT_ATTN_S] = cap, p[MT_ATTN_D] = D, p[MT_ATTN_DV] = Dv;
    p[MT_ATTN_K_STRIDE] = kv * D, p[MT_ATTN_V_STRIDE] = kv * Dv;
    for (r = 0; r < 2; ++r) {
      const int32_t lo = r ? -32768 : -12000, hi = r ? 32767 : 12000;
      int k;
      p[MT_ATTN_LOGIT_M] = 1548970010, p[MT_ATTN_LOGIT_S] = 11 + (D == 16 ? 0 : -1);
      p[MT_ATTN_OUT_M] = rnd_m(), p[MT_ATTN_OUT_S] = 0;
      fill16(a16, kv * G * D, lo, hi);                  /* q [kv G, D] */
      fill16(b16, cap * kv * D, lo, hi);                /* k [cap, kv D] */
      fill16(y16 + 1024, cap * kv * Dv, -32768, 32767); /* v [cap, kv Dv] */
      fill8(a8, kv * G * D, -128, 127);
      fill8(b8, cap * kv * D, -128, 127);
      fill8(y8 + 1024, cap * kv * Dv, -128, 127);
      for (k = 0; k < 4; ++k) {
        p[MT_ATTN_LOGIT_S] = 11 + (D == 16 ? 0 : -1);
        mt_attention_cached_s16(p, &at_pos[k], kv, G, a16, b16, y16 + 1024, y16, acc64), h16(y16, kv * G * Dv);
        p[MT_ATTN_LOGIT_S] -= 16; /* q, k at 2^-5 */
        mt_attention_cached_s8(p, &at_pos[k], kv, G, a8, b8, y8 + 1024, y8, acc32), h8(y8, kv * G * Dv);
      }
    }
  }
  h_end("attention cached");
  /* whole steps on a cache of 9 rows, two key/value heads, groups of two, D = Dv = 8: RMS norm
   * of the step's input, RoPE of q and k at the position (half-split), the appends, attention,
   * the counter; eleven steps, the last two on a full cache */
  {
    int16_t *const x = a16, *const q = a16 + 64, *const kn = a16 + 128, *const vn = a16 + 192;
    int16_t *const kc = b16, *const vc = b16 + 1024, *const cos_q14 = b16 + 2048, *const sin_q14 = b16 + 2560;
    int step;
    for (i = 0; i < 32; ++i) a32[2 * i] = (int32_t)((1u << 30) | (lcg() >> 2)), a32[2 * i + 1] = -19;
    fill16(cos_q14, 9 * 4, -16384, 16384);
    fill16(sin_q14, 9 * 4, -16384, 16384);
    for (i = 0; i < MT_ATTN_PARAMS; ++i) p[i] = 0;
    p[MT_ATTN_S] = 9, p[MT_ATTN_D] = 8, p[MT_ATTN_DV] = 8, p[MT_ATTN_K_STRIDE] = 16, p[MT_ATTN_V_STRIDE] = 16;
    p[MT_ATTN_LOGIT_M] = 1548970010, p[MT_ATTN_LOGIT_S] = 10, p[MT_ATTN_OUT_M] = 1431655765;
    h_begin();
    for (pos = 0, step = 0; step < 11; ++step) {
      fill16(x, 32, -20000, 20000);
      mt_rmsnorm_s16(x, x, 1, 32, 2748779u, 0, a32);
      for (i = 0; i < 32; ++i) q[i] = x[i];
      for (i = 0; i < 16; ++i) kn[i] = x[(i * 7) % 32], vn[i] = x[(i * 5 + 3) % 32];
      mt_rope_s16(q, 4, 8, cos_q14, sin_q14, &pos, 9, 0);
      mt_rope_s16(kn, 2, 8, cos_q14, sin_q14, &pos, 9, 0);
      h_u32((uint32_t)mt_cache_append_s16(kn, kc, 16, &pos, 9));
      h_u32((uint32_t)mt_cache_append_s16(vn, vc, 16, &pos, 9));
      mt_attention_cached_s16(p, &pos, 2, 2, q, kc, vc, y16, acc64), h16(y16, 32);
      mt_position_next(&pos, 9), h32(&pos, 1);
    }
    h_end("decode steps");
  }
  /* SwiGLU's product: full-range gates and up values, 1024 of them, the multipliers of a
   * decoder's MLP (argument ratio >= 1/2, sigmoid to Q0.15, two products below 1/2), then the
   * gate's argument ratio below 1/2 and a product ratio of at least 1/2 */
  {
    static const int32_t sw[2][8] = {{1627389952, -9, 1073741824, 6, 1546188227, 3, 1288490189, 13},
                                     {1288490189, 2, 1073741824, 6, 1932735283, -2, 1717986918, -1}};
    int k;
    h_begin();
    for (k = 0; k < 2; ++k) {
      fill16(a16, 1024, -32768, 32767);
      fill16(b16, 1024, -32768, 32767);
      mt_swiglu_s16(a16, b16, y16, 1024, sw[k][0], sw[k][1], sw[k][2], sw[k][3], sw[k][4], sw[k][5], sw[k][6], sw[k][7]);
      h16(y16, 1024);
    }
    h_end("swiglu");
  }
  /* sampling: 300 full-range logits at top_k 1 (greedy), 8 and 64, logit scales 2^-14, 2^-8
   * and 2^-2 (logit_q24 = scale log2(e) 2^24), temperatures 1/2, 1 and 4, states 0 (the
   * substitute start), 1, 2^32 - 1 and drawn, eight draws each; logits within +-2 (ties: by
   * value then lowest index) at top_k 1 and 20; n = top_k = 64; n = 1; the extremes -2^15 and
   * 2^15 - 1 at a logit scale of 1 (the first product capped) */
  {
    static const int ks[3] = {1, 8, 64};
    static const int32_t q24[3] = {1477, 94548, 6051102}, inv_t[3] = {131072, 65536, 16384};
    static const uint32_t seeds[4] = {0u, 1u, 4294967295u, 0u};
    uint32_t state;
    int k, t, s, d;
    h_begin();
    fill16(a16, 300, -32768, 32767);
    for (k = 0; k < 3; ++k)
      for (t = 0; t < 3; ++t)
        for (s = 0; s < 4; ++s) {
          state = s == 3 ? lcg() : seeds[s];
          for (d = 0; d < 8; ++d) h_u32((uint32_t)mt_sample_s16(a16, 300, ks[k], q24[t], inv_t[(t + s) % 3], &state));
          h_u32(state);
        }
    fill16(b16, 100, -2, 2);
    for (s = 0; s < 4; ++s) {
      state = s == 3 ? lcg() : seeds[s];
      for (d = 0; d < 8; ++d) {
        h_u32((uint32_t)mt_sample_s16(b16, 100, 1, 94548, 65536, &state));
        h_u32((uint32_t)mt_sample_s16(b16, 100, 20, 6051102, 65536, &state));
        h_u32((uint32_t)mt_sample_s16(a16, 64, 64, 94548, 131072, &state));
        h_u32((uint32_t)mt_sample_s16(a16 + 7, 1, 1, 94548, 65536, &state));
      }
      h_u32(state);
    }
    for (i = 0; i < 16; ++i) b16[i] = (int16_t)(i % 3 ? -32768 : 32767);
    for (s = 0; s < 4; ++s) {
      state = seeds[s];
      for (d = 0; d < 8; ++d) h_u32((uint32_t)mt_sample_s16(b16, 16, 16, 24204406, 65536, &state));
      h_u32(state);
    }
    h_end("sample");
  }
}

int main(void) {
  primitives();
  linear();
  linear_two_rows();
  linear_encoder_rows();
  linear_four_channels();
  linear_wide_sums();
  matmul();
  elementwise();
  activations();
  softmax();
  layernorm();
  sum_argmax();
  attention();
  copy_embedding();
  div_rows();
  conv();
  conv_dw3s();
  conv_dw1s();
  conv_rq_paths();
  conv_m4_paths();
  train_int();
  decode();
  printf("%d cases\n", cases);
  return 0;
}
