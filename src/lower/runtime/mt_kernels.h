/* mt_kernels.h - microtorch fixed-point runtime kernels (C99).
 *
 * One set of integer kernels: the host simulator calls these functions and the emitter
 * copies mt_kernels.h / mt_kernels.c verbatim into every generated firmware, so the host
 * and the target compute the same bits (verified under QEMU by tools/mcu/run_kernels_qemu.sh).
 *
 * Rules every kernel follows
 *   - No malloc, no stdio, no float or double, no division or modulo (Cortex-M0 has no
 *     divide instruction): reciprocals come from a fixed-point Newton iteration.
 *   - Only <stdint.h>. No compiler builtins; the code is plain portable C99 (the compiler
 *     may still turn a zeroing loop into a memset call, and on Cortex-M0 64-bit multiplies
 *     and shifts into __aeabi_lmul / __aeabi_llsl / __aeabi_llsr from libgcc).
 *   - No undefined or implementation-defined integer behaviour: no signed overflow, no
 *     shift of a negative value in either direction (rounding works on magnitudes), no
 *     shift by >= the width. Every narrowing saturates. Clean under -fsanitize=undefined.
 *
 * Number format (power-of-two Q format, one `frac` per tensor)
 *   A stored integer q with `frac` fractional bits means the real value q * 2^-frac.
 *   int16 tensors hold activations "s16", int8 tensors "s8"; weights are int8 or int16;
 *   accumulators are int32, and int64 only where the worst-case bound needs it (stated per
 *   kernel). A `shift` argument is always a right shift: y = x * 2^-shift; a negative shift
 *   is a saturating left shift. Any shift amount is valid (no shift by >= the width).
 *
 * Rounding mode (the only one used anywhere)
 *   Round to nearest, ties away from zero, then saturate to the destination type:
 *       mt_rshift_s32(x, s) = sign(x) * floor(|x| / 2^s + 1/2)        (s > 0)
 *   e.g. 5 >> 1 -> 3, -5 >> 1 -> -3, 6 >> 2 -> 2 (1.5 -> 2), -6 >> 2 -> -2.
 *   It is symmetric (no drift for zero-mean data), equals gemmlowp/CMSIS-NN's
 *   RoundingDivideByPOT, and is computed on the magnitude so negative values are never
 *   shifted.
 *
 * Arrays are row-major and contiguous unless a stride is given. Output buffers may alias
 * the input only where a kernel says so. Sizes are int; n <= 0 does nothing.
 *
 * Accuracy: the worst error against double precision, measured by
 * tests/test_lower_kernels.cpp, is given per kernel below and in README.md beside this file
 * (LSB = one unit of the output format). Integer-only kernels (requantise, linear, matmul,
 * add, mul, scale, relu, mean pooling, sum, argmax) are exact: the exact result rounded
 * once; the data movement kernels (strided copy, embedding) copy bits.
 */
#ifndef MT_KERNELS_H
#define MT_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------ */
/* Rounding and saturation helpers (the only place where precision is dropped)           */
/* ------------------------------------------------------------------------------------ */

static inline int16_t mt_sat_s16(int32_t x) {
  return (int16_t)(x > 32767 ? 32767 : (x < -32768 ? -32768 : x));
}

