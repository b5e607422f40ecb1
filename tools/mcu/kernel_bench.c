/* kernel_bench.c - one runtime kernel on the shapes of the MCU benchmark, run REPS times on
 * fixed pseudo-random inputs; prints the kernel, its MACs and a hash of its output (hashed
 * once, after the calls).
 * tools/mcu/bench_kernels.sh builds it for each CPU and runs it under QEMU with the
 * instruction-counting plugin for REPS = 1 and 2: the difference is one call (startup, input
 * generation and printing cancel), and the hashes must agree across every build.
 *
 *   kernel_bench NAME REPS        (semihosting arguments; NAME from the table below)
 *
 * Static buffers only (fits the 256 KB RAM of the mps2 recipe). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_kernels.h"

#define LCG_SEED 2024u
#include "lcg_inputs.h"


static uint32_t fnv(const void *p, int bytes) { /* FNV-1a over the output bytes (little-endian targets) */
  const uint8_t *b = (const uint8_t *)p;
  uint32_t h = 2166136261u;
  int i;
  for (i = 0; i < bytes; ++i) h = (h ^ b[i]) * 16777619u;
  return h;
}

/* the shapes: linear [128, 16] x [48, 16]^T (linear_s16x8: int16 x, int8 weights, as the
 * layers of an int8 model that read its int16 residual stream); softmax 128 x 128; attention
 * L = S = 128, d = 16 (attention_*: full-range inputs, so many keys get weight 0; attention_s16_dense*: the q and
 * k of a real block, |logit| of a few units, every key with a weight, on H = 1 head of 16 or
 * H = 4 heads of 4 features of the same [L, 3 * 16] projection) */
enum { ROWS = 128, IN = 16, OUT = 48, SM = 128, L = 128, D = 16 };

static int8_t x8[L * 3 * D], w8[OUT * IN], s8[SM * SM], y8[SM * SM];
static int16_t x16[L * 3 * D], xd16[L * 3 * D], w16[OUT * IN], s16[SM * SM], y16[SM * SM];
static int32_t b32[OUT], rq[2 * OUT], acc32[D];
static int64_t b64[OUT], acc64[D];

/* the linear layers of a d_model 32 encoder layer on 32 positions (the lowering bench's
 * sensor encoder, feed-forward 64), int8 scheme: the attention's input projection 32 -> 96 of
 * the int16 residual stream (enc_qkv_s16x8, int16 x int8), the feed-forward 32 -> 64 with a
 * fused relu (enc_ff1_s8, int8 x int8) and 64 -> 32 back into the stream (enc_ff2_s8_s16, int16
 * outputs); the int16 scheme's projection (enc_qkv_s16, int16 x int16) beside them. x and w
 * on word boundaries, as the lowering places them. */
enum { ER = 32, EMAX = 96 * 64 };
static MT_WORD_ALIGNED int8_t ex8[ER * 64], ew8[EMAX], ey8[ER * 96];
static MT_WORD_ALIGNED int16_t ex16[ER * 64], ew16[EMAX], ey16[ER * 96];
static int32_t eb32[96], erq[2 * 96];
static int64_t eb64[96];
/* one of them: x [ER, in] times w [out, in]^T; its MACs (0: not one of them) */
static long enc_linear(const char *name) {
  if (!strcmp(name, "enc_qkv_s16x8"))
    mt_linear_s16_s8_s16(ex16, ew8, eb64, ey16, ER, 32, 96, 0, erq, 1, 0, -32768);
  else if (!strcmp(name, "enc_ff1_s8"))
    mt_linear_s8_s8_s8(ex8, ew8, eb32, ey8, ER, 32, 64, 0, erq, 1, -128, -128);
  else if (!strcmp(name, "enc_ff2_s8_s16"))
    mt_linear_s8_s8_s16(ex8, ew8, eb32, ey16, ER, 64, 32, 0, erq, 1, 0, -32768);
  else if (!strcmp(name, "enc_qkv_s16"))
    mt_linear_s16_s16_s16(ex16, ew16, eb64, ey16, ER, 32, 96, 0, erq, 1, 0, -32768);
  else
    return 0;
  return strstr(name, "qkv") ? ER * 32L * 96 : ER * 32L * 64;
}

