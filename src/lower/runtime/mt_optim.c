/* mt_optim.c - the optimizer step of a training step (float32; the lowering's training,
 * src/lower/train): mt_sgd_f32, and mt_fill_f32 for the buffers a step zeroes. Compiled
 * where MT_F32 is 1. Part of mt_kernels.c. */
#include "mt_internal.h"

#if MT_F32
/* torch.optim.SGD (dampening 0, not Nesterov), per element: d = g + weight_decay w (left out
 * when weight_decay is 0), with momentum m = momentum m + d (PyTorch's first step sets m = d:
 * the same as momentum 0 + d, so a zero-filled m is exact), then w = w - lr m (or lr d). */
void mt_sgd_f32(float *w, const float *g, float *m, int n, float lr, float momentum, float weight_decay) {
  int i;
  for (i = 0; i < n; ++i) {
    float d = g[i];
    if (weight_decay != 0.0f) d = d + weight_decay * w[i];
    if (m) {
      d = momentum * m[i] + d;
      m[i] = d;
    }
    w[i] = w[i] - lr * d;
  }
}

void mt_fill_f32(float *x, int n, float v) {
  int i;
  for (i = 0; i < n; ++i) x[i] = v;
}
#endif
