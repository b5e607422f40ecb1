/* mt_internal.h - what the runtime's kernel families share (private: the firmware gets it
 * inside its one mt_kernels.c, tools/embed_runtime.py): the target's feature macros, the
 * constant tables, small integer helpers, the Armv7E-M primitives of the DSP variants and
 * the shared fixed-point functions of mt_primitives.c. mt_kernels.c includes it first; each
 * family file includes it too, for its reader (the include guard keeps one copy). */
#ifndef MT_INTERNAL_H
#define MT_INTERNAL_H

#include "mt_kernels.h"

/* Kernel variants by target, chosen at compile time (as CMSIS-NN does): the portable C body
 * of a kernel is the reference and runs everywhere (host simulator, Cortex-M0); where the
 * Armv7E-M DSP extension is present (__ARM_FEATURE_DSP: Cortex-M4, M7, M33) a variant next
 * to it uses the ACLE intrinsics of <arm_acle.h> (SMLAD: two 16 x 16 multiplies added to a
 * 32-bit accumulator in one instruction; SMLALD: the same into 64 bits; SXTB16: two bytes
 * sign-extended to two halfwords). Every variant computes the same integers as the reference
 * (tools/mcu/run_kernels_qemu.sh checks it on each core); -DMT_NO_DSP selects the portable
 * bodies on any core (the benchmark's "before"); an optimizing build that keeps a frame pointer
 * (-fno-omit-frame-pointer) defines MT_COLS8_C (mt_conv_arm.c: its loop needs all 14 registers).
 * Where Armv8.1-M's M-profile vector extension
 * is present as well (__ARM_FEATURE_MVE: Cortex-M55 built with an FPU ABI, -mfloat-abi=softfp
 * or hard) the int8 x int8 linear layers take MVE (Helium) variants of <arm_mve.h> (VMLADAVA:
 * 16 int8 products added to a 32-bit sum in one instruction); -DMT_NO_MVE leaves them to the
 * DSP variants. */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && !defined(MT_NO_DSP)
#define MT_DSP 1
#include <arm_acle.h>
#else
#define MT_DSP 0
#endif
#if MT_DSP && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && !defined(MT_NO_MVE)
#define MT_MVE 1
#include <arm_mve.h>
#else
#define MT_MVE 0
#endif
/* RISC-V with 32-bit registers and the M extension (__riscv_mul: MUL, MULH, MULHU in one
 * instruction each), the rv32imc class of ESP32-C3 and CH32V: no packed SIMD, so its variants
 * (#if MT_RV32) load words and register-block the loops in C, the same integers as the
 * reference; -DMT_NO_RV selects the portable bodies (the benchmark's "before"). */
#if defined(__riscv) && defined(__riscv_xlen) && __riscv_xlen == 32 && defined(__riscv_mul) && !defined(MT_NO_RV)
#define MT_RV32 1
#else
#define MT_RV32 0
#endif

/* ==================================================================================== */
/* Constant tables (flash): mt_tables.h                                                 */
/* ==================================================================================== */
#include "mt_tables.h"

#define MT_LOG2E_Q15 47275u /* round(log2(e) * 2^15); relative error 6.5e-6 */

/* ==================================================================================== */
/* Small integer helpers                                                                */
/* ==================================================================================== */

/* |x| as an unsigned number (correct for INT32_MIN). */
static uint32_t mt_mag32(int32_t x) { return x < 0 ? 0u - (uint32_t)x : (uint32_t)x; }

/* The high word of a b: one UMULL where the core has it; Armv6-M has no 32 x 32 -> 64-bit
 * multiply (libgcc's 64-bit one costs ~40 instructions): four 16 x 16 products, with
 * a b = ah bh 2^32 + (ah bl + al bh) 2^16 + al bl, each partial sum below 2^32. */
static inline uint32_t mt_mulhi_u32(uint32_t a, uint32_t b) {
#if defined(__ARM_ARCH_6M__)
  const uint32_t ah = a >> 16, al = a & 0xFFFFu, bh = b >> 16, bl = b & 0xFFFFu;
  const uint32_t t = ah * bl + ((al * bl) >> 16), u = al * bh + (t & 0xFFFFu);
  return ah * bh + (t >> 16) + (u >> 16);
#else
  return (uint32_t)(((uint64_t)a * b) >> 32);
#endif
}

