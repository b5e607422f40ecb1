/* mt_loss.c - the losses of a training step and their gradients (float32; the lowering's
 * training, src/lower/train): mt_cross_entropy_f32, mt_mse_f32. Compiled where MT_F32 is 1.
 * Part of mt_kernels.c. */
#include "mt_internal.h"

#if MT_F32
/* Per counted row (target in [0, n)): m = max, e_j = exp(x_j - m), s = e_0 + e_1 + .. (j
 * ascending), the row's loss (m - x_t) + log s (both terms >= 0: no cancellation), its
 * gradient (e_j / s - [j = t]) / count with one reciprocal of s per row; the loss the rows'
 * sum (ascending) divided by count. Rows with another target: no loss, a zero gradient row. */
void mt_cross_entropy_f32(const float *logits, const int32_t *target, float *loss, float *dlogits, int rows, int n) {
  int r, j, count = 0;
  float total = 0.0f, c;
  for (r = 0; r < rows; ++r) count += target[r] >= 0 && target[r] < n;
  c = count > 0 ? 1.0f / (float)count : 0.0f;
  for (r = 0; r < rows; ++r) {
    const float *x = logits + r * n;
    float *dl = dlogits ? dlogits + r * n : 0;
    const int32_t t = target[r];
    float m, s = 0.0f;
    if (t < 0 || t >= n) {
      if (dl)
        for (j = 0; j < n; ++j) dl[j] = 0.0f;
      continue;
    }
    m = x[0];
    for (j = 1; j < n; ++j) m = x[j] > m ? x[j] : m;
    for (j = 0; j < n; ++j) {
      const float e = mt_expf(x[j] - m);
      if (dl) dl[j] = e;
      s += e;
    }
    total += (m - x[t]) + mt_logf(s);
    if (dl) {
      const float rs = 1.0f / s;
      for (j = 0; j < n; ++j) dl[j] = (dl[j] * rs - (j == t ? 1.0f : 0.0f)) * c;
    }
  }
  if (loss) loss[0] = count > 0 ? total / (float)count : 0.0f;
}

/* d_i = y_i - t_i; loss = (d_0^2 + d_1^2 + ..) / n (i ascending); dy_i = d_i (2 / n) */
void mt_mse_f32(const float *y, const float *t, float *loss, float *dy, int n) {
  int i;
  float s = 0.0f, c;
  if (n <= 0) {
    if (loss) loss[0] = 0.0f;
    return;
  }
  c = 2.0f / (float)n;
  for (i = 0; i < n; ++i) {
    const float d = y[i] - t[i];
    s += d * d;
    if (dy) dy[i] = d * c;
  }
  if (loss) loss[0] = s / (float)n;
}
#endif

/* ==================================================================================== */
/* Integer training (Numeric::Integer): the cross entropy of int8 / int16 logits          */
/* ==================================================================================== */

/* log2(x) in Q16 for x >= 1: the integer part from the highest bit, then 16 fraction bits
 * from repeated squaring of the mantissa y in [1, 2) in Q30 (y^2 >= 2 gives the bit 1 and
 * halves y); truncated, so the error is below 2^-16 plus the squarings' truncation (< 2^-15). */
static int32_t mt_log2_q16(uint64_t x) {
  const int k = mt_msb64(x);
  uint64_t y = k >= 30 ? x >> (k - 30) : x << (30 - k);
  int32_t r = (int32_t)k << 16;
  int i;
  for (i = 15; i >= 0; --i) {
    y = (y * y) >> 30;
    if (y >= ((uint64_t)1 << 31)) {
      y >>= 1;
      r |= (int32_t)1 << i;
    }
  }
  return r;
}

#define MT_LN2_Q16 45426 /* round(ln(2) * 2^16) */

/* round(v / d) for d >= 1 and |v| < 2^32 without a division: |v| times the reciprocal
 * (mt_recip_u32: y <= 2^31, so the product stays below 2^63), one rounding shift */
static int32_t mt_div_recip(int64_t v, uint32_t d) {
  int e;
  const uint32_t y = mt_recip_u32(d, &e);
  const uint64_t q = mt_rshift_u64(mt_abs_u64(v) * y, e);
  return v < 0 ? -(int32_t)q : (int32_t)q;
}

#define MT_DEFINE_CROSS_ENTROPY_Q(NAME, T)                                                              \
  void NAME(const T *y, const int32_t *target, int32_t *loss, int32_t *g, int rows, int n, int32_t m, int s, \
            int32_t ml, int sl, int gb) {                                                             \
    int r, j, count = 0;                                                                              \
    int64_t total = 0;                                                                                \
    for (r = 0; r < rows; ++r) count += target[r] >= 0 && target[r] < n;                              \
    for (r = 0; r < rows; ++r) {                                                                      \
      const T *x = y + r * n;                                                                         \
      int32_t *gr = g ? g + r * n : 0;                                                                \
      const int32_t t = target[r];                                                                    \
      int32_t mx;                                                                                     \
      uint64_t sum = 0;                                                                               \
      if (t < 0 || t >= n) {                                                                          \
        if (gr)                                                                                       \
          for (j = 0; j < n; ++j) gr[j] = 0;                                                          \
        continue;                                                                                     \
      }                                                                                               \
      mx = x[0];                                                                                      \
      for (j = 1; j < n; ++j) mx = x[j] > mx ? x[j] : mx;                                             \
      for (j = 0; j < n; ++j) sum += mt_exp2neg_q20((uint32_t)mt_rq((int64_t)(mx - x[j]), m, s));     \
      total += (int64_t)mt_rq((int64_t)(mx - x[t]), ml, sl) +                                         \
               mt_rshift_s64((int64_t)(mt_log2_q16(sum) - (20 << 16)) * MT_LN2_Q16, 16);             \
      if (gr) {                                                                                       \
        int es;                                                                                       \
        const uint64_t ys = mt_recip_u32((uint32_t)sum, &es); /* sum < n 2^20 < 2^31 */               \
        for (j = 0; j < n; ++j) {                                                                     \
          const uint64_t e = mt_exp2neg_q20((uint32_t)mt_rq((int64_t)(mx - x[j]), m, s));             \
          const int64_t p = (int64_t)mt_rshift_u64(e * ys, es - gb); /* e 2^gb / sum: < 2^51 */       \
          gr[j] = mt_div_recip(p - (j == t ? ((int64_t)1 << gb) : 0), (uint32_t)count);               \
        }                                                                                             \
      }                                                                                               \
    }                                                                                                 \
    if (loss) loss[0] += count > 0 ? mt_div_recip(total, (uint32_t)count) : 0;                         \
  }
MT_DEFINE_CROSS_ENTROPY_Q(mt_cross_entropy_s8, int8_t)
MT_DEFINE_CROSS_ENTROPY_Q(mt_cross_entropy_s16, int16_t)