/* the convolutions (int8, per-channel, fused relu): a sensor stem of N 1, 3 to 16 channels,
 * L 128, kernel 5, stride 2, padding 2 (conv_stem); depthwise 3 on 16 channels and pointwise
 * 16 to 32 on L 64 (conv_dw, conv_pw); the DS-CNN layer pair, 64-channel depthwise 3 x 3
 * (padding 1) and pointwise 64 to 64 on 25 x 5 (dscnn_dw, dscnn_pw) */
static int8_t cx8[64 * 125], cw8[64 * 64], cy8[64 * 125];
static int32_t cb32[64], crq[2 * 64];
static MT_WORD_ALIGNED int16_t col16[8 * 64];
static const int32_t conv_stem[MT_CONV_FIELDS] = {1, 3, 1, 128, 16, 1, 5, 1, 64, 1, 2, 0, 2, 1, 1, 1};
static const int32_t conv_dw[MT_CONV_FIELDS] = {1, 1, 1, 64, 1, 1, 3, 1, 64, 1, 1, 0, 1, 1, 1, 16};
static const int32_t conv_pw[MT_CONV_FIELDS] = {1, 16, 1, 64, 32, 1, 1, 1, 64, 1, 1, 0, 0, 1, 1, 1};
static const int32_t dscnn_dw[MT_CONV_FIELDS] = {1, 1, 25, 5, 1, 3, 3, 25, 5, 1, 1, 1, 1, 1, 1, 64};
static const int32_t dscnn_pw[MT_CONV_FIELDS] = {1, 64, 25, 5, 64, 1, 1, 25, 5, 1, 1, 0, 0, 1, 1, 1};
static const struct {
  const char *name;
  const int32_t *g;
} convs[] = {{"conv_stem", conv_stem}, {"conv_dw", conv_dw}, {"conv_pw", conv_pw}, {"dscnn_dw", dscnn_dw},
             {"dscnn_pw", dscnn_pw}};

/* a whole keyword-spotting DS-CNN (MLPerf Tiny's kws reference architecture, random weights;
 * dscnn): a 49 x 10 input, a 10 x 4 convolution of stride 2 to 64 channels (25 x 5; padding
 * 4 rows above, 1 column left), four pairs of 64-channel depthwise 3 x 3 (padding 1) and
 * pointwise 64 to 64, the average over the map, a linear layer to 12 classes; int8, per
 * channel, relu everywhere but the last layer */
static int8_t dsx[49 * 10], dsa[64 * 125], dsb[64 * 125], dsy[64 * 125 + 64 + 12], dsw0[64 * 40], dsdw[4][64 * 9], dspw[4][64 * 64],
    dsfc[12 * 64];
static const int32_t ds_stem[MT_CONV_FIELDS] = {1, 1, 49, 10, 64, 10, 4, 25, 5, 2, 2, 4, 1, 1, 1, 1};
static const int32_t ds_pool[MT_POOL_FIELDS] = {64, 25, 5, 1, 1, 25, 5, 1, 1, 0, 0, 0};
static long dscnn(void) { /* the MACs; the output hashed: the last pointwise layer's, the mean's and the logits */
  int l;
  mt_conv_s8_s8_s8(dsx, dsw0, cb32, dsa, ds_stem, crq, 1, -128, -128, col16);
  for (l = 0; l < 4; ++l) {
    mt_conv_s8_s8_s8(dsa, dsdw[l], cb32, dsb, dscnn_dw, crq, 1, -128, -128, col16);
    mt_conv_s8_s8_s8(dsb, dspw[l], cb32, l < 3 ? dsa : dsy, dscnn_pw, crq, 1, -128, -128, col16);
  }
  mt_avg_pool_s8(dsy, dsy + 64 * 125, ds_pool, -128);
  mt_linear_s8_s8_s8(dsy + 64 * 125, dsfc, b32, dsy + 64 * 125 + 64, 1, 64, 12, 0, rq, 1, -3, -128);
  return 25L * 5 * 64 * 40 + 4 * (25L * 5 * 64 * 9 + 25L * 5 * 64 * 64) + 64 * 12;
}