/* Index of the highest set bit of x > 0 (0 for x = 0): one CLZ where the core has it, else a
 * binary search (Cortex-M0 has no CLZ instruction). */
static int mt_msb32(uint32_t x) {
#if defined(__ARM_FEATURE_CLZ)
  return x ? 31 - __builtin_clz(x) : 0;
#else
  int b = 0;
  if (x >= 0x10000u) { x >>= 16; b += 16; }
  if (x >= 0x100u) { x >>= 8; b += 8; }
  if (x >= 0x10u) { x >>= 4; b += 4; }
  if (x >= 0x4u) { x >>= 2; b += 2; }
  if (x >= 0x2u) { b += 1; }
  return b;
#endif
}

static int mt_msb64(uint64_t x) {
  uint32_t hi = (uint32_t)(x >> 32);
  return hi ? 32 + mt_msb32(hi) : mt_msb32((uint32_t)x);
}

/* Rounding right shift of a 32-bit magnitude, s >= 1 (any size). */
static uint32_t mt_rsh_u32(uint32_t m, int s) {
  if (s > 32) return 0;
  if (s == 32) return m >> 31;
  return (m >> s) + ((m >> (s - 1)) & 1u);
}

/* A kernel's optimized variant for the target: called first with the kernel's arguments,
 * returns 1 when it computed the result; MT_NO_VARIANT leaves every call to the reference. */
#define MT_NO_VARIANT(...) 0

/* Variants a model can do without (a firmware folder's mt_kernels.c defines them 0 when no
 * step of its model can take the path, src/lower/emit.cpp: their code then costs no flash;
 * the results are the same either way). MT_CONV_SAME3X3: the Armv7E-M 'same' 3 x 3 depthwise
 * convolutions (mt_dw3s_chan_*, about 11 KB of Cortex-M4 code for int8 and int16 outputs);
 * MT_CONV_SAME1X3: the Armv7E-M 'same' 1-D depthwise convolutions of kernel 3 (mt_dw1s_*). */
#ifndef MT_CONV_SAME3X3
#define MT_CONV_SAME3X3 1
#endif
#ifndef MT_CONV_SAME1X3
#define MT_CONV_SAME1X3 1
#endif
/* The other Armv7E-M convolution variants of mt_conv_arm.c (the conditions that send a call to
 * each: mt_kernels.h, MT_CONV_DW3_FITS .. MT_CONV_COLS8_LAST1): MT_CONV_DW3, the generic rows of
 * the depthwise layers of kernel width 3 (mt_conv_dw3_chan_*, mt_dw3_sums*: the layers other
 * than the 'same' ones, and a 'same' 1-D layer's channel that can meet a rounding tie);
 * MT_CONV_COLS8, eight positions per pass for the layers of two or more output channels per
 * group (mt_conv_dsp_*_cols, mt_conv_cols8, the columns' helpers; off, the two below go too);
 * of it MT_CONV_CHANS8 and MT_CONV_CHANS8_CLAMP, the channels eight outputs at a time
 * (mt_conv_chans8_*: y_min at the type's minimum, or above it), and MT_CONV_ONE_CHAN, one
 * channel at a time (mt_conv_chan1_*: fewer than eight positions, a channel that can meet a
 * rounding tie, no bias, the array's last channel of many taps). A call that needs a variant
 * that is off goes to the reference whole. */
#ifndef MT_CONV_DW3
#define MT_CONV_DW3 1
#endif
#ifndef MT_CONV_COLS8
#define MT_CONV_COLS8 1
#endif
#ifndef MT_CONV_CHANS8
#define MT_CONV_CHANS8 1
#endif
#ifndef MT_CONV_CHANS8_CLAMP
#define MT_CONV_CHANS8_CLAMP 1
#endif
#ifndef MT_CONV_ONE_CHAN
#define MT_CONV_ONE_CHAN 1
#endif
/* The Armv7E-M variants of the linear layers with int8 weights (mt_linear.c): MT_LINEAR_ROWS, two
 * rows of x per pass (mt_linear_rows_*: a layer of two rows or more); MT_LINEAR_UP, the int8 x
 * int8 layers with int16 outputs and a channel at a shift of 0 or less (mt_linear_any_*,
 * mt_linear_up1_*); MT_LINEAR_ONE_ROW, one row per pass (mt_linear_dsp_*: a single row, a channel
 * at another shift or a negative multiplier, a bias beyond 2^30, wider sums). */
