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
