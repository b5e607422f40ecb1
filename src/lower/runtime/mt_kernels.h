/* mt_kernels.h - microtorch fixed-point runtime kernels (C99).
 *
 * One set of integer kernels: the host simulator calls these functions and the emitter
 * copies mt_kernels.h and mt_kernels.c into every generated firmware (mt_kernels.c as one
 * file: the kernel families of src/lower/runtime amalgamated by tools/embed_runtime.py), so the
 * host and the target compute the same bits (verified under QEMU by
 * tools/mcu/run_kernels_qemu.sh). Each declaration below is the only one: the host binds the
 * kernels by these signatures. The sections follow the family files (mt_<family>.c, named as
 * the lowering's op families), each kernel defined under its full name.
 *
 * Rules every kernel follows
 *   - No malloc, no stdio, no float or double, no division or modulo (Cortex-M0 has no
 *     divide instruction): reciprocals come from a fixed-point Newton iteration. (The
 *     float32 kernels, *_f32, are the exception: see "Float32 kernels" below.)
 *   - Only <stdint.h>. The reference bodies are plain portable C99 (the compiler may still
 *     turn a zeroing loop into a memset call, and on Cortex-M0 64-bit multiplies and shifts
 *     into __aeabi_lmul / __aeabi_llsl / __aeabi_llsr from libgcc). Where the target has
 *     the Armv7E-M DSP extension (__ARM_FEATURE_DSP: Cortex-M4, M7, M33), optimized variants
 *     of some kernels (their family files say which) use the ACLE intrinsics of <arm_acle.h>;
 *     they compute the same integers (checked under QEMU on each core); -DMT_NO_DSP turns
 *     them off.
 *   - No undefined or implementation-defined integer behaviour: no signed overflow, no
 *     shift of a negative value in either direction (rounding works on magnitudes), no
 *     shift by >= the width. Every narrowing saturates. Clean under -fsanitize=undefined.
 *
 * Number format
 *   A tensor of int8 ("s8") or int16 ("s16") integers q stands for the real values
 *   scale * (q - zero_point). The scale is any positive real (a power of two 2^-frac in the
 *   power-of-two scheme); the zero point is 0 except for affine int8 tensors. Weights are
 *   int8 or int16, symmetric, with one scale per output channel or per tensor; biases are
 *   int32 (int8 inputs) or int64 (int16 inputs) in the accumulator's scale.
 *
 * Requantization: y = round(x * m * 2^-(31 + s)), the multiplier of a real ratio r written
 *   r = m * 2^-(31 + s) with |m| in [2^30, 2^31) (gemmlowp's quantized multiplier and shift;
 *   TFLite and CMSIS-NN requantize the same way); m = 0 stands for m = 2^31, the ratio 2^-s:
 *   a plain rounding shift, no multiply (the power-of-two scheme's requantization, cheap on
 *   cores without a fast multiplier). The product is exact in 64 bits and rounded ONCE, to
 *   nearest with ties away from zero, then saturated to int32 (mt_rq). gemmlowp instead
 *   rounds twice (SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT), with ties of
 *   negative products going up; the two differ by at most one unit, only near ties.
 *   Kernels add the output zero point and saturate to the output type.
 *
 * Rounding mode (the only one used anywhere)
 *   Round to nearest, ties away from zero, then saturate to the destination type:
 *       mt_rshift_s32(x, s) = sign(x) * floor(|x| / 2^s + 1/2)        (s > 0)
 *   e.g. 5 >> 1 -> 3, -5 >> 1 -> -3, 6 >> 2 -> 2 (1.5 -> 2), -6 >> 2 -> -2. It is symmetric
 *   (no drift for zero-mean data) and equals gemmlowp/CMSIS-NN's RoundingDivideByPOT.
 *
 * Kernel names: mt_<op>_<in>_<out> (mt_linear_<x>_<w>_<y>, mt_add_<a>_<b>_<y>) with s8/s16;
 * one suffix when input and output share a type. Arrays are row-major and contiguous unless
 * a stride is given. Output buffers may alias an input only where a kernel says so. Sizes
 * are int; n <= 0 does nothing.
 *
 * Accuracy: the worst error against double precision, measured by the tests of
 * tests/lower_kernels/, is given per kernel in README.md beside this file (LSB = one
 * unit of the output). Kernels marked "exact" compute the exact integer result and round it
 * once with the rule above.
 *
 * Float32 kernels (*_f32: training on the device in float, its forward, backward, loss and
 * optimizer; and the float math mt_expf, mt_logf, ...)
 *   Compiled only where every float operation is a single-precision instruction (MT_F32 of
 *   mt_internal.h: hosts, Arm cores with an FPU built with -mfloat-abi=hard or softfp, RISC-V
 *   with F); declared everywhere (calling one on another core fails to link). Plain C99
 *   float arithmetic, each operation rounded once to nearest (no fused multiply-add: GCC in
 *   ISO C mode, -std=c99, contracts nothing; no libm, no double), every sum in the order its
 *   kernel states, so the host simulator and each of those targets compute the same bits
 *   (the lowering's training test compares a Cortex-M4F on QEMU with the host). They
 *   may differ from microtorch's own float ops in the last bits.
 *   Arrays are float (inputs const), sizes int (n <= 0 does nothing), float scalars float.
 *   A gradient output takes an `acc` flag: 0 stores the kernel's value v (g = v), 1 adds it
 *   (g = g + v, v the same bits as stored); where a kernel has several gradient outputs, bit
 *   0 is for the activation gradients (dx, da, dq, ..) and bit 1 for the parameter gradients
 *   (dw, db, dg). A NULL gradient (or loss, stats, lse) pointer means "not wanted": that
 *   work is skipped. "Sum over k ascending" is ((t_0 + t_1) + t_2) + .., from 0 unless a
 *   first term is named. Outputs must not overlap inputs unless the kernel says so.
 *   Their error bounds against double precision are not measured by kernel tests yet (the
 *   lowering's training tests compare whole training steps with microtorch's autograd).
 */
#ifndef MT_KERNELS_H
#define MT_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------ */
/* Rounding, saturation and requantization (the only places where precision is dropped)  */
/* ------------------------------------------------------------------------------------ */

static inline int16_t mt_sat_s16(int32_t x) {
  return (int16_t)(x > 32767 ? 32767 : (x < -32768 ? -32768 : x));
}

static inline int8_t mt_sat_s8(int32_t x) {
  return (int8_t)(x > 127 ? 127 : (x < -128 ? -128 : x));
}

/* x + zero_point saturated to int8 / int16 (x is any int32, |zero_point| <= 32768). */
static inline int8_t mt_out_s8(int32_t x, int32_t zero) {
  return mt_sat_s8(x > 65536 ? 65536 : x < -65536 ? -65536 : x + zero);
}

static inline int16_t mt_out_s16(int32_t x, int32_t zero) {
  return mt_sat_s16(x > 131072 ? 131072 : x < -131072 ? -131072 : x + zero);
}

/* Magnitude of x as an unsigned number (correct for INT64_MIN). */
static inline uint64_t mt_abs_u64(int64_t x) {
  return x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
}

/* sign * m saturated to int32 (m is a magnitude). */
static inline int32_t mt_signed_sat32(int negative, uint64_t m) {
  if (negative) return m >= 0x80000000u ? INT32_MIN : -(int32_t)m;
  return m >= 0x7FFFFFFFu ? INT32_MAX : (int32_t)m;
}

/* Rounding right shift of a magnitude: floor(m / 2^s + 1/2), 0 < s <= 63, never overflows. */
static inline uint64_t mt_rshift_u64(uint64_t m, int s) {
  return (m >> s) + ((m >> (s - 1)) & 1u);
}

/* Round-to-nearest (ties away from zero) right shift of a 64-bit value, saturated to int32.
 * shift <= 0 is a saturating left shift; any shift amount is valid. */
static inline int32_t mt_rshift_s64(int64_t x, int shift) {
  uint64_t m = mt_abs_u64(x);
  if (shift > 0) {
    m = shift < 64 ? mt_rshift_u64(m, shift) : (shift == 64 ? m >> 63 : 0); /* |x| <= 2^63 */
  } else if (shift < 0 && m != 0) {
    int n = -shift;
    m = (n >= 32 || (m >> (32 - n)) != 0) ? 0xFFFFFFFFu : m << n; /* saturates below */
  }
  return mt_signed_sat32(x < 0, m);
}

/* mt_rshift_s64 where |x| < 2^bits and bits - 30 <= shift <= bits (bits <= 61, a constant at
 * each call: the adds' and LayerNorm's sums of products, whose bounds their kernels state):
 * round half away from zero is floor((x - [x < 0] + 2^(shift-1)) 2^-shift) (the - [x < 0]
 * moves a negative tie down), formed with an offset of 2^bits (a multiple of 2^shift) so
 * that one unsigned shift remains, whose result is below 2^32; |result| <= 2^30, so there
 * is nothing to saturate. */
static inline int32_t mt_rshift_within(int64_t x, int shift, int bits) {
  const uint64_t w = (uint64_t)x - (uint64_t)(x < 0) + ((uint64_t)1 << (shift - 1)) + ((uint64_t)1 << bits);
  return (int32_t)((uint32_t)(w >> shift) - (1u << (bits - shift)));
}

/* Same on a 32-bit value (cheaper on Cortex-M0: no 64-bit arithmetic for shift > 0). */
static inline int32_t mt_rshift_s32(int32_t x, int shift) {
  if (shift > 0 && shift < 32) {
    uint32_t m = x < 0 ? 0u - (uint32_t)x : (uint32_t)x;
    m = (m >> shift) + ((m >> (shift - 1)) & 1u);
    return x < 0 ? -(int32_t)m : (int32_t)m;
  }
  return shift == 0 ? x : mt_rshift_s64(x, shift);
}

/* The requantization of the header comment: round(x * m * 2^-(31 + s)) saturated to int32,
 * for |m| in [2^30, 2^31) (any sign), or m = 0: round(x * 2^-s). Exact for |x| < 2^47. */
int32_t mt_rq(int64_t x, int32_t m, int s);

