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

/* ==================================================================================== */
/* Integer training (Numeric::Integer): the gradients of a linear layer's weight and bias,  */
/* the SGD step on int32 master copies, the inference weights re-derived from them        */
/* ==================================================================================== */

#define MT_DEFINE_LINEAR_GRAD(NAME, T)                                                                \
  void NAME(const T *x, const int32_t *g, int32_t *dw, int32_t *db, int rows, int in, int out, int xs,  \
            int32_t zx) {                                                                             \
    int r, o, i;                                                                                      \
    if (xs == 0) xs = in;                                                                             \
    for (r = 0; r < rows; ++r) {                                                                      \
      const T *xr = x + r * xs;                                                                       \
      const int32_t *gr = g + r * out;                                                                \
      for (o = 0; o < out; ++o) {                                                                     \
        const int32_t go = gr[o];                                                                     \
        if (db) db[o] += go;                                                                          \
        if (dw && go != 0) {                                                                          \
          int32_t *dwo = dw + o * in;                                                                 \
          for (i = 0; i < in; ++i) dwo[i] += go * ((int32_t)xr[i] - zx);                              \
        }                                                                                             \
      }                                                                                               \
    }                                                                                                 \
  }
MT_DEFINE_LINEAR_GRAD(mt_linear_grad_s8, int8_t)
MT_DEFINE_LINEAR_GRAD(mt_linear_grad_s16, int16_t)

void mt_sgd_s32(int32_t *w, const int32_t *g, int32_t *mom, int n, int per, const int32_t *rq, int32_t mu, int mu_s,
                int32_t lo, int32_t hi) {
  int i, k = 0, left = per; /* k: the row's (m, s) pair; no division */
  for (i = 0; i < n; ++i) {
    int64_t d, v;
    if (left == 0) k += 2, left = per;
    --left;
    d = mt_rq((int64_t)g[i], rq[k], (int)rq[k + 1]);
    if (mom) {
      d = (int64_t)mt_rq((int64_t)mom[i], mu, mu_s) + d;
      mom[i] = d > INT32_MAX ? INT32_MAX : d < INT32_MIN ? INT32_MIN : (int32_t)d;
    }
    v = (int64_t)w[i] - d;
    w[i] = v > hi ? hi : v < lo ? lo : (int32_t)v;
  }
}

void mt_fill_s32(int32_t *x, int n, int32_t v) {
  int i;
  for (i = 0; i < n; ++i) x[i] = v;
}

void mt_scale_s32(int32_t *x, int n, int32_t m, int s) {
  int i;
  for (i = 0; i < n; ++i) x[i] = mt_rq((int64_t)x[i], m, s);
}

void mt_master_s8(const int32_t *master, int8_t *w, int n, int shift) {
  int i;
  for (i = 0; i < n; ++i) w[i] = mt_sat_s8(mt_rshift_s64((int64_t)master[i], shift));
}

void mt_master_s16(const int32_t *master, int16_t *w, int n, int shift) {
  int i;
  for (i = 0; i < n; ++i) w[i] = mt_sat_s16(mt_rshift_s64((int64_t)master[i], shift));
}

/* b = round(master 2^-shift) (a left shift for shift < 0) */
static int64_t mt_master_value(int32_t master, int shift) {
  if (shift <= 0) return (int64_t)master * ((int64_t)1 << -shift);
  return (int64_t)mt_rshift_s64((int64_t)master, shift);
}

#define MT_DEFINE_LINEAR_BIAS(NAME, T, B)                                                             \
  void NAME(const int32_t *master, const T *w, B *b, int in, int out, int shift, int32_t zx) {          \
    int o, i;                                                                                         \
    for (o = 0; o < out; ++o) {                                                                       \
      int64_t zsum = 0;                                                                               \
      for (i = 0; i < in; ++i) zsum += w[o * in + i];                                                 \
      b[o] = (B)((master ? mt_master_value(master[o], shift) : 0) - zsum * zx);                       \
    }                                                                                                 \
  }
MT_DEFINE_LINEAR_BIAS(mt_linear_bias_s8, int8_t, int32_t)
MT_DEFINE_LINEAR_BIAS(mt_linear_bias_s16, int16_t, int64_t)

#define MT_DEFINE_LINEAR_DX(NAME, T)                                                                  \
  void NAME(const int32_t *g, const T *w, int32_t *dx, int rows, int in, int out, const int32_t *pre, int32_t m, \
            int s, const T *y, int ys, int32_t zy) {                                                  \
    int r, o, i;                                                                                      \
    if (ys == 0) ys = in;                                                                             \
    for (r = 0; r < rows; ++r) {                                                                      \
      const int32_t *gr = g + r * out;                                                                \
      int32_t *dxr = dx + r * in;                                                                     \
      for (i = 0; i < in; ++i) {                                                                      \
        int64_t acc = 0;                                                                              \
        if (y && y[r * ys + i] <= zy) {                                                               \
          dxr[i] = 0;                                                                                 \
          continue;                                                                                   \
        }                                                                                             \
        for (o = 0; o < out; ++o) acc += (int64_t)mt_rq((int64_t)gr[o], pre[2 * o], (int)pre[2 * o + 1]) * w[o * in + i]; \
        dxr[i] = mt_rq(acc, m, s);                                                                    \
      }                                                                                               \
    }                                                                                                 \
  }
MT_DEFINE_LINEAR_DX(mt_linear_dx_s8, int8_t)
MT_DEFINE_LINEAR_DX(mt_linear_dx_s16, int16_t)