static inline int8_t mt_sat_s8(int32_t x) {
  return (int8_t)(x > 127 ? 127 : (x < -128 ? -128 : x));
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
 * shift <= 0 is a saturating left shift. This is THE requantisation primitive. */
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

/* Same on a 32-bit value (cheaper on Cortex-M0: no 64-bit arithmetic for shift > 0). */
static inline int32_t mt_rshift_s32(int32_t x, int shift) {
  if (shift > 0 && shift < 32) {
    uint32_t m = x < 0 ? 0u - (uint32_t)x : (uint32_t)x;
    m = (m >> shift) + ((m >> (shift - 1)) & 1u);
    return x < 0 ? -(int32_t)m : (int32_t)m;
  }
  return shift == 0 ? x : mt_rshift_s64(x, shift);
}

/* Requantise an accumulator to int16 / int8: saturate(round(x * 2^-shift)). */
static inline int16_t mt_requant_s16(int32_t x, int shift) { return mt_sat_s16(mt_rshift_s32(x, shift)); }
static inline int8_t mt_requant_s8(int32_t x, int shift) { return mt_sat_s8(mt_rshift_s32(x, shift)); }

/* ------------------------------------------------------------------------------------ */
/* Fixed-point primitives (exposed for the quantiser and for tests)                      */
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
 * 0 once z >= 17. 66-entry Q24 table of 2^(-k/64), quadratic interpolation, one rounding:
 * within 0.51 LSB of 2^16 * 2^-z. */
uint32_t mt_exp2neg_q16(uint32_t z);

/* ------------------------------------------------------------------------------------ */
/* Requantisation of whole arrays: y[i] = saturate(round(x[i] * 2^-shift))               */
/* ------------------------------------------------------------------------------------ */

void mt_requant_s32_s16(const int32_t *x, int16_t *y, int n, int shift);
void mt_requant_s32_s8(const int32_t *x, int8_t *y, int n, int shift);
void mt_requant_s16_s16(const int16_t *x, int16_t *y, int n, int shift); /* y may alias x */
void mt_requant_s16_s8(const int16_t *x, int8_t *y, int n, int shift);
void mt_requant_s8_s16(const int8_t *x, int16_t *y, int n, int shift);

/* ------------------------------------------------------------------------------------ */
/* Linear layer and matmul                                                               */
/* ------------------------------------------------------------------------------------ */

/* y = x W^T + b (PyTorch nn.Linear layout).
 *   x [rows, in] (frac fx), w [out, in] (frac fw), b [out] int32 in the accumulator format
 *   (frac fx + fw) or NULL, y [rows, out] (frac fy); shift = fx + fw - fy.
 * Accumulators: int32 partial sums over chunks of 511 terms for s16 x w8 (|x*w| <= 2^22)
 * and 131071 terms for s8 x w8 (|x*w| <= 2^14), so a layer up to that width is a plain
 * int32 loop; longer rows add the chunks into int64. s16 x w16 accumulates in int64
 * (|x*w| <= 2^30). The bias is added and the result requantised in 64 bits, so nothing
 * can overflow. y must not alias x. Exact: the exact sum rounded once.
 * x_stride: elements from one row of x to the next (0 = packed, i.e. `in`), so the rows can
 * be read in place from a wider tensor (attention heads written over their query columns). */
void mt_linear_s16_w8(const int16_t *x, const int8_t *w, const int32_t *b, int16_t *y,
                      int rows, int in, int out, int shift, int x_stride);
void mt_linear_s16_w16(const int16_t *x, const int16_t *w, const int32_t *b, int16_t *y,
                       int rows, int in, int out, int shift, int x_stride);
void mt_linear_s8_w8(const int8_t *x, const int8_t *w, const int32_t *b, int8_t *y,
                     int rows, int in, int out, int shift, int x_stride);

/* Batched matmul of two activations: y[t] = a[t] @ b[t] for t < batch.
 *   a [batch, M, K]; b [batch, K, N], or [batch, N, K] when b_transposed != 0 (a @ b^T);
 *   y [batch, M, N]; shift = fa + fb - fy. s16: int64 accumulator; s8: int32 chunks of
 *   131071 terms as in mt_linear_s8_w8. y must not alias a or b. Exact. */
void mt_matmul_s16(const int16_t *a, const int16_t *b, int16_t *y, int batch, int M, int K, int N,
                   int b_transposed, int shift);
void mt_matmul_s8(const int8_t *a, const int8_t *b, int8_t *y, int batch, int M, int K, int N,
                  int b_transposed, int shift);

/* ------------------------------------------------------------------------------------ */
/* Elementwise                                                                           */
/* ------------------------------------------------------------------------------------ */

/* y = a + b with a in Q(fa), b in Q(fb), y in Q(fy). Both operands are aligned exactly to
 * F = max(fa, fb) (or, if the formats differ by more than 15 bits, the finer one is
 * rounded to min(fa, fb) + 15) and the sum is rounded once. y may alias a or b.
 * (The nb == n case of mt_add_bcast_*: one implementation.) */
void mt_add_s16(const int16_t *a, int fa, const int16_t *b, int fb, int16_t *y, int fy, int n);
void mt_add_s8(const int8_t *a, int fa, const int8_t *b, int fb, int8_t *y, int fy, int n);

/* Broadcast add: y[i] = a[i] + b[i mod nb] for i < n, with the alignment and the single
 * rounding of mt_add_* (b is repeated along the leading dims: a [.., nb] + b [nb]).
 * int32 sum. nb normally divides n; the index into b is a wrapping counter (no modulo),
 * so any nb >= 1 is well defined; nb <= 0 or n <= 0 does nothing. y may alias a (and b
 * when nb == n). Exact (formats within 15 bits). */
void mt_add_bcast_s16(const int16_t *a, int fa, const int16_t *b, int fb, int nb, int16_t *y, int fy,
                      int n);
void mt_add_bcast_s8(const int8_t *a, int fa, const int8_t *b, int fb, int nb, int8_t *y, int fy,
                     int n);

/* Broadcast multiply: y[i] = saturate(round(a[i] * b[i mod nb] * 2^-shift)), shift =
 * fa + fb - fy (any value; negative = saturating left shift). The product is exact in
 * int32 (|a b| <= 2^30) and rounded once. nb as in mt_add_bcast_* (nb == n: elementwise).
 * y may alias a (and b when nb == n). Exact. */
void mt_mul_s16(const int16_t *a, const int16_t *b, int nb, int16_t *y, int n, int shift);
void mt_mul_s8(const int8_t *a, const int8_t *b, int nb, int8_t *y, int n, int shift);

/* Row division (LinearAttention's normaliser): y[r, j] = x[r, j] / d[r] for x [rows, n]
 * in Q(fx), d [rows] in Q(fd), y in Q(fy); i.e. y = round(x / d * 2^-s), s = fx - fd - fy.
 * One reciprocal per row (mt_recip_u32 of |d[r]|, y_r in (2^30, 2^31], never below
 * 2^e/|d|), then per element one 32 x 32 -> 64-bit multiply |x| * y_r (< 2^47) and one
 * rounding shift by e + s (saturating left shift if e + s < 0); signs are applied to the
 * magnitudes. y_r over-estimates 1/|d| by less than 6 * 2^-30 relatively, so the result
 * is correctly rounded (ties away from zero) whenever s >= 0, and always for s8; for s16
 * with s < 0 an exact quotient q within |q| * 5.6e-9 (<= 1.9e-4 LSB) below a rounding tie
 * rounds up instead of down. Error vs the exact quotient: <= 0.5 + 1.9e-4 LSB; measured
 * 0.500023 LSB (s16; 2 of 125043 quotients, all near-tie probes, differ by one from the
 * correctly rounded value), 0.50 (s8, correctly rounded). A zero divisor gives the
 * saturated +max / -max of the output type with the sign of x (32767 / -32768, 127 /
 * -128), and 0 for x == 0: no trap. y may alias x, never d. */
void mt_div_rows_s16(const int16_t *x, int fx, const int16_t *d, int fd, int16_t *y, int fy, int rows,
                     int n);
void mt_div_rows_s8(const int8_t *x, int fx, const int8_t *d, int fd, int8_t *y, int fy, int rows,
                    int n);

/* y = x * mult * 2^-shift (scalar scale; mult a Q-format constant, shift = fx + fm - fy).
 * y may alias x. */
void mt_scale_s16(const int16_t *x, int16_t *y, int n, int16_t mult, int shift);
void mt_scale_s8(const int8_t *x, int8_t *y, int n, int16_t mult, int shift);

/* y = max(x, 0), same format; y may alias x. */
void mt_relu_s16(const int16_t *x, int16_t *y, int n);
void mt_relu_s8(const int8_t *x, int8_t *y, int n);

/* Activations through 258-entry Q0.16 tables on [0, 8] (step 1/32) with quadratic
 * interpolation and odd/even symmetry for negative inputs; x in Q(fx), y in Q(fy) (Q0.15 /
 * Q0.7 are the natural output formats of tanh and sigmoid). y may alias x.
 *   tanh(x);  sigmoid(x) = (1 + tanh(x/2)) / 2 (same table);
 *   gelu(x) = x * Phi(x) with Phi the standard normal CDF (PyTorch's exact, erf-based GELU).
 * Error over every int16 input: tanh 0.80 LSB of Q0.15, sigmoid 0.65, gelu 0.67 (Q3.12) to
 * 0.87 (Q0.15); int8: 0.50. */
void mt_tanh_s16(const int16_t *x, int16_t *y, int n, int fx, int fy);
void mt_tanh_s8(const int8_t *x, int8_t *y, int n, int fx, int fy);
void mt_sigmoid_s16(const int16_t *x, int16_t *y, int n, int fx, int fy);
void mt_sigmoid_s8(const int8_t *x, int8_t *y, int n, int fx, int fy);
void mt_gelu_s16(const int16_t *x, int16_t *y, int n, int fx, int fy);
void mt_gelu_s8(const int8_t *x, int8_t *y, int n, int fx, int fy);

/* ------------------------------------------------------------------------------------ */
/* Data movement: strided copy, embedding lookup                                         */
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
 * dst stride makes the last write win). Permute: src_strides = the input's strides taken
 * in the permuted order, dst packed; slice: src = base + start offset, src strides of the
 * input; concat: one call per input with dst offset and dst strides of the output;
 * expand: src stride 0 on the broadcast dims. */