/* mt_rq32 in its common case 1 <= s <= 31 (a ratio below 1/2, m != 0), p = x m: |p| <= 2^62,
 * so |result| <= 2^30 needs no saturation, and sign(p) floor(|p| 2^-(31+s) + 1/2) equals
 * floor((t + 2^(s-1)) 2^-s) with t = floor((p - [p < 0]) 2^-31) (a tie of a negative p moves
 * down); t is formed with an offset of 2^31 (p + 2^62 >= 0), so only unsigned 32-bit shifts
 * remain (Cortex-M4: SMULL and 14 single-cycle instructions, no branch). */
static inline int32_t mt_rq32_common(int32_t x, int32_t m, int s) {
  const int64_t p = (int64_t)x * m;
  const uint32_t t = (uint32_t)(((uint64_t)p - (uint64_t)(p < 0) + ((uint64_t)1 << 62)) >> 31);
  return (int32_t)((t >> s) + ((t >> (s - 1)) & 1u)) - (int32_t)(1u << (31 - s));
}

/* mt_rq32 for -30 <= s <= 0 (a ratio of at least 1/2, m != 0): the same identity with
 * sh = 31 + s in [1, 31], on 64 bits (t = floor((p - [p < 0]) 2^-(sh-1)) may need 33 bits,
 * offset by 2^(32-s)), saturated to int32. */
static inline int32_t mt_rq32_large(int32_t x, int32_t m, int s) {
  const int64_t p = (int64_t)x * m;
  const uint64_t u = ((uint64_t)p - (uint64_t)(p < 0) + ((uint64_t)1 << 62)) >> (30 + s);
  const uint64_t r = (u + 1u) >> 1, off = (uint64_t)1 << (31 - s); /* r - off is the result */
  if (r >= off + 0x7FFFFFFFu) return INT32_MAX;
  if (r <= off - 0x80000000u) return INT32_MIN;
  return (int32_t)((int64_t)r - (int64_t)off);
}

/* The same for an int32 x (the int8 kernels' accumulators): one 32 x 32 -> 64-bit multiply. */
static inline int32_t mt_rq32(int32_t x, int32_t m, int s) {
  uint64_t p, a;
  int neg, sh;
#ifndef __ARM_ARCH_6M__ /* Armv6-M (Cortex-M0) has no 32 x 32 -> 64 multiply: the magnitudes below are cheaper there */
  if ((uint32_t)s - 1u < 31u && m != 0) return mt_rq32_common(x, m, s);        /* 1 <= s <= 31 */
  if ((uint32_t)s + 30u < 31u && m != 0) return mt_rq32_large(x, m, s);         /* -30 <= s <= 0 */
#endif
  if (m == 0) return mt_rshift_s32(x, s);
  a = x < 0 ? (uint64_t)(0u - (uint32_t)x) : (uint64_t)(uint32_t)x;
  neg = (x < 0) != (m < 0);
  p = a * (uint64_t)(m < 0 ? 0u - (uint32_t)m : (uint32_t)m); /* < 2^62 */
  if (p == 0) return 0;
  sh = 31 + s;
  if (sh > 0) return mt_signed_sat32(neg, sh < 64 ? mt_rshift_u64(p, sh) : 0);
  return mt_signed_sat32(neg, (sh < -31 || (p >> (63 + sh)) != 0) ? 0xFFFFFFFFu : p << -sh);
}

/* ------------------------------------------------------------------------------------ */
/* Fixed-point primitives (mt_primitives.c; exposed for the lowering and for tests)      */
/* ------------------------------------------------------------------------------------ */

/* 1/d for d > 0 without division: returns y in (2^30, 2^31] with 1/d = y * 2^-(*e),
 * y - 2^e/d in [0, 6] (relative error < 2^-27; exact for powers of two; never below the
 * true value, so quotients built on it round ties correctly).
 * d == 0 returns 0xFFFFFFFF with *e = 0 (the caller treats it as "infinite"). */
uint32_t mt_recip_u32(uint32_t d, int *e);

/* 1/sqrt(v) for v > 0: returns y in (2^30, 2^31] with 1/sqrt(v) = y * 2^-(*e),
 * y - 2^e/sqrt(v) in [0, 3.1] (relative error < 2^-28). v == 0 returns 0 with *e = 0. */
uint32_t mt_rsqrt_u64(uint64_t v, int *e);

/* 2^-z for z >= 0 in Q16 (z = 65536 means 2^-1), result in Q16: 65536 at z = 0,
 * 0 once z >= 17. Q24 table of 2^(-k/64) in 64 segments, quadratic interpolation, one rounding:
 * within 0.51 LSB of 2^16 * 2^-z. */
uint32_t mt_exp2neg_q16(uint32_t z);

/* Float32 math of the float32 kernels (mt_primitives.c, compiled where MT_F32 is 1, see
 * "Float32 kernels" above): float + - * /, comparisons and integer bit casts only, so they
 * give the same bits on every target; no libm. Worst error against double precision,
 * measured over sweeps by tests/lower_kernels/test_primitives.cpp (ulp of the float result):
 *   mt_expf(x)   exp: 2^k exp(r), Cody-Waite reduction, Taylor to degree 7; infinity above
 *                88.73, subnormals below -87.34, 0 below -103.98 (1 ulp)
 *   mt_logf(x)   natural log, 2 atanh(f / (2 + f)) series; x = 0: -infinity, x < 0: NaN (1 ulp)
 *   mt_tanhf(x)  tanh: a fitted odd polynomial below 0.625, 1 - 2 / (exp(2x) + 1) above (2 ulp)
 *   mt_phif(x)   the normal CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2 of the exact GELU, in x
 *                (no rounding of x / sqrt 2): a fitted polynomial below 1/sqrt(2), the tail
 *                exp(-x^2/2) G(|x|) (exp(-x^2/2) without the rounding of x^2, G fitted), so
 *                the tail Phi(-a) keeps its relative accuracy (5 ulp; 4.5 measured)
 *   mt_rsqrtf(x) 1/sqrt(x): bit-trick estimate and three Newton steps; x <= 0 or infinity: 0
 *                (2 ulp) */
float mt_expf(float x);
float mt_logf(float x);
float mt_tanhf(float x);
float mt_phif(float x);
float mt_rsqrtf(float x);

/* ------------------------------------------------------------------------------------ */
/* Linear layer and matmul (mt_linear.c)                                                 */
/* ------------------------------------------------------------------------------------ */

/* y = x W^T + b (PyTorch nn.Linear layout), per-channel requantized:
 *   x [rows, in] (rows x_stride elements apart; 0 = packed), w [out, in] symmetric, b [out]
 *   in the accumulator's scale (NULL = none; a zero point of x is folded into it by the
 *   lowering: b - z_x * sum_j w[o][j]), y [rows, out]:
 *     y[r, o] = max(y_min, y_zero + rq(sum_j x[r, j] w[o, j] + b[o], rq[2c], rq[2c + 1]))
 *   with c = o when rq_per_channel, else 0 (rq holds pairs (m, s) of mt_rq). y_min is the
 *   lowest output (the output's minimum, or its zero point for a fused relu).
 * Weight order: a layer whose x and w differ in width (int16 x int8, int8 x int16) takes each
 *   row of w in pair order, the middle two of every four weights swapped: w[o, 0], w[o, 2],
 *   w[o, 1], w[o, 3], w[o, 4], w[o, 6], w[o, 5], w[o, 7], .., the last in % 4 in order (the
 *   lowering stores them so; lower::pair_order). A word of four int8 weights then splits
 *   (SXTB16) into the halfword pairs (w0, w1), (w2, w3) that meet two int16 words of x as
 *   loaded, and two int16 words of weights meet the split of four int8 inputs. Same-width
 *   layers take w in order.
 * Accumulators: int8 x int8 sums in int32 (|x w| <= 2^14: exact up to in = 131071);
 * otherwise int64 (int32 partial sums of 508 terms for int16 x int8). Exact.
 * y must not alias x. b is int32 for int8 x, int64 for int16 x. Any address works; on
 * Armv7E-M, int16 x int16 layers whose rows of x and w start on word boundaries, with in a
 * multiple of 8, load two words per instruction (LDRD): the generated arrays are declared
 * MT_WORD_ALIGNED and the arena's buffers start at multiples of 8 bytes. */
#if defined(__GNUC__) || defined(__clang__)
#define MT_WORD_ALIGNED __attribute__((aligned(4)))
#else
#define MT_WORD_ALIGNED
#endif
/* Where the Armv7E-M variants of the int8-weight layers set a channel's requantization up once
 * and sum in int32 (mt_linear.c), stated once for the runtime and for the lowering's emitter,
 * which leaves out of a firmware the variants no step takes (src/lower/emit.cpp): a channel
 * (m, s) is fast when 1 <= s <= 31, m > 0 and |y_zero| < 2^(31 - s); the int32 sums from a bias
 * |b| < 2^30 are exact for up to MT_LINEAR_MAX_IN_S8 inputs of int8 x (|x w| <= 2^14) and
 * MT_LINEAR_MAX_IN_S16 of int16 x (|x w| <= 2^22). */
#define MT_RQ_CHAN_FAST(m, s, y_zero)                                                              \
  ((s) >= 1 && (s) <= 31 && (m) > 0 &&                                                             \
   ((y_zero) < 0 ? 0u - (uint32_t)(y_zero) : (uint32_t)(y_zero)) < 1u << (31 - (s)))
#define MT_LINEAR_BIAS_FITS(b) ((b) < (1 << 30) && (b) > -(1 << 30))
#define MT_LINEAR_MAX_IN_S8 65536
#define MT_LINEAR_MAX_IN_S16 256
void mt_linear_s8_s8_s8(const int8_t *x, const int8_t *w, const int32_t *b, int8_t *y, int rows, int in,
                        int out, int x_stride, const int32_t *rq, int rq_per_channel, int32_t y_zero,
                        int32_t y_min);
void mt_linear_s8_s8_s16(const int8_t *x, const int8_t *w, const int32_t *b, int16_t *y, int rows, int in,
                         int out, int x_stride, const int32_t *rq, int rq_per_channel, int32_t y_zero,
                         int32_t y_min);