#ifndef MT_LINEAR_ROWS
#define MT_LINEAR_ROWS 1
#endif
#ifndef MT_LINEAR_UP
#define MT_LINEAR_UP 1
#endif
#ifndef MT_LINEAR_ONE_ROW
#define MT_LINEAR_ONE_ROW 1
#endif
/* The Armv7E-M attention kernels' code unrolled for a head (query and key) or value dimension
 * of 4, 8 or 16 (mt_attention.c: MT_ATTN_DIM4, MT_ATTN_DIM8, MT_ATTN_DIM16; other dimensions
 * take the loops for any). */
#ifndef MT_ATTN_DIM4
#define MT_ATTN_DIM4 1
#endif
#ifndef MT_ATTN_DIM8
#define MT_ATTN_DIM8 1
#endif
#ifndef MT_ATTN_DIM16
#define MT_ATTN_DIM16 1
#endif

/* ==================================================================================== */
/* Armv7E-M primitives of the DSP variants                                              */
/* ==================================================================================== */
#if MT_DSP
/* Four bytes or two halfwords from any address: a 4-byte copy is one LDR (Armv7-M loads
 * need no alignment; the compilers that provide <arm_acle.h> provide __builtin_memcpy). */
static inline int32_t mt_ld32(const void *p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

/* Bytes (b0, b1, b2, b3) of a word as two pairs of int16: SXTB16 gives (b0, b2), SXTB16 of
 * the word rotated right by 8 gives (b1, b3). The same split of both operands pairs
 * a_k with b_k, so SMLAD of the two halves adds a0 b0 + a2 b2 and a1 b1 + a3 b3.
 * The rotation is SXTB16's own operand (one instruction): <arm_acle.h> of GCC 12 has no
 * __ror and GCC does not fold a rotate into SXTB16, hence the one line of assembly. */
static inline int32_t mt_odd_bytes(int32_t w) {
  int32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(w));
  return r;
}

/* acc + a b as one SMLAL on the two halves of the int64 (GCC's %Q / %R operand modifiers) */
static inline int64_t mt_smlal(int64_t acc, int32_t a, int32_t b) {
  __asm__("smlal %Q0, %R0, %1, %2" : "+r"(acc) : "r"(a), "r"(b));
  return acc;
}

/* 4 int8 inputs against two int8 weight rows: x's bytes split once (SXTB16), 4 SMLAD */
#define MT_MAC2_S8_S8(xp, p0, p1, a0, a1)                                                                 \
  do {                                                                                                    \
    const int32_t xw_ = mt_ld32(xp), w0_ = mt_ld32(p0), w1_ = mt_ld32(p1);                                \
    const int32_t xe_ = __sxtb16(xw_), xo_ = mt_odd_bytes(xw_);                                           \
    a0 = __smlad(xo_, mt_odd_bytes(w0_), __smlad(xe_, __sxtb16(w0_), a0));                                \
    a1 = __smlad(xo_, mt_odd_bytes(w1_), __smlad(xe_, __sxtb16(w1_), a1));                                \
  } while (0)
/* 2 int16 inputs against two int16 weight rows: 2 SMLALD */
#define MT_MAC2_S16_S16(xp, p0, p1, a0, a1)                                                               \
  do {                                                                                                    \
    const int32_t xw_ = mt_ld32(xp);                                                                      \
    a0 = __smlald(xw_, mt_ld32(p0), a0);                                                                  \
    a1 = __smlald(xw_, mt_ld32(p1), a1);                                                                  \
  } while (0)
#endif

/* ==================================================================================== */
/* Shared fixed-point functions (mt_primitives.c)                                       */
/* ==================================================================================== */
/* The mantissa of 2^-r in Q24 (r < 2^16) and 2^-z in Q20 (softmax's row sums; mt_exp2neg_q16
 * in Q16 is public), the per-row normaliser of a Q20 sum of exps, and the dot products with b
 * at a stride (exact: int32 chunks into int64 for int8, int64 for int16). */