void mt_copy_strided_s16(const int16_t *src, int16_t *dst, int ndim, const int32_t *shape,
                         const int32_t *src_strides, const int32_t *dst_strides);
void mt_copy_strided_s8(const int8_t *src, int8_t *dst, int ndim, const int32_t *shape,
                        const int32_t *src_strides, const int32_t *dst_strides);
void mt_copy_strided_s32(const int32_t *src, int32_t *dst, int ndim, const int32_t *shape,
                         const int32_t *src_strides, const int32_t *dst_strides);

/* Embedding lookup: out [n, dim] row i = table [num, dim] row ids[i], copied (same Q
 * format). An id outside [0, num) gives an all-zero row and is counted: the return value
 * is the number of out-of-range ids (0 = success). n <= 0 returns 0; dim <= 0 copies
 * nothing but still counts. out must not overlap table or ids. Exact. */
int mt_embedding_s16(const int32_t *ids, int n, const int16_t *table, int num, int dim, int16_t *out);
int mt_embedding_s8(const int32_t *ids, int n, const int8_t *table, int num, int dim, int8_t *out);

/* ------------------------------------------------------------------------------------ */
/* Softmax, layer norm, pooling, sums, argmax                                            */
/* ------------------------------------------------------------------------------------ */

/* Softmax over the last dim of x [rows, n] (frac fx). Output Q0.15 (s16) or Q0.7 (s8);
 * 1.0 saturates to 32767 / 127. Per row: max subtraction; z_j = (max - x_j) * log2(e) in
 * Q16; e_j = 2^-z_j by range reduction (integer part of z = a shift, fraction from the
 * table of mt_exp2neg_q16); the row sum of e_j in Q20 (so that the many small terms add up
 * without a rounding bias); ONE reciprocal per row (mt_recip_u32); then p_j = e_j (Q16)
 * times the reciprocal, one 32-bit multiply per element.
 * Error: 1.10 LSB of Q0.15, 0.50 LSB of Q0.7. n <= 65535. y may alias x. */