void mt_linear_s8_s16_s8(const int8_t *x, const int16_t *w, const int32_t *b, int8_t *y, int rows, int in,
                         int out, int x_stride, const int32_t *rq, int rq_per_channel, int32_t y_zero,
                         int32_t y_min);
void mt_linear_s8_s16_s16(const int8_t *x, const int16_t *w, const int32_t *b, int16_t *y, int rows, int in,
                          int out, int x_stride, const int32_t *rq, int rq_per_channel, int32_t y_zero,
                          int32_t y_min);
void mt_linear_s16_s8_s8(const int16_t *x, const int8_t *w, const int64_t *b, int8_t *y, int rows, int in,
                         int out, int x_stride, const int32_t *rq, int rq_per_channel, int32_t y_zero,
                         int32_t y_min);
void mt_linear_s16_s8_s16(const int16_t *x, const int8_t *w, const int64_t *b, int16_t *y, int rows, int in,
                          int out, int x_stride, const int32_t *rq, int rq_per_channel, int32_t y_zero,
                          int32_t y_min);
void mt_linear_s16_s16_s8(const int16_t *x, const int16_t *w, const int64_t *b, int8_t *y, int rows, int in,
                          int out, int x_stride, const int32_t *rq, int rq_per_channel, int32_t y_zero,
                          int32_t y_min);
void mt_linear_s16_s16_s16(const int16_t *x, const int16_t *w, const int64_t *b, int16_t *y, int rows,
                           int in, int out, int x_stride, const int32_t *rq, int rq_per_channel,
                           int32_t y_zero, int32_t y_min);

/* Batched matmul of two symmetric activations: y[t] = rq(a[t] @ b[t], m, s) for t < batch.
 *   a [batch, M, K]; b [batch, K, N], or [batch, N, K] when b_transposed != 0 (a @ b^T);
 *   y [batch, M, N], symmetric. s16: int64 accumulator; s8: int32 (K <= 131071). y must
 *   not alias a or b. Exact. */
void mt_matmul_s8(const int8_t *a, const int8_t *b, int8_t *y, int batch, int M, int K, int N,
                  int b_transposed, int32_t m, int s);
void mt_matmul_s16(const int16_t *a, const int16_t *b, int16_t *y, int batch, int M, int K, int N,
                   int b_transposed, int32_t m, int s);

/* Float32 (training in float; see "Float32 kernels" above).
 * mt_linear_f32: y [rows, out] = x W^T + b, x [rows, in] at a row stride of xs elements (0:
 *   packed, xs = in), W [out, in] row-major, b [out] or NULL:
 *     y[r, c] = b[c] + x[r, 0] w[c, 0] + x[r, 1] w[c, 1] + ..   (k ascending, from b[c] or 0)
 * mt_linear_backward_f32: the gradients of y = x W^T + b from dy [rows, out]:
 *     dx[r, k] = sum_c dy[r, c] w[c, k]  (c ascending; dx [rows, in] packed; acc bit 0)
 *     dw[c, k] = sum_r dy[r, c] x[r, k]  (r ascending; acc bit 1)
 *     db[c]    = sum_r dy[r, c]          (r ascending; acc bit 1)
 * mt_matmul_f32: y[z] = a[z] b[z] for z < batch, a [batch, M, K], b [batch, K, N] (bt = 1:
 *   stored [batch, N, K], read transposed), y [batch, M, N], all packed:
 *     y[z, m, n] = sum_k a[z, m, k] b[z, k, n]   (k ascending)
 * mt_matmul_backward_f32: da[z, m, k] = sum_n dy[z, m, n] b[z, k, n] (n ascending),
 *   db[z, k, n] = sum_m a[z, m, k] dy[z, m, n] (m ascending), db laid out as b (transposed
 *   when bt); acc bit 0 for both. */
void mt_linear_f32(const float *x, const float *w, const float *b, float *y, int rows, int in, int out, int xs);
void mt_linear_backward_f32(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                            int rows, int in, int out, int xs, int acc);
void mt_matmul_f32(const float *a, const float *b, float *y, int batch, int M, int K, int N, int bt);
void mt_matmul_backward_f32(const float *a, const float *b, const float *dy, float *da, float *db, int batch, int M,
                            int K, int N, int bt, int acc);

/* ------------------------------------------------------------------------------------ */
/* Elementwise (mt_elementwise.c)                                                        */
/* ------------------------------------------------------------------------------------ */

/* y[i] = y_zero + round((a[i] ma + b[i mod nb] mb + c) * 2^-shift) for i < n: a sum of two
 * tensors in one rounding, b repeated along the leading dims (nb == n: elementwise; a bias
 * [nb] broadcast over rows). The zero points are folded into c = -(z_a ma + z_b mb) (plus
 * any constant); mb < 0 subtracts. In the power-of-two scheme ma, mb are powers of two that
 * align both operands exactly. The lowering keeps |ma|, |mb| < 2^21 for two int8 operands
 * (int32 arithmetic) and < 2^30 otherwise (int64). nb counts with a wrapping index (no
 * modulo); nb <= 0 does nothing. y may alias a (and b when nb == n). Exact. */
void mt_add_s8_s8_s8(const int8_t *a, const int8_t *b, int nb, int8_t *y, int n, int32_t ma, int32_t mb,
                     int32_t c, int shift, int32_t y_zero);
void mt_add_s8_s8_s16(const int8_t *a, const int8_t *b, int nb, int16_t *y, int n, int32_t ma, int32_t mb,
                      int32_t c, int shift, int32_t y_zero);
void mt_add_s8_s16_s8(const int8_t *a, const int16_t *b, int nb, int8_t *y, int n, int32_t ma, int32_t mb,
                      int32_t c, int shift, int32_t y_zero);
void mt_add_s8_s16_s16(const int8_t *a, const int16_t *b, int nb, int16_t *y, int n, int32_t ma, int32_t mb,
                       int32_t c, int shift, int32_t y_zero);
void mt_add_s16_s8_s8(const int16_t *a, const int8_t *b, int nb, int8_t *y, int n, int32_t ma, int32_t mb,
                      int32_t c, int shift, int32_t y_zero);
void mt_add_s16_s8_s16(const int16_t *a, const int8_t *b, int nb, int16_t *y, int n, int32_t ma, int32_t mb,
                       int32_t c, int shift, int32_t y_zero);
void mt_add_s16_s16_s8(const int16_t *a, const int16_t *b, int nb, int8_t *y, int n, int32_t ma, int32_t mb,
                       int32_t c, int shift, int32_t y_zero);
void mt_add_s16_s16_s16(const int16_t *a, const int16_t *b, int nb, int16_t *y, int n, int32_t ma,
                        int32_t mb, int32_t c, int shift, int32_t y_zero);

/* y[i] = y_zero + rq((a[i] - a_zero) (b[i mod nb] - b_zero), m, s): a product of two tensors
 * (or a tensor and a constant block), b repeated as in mt_add_*. The product is exact in
 * int32 and requantized once. y may alias a (and b when nb == n). Exact. */
void mt_mul_s8(const int8_t *a, const int8_t *b, int nb, int8_t *y, int n, int32_t a_zero, int32_t b_zero,
               int32_t m, int s, int32_t y_zero);
void mt_mul_s16(const int16_t *a, const int16_t *b, int nb, int16_t *y, int n, int32_t a_zero,
                int32_t b_zero, int32_t m, int s, int32_t y_zero);

/* y[i] = y_zero + rq(x[i] - x_zero, m, s), with x[i] - x_zero first clamped at 0 when relu:
 * a change of scale, zero point or type, a product with a constant (m < 0 negates), a relu.
 * y may alias x when both have the same type. Exact. */
void mt_requant_s8_s8(const int8_t *x, int8_t *y, int n, int32_t x_zero, int32_t m, int s, int32_t y_zero,
                      int relu);
void mt_requant_s8_s16(const int8_t *x, int16_t *y, int n, int32_t x_zero, int32_t m, int s,
                       int32_t y_zero, int relu);
void mt_requant_s16_s8(const int16_t *x, int8_t *y, int n, int32_t x_zero, int32_t m, int s,
                       int32_t y_zero, int relu);
void mt_requant_s16_s16(const int16_t *x, int16_t *y, int n, int32_t x_zero, int32_t m, int s,
                        int32_t y_zero, int relu);

/* Row division (LinearAttention's normaliser): y[r, j] = rq(x[r, j] / d[r]) for symmetric x
 * [rows, n], d [rows], y: one reciprocal per row (mt_recip_u32 of |d[r]|, r in (2^30, 2^31],
 * 1/|d| = r 2^-e, never below), then y = rq(|x| r, m, s + e) with the sign of x d, where
 * m 2^-(31 + s) = scale_x / (scale_d scale_y). A zero divisor gives the saturated +max /
 * -max of the output with the sign of x, and 0 for x == 0: no trap. y may alias x, never d.
 * Within 0.5 LSB plus the reciprocal's 2^-27 relative error. */
void mt_div_rows_s8(const int8_t *x, const int8_t *d, int8_t *y, int rows, int n, int32_t m, int s);
void mt_div_rows_s16(const int16_t *x, const int16_t *d, int16_t *y, int rows, int n, int32_t m, int s);

/* Float32 (training in float; see "Float32 kernels" above); b, when given, is a trailing
 * block of nb elements repeated n / nb times (nb divides n), read with a wrapping counter.
 * mt_add_f32: y[i] = ca a[i] + cb b[i mod nb] (two products, one sum); b NULL: y[i] = ca a[i]
 *   + cb (add: ca = cb = 1; sub: cb = -1; neg, a product or a quotient by a constant: b NULL,
 *   cb = 0, ca = -1 or c or 1/c). y may alias a (or b when nb = n).
 * mt_add_backward_f32: da[i] = ca dy[i]; db[j] = cb (sum over the repeats r ascending of
 *   dy[j + r nb]); acc bit 0 for both.
 * mt_mul_f32: y[i] = a[i] b[i mod nb]; y may alias a. Correctly rounded.
 * mt_mul_backward_f32: da[i] = dy[i] b[i mod nb]; db[j] = sum over the repeats r ascending of
 *   dy[i] a[i], i = j + r nb; acc bit 0 for both. */