/* attention parameters: q, k, v read in place from one [L, 3D] projection (as lowered MHA) */
static void attn_params(int32_t *p, int bits) {
  memset(p, 0, MT_ATTN_PARAMS * sizeof *p);
  p[MT_ATTN_L] = L, p[MT_ATTN_S] = L, p[MT_ATTN_D] = D, p[MT_ATTN_DV] = D;
  p[MT_ATTN_Q_STRIDE] = p[MT_ATTN_K_STRIDE] = p[MT_ATTN_V_STRIDE] = 3 * D;
  /* q, k at 2^-5 (int8) or 2^-13 (int16), logits 1/sqrt(16) log2(e) in Q16 */
  p[MT_ATTN_LOGIT_M] = 1548970010, p[MT_ATTN_LOGIT_S] = bits == 8 ? -5 : 11;
  p[MT_ATTN_OUT_M] = 1431655765, p[MT_ATTN_OUT_S] = 0;
}

int main(int argc, char **argv) {
  const char *name = argc >= 3 ? argv[argc - 2] : "";
  const int reps = argc >= 3 ? atoi(argv[argc - 1]) : 0;
  int32_t p[MT_ATTN_PARAMS];
  long macs = 0;
  uint32_t h = 0;
  const void *out = 0;
  int bytes = 0;
  int i, r;
  fill8(x8, L * 3 * D, -128, 127), fill8(w8, OUT * IN, -127, 127);
  fill16(x16, L * 3 * D, -32768, 32767), fill16(w16, OUT * IN, -32767, 32767);
  fill8(s8, SM * SM, -128, 127), fill16(s16, SM * SM, -32768, 32767);
  for (i = 0; i < OUT; ++i) {
    b32[i] = rnd(-20000, 20000), b64[i] = (int64_t)b32[i] << 16;
    rq[2 * i] = 1073741824 + rnd(0, 65535) * 16384, rq[2 * i + 1] = 7 + rnd(0, 1);
  }
  for (i = 0; i < L; ++i) /* q, k about N(0, 1) real values at 2^-13; v full range */
    fill16(xd16 + i * 3 * D, 2 * D, -12000, 12000), fill16(xd16 + i * 3 * D + 2 * D, D, -32768, 32767);
  fill8(cx8, 64 * 125, -128, 127), fill8(cw8, 64 * 64, -127, 127);
  for (i = 0; i < 64; ++i) cb32[i] = rnd(-20000, 20000), crq[2 * i] = 1073741824 + rnd(0, 65535) * 16384, crq[2 * i + 1] = 9;
  if (!strncmp(name, "enc_", 4)) { /* requantizations as lowered: int16 outputs from int16 x at shifts near 12,
                                      from int8 x near 4, int8 outputs near 11 */
    const int s = !strcmp(name, "enc_ff1_s8") ? 11 : !strcmp(name, "enc_ff2_s8_s16") ? 4 : 12;
    fill8(ex8, ER * 64, -128, 127), fill8(ew8, EMAX, -127, 127);
    fill16(ex16, ER * 64, -32768, 32767), fill16(ew16, EMAX, -32767, 32767);
    for (i = 0; i < 96; ++i) {
      eb32[i] = rnd(-20000, 20000), eb64[i] = (int64_t)eb32[i] << 8;
      erq[2 * i] = 1073741824 + rnd(0, 65535) * 16384, erq[2 * i + 1] = s + rnd(0, 1) + 8 * !strcmp(name, "enc_qkv_s16");
    }
  }
  if (!strcmp(name, "dscnn")) {
    fill8(dsx, 49 * 10, -128, 127), fill8(dsw0, 64 * 40, -127, 127), fill8(dsfc, 12 * 64, -127, 127);
    for (i = 0; i < 4; ++i) fill8(dsdw[i], 64 * 9, -127, 127), fill8(dspw[i], 64 * 64, -127, 127);
  }
  for (r = 0; r < reps; ++r) {
    const int32_t *cg = 0;
    for (i = 0; i < (int)(sizeof convs / sizeof convs[0]); ++i)
      if (!strcmp(name, convs[i].name)) cg = convs[i].g;
    if (cg) {
      const long outs = (long)cg[MT_CONV_N] * cg[MT_CONV_OG] * cg[MT_CONV_GROUPS] * cg[MT_CONV_OH] * cg[MT_CONV_OW];
      mt_conv_s8_s8_s8(cx8, cw8, cb32, cy8, cg, crq, 1, -128, -128, col16);
      macs = outs * cg[MT_CONV_CG] * cg[MT_CONV_KH] * cg[MT_CONV_KW], out = cy8, bytes = (int)outs;
    } else if (!strcmp(name, "linear_s8")) {
      mt_linear_s8_s8_s8(x8, w8, b32, y8, ROWS, IN, OUT, 0, rq, 1, -3, -128);
      macs = (long)ROWS * IN * OUT, out = y8, bytes = ROWS * OUT;
    } else if (!strcmp(name, "linear_s16")) {
      if (r == 0) for (i = 0; i < 2 * OUT; i += 2) rq[i + 1] += 16; /* 2^16 x the int8 products */
      mt_linear_s16_s16_s16(x16, w16, b64, y16, ROWS, IN, OUT, 0, rq, 1, 0, -32768);
      macs = (long)ROWS * IN * OUT, out = y16, bytes = 2 * ROWS * OUT;
    } else if (!strcmp(name, "linear_s16x8")) {
      if (r == 0) for (i = 0; i < OUT; ++i) b64[i] = (int64_t)b32[i] * 256, rq[2 * i + 1] += 8; /* 2^8 x */
      mt_linear_s16_s8_s16(x16, w8, b64, y16, ROWS, IN, OUT, 0, rq, 1, 0, -32768);
      macs = (long)ROWS * IN * OUT, out = y16, bytes = 2 * ROWS * OUT;
    } else if (!strcmp(name, "softmax_s8")) {
      /* logits at 2^-4: z = (max - x) 2^-4 log2(e) in Q16 */
      mt_softmax_s8_s8(s8, y8, SM, SM, 1548970010, -13, 7, 0);
      out = y8, bytes = SM * SM;
    } else if (!strcmp(name, "softmax_s16")) {
      mt_softmax_s16_s16(s16, y16, SM, SM, 1548970010, -5, 15, 0); /* logits at 2^-12 */
      out = y16, bytes = 2 * SM * SM;
    } else if (!strcmp(name, "attention_s8")) {
      attn_params(p, 8);
      mt_attention_stream_s8(p, 0, x8, x8 + D, x8 + 2 * D, y8, acc32);
      macs = 2L * L * L * D, out = y8, bytes = L * D;
    } else if (!strcmp(name, "attention_s16")) {
      attn_params(p, 16);
      mt_attention_stream_s16(p, 0, x16, x16 + D, x16 + 2 * D, y16, acc64);
      macs = 2L * L * L * D, out = y16, bytes = 2 * L * D;
    } else if (!strcmp(name, "attention_s16_dense") || !strcmp(name, "attention_s16_dense_h4")) {
      const int heads = name[19] ? 4 : 1, hd = D / heads;
      int h;
      attn_params(p, 16);
      p[MT_ATTN_D] = p[MT_ATTN_DV] = hd, p[MT_ATTN_OUT_STRIDE] = D;
      p[MT_ATTN_LOGIT_S] = heads == 4 ? 10 : 11; /* scale 1/sqrt(hd) */
      for (h = 0; h < heads; ++h)
        mt_attention_stream_s16(p, 0, xd16 + h * hd, xd16 + D + h * hd, xd16 + 2 * D + h * hd, y16 + h * hd, acc64);
      macs = 2L * L * L * D, out = y16, bytes = 2 * L * D;
    } else if (!strcmp(name, "dscnn")) {
      macs = dscnn(), out = dsy, bytes = (int)sizeof dsy;
    } else if (!strncmp(name, "enc_", 4) && (macs = enc_linear(name)) > 0) {
      const int y8_out = !strcmp(name, "enc_ff1_s8");
      out = y8_out ? (const void *)ey8 : (const void *)ey16, bytes = y8_out ? (int)sizeof ey8 : (int)sizeof ey16;
    } else {
      printf("kernel_bench: unknown kernel '%s'\n", name);
      return 2;
    }
  }
  if (out) h = fnv(out, bytes); /* after the calls: the count difference is the kernel alone */
  printf("%s macs %ld hash %08lx\n", name, macs, (unsigned long)h);
  return 0;
}