static uint32_t mt_exp2neg_mant_q24(uint32_t r);
static uint32_t mt_exp2neg_q20(uint32_t z);
static uint32_t mt_norm16(uint64_t sum_q20, int *shift);
static int64_t mt_dot_s8_s8(const int8_t *a, const int8_t *b, int bstride, int n);
static int64_t mt_dot_s16_s16(const int16_t *a, const int16_t *b, int bstride, int n);

/* ==================================================================================== */
/* Float32 (MT_F32): the *_f32 kernels and the float math of mt_primitives.c            */
/* ==================================================================================== */
/* The float32 kernels (training in float: forward, backward, loss and optimizer) are
 * compiled where every float operation is one IEEE-754 single-precision instruction: on
 * hosts (neither __arm__ nor __riscv), on Arm cores with a single-precision FPU (__ARM_FP &
 * 4: Cortex-M4F, M7, M33, M55 built with -mfloat-abi=hard or softfp) and on RISC-V with F
 * (__riscv_flen >= 32). Elsewhere (Cortex-M0, soft-float builds), or with -DMT_NO_F32, they
 * are not compiled at all, so no float helper is ever linked in.
 * The same C gives the same bits on each of them: every + - * /, comparison and int <-> float
 * conversion rounds once, to nearest even, in single precision (FLT_EVAL_METHOD 0, checked
 * below), subnormals kept (the reset state of x86's MXCSR and of the Cortex-M FPSCR), and
 * nothing is contracted into a fused multiply-add: GCC in ISO C mode (-std=c99, as every
 * build here) compiles with -ffp-contract=off, clang is told so by the pragma below, and a GNU
 * C mode on a core with FMA (where GCC's default is -ffp-contract=fast) is an error unless
 * MT_FP_CONTRACT_OFF says that -ffp-contract=off was given. No libm, no double. */
#if defined(MT_NO_F32)
#define MT_F32 0
#elif defined(__arm__)
#if defined(__ARM_FP) && (__ARM_FP & 4)
#define MT_F32 1
#else
#define MT_F32 0
#endif
#elif defined(__riscv)
#if defined(__riscv_flen) && __riscv_flen >= 32
#define MT_F32 1
#else
#define MT_F32 0
#endif
#else
#define MT_F32 1
#endif

#if MT_F32
#if defined(__FLT_EVAL_METHOD__) && (__FLT_EVAL_METHOD__ == 1 || __FLT_EVAL_METHOD__ == 2)
#error "mt_kernels.c: float evaluated in a wider format (x87?): the float32 kernels would not match the targets; use SSE (-mfpmath=sse) or -DMT_NO_F32"
#endif
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__) && !defined(__STRICT_ANSI__) && defined(__FP_FAST_FMAF) && !defined(MT_FP_CONTRACT_OFF)
#error "mt_kernels.c: the float32 kernels need -ffp-contract=off (GCC's default in ISO C mode: -std=c99; in a GNU mode add -ffp-contract=off -DMT_FP_CONTRACT_OFF)"
#endif

/* A float's bits and back (a union: C99 defines the reinterpretation) */
typedef union {
  float f;
  uint32_t u;
} mt_f32_word;

static inline uint32_t mt_f32_bits(float x) {
  mt_f32_word w;
  w.f = x;
  return w.u;
}

static inline float mt_f32_of_bits(uint32_t u) {
  mt_f32_word w;
  w.u = u;
  return w.f;
}

#define MT_F32_INF_BITS 0x7F800000u /* +infinity */
#define MT_F32_NAN_BITS 0x7FC00000u /* the quiet NaN the math functions return for invalid arguments */

/* Shared by the float32 kernels (mt_primitives.c): the normal distribution's CDF Phi(x) and,
 * when pdf is not NULL, its density exp(-x^2/2) / sqrt(2 pi) in *pdf (the GELU and its
 * gradient); the sums s + a[0] b[0] + a[as] b[bs] + .. (n terms) and s + a[0] + a[as] + ..,
 * each term added in index order (the kernels' one summation order). */
static float mt_phi_pdf(float x, float *pdf);
static float mt_dotf(float s, const float *a, int as, const float *b, int bs, int n);
static float mt_sumf(float s, const float *a, int as, int n);

/* A gradient output: g = v (add = 0: store) or g = g + v (add = 1: accumulate) */
static inline void mt_put_f32(float *g, float v, int add) { *g = add ? *g + v : v; }
#endif

#endif /* MT_INTERNAL_H */