void mt_add_f32(const float *a, const float *b, float *y, int n, int nb, float ca, float cb);
void mt_add_backward_f32(const float *dy, float *da, float *db, int n, int nb, float ca, float cb, int acc);
void mt_mul_f32(const float *a, const float *b, float *y, int n, int nb);
void mt_mul_backward_f32(const float *a, const float *b, const float *dy, float *da, float *db, int n, int nb,
                         int acc);

/* ------------------------------------------------------------------------------------ */
/* Activation functions (mt_activation.c)                                                */
/* ------------------------------------------------------------------------------------ */

/* y[i] = table[x[i] + 128]: any function of an int8 tensor (tanh, sigmoid, GELU, ...) as a
 * 256-entry table the lowering computes in double precision for the input's and output's
 * scales and zero points: the correctly rounded result, 0.5 LSB. y may alias x (s8). */
void mt_lut_s8_s8(const int8_t *x, int8_t *y, int n, const int8_t *table);
void mt_lut_s8_s16(const int8_t *x, int16_t *y, int n, const int16_t *table);

/* tanh, sigmoid and GELU of int16 inputs, through 258-entry Q0.16 tables on [0, 8] (step
 * 1/32) with quadratic interpolation and odd/even symmetry for negative inputs:
 *   t = rq(x, in_m, in_s) is |x| * scale_x in Q16 (the table's argument), then
 *   tanh(x), sigmoid(x) = (1 + tanh(x/2)) / 2: y = y_zero + rq(f in Q20, out_m, out_s);
 *   gelu(x) = x Phi(x) (PyTorch's exact, erf-based GELU): y = y_zero + rq(x * Phi in Q16,
 *   out_m, out_s). Error over every int16 input: tanh 0.80 LSB of Q0.15, sigmoid 0.65, gelu
 *   0.67 (Q3.12) to 0.87 (Q0.15). y may alias x (s16). */
void mt_tanh_s16_s8(const int16_t *x, int8_t *y, int n, int32_t in_m, int in_s, int32_t out_m, int out_s,
                    int32_t y_zero);
void mt_tanh_s16_s16(const int16_t *x, int16_t *y, int n, int32_t in_m, int in_s, int32_t out_m,
                     int out_s, int32_t y_zero);
void mt_sigmoid_s16_s8(const int16_t *x, int8_t *y, int n, int32_t in_m, int in_s, int32_t out_m,
                       int out_s, int32_t y_zero);
void mt_sigmoid_s16_s16(const int16_t *x, int16_t *y, int n, int32_t in_m, int in_s, int32_t out_m,
                        int out_s, int32_t y_zero);
void mt_gelu_s16_s8(const int16_t *x, int8_t *y, int n, int32_t in_m, int in_s, int32_t out_m, int out_s,
                    int32_t y_zero);
void mt_gelu_s16_s16(const int16_t *x, int16_t *y, int n, int32_t in_m, int in_s, int32_t out_m,
                     int out_s, int32_t y_zero);

/* SwiGLU's gated product (Shazeer 2020; Llama's MLP) y = silu(g) u = g sigmoid(g) u of int16
 * g, u [n], in one pass with the integers of three kernels in turn: s = sigmoid(g) in Q0.15 as
 * mt_sigmoid_s16_s16(g, s, n, in_m, in_s, sig_m, sig_s, 0), a = rq(g s, act_m, act_s) and y =
 * rq(a u, m, s) as mt_mul_s16 (zero points 0), each saturated to int16. y may alias g or u. */
void mt_swiglu_s16(const int16_t *g, const int16_t *u, int16_t *y, int n, int32_t in_m, int in_s, int32_t sig_m,
                   int sig_s, int32_t act_m, int act_s, int32_t m, int s);

/* Float32 (training in float; see "Float32 kernels" above); y may alias x; the backward
 * kernels take acc bit 0.
 * mt_relu_f32: y = x > 0 ? x : 0; mt_relu_backward_f32 from y: dx = y > 0 ? dy : 0. Exact.
 * mt_clamp_f32: y = min(max(x, lo), hi); mt_clamp_backward_f32: dx = dy where lo <= x <= hi
 *   (PyTorch's convention: the gradient passes at the bounds), else 0. Exact.
 * mt_gelu_f32: PyTorch's GELU: x Phi(x) (tanh_form 0: mt_phif) or its tanh approximation
 *   x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as x sigmoid(2u) (no
 *   cancellation for x < 0).
 * mt_gelu_backward_f32: dx = dy (Phi(x) + x phi(x)), phi the normal density; tanh form:
 *   dx = dy (s + x s (1 - s) 2u'), s = sigmoid(2u) and 1 - s each without cancellation.
 * mt_tanh_f32: y = mt_tanhf(x); mt_tanh_backward_f32 from y: dx = dy (1 - y)(1 + y) (= 1 - y^2
 *   without cancellation near |y| = 1).
 * mt_sigmoid_f32: y = 1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below (no
 *   cancellation); mt_sigmoid_backward_f32 from y: dx = dy (y (1 - y)). */
void mt_relu_f32(const float *x, float *y, int n);
void mt_relu_backward_f32(const float *y, const float *dy, float *dx, int n, int acc);
void mt_clamp_f32(const float *x, float *y, int n, float lo, float hi);
void mt_clamp_backward_f32(const float *x, const float *dy, float *dx, int n, float lo, float hi, int acc);
void mt_gelu_f32(const float *x, float *y, int n, int tanh_form);
void mt_gelu_backward_f32(const float *x, const float *dy, float *dx, int n, int tanh_form, int acc);
void mt_tanh_f32(const float *x, float *y, int n);
void mt_tanh_backward_f32(const float *y, const float *dy, float *dx, int n, int acc);
void mt_sigmoid_f32(const float *x, float *y, int n);
void mt_sigmoid_backward_f32(const float *y, const float *dy, float *dx, int n, int acc);

/* ------------------------------------------------------------------------------------ */
/* Data movement: strided copy, padding, embedding lookup (mt_shape.c)                   */
/* ------------------------------------------------------------------------------------ */

#define MT_MAX_DIMS 6

/* Strided N-d copy, the one kernel behind permute / transpose / slice / concat / expand:
 * for every index (i_0, .., i_{ndim-1}) with 0 <= i_k < shape[k],
 *   dst[sum_k i_k * dst_strides[k]] = src[sum_k i_k * src_strides[k]].
 * Strides are in elements (not bytes) and may be 0 (a broadcast read for expand) or
 * negative; every offset formed must lie inside its array and fit int32. ndim outside
 * [1, MT_MAX_DIMS] or any shape[k] <= 0 copies nothing. No division: an index counter per
 * dim; adjacent dims that are contiguous in both src and dst are merged first, so the
 * innermost run is as long as possible, and it is a plain pointer loop. Exact (a copy).
 * dst must not overlap src; distinct indices should address distinct dst elements (a 0
 * dst stride makes the last write win). */
void mt_copy_strided_s8(const int8_t *src, int8_t *dst, int ndim, const int32_t *shape,
                        const int32_t *src_strides, const int32_t *dst_strides);
void mt_copy_strided_s16(const int16_t *src, int16_t *dst, int ndim, const int32_t *shape,
                         const int32_t *src_strides, const int32_t *dst_strides);
void mt_copy_strided_s32(const int32_t *src, int32_t *dst, int ndim, const int32_t *shape,
                         const int32_t *src_strides, const int32_t *dst_strides);

/* Padding with a value: y [planes, top + h + bottom, left + w + right] holds x [planes, h, w]
 * at rows top.., columns left.., and `fill` everywhere else:
 *   y[p, i, j] = x[p, i - top, j - left] inside, fill outside.
 * The input of an int8 convolution whose input carries a zero point z (real value
 * s (q - z)): its padding's real zeros are the integer z, which the convolution kernels,
 * padding with the integer 0, do not take; they run on y with no padding (conv.cpp). fill
 * saturates to int8. Nothing is written when a size is <= 0 or a border negative. y must not
 * overlap x. Exact (a copy). */
void mt_pad_s8(const int8_t *x, int8_t *y, int planes, int h, int w, int top, int left, int bottom, int right,
               int32_t fill);

/* Embedding lookup: out [n, dim] row i = table [num, dim] row ids[i], copied (same scale).
 * An id outside [0, num) gives an all-zero row and is counted: the return value is the
 * number of out-of-range ids (0 = success). n <= 0 returns 0; dim <= 0 copies nothing but
 * still counts. out must not overlap table or ids. Exact. */
int mt_embedding_s8(const int32_t *ids, int n, const int8_t *table, int num, int dim, int8_t *out);
int mt_embedding_s16(const int32_t *ids, int n, const int16_t *table, int num, int dim, int16_t *out);

/* Float32 (training in float; see "Float32 kernels" above).
 * mt_copy_strided_f32: as mt_copy_strided_s16 (the same index walk). Exact.
 * mt_add_strided_f32: dst[sum_k i_k dst_strides[k]] += src[sum_k i_k src_strides[k]] over the
 *   same walk, in index order (last index fastest): the backward of a view or an expand,
 *   where a dst stride of 0 sums the elements it broadcast, in index order.
 * mt_embedding_f32: as mt_embedding_s16 (an id outside [0, num): a zero row, counted). */
void mt_copy_strided_f32(const float *src, float *dst, int ndim, const int32_t *shape, const int32_t *src_strides,
                         const int32_t *dst_strides);
void mt_add_strided_f32(const float *src, float *dst, int ndim, const int32_t *shape, const int32_t *src_strides,
                        const int32_t *dst_strides);
int mt_embedding_f32(const int32_t *ids, int n, const float *table, int num, int dim, float *out);

/* ------------------------------------------------------------------------------------ */
/* Softmax and layer norm (mt_softmax.c, mt_norm.c)                                      */
/* ------------------------------------------------------------------------------------ */