void mt_softmax_s16(const int16_t *x, int16_t *y, int rows, int n, int fx);
void mt_softmax_s8(const int8_t *x, int8_t *y, int rows, int n, int fx);

/* LayerNorm over the last dim of x [rows, n]:
 *   y = (x - mean) / sqrt(var + eps) * gamma + beta   (biased variance, like PyTorch)
 * x in Q(fx), gamma in Q(fg) (NULL = 1), beta in Q(fb) (NULL = 0), y in Q(fy),
 * eps = eps_q * 2^-eps_frac. Integer mean (8 extra fraction bits), variance in 64 bits,
 * one reciprocal of n per call and one integer inverse square root (Newton) per row.
 * Error 0.56 LSB (s16), 0.55 (s8). n <= 32767. A constant row with eps = 0 gives beta.
 * y may alias x. */
void mt_layernorm_s16(const int16_t *x, int16_t *y, int rows, int n, int fx,
                      const int16_t *gamma, int fg, const int16_t *beta, int fb,
                      uint32_t eps_q, int eps_frac, int fy);
void mt_layernorm_s8(const int8_t *x, int8_t *y, int rows, int n, int fx,
                     const int8_t *gamma, int fg, const int8_t *beta, int fb,
                     uint32_t eps_q, int eps_frac, int fy);

/* Mean over the middle dim of x [outer, n, inner] -> y [outer, inner]; shift = fx - fy.
 * The sum is exact (int32, n <= 65536) and divided by one reciprocal; the result equals
 * round(sum / n * 2^-shift) (ties away from zero). y must not alias x. */
void mt_meanpool_s16(const int16_t *x, int16_t *y, int outer, int n, int inner, int shift);
void mt_meanpool_s8(const int8_t *x, int8_t *y, int outer, int n, int inner, int shift);

/* Sum over the middle dim of x [outer, n, inner] -> y [outer, inner]:
 *   y[o, i] = saturate(round(sum_j x[o, j, i] * 2^-shift)), shift = fx - fy (any value;
 *   negative = saturating left shift).
 * The sum is exact: int32 partial sums over chunks of 65536 terms (s16: |sum| <= 2^31) or
 * 2^24 terms (s8), added into int64 only when n is longer; rounded once. n <= 0 gives
 * zeros (the empty sum; x is not read). y must not alias x. Exact. */
