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
 * bodies on any core (the benchmark's "before"). Where Armv8.1-M's M-profile vector extension
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

#endif /* MT_INTERNAL_H */