/* Softmax over the last dim of x [rows, n] (any zero point: it cancels). Per row: max
 * subtraction; z_j = rq(max - x_j, in_m, in_s) = (max - x_j) * scale_x * log2(e) in Q16;
 * e_j = 2^-z_j by range reduction (integer part of z = a shift, fraction from the table of
 * mt_exp2neg_q16); the row sum of e_j in Q20 (so that the many small terms add up without a
 * rounding bias); ONE reciprocal per row (mt_recip_u32); p_j = e_j times the reciprocal.
 * int16 inputs: e_j = 2^-z(256 dh) 2^-z(dl) for max - x_j = 256 dh + dl, from two tables of
 * 256 factors in Q31 filled per call (2 KB of stack), the row sum from the products in Q30.
 * Output y_zero + p * 2^out_bits, saturated: Q0.15 (s16: out_bits 15, zero 0), Q0.7 (s8
 * symmetric: 7, 0) or scale 1/256, zero point -128 (s8 affine: 8, -128).
 * Error: 1.10 LSB of Q0.15, 0.50 LSB of 8-bit outputs. n <= 65535. y may alias x (same type). */
void mt_softmax_s8_s8(const int8_t *x, int8_t *y, int rows, int n, int32_t in_m, int in_s, int out_bits,
                      int32_t y_zero);
void mt_softmax_s8_s16(const int8_t *x, int16_t *y, int rows, int n, int32_t in_m, int in_s, int out_bits,
                       int32_t y_zero);
void mt_softmax_s16_s8(const int16_t *x, int8_t *y, int rows, int n, int32_t in_m, int in_s, int out_bits,
                       int32_t y_zero);
void mt_softmax_s16_s16(const int16_t *x, int16_t *y, int rows, int n, int32_t in_m, int in_s,
                        int out_bits, int32_t y_zero);

/* Float32 softmax over the last dim of x [rows, n] (training in float; see "Float32 kernels"
 * above): per row m = max, e_j = mt_expf(x_j - m), s = sum_j e_j (j ascending), ONE
 * reciprocal r = 1/s, y_j = e_j r; a row of -infinity gives zeros. y may alias x.
 * mt_softmax_backward_f32 from y: dx_j = y_j (dy_j - sum_k dy_k y_k) (k ascending; acc bit
 * 0). */
void mt_softmax_f32(const float *x, float *y, int rows, int n);
void mt_softmax_backward_f32(const float *y, const float *dy, float *dx, int rows, int n, int acc);

/* LayerNorm over the last dim of x [rows, n] (biased variance, like PyTorch; any zero point
 * of x cancels in x - mean):
 *   xhat = (x - mean) / sqrt(var + eps) in Q20, var in units of x's integers squared, eps
 *   = eps_q * 2^-eps_frac in the same units (eps / scale_x^2, computed by the lowering);
 *   y[r, j] = y_zero + round((xhat * g[j] + b[j] * 2^(g_shift - b_shift)) * 2^-g_shift)
 * where g = gamma / scale_y and b = beta / scale_y are int32 per channel, folded by the
 * lowering (g in Q(g_shift - 20), b in Q(b_shift), g_shift - 32 <= b_shift <= g_shift <= 62).
 * Integer mean (16 extra fraction bits for int8 inputs, 8 for int16),
 * variance in 64 bits, one reciprocal of n per call and one integer inverse square root
 * (Newton) per row: the statistics keep 32 significant bits whatever the output type.
 * Error 0.56 LSB (s16), 0.55 (s8). n <= 32767. A constant row with eps = 0 gives b.
 * y may alias x (same type). */
void mt_layernorm_s8_s8(const int8_t *x, int8_t *y, int rows, int n, uint32_t eps_q, int eps_frac,
                        const int32_t *g, int g_shift, const int32_t *b, int b_shift, int32_t y_zero);
void mt_layernorm_s8_s16(const int8_t *x, int16_t *y, int rows, int n, uint32_t eps_q, int eps_frac,
                         const int32_t *g, int g_shift, const int32_t *b, int b_shift, int32_t y_zero);
void mt_layernorm_s16_s8(const int16_t *x, int8_t *y, int rows, int n, uint32_t eps_q, int eps_frac,
                         const int32_t *g, int g_shift, const int32_t *b, int b_shift, int32_t y_zero);
void mt_layernorm_s16_s16(const int16_t *x, int16_t *y, int rows, int n, uint32_t eps_q, int eps_frac,
                          const int32_t *g, int g_shift, const int32_t *b, int b_shift, int32_t y_zero);

/* Float32 layer norm over the last dim of x [rows, n] (PyTorch's; training in float, see
 * "Float32 kernels" above): per row mean = (sum_j x_j) / n, var = (sum_j (x_j - mean)^2) / n
 * (biased; both sums j ascending), rstd = mt_rsqrtf(var + eps), y_j = ((x_j - mean) rstd)
 * g_j + b_j (g, b NULL: 1, 0); stats [rows, 2] = (mean, rstd) for the backward (NULL: not
 * kept). var + eps = 0 (a constant row, eps = 0) gives rstd = 0, y = b (PyTorch: NaN). y may
 * alias x.
 * mt_layernorm_backward_f32 from the saved stats: xhat = (x - mean) rstd, gdy = g dy (dy when
 *   g is NULL):
 *     dx_j = rstd ((gdy_j - a) - xhat_j c), a = (sum_k gdy_k) / n, c = (sum_k gdy_k xhat_k) / n
 *   (k ascending; acc bit 0); dg_j = sum_r dy[r, j] xhat[r, j], db_j = sum_r dy[r, j] (r
 *   ascending; acc bit 1). */
void mt_layernorm_f32(const float *x, const float *g, const float *b, float *y, float *stats, int rows, int n,
                      float eps);
void mt_layernorm_backward_f32(const float *x, const float *g, const float *stats, const float *dy, float *dx,
                               float *dg, float *db, int rows, int n, int acc);

/* Float32 batch norm in eval over x [n, c, inner] (channels at dim 1; training in float, see
 * "Float32 kernels" above): a per-channel affine map from the running statistics, which the
 * step never changes: y = ((x - mean[k]) rstd[k]) g[k] + b[k] for channel k, rstd[k] =
 * 1 / sqrt(running_var[k] + eps) (computed by the lowering; g, b NULL: 1, 0). y may alias x.
 * mt_batchnorm_backward_f32: with xhat = (x - mean[k]) rstd[k],
 *     dx = (g[k] dy) rstd[k]   (dy rstd[k] when g is NULL; acc bit 0)
 *     dg[k] = sum over n, inner (ascending) of dy xhat, db[k] = sum of dy (acc bit 1). */
void mt_batchnorm_f32(const float *x, const float *mean, const float *rstd, const float *g, const float *b, float *y,
                      int n, int c, int inner);
void mt_batchnorm_backward_f32(const float *x, const float *mean, const float *rstd, const float *g, const float *dy,
                               float *dx, float *dg, float *db, int n, int c, int inner, int acc);

/* ------------------------------------------------------------------------------------ */
/* Sums and argmax (mt_reduce.c)                                                         */
/* ------------------------------------------------------------------------------------ */

/* Sum over the middle dim of x [outer, n, inner] -> y [outer, inner]:
 *   y[o, i] = y_zero + rq(sum_j x[o, j, i] - n x_zero, m, s)
 * (a mean is the sum with the multiplier of scale_x / (n scale_y)). The sum is exact: int32
 * partial sums over chunks of 65536 terms (s16) or 2^24 terms (s8), added into int64 only
 * when n is longer; requantized once. n <= 0 gives y_zero (the empty sum; x is not read).
 * y must not alias x. Exact. */
void mt_sum_s8_s8(const int8_t *x, int8_t *y, int outer, int n, int inner, int32_t x_zero, int32_t m, int s,
                  int32_t y_zero);
void mt_sum_s8_s16(const int8_t *x, int16_t *y, int outer, int n, int inner, int32_t x_zero, int32_t m,
                   int s, int32_t y_zero);
void mt_sum_s16_s8(const int16_t *x, int8_t *y, int outer, int n, int inner, int32_t x_zero, int32_t m,
                   int s, int32_t y_zero);
void mt_sum_s16_s16(const int16_t *x, int16_t *y, int outer, int n, int inner, int32_t x_zero, int32_t m,
                    int s, int32_t y_zero);

/* Index of the maximum of each row of x [rows, n]; ties give the first index (torch.argmax). */
void mt_argmax_s8(const int8_t *x, int32_t *idx, int rows, int n);
void mt_argmax_s16(const int16_t *x, int32_t *idx, int rows, int n);

/* Float32 (training in float; see "Float32 kernels" above).
 * mt_sum_f32: y[o, i] = c sum_k x[o, k, i] (k ascending, then one product; a mean: c = 1/n).
 * mt_sum_backward_f32: dx[o, k, i] = c dy[o, i] (acc bit 0). Correctly rounded.
 * mt_argmax_f32: the first index of each row's maximum (as mt_argmax_s16). */
void mt_sum_f32(const float *x, float *y, int outer, int n, int inner, float c);
void mt_sum_backward_f32(const float *dy, float *dx, int outer, int n, int inner, float c, int acc);
void mt_argmax_f32(const float *x, int32_t *idx, int rows, int n);

/* ------------------------------------------------------------------------------------ */
/* Losses (mt_loss.c; float32, training in float: see "Float32 kernels" above)           */
/* ------------------------------------------------------------------------------------ */

/* Mean cross entropy of the rows of logits [rows, n] against class indices target [rows]:
 *   loss[0] = (1 / count) sum_r ((m_r - x[r, t_r]) + log s_r),  dlogits[r, j] = (e_j / s_r -
 *   [j = t_r]) / count, with m_r the row's max, e_j = exp(x[r, j] - m_r), s_r = sum_j e_j (j
 *   ascending), the rows summed ascending. A target outside [0, n) (PyTorch's ignore_index,
 *   e.g. -100) ignores its row: no loss, a zero gradient row, and it is not counted: count is
 *   the number of rows with a target in range (all of them: rows), and with none the loss is
 *   0 (PyTorch: NaN). dlogits NULL: the loss only; loss NULL: the gradient only. */