void mt_sum_s16(const int16_t *x, int16_t *y, int outer, int n, int inner, int shift);
void mt_sum_s8(const int8_t *x, int8_t *y, int outer, int n, int inner, int shift);

/* Index of the maximum of each row of x [rows, n]; ties give the first index (torch.argmax). */
void mt_argmax_s16(const int16_t *x, int32_t *idx, int rows, int n);
void mt_argmax_s8(const int8_t *x, int32_t *idx, int rows, int n);

/* ------------------------------------------------------------------------------------ */
/* Scaled dot-product attention                                                          */
/* ------------------------------------------------------------------------------------ */

/* mask flags */
#define MT_ATTN_CAUSAL 1u /* key j is visible to query i only if j <= i (PyTorch is_causal) */

/* out = softmax(scale * q k^T, masked) v for one head.
 *   q [L, D] (frac q_frac), k [S, D] (k_frac), v [S, Dv] (v_frac), out [L, Dv] (out_frac);
 *   row strides in elements (0 = packed: D, D, Dv, Dv), so heads can be read in place from
 *   an [L, H*D] projection.
 *   scale = scale_q * 2^-scale_frac, 0 < scale_q < 2^16 (e.g. 1/sqrt(16): 16384, 16).
 *   keep: NULL or an L*S bit mask, row-major, bit (i*S + j) = keep[(i*S+j) >> 3] >> ((i*S+j) & 7),
 *   1 = query i may attend key j ("keep" polarity). flags: MT_ATTN_CAUSAL. Both combine (AND).
 *   A fully masked query row gives an all-zero output row (never NaN-like garbage).
 * Scores are dot products in int64 (s16) / int32 (s8), then converted to base-2 logits in
 * Q16, t = score * scale * log2(e), saturated to int32; weights 2^(t_j - max) in Q16.
 * Limits: S <= 32767, D <= 65535. */
typedef struct {
  int L, S, D, Dv;
  int q_stride, k_stride, v_stride, out_stride;
  int q_frac, k_frac, v_frac, out_frac;
  uint32_t scale_q;
  int scale_frac;
  unsigned flags;
  const uint8_t *keep;
} mt_attn_params;

/* STREAMING (online-softmax) attention: for each query the keys are visited once, keeping a
 * running max m, a running sum l = sum 2^(t_j - m) (Q16) and a running weighted sum
 * acc = sum 2^(t_j - m) v_j; when a new max arrives, l and acc are rescaled by 2^(m - m').
 * out = acc / l with one reciprocal per query. No L x S buffer: the working memory is
 * `acc`, Dv int64 (s16) or Dv int32 (s8) (bytes: MT_ATTN_STREAM_SCRATCH_BYTES_S16/_S8);
 * for s8 and S > 256 the weights enter acc with ceil(log2 S) - 8 fewer bits so that int32
 * cannot overflow. out may alias q (in place) when out_stride == q_stride and Dv <= D;
 * never k or v. Error: 1.30 LSB (s16, 4e-5 of the output range), 0.50 LSB (s8). */
#define MT_ATTN_STREAM_SCRATCH_BYTES_S16(Dv) ((Dv) * 8)
#define MT_ATTN_STREAM_SCRATCH_BYTES_S8(Dv) ((Dv) * 4)
void mt_attention_stream_s16(const mt_attn_params *p, const int16_t *q, const int16_t *k,
                             const int16_t *v, int16_t *out, int64_t *acc);
void mt_attention_stream_s8(const mt_attn_params *p, const int8_t *q, const int8_t *k,
                            const int8_t *v, int8_t *out, int32_t *acc);

/* TWO-PASS reference: materialises the L x S base-2 logits in `scores` (int32, L*S
 * elements = 4*L*S bytes), overwrites each row with its softmax in Q0.15 (same exp and
 * reciprocal as mt_softmax_s16), then out = P v (int64 accumulator). Kept as the reference
 * for the streaming kernel and as the memory baseline. Error: 4.1 LSB (s16: rounding every
 * probability to Q0.15 costs up to S * 2^-16 * max|v|), 0.51 LSB (s8); it differs from
 * the streaming result by <= 4 LSB (s16) / 1 LSB (s8): equal within that, not bit-equal. */
void mt_attention_twopass_s16(const mt_attn_params *p, const int16_t *q, const int16_t *k,
                              const int16_t *v, int16_t *out, int32_t *scores);
void mt_attention_twopass_s8(const mt_attn_params *p, const int8_t *q, const int8_t *k,
                             const int8_t *v, int8_t *out, int32_t *scores);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MT_KERNELS_H */