void mt_cross_entropy_f32(const float *logits, const int32_t *target, float *loss, float *dlogits, int rows, int n);

/* Mean squared error: loss[0] = (sum_i (y_i - t_i)^2) / n (i ascending), dy_i = (y_i - t_i)
 * (2/n) (NULL: not wanted; dy may alias y). */
void mt_mse_f32(const float *y, const float *t, float *loss, float *dy, int n);

/* ------------------------------------------------------------------------------------ */
/* Optimizer (mt_optim.c; float32, training in float: see "Float32 kernels" above)       */
/* ------------------------------------------------------------------------------------ */

/* One step of torch.optim.SGD (dampening 0, not Nesterov) on the n elements of w, from
 * their gradient g:
 *   d = g + weight_decay w (weight_decay = 0: d = g);
 *   m = momentum m + d, d = m (m NULL, when momentum is 0: d as it is; PyTorch's first step
 *   sets m = d, which a zero-filled m gives exactly: momentum 0 + d = d);
 *   w = w - lr d. */
void mt_sgd_f32(float *w, const float *g, float *m, int n, float lr, float momentum, float weight_decay);

/* x[i] = v for i < n (the gradients and sums a training step starts from zero) */
void mt_fill_f32(float *x, int n, float v);

/* ------------------------------------------------------------------------------------ */
/* Scaled dot-product attention (mt_attention.c)                                         */
/* ------------------------------------------------------------------------------------ */

/* The parameters of one attention matrix: an int32 array indexed by these names (a static
 * const table in the firmware, written with designated initializers). */
enum {
  MT_ATTN_L,        /* queries */
  MT_ATTN_S,        /* keys */
  MT_ATTN_D,        /* q and k features */
  MT_ATTN_DV,       /* v and out features */
  MT_ATTN_Q_STRIDE, /* elements from one row to the next (0 = packed: D, D, Dv, Dv) */
  MT_ATTN_K_STRIDE,
  MT_ATTN_V_STRIDE,
  MT_ATTN_OUT_STRIDE,
  MT_ATTN_LOGIT_M,  /* rq(q.k, m, s) = the base-2 logit q.k * scale_q scale_k * scale * log2(e) in Q16 */
  MT_ATTN_LOGIT_S,
  MT_ATTN_OUT_M,    /* m 2^-(31 + s) = scale_v / scale_out */
  MT_ATTN_OUT_S,
  MT_ATTN_FLAGS,    /* MT_ATTN_CAUSAL */
  MT_ATTN_PARAMS    /* the length of the array */
};
#define MT_ATTN_CAUSAL 1 /* key j is visible to query i only if j <= i (PyTorch is_causal) */

/* out = softmax(scale * q k^T, masked) v for one matrix (a head):
 *   q [L, D], k [S, D], v [S, Dv], out [L, Dv], all symmetric, rows at their strides (heads
 *   are read in place from an [L, H*D] projection).
 *   keep: NULL or an L*S bit mask, row-major, bit (i*S + j) = keep[(i*S+j) >> 3] >> ((i*S+j) & 7),
 *   1 = query i may attend key j ("keep" polarity). MT_ATTN_CAUSAL and keep combine (AND).
 *   A fully masked query row gives an all-zero output row (never NaN-like garbage).
 * Scores are dot products in int64 (s16) / int32 (s8), converted to base-2 logits in Q16
 * (saturated to int32); weights 2^(t_j - max) in Q16. Limits: S <= 32767, D <= 65535. */

/* STREAMING (blocked online-softmax) attention: for each query the keys are visited once, in
 * blocks of 64, keeping a running max m, a running sum l = sum 2^(t_j - m) (Q16) and a running
 * weighted sum acc = sum 2^(t_j - m) v_j; when a block's max m' exceeds m, l and acc are
 * rescaled once by 2^(m - m') before the block's keys are added (weights 2^(t - m) from a table
 * of 128 factors and a line, within 0.62 units of Q16). out = acc / l with one reciprocal per
 * query. No L x S buffer: the working memory is `acc`, Dv int64 (s16) or Dv int32 (s8)
 * (bytes: MT_ATTN_STREAM_SCRATCH_BYTES_S16/_S8), and 516 B of stack for a block of 64 keys;
 * for s8 and S > 256 the weights enter acc with ceil(log2 S) - 8 fewer bits so that int32
 * cannot overflow. out may alias q (in place) when out_stride == q_stride and Dv <= D;
 * never k or v. Error: 1.56 LSB (s16, 5e-5 of the output range), 0.50 LSB (s8). */
#define MT_ATTN_STREAM_SCRATCH_BYTES_S16(Dv) ((Dv) * 8)
#define MT_ATTN_STREAM_SCRATCH_BYTES_S8(Dv) ((Dv) * 4)
void mt_attention_stream_s8(const int32_t *p, const uint8_t *keep, const int8_t *q, const int8_t *k,
                            const int8_t *v, int8_t *out, int32_t *acc);
void mt_attention_stream_s16(const int32_t *p, const uint8_t *keep, const int16_t *q, const int16_t *k,
                             const int16_t *v, int16_t *out, int64_t *acc);

/* TWO-PASS reference: materialises the L x S base-2 logits in `scores` (int32, L*S
 * elements = 4*L*S bytes), overwrites each row with its softmax in Q0.15 (same exp and
 * reciprocal as mt_softmax_*), then out = P v (int64 accumulator). Kept as the reference
 * for the streaming kernel and as the memory baseline. Error: 4.1 LSB (s16: rounding every
 * probability to Q0.15 costs up to S * 2^-16 * max|v|), 0.51 LSB (s8); it differs from
 * the streaming result by <= 4 LSB (s16) / 1 LSB (s8): equal within that, not bit-equal. */
void mt_attention_twopass_s8(const int32_t *p, const uint8_t *keep, const int8_t *q, const int8_t *k,
                             const int8_t *v, int8_t *out, int32_t *scores);
void mt_attention_twopass_s16(const int32_t *p, const uint8_t *keep, const int16_t *q, const int16_t *k,
                              const int16_t *v, int16_t *out, int32_t *scores);

/* FLOAT32 attention (training in float; see "Float32 kernels" above), out = softmax(scale q
 * k^T, masked) v with the parameter array p (L, S, D, DV, the row strides, FLAGS; the LOGIT_
 * and OUT_ fields unused) and the keep bits of the integer kernels, q, k, v, out float.
 * Per query i its visible keys j in ascending order, an online softmax (no L x S buffer and
 * no scratch: the running sums in out's row): s = scale (q_i . k_j) (the dot product over d
 * ascending, then one product); where s exceeds the running max m, the running sum l and the
 * row are rescaled by mt_expf(m - s) and m = s; w = mt_expf(s - m), l += w, out_i += w v_j;
 * at the end out_i *= 1/l (one reciprocal per query). lse [L] (NULL in inference): the
 * natural log-sum-exp of the row's scaled logits, m + log l, for the backward; a query with
 * no visible key gets a zero row and lse = +infinity. out must not overlap q, k or v (its
 * row holds the running sums while q_i is read).
 * mt_attention_backward_f32 (FlashAttention-2's backward, no L x S buffer): from q, k, v, out,
 *   dout (laid out as out) and lse, per query i (ascending) D_i = dout_i . out_i, then for
 *   each visible key j (ascending) s = scale (q_i . k_j), pr = exp(s - lse_i),
 *     dv_j += pr dout_i;  ds = pr (dout_i . v_j - D_i);  dq_i += (scale ds) k_j;  dk_j += (scale ds) q_i
 *   dq, dk, dv are laid out as q, k, v (the same row strides: views into one packed q|k|v
 *   gradient work); each gathers its terms in that order, from its values (acc bit 0) or
 *   from 0 (else only its rows' D or Dv elements are zeroed first). */
void mt_attention_f32(const int32_t *p, const uint8_t *keep, const float *q, const float *k, const float *v,
                      float *out, float *lse, float scale);
void mt_attention_backward_f32(const int32_t *p, const uint8_t *keep, const float *q, const float *k, const float *v,
                               const float *out, const float *dout, const float *lse, float *dq, float *dk, float *dv,
                               float scale, int acc);

/* ------------------------------------------------------------------------------------ */
/* A decoder's step (mt_norm.c: RMS norm; mt_decode.c: the rest)                          */
/* ------------------------------------------------------------------------------------ */

/* RMSNorm over the last dim of symmetric x [rows, n] (Zhang and Sennrich 2019; Llama):
 *   y_j = x_j / sqrt(mean_k x_k^2 + eps) * g_j, per row
 *   v = 2^8 sum_k x_k^2 + eps_q 2^eps_shift (exact in uint64; eps_q 2^eps_shift = 2^8 n eps /
 *   scale_x^2, from the lowering), r 2^-e = 1/sqrt(v) (mt_rsqrt_u64, relative error < 2^-28),
 *   y_j = rq(round(x_j r 2^-16), rq[2j], rq[2j + 1] + e - 16), (rq[2j], rq[2j + 1]) the
 *   multiplier of the real ratio 16 sqrt(n) g_j / scale_y (x's scale cancels: y = x g sqrt(n) /
 *   sqrt(sum x^2 + n eps / scale_x^2) in x's integers). Error 0.50 LSB. n <= 32767. y may
 *   alias x. */
void mt_rmsnorm_s16(const int16_t *x, int16_t *y, int rows, int n, uint32_t eps_q, int eps_shift,
                    const int32_t *rq);

/* Rotary position embedding (RoFormer; Llama, Qwen2), in place, of x [heads, dim] at the
 * position *pos: pair (a, b) of each head (a = x[i], b = x[i + dim/2]; interleaved: x[2i],
 * x[2i + 1]) turned by the angle pos theta_i,
 *   a' = round((a c_i - b s_i) 2^-14), b' = round((b c_i + a s_i) 2^-14), saturated,
 * c, s the rows *pos of cos_q14 and sin_q14 [capacity, dim/2] (cos and sin in Q14: 16384 is
 * 1). A position beyond the tables reads their last row. Exact given the tables. */
void mt_rope_s16(int16_t *x, int heads, int dim, const int16_t *cos_q14, const int16_t *sin_q14,
                 const int32_t *pos, int capacity, int interleaved);

/* Appends the n values x as row *pos of cache [capacity, n] (int16 or int8); returns 1 (and writes nothing)
 * when *pos is outside [0, capacity): the cache is full. Exact. */
int mt_cache_append_s16(const int16_t *x, int16_t *cache, int n, const int32_t *pos, int capacity);
int mt_cache_append_s8(const int8_t *x, int8_t *cache, int n, const int32_t *pos, int capacity);

/* The position counter of a decoder's step: *pos += 1, up to capacity. */
void mt_position_next(int32_t *pos, int capacity);

/* Attention of one query per head over the positions 0 .. *pos of a key/value cache
 * (grouped-query attention: kv_heads key/value heads, each read by `group` consecutive query
 * heads): q [kv_heads group, D], k [S, kv_heads D] and v [S, kv_heads Dv] (the cache rows,
 * p[MT_ATTN_K_STRIDE] and p[MT_ATTN_V_STRIDE] elements apart), out [kv_heads group, Dv].
 * p is an attention parameter table (D, DV, strides, LOGIT_ and OUT_ multipliers) whose
 * MT_ATTN_S is the cache's capacity; each key/value head is one mt_attention_stream_s16 call
 * whose L = group queries are its query heads (rows D apart), S = min(*pos + 1, capacity), no
 * mask (the cache holds only the past): each head's output is that of its own call with L = 1. acc: Dv int64 (s16) or
 * int32 (s8, mt_attention_stream_s8). */
void mt_attention_cached_s16(const int32_t *p, const int32_t *pos, int kv_heads, int group, const int16_t *q,
                             const int16_t *k, const int16_t *v, int16_t *out, int64_t *acc);
void mt_attention_cached_s8(const int32_t *p, const int32_t *pos, int kv_heads, int group, const int8_t *q,
                            const int8_t *k, const int8_t *v, int8_t *out, int32_t *acc);

/* Seeded sampling of a token from int16 logits [n] (a helper the firmware calls, not a kernel
 * of a program): among the top_k largest (1 <= top_k <= MT_SAMPLE_MAX_K, by value then lowest
 * index), token k with probability w_k / sum w, w_k = 2^-z_k in Q16 (mt_exp2neg_q16),
 * z_k = floor((max - l_k) logit_q24 2^-8) inv_t_q16 2^-16 in Q16 (the first product capped at
 * 2^22: w = 0 from z = 17 on), logit_q24 = scale_logits log2(e) 2^24 and inv_t_q16 = 2^16 /
 * temperature; r = floor(xorshift32(state) sum 2^-32) picks the first k whose running sum
 * exceeds r. top_k = 1 is greedy decoding. *state advances one xorshift32 step (Marsaglia
 * 2003; a zero state starts from 2463534242). Returns the token, -1 for n <= 0. Integers only:
 * the same token on every target. */
#define MT_SAMPLE_MAX_K 64
int32_t mt_sample_s16(const int16_t *logits, int n, int top_k, int32_t logit_q24, int32_t inv_t_q16,
                      uint32_t *state);

/* ------------------------------------------------------------------------------------ */
/* Convolution and pooling (mt_conv.c)                                                   */
/* ------------------------------------------------------------------------------------ */

/* The geometry table g of a convolution (int32, indices below): GROUPS groups of CG input and
 * OG output channels, x [N, C = CG GROUPS, H, W], w [O = OG GROUPS, CG, KH, KW], y [N, O, OH,
 * OW], strides SH, SW, zeros PH, PW before each row and column (as many or fewer after: OH,
 * OW say how far the windows go), dilations DH, DW. A 1-D convolution is a 2-D one of H = KH
 * = OH = 1. */
#define MT_CONV_N 0
#define MT_CONV_CG 1
#define MT_CONV_H 2
#define MT_CONV_W 3
#define MT_CONV_OG 4
#define MT_CONV_KH 5
#define MT_CONV_KW 6
#define MT_CONV_OH 7
#define MT_CONV_OW 8
#define MT_CONV_SH 9
#define MT_CONV_SW 10
#define MT_CONV_PH 11
#define MT_CONV_PW 12
#define MT_CONV_DH 13
#define MT_CONV_DW 14
#define MT_CONV_GROUPS 15
#define MT_CONV_FIELDS 16

/* Convolution (cross-correlation, PyTorch's conv1d / conv2d), per-channel requantized as
 * mt_linear_*: with o = g OG + t (output channel t of group g),
 *   y[n, o, p, q] = max(y_min, y_zero + rq(b[o] + sum_{c < CG, i < KH, j < KW}
 *                   x[n, g CG + c, p SH - PH + i DH, q SW - PW + j DW] w[o, c, i, j], rq[2k], rq[2k + 1]))
 *   the taps outside the input left out (zero padding; x symmetric, no zero point), k = o when
 *   rq_per_channel, else 0. w in order (no pair order), b in the accumulator's scale (NULL =
 *   none): int32 for int8 x, int64 for int16 x. Accumulators: int32 for int8 x int8 (exact
 *   up to CG KH KW = 131071 taps), int64 otherwise. Exact. y must not alias x.
 * col: scratch of 8 ((CG KH KW + 3) & ~3) int16 on a word boundary, for the int8 x int8
 *   variants on Armv7E-M (eight im2col columns at a time) and RISC-V (three columns of int8
 *   taps); its contents are not kept; or NULL (the portable loops). */
/* Which Armv7E-M variant of mt_conv_s8_s8_* a call takes (mt_conv_arm.c), stated once for the
 * runtime and for the lowering's emitter, which leaves out of a firmware the variants no step
 * takes (src/lower/emit.cpp). A call takes a variant only when every channel is
 * MT_RQ_CHAN_FAST, every bias MT_LINEAR_BIAS_FITS and the taps CG KH KW are at most
 * MT_LINEAR_MAX_IN_S8; then (g the call's table):
 *   depthwise (OG = CG = 1) and MT_CONV_DW3_FITS: kernel width 3, two outputs per word of a
 *   row; of those, MT_CONV_SAME3X3_FITS the 'same' 3 x 3 channels, MT_CONV_SAME1X3_FITS the
 *   'same' 1-D rows (a channel whose sums can meet a rounding tie, not MT_RQ_CHAN_H_OK of
 *   |b| + 2^7 sum |w|, by the generic rows), the others the generic rows;
 *   other layers of OG >= 2 (and col): eight positions per pass, the channels eight outputs at
 *   a time where MT_CONV_COLS8_CHANS (hq: every channel MT_RQ_CHAN_H_OK of CG KH KW 2^14 +
 *   max |b|), else one by one, and the array's last channel one by one where
 *   MT_CONV_COLS8_LAST1 (its zero-padded copy would exceed 128 taps, MT_CONV_TAB).
 * MT_RQ_CHAN_H_OK(m, s, amax): sums |a| <= amax of a channel (m, s) never meet a rounding tie
 * (a m an odd multiple of 2^(30+s) needs amax 2^t >= 2^(30+s), 2^t m's lowest set bit), so
 * SMMLA's rounding is mt_rq_chan's. */
#define MT_RQ_CHAN_H_OK(m, s, amax)                                                                \
  ((s) >= 2 && (((uint64_t)(amax) * ((uint32_t)(m) & (0u - (uint32_t)(m)))) >> (30 + (s))) == 0)
#define MT_CONV_DW3_FITS(g)                                                                        \
  ((g)[MT_CONV_KW] == 3 && (g)[MT_CONV_DW] == 1 && (g)[MT_CONV_SW] == 1 && (g)[MT_CONV_KH] <= 8 &&  \
   (g)[MT_CONV_W] >= 4 && (g)[MT_CONV_PW] <= 3 && (((g)[MT_CONV_OW] - 1) & ~1) - (g)[MT_CONV_PW] <= (g)[MT_CONV_W] - 1)
#define MT_CONV_SAME3X3_FITS(g)                                                                    \
  ((g)[MT_CONV_KH] == 3 && (g)[MT_CONV_PW] == 1 && (g)[MT_CONV_PH] == 1 && (g)[MT_CONV_SH] == 1 &&   \
   (g)[MT_CONV_DH] == 1 && (g)[MT_CONV_H] >= 3)
#define MT_CONV_SAME1X3_FITS(g)                                                                    \
  ((g)[MT_CONV_KH] == 1 && (g)[MT_CONV_PW] == 1 && (g)[MT_CONV_PH] == 0 && (g)[MT_CONV_SH] == 1 &&   \
   (g)[MT_CONV_OW] == (g)[MT_CONV_W] && (g)[MT_CONV_OH] == (g)[MT_CONV_H])
#define MT_CONV_COLS8_CHANS(positions, hq, has_bias) ((positions) >= 8 && (hq) && (has_bias))
#define MT_CONV_COLS8_LAST1(taps) ((taps) % 4 != 0 && (((taps) + 3) & ~3) > 128)
void mt_conv_s8_s8_s8(const int8_t *x, const int8_t *w, const int32_t *b, int8_t *y, const int32_t *g,
                      const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col);
void mt_conv_s8_s8_s16(const int8_t *x, const int8_t *w, const int32_t *b, int16_t *y, const int32_t *g,
                       const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col);
void mt_conv_s8_s16_s8(const int8_t *x, const int16_t *w, const int32_t *b, int8_t *y, const int32_t *g,
                       const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col);
void mt_conv_s8_s16_s16(const int8_t *x, const int16_t *w, const int32_t *b, int16_t *y, const int32_t *g,
                        const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col);
void mt_conv_s16_s8_s8(const int16_t *x, const int8_t *w, const int64_t *b, int8_t *y, const int32_t *g,
                       const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col);
void mt_conv_s16_s8_s16(const int16_t *x, const int8_t *w, const int64_t *b, int16_t *y, const int32_t *g,
                        const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col);
void mt_conv_s16_s16_s8(const int16_t *x, const int16_t *w, const int64_t *b, int8_t *y, const int32_t *g,
                        const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col);
void mt_conv_s16_s16_s16(const int16_t *x, const int16_t *w, const int64_t *b, int16_t *y, const int32_t *g,
                         const int32_t *rq, int rq_per_channel, int32_t y_zero, int32_t y_min, int16_t *col);

/* The geometry table g of a pooling (int32): PLANES planes (N C) of H x W in, of OH x OW out;
 * MODE 0 and 1: windows of KH x KW at (p SH - PH, q SW - PW), clipped to the input (the
 * padding never counts in a maximum; in a mean it counts as zeros in mode 0, not at all in
 * mode 1); MODE 2: adaptive, rows [floor(p H / OH), ceil((p + 1) H / OH)), columns alike. */
#define MT_POOL_PLANES 0
#define MT_POOL_H 1
#define MT_POOL_W 2
#define MT_POOL_OH 3
#define MT_POOL_OW 4
#define MT_POOL_KH 5
#define MT_POOL_KW 6
#define MT_POOL_SH 7
#define MT_POOL_SW 8
#define MT_POOL_PH 9
#define MT_POOL_PW 10
#define MT_POOL_MODE 11
#define MT_POOL_FIELDS 12

/* mt_max_pool_*: y = the largest x of each window (every window holds one element of the
 * input at least). mt_avg_pool_*: y = zero + round(sum of (x - zero) over the window / d), to
 * nearest with ties away from zero, d = KH KW (mode 0) or the window's elements (modes 1, 2);
 * windows of at most 65535 elements. y has x's format. Exact. */
void mt_max_pool_s8(const int8_t *x, int8_t *y, const int32_t *g);
void mt_max_pool_s16(const int16_t *x, int16_t *y, const int32_t *g);
void mt_avg_pool_s8(const int8_t *x, int8_t *y, const int32_t *g, int32_t zero);
void mt_avg_pool_s16(const int16_t *x, int16_t *y, const int32_t *g, int32_t zero);

/* Float32 (training in float; see "Float32 kernels" above), with the tables above.
 * mt_conv_f32: y[n, o, p, q] = b[o] + sum over c < CG, i < KH, j < KW (ascending, from b[o] or
 *   0) of x[n, g CG + c, p SH - PH + i DH, q SW - PW + j DW] w[o, c, i, j], the taps outside
 *   the input left out (zero padding), o = g OG + t.
 * mt_conv_backward_f32: the gradients of that cross-correlation from dy [N, O, OH, OW]:
 *     dx[n, g CG + c, h, v] = sum over t < OG, i, j (ascending) of dy[n, o, p, q] w[o, c, i, j]
 *       for the (p, q) in [0, OH) x [0, OW) with p SH - PH + i DH = h, q SW - PW + j DW = v
 *       (x's positions that no window reads get 0; acc bit 0)
 *     dw[o, c, i, j] = sum over n, p, q (ascending) of dy[n, o, p, q] x[n, g CG + c, p SH - PH
 *       + i DH, q SW - PW + j DW] (taps inside the input; acc bit 1)
 *     db[o] = sum over n, p, q (ascending) of dy[n, o, p, q] (acc bit 1)
 * mt_max_pool_f32: y = the first largest x of each window in row-major order (PyTorch's tie
 *   rule); idx (NULL: not kept) = its index h W + v within the plane, for the backward.
 * mt_max_pool_backward_f32: dx[t, h, v] = sum over the windows (p, q ascending) whose idx is
 *   h W + v of dy[t, p, q] (acc bit 0).
 * mt_avg_pool_f32: y = (sum of the window, rows then columns ascending) / d, d as the integer
 *   kernels' (KH KW in mode 0: count_include_pad; the window's elements in modes 1, 2).
 * mt_avg_pool_backward_f32: dx[t, h, v] = sum over the windows (p, q ascending) that hold
 *   (h, v) of dy[t, p, q] / d(p, q) (acc bit 0). */
void mt_conv_f32(const float *x, const float *w, const float *b, float *y, const int32_t *g);
void mt_conv_backward_f32(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                          const int32_t *g, int acc);
void mt_max_pool_f32(const float *x, float *y, int32_t *idx, const int32_t *g);
void mt_max_pool_backward_f32(const int32_t *idx, const float *dy, float *dx, const int32_t *g, int acc);
void mt_avg_pool_f32(const float *x, float *y, const int32_t *g);
void mt_avg_pool_backward_f32(const float *dy, float *dx, const int32_t *g, int acc);

/* ------------------------------------------------------------------------------------ */
/* Integer training (mt_loss.c: the cross entropy; mt_optim.c: the rest)                */
/* ------------------------------------------------------------------------------------ */
/* INTEGER TRAINING (train.hpp, Numeric::Integer: cores without an FPU). A training step's
 * loss, gradients and SGD step in integers; every scale is fixed at lowering time.
 * mt_cross_entropy_s8 / _s16: logits y [rows, n] (real sy (y - zy)) against class indices
 *   target [rows]; per counted row (target in [0, n)), M = max_j y_j and
 *     z_j = rq(M - y_j; m, s)          the base-2 exponent in Q16 ((m, s): sy log2(e) 2^16)
 *     e_j = 2^-z_j in Q20               (mt_exp2neg_q20; e = 2^20 at the max), S = sum_j e_j
 *     p_j = round(e_j 2^gb / S)         the softmax in Q gb (e_j times S's reciprocal, mt_recip_u32)
 *     g_j = round((p_j - [j = t] 2^gb) / count)   d loss / d logit_j in Q gb (count: counted rows;
 *                                       its reciprocal too: no division anywhere)
 *     loss_r = rq(M - y_t; ml, sl) + round(ln(S 2^-20) 2^16)   -log p_t in Q16 ((ml, sl): sy 2^16;
 *                                       ln from a Q16 log2 by repeated squaring, times ln 2)
 *   loss[0] += round(sum_r loss_r / count) (|sum| < 2^32; loss NULL: not computed); rows with another target
 *   get g = 0. S <= n 2^20 and p_j 2^gb: n < 2^11 and gb <= 15 keep everything in 64 bits.
 * mt_linear_grad_s8 / _s16: the gradients of y = x W^T + b from g [rows, out] (int32),
 *   x [rows, in] at a row stride xs (0: in), real sx (x - zx):
 *     dw[o, i] += sum_r g[r, o] (x[r, i] - zx),   db[o] += sum_r g[r, o]   (r ascending)
 *   in int32 (the lowering bounds every sum below 2^31); dw or db NULL: not computed.
 * mt_sgd_s32: SGD on an int32 master copy w [n], rows of `per` elements, rq [2 n/per] the
 *   (m, s) pair of each row (lr times the gradient's scale over the batch, in w's units):
 *     d = rq(g[i]; m_r, s_r);  momentum (mom not NULL): d = rq(mom[i]; mu, mu_s) + d, mom[i] = d
 *     (saturated); w[i] = clamp(w[i] - d, lo, hi)   (64-bit intermediates; round to nearest)
 * mt_fill_s32: x[i] = v. mt_scale_s32: x[i] = rq(x[i]; m, s).
 * mt_master_s8 / _s16: the inference weights from their master: w[i] = sat(round(master[i] 2^-shift)).
 * mt_linear_bias_s8 / _s16: a linear layer's bias table (the accumulator's scale, x's zero point
 *   folded in) from its master: b[o] = round(master[o] 2^-shift) - zx sum_i w[o, i] (shift < 0:
 *   a left shift; master NULL: 0), int32 for int8 x, int64 for int16 x. */
void mt_cross_entropy_s8(const int8_t *y, const int32_t *target, int32_t *loss, int32_t *g, int rows, int n, int32_t m,
                         int s, int32_t ml, int sl, int gb);
void mt_cross_entropy_s16(const int16_t *y, const int32_t *target, int32_t *loss, int32_t *g, int rows, int n, int32_t m,
                          int s, int32_t ml, int sl, int gb);
void mt_linear_grad_s8(const int8_t *x, const int32_t *g, int32_t *dw, int32_t *db, int rows, int in, int out, int xs,
                       int32_t zx);
void mt_linear_grad_s16(const int16_t *x, const int32_t *g, int32_t *dw, int32_t *db, int rows, int in, int out, int xs,
                        int32_t zx);
void mt_sgd_s32(int32_t *w, const int32_t *g, int32_t *mom, int n, int per, const int32_t *rq, int32_t mu, int mu_s,
                int32_t lo, int32_t hi);
void mt_fill_s32(int32_t *x, int n, int32_t v);
void mt_scale_s32(int32_t *x, int n, int32_t m, int s);
void mt_master_s8(const int32_t *master, int8_t *w, int n, int shift);
void mt_master_s16(const int32_t *master, int16_t *w, int n, int shift);
void mt_linear_bias_s8(const int32_t *master, const int8_t *w, int32_t *b, int in, int out, int shift, int32_t zx);
void mt_linear_bias_s16(const int32_t *master, const int16_t *w, int64_t *b, int in, int out, int shift, int32_t zx);
/* mt_linear_dx_s8 / _s16: the gradient of a linear layer's input from its output's, g [rows, out]
 *   (int32), through the layer's weights W_q [out, in] (a scale per row o):
 *     dx[r, i] = rq(sum_o rq(g[r, o]; pre_o) W_q[o, i]; m, s)   (o ascending, int64 sum)
 *   pre [2 out]: the (m, s) of scale_w[o] / max_o scale_w, so one (m, s) rescales the sum; and
 *   a relu in front of the layer (y not NULL: its output, rows at a stride ys, 0: in): dx = 0
 *   where y[r, i] <= zy (the relu's output at its zero). */
void mt_linear_dx_s8(const int32_t *g, const int8_t *w, int32_t *dx, int rows, int in, int out, const int32_t *pre,
                     int32_t m, int s, const int8_t *y, int ys, int32_t zy);
void mt_linear_dx_s16(const int32_t *g, const int16_t *w, int32_t *dx, int rows, int in, int out, const int32_t *pre,
                      int32_t m, int s, const int16_t *y, int ys, int32_t zy);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MT_KERNELS_H */
