/* mt_shape.c - data movement (the shape family, src/lower/rules/shape.cpp):
 * the strided copy behind permute, slice, concat and expand (mt_copy_strided_*), the padding
 * of a convolution's input that carries a zero point (mt_pad_s8, conv.cpp) and the embedding
 * lookup (mt_embedding_*). Portable C only. Part of mt_kernels.c. */
#include "mt_internal.h"

/* Walk over the runs of an N-d index space with one counter per outer dim (no division).
 * Size-1 dims are dropped and a dim is merged into the one outside it when that one steps
 * exactly over it in both arrays (stride_outer == shape * stride_inner), so the innermost
 * run is as long as possible. Offsets always address elements of the index space. */
typedef struct {
  int nd;                                      /* dims after merging, >= 1 */
  int32_t off_s, off_d;                        /* first element of the current run */
  int32_t cnt[MT_MAX_DIMS], len[MT_MAX_DIMS];  /* len[nd - 1] = run length */
  int32_t st_s[MT_MAX_DIMS], st_d[MT_MAX_DIMS];
} mt_walk;

static int mt_walk_init(mt_walk *w, int ndim, const int32_t *shape, const int32_t *ss,
                        const int32_t *ds) {
  int k, nd = 0;
  if (ndim < 1 || ndim > MT_MAX_DIMS) return 0;
  for (k = 0; k < ndim; ++k)
    if (shape[k] <= 0) return 0;
  for (k = 0; k < ndim; ++k) {
    if (shape[k] == 1) continue;
    if (nd > 0 && (int64_t)w->st_s[nd - 1] == (int64_t)shape[k] * ss[k] &&
        (int64_t)w->st_d[nd - 1] == (int64_t)shape[k] * ds[k]) {
      w->len[nd - 1] *= shape[k];
      w->st_s[nd - 1] = ss[k];
      w->st_d[nd - 1] = ds[k];
      continue;
    }
    w->len[nd] = shape[k];
    w->st_s[nd] = ss[k];
    w->st_d[nd] = ds[k];
    ++nd;
  }
  if (nd == 0) { /* a single element */
    w->len[0] = 1;
    w->st_s[0] = w->st_d[0] = 0;
    nd = 1;
  }
  for (k = 0; k < nd; ++k) w->cnt[k] = 0;
  w->nd = nd;
  w->off_s = w->off_d = 0;
  return 1;
}

/* Next run: increment the counters of the outer dims (last one fastest); 0 when done. */
static int mt_walk_next(mt_walk *w) {
  int k;
  for (k = w->nd - 2; k >= 0; --k) {
    if (++w->cnt[k] < w->len[k]) {
      w->off_s += w->st_s[k];
      w->off_d += w->st_d[k];
      return 1;
    }
    w->cnt[k] = 0; /* back to index 0 of dim k, carry into dim k - 1 */
    w->off_s -= (w->len[k] - 1) * w->st_s[k];
    w->off_d -= (w->len[k] - 1) * w->st_d[k];
  }
  return 0;
}

/* The innermost run: a pointer loop that never steps past its last element. */
#define MT_COPY_STRIDED_BODY(T)                                                   \
  mt_walk w;                                                                      \
  if (!mt_walk_init(&w, ndim, shape, src_strides, dst_strides)) return;          \
  do {                                                                            \
    const T *s = src + w.off_s;                                                   \
    T *d = dst + w.off_d;                                                         \
    const int32_t ss = w.st_s[w.nd - 1], ds = w.st_d[w.nd - 1];                   \
    int32_t j = w.len[w.nd - 1];                                                  \
    for (;;) {                                                                    \
      *d = *s;                                                                    \
      if (--j == 0) break;                                                        \
      s += ss;                                                                    \
      d += ds;                                                                    \
    }                                                                             \
  } while (mt_walk_next(&w))

void mt_copy_strided_s16(const int16_t *src, int16_t *dst, int ndim, const int32_t *shape,
                         const int32_t *src_strides, const int32_t *dst_strides) {
  MT_COPY_STRIDED_BODY(int16_t);
}

void mt_copy_strided_s8(const int8_t *src, int8_t *dst, int ndim, const int32_t *shape,
                        const int32_t *src_strides, const int32_t *dst_strides) {
  MT_COPY_STRIDED_BODY(int8_t);
}

void mt_copy_strided_s32(const int32_t *src, int32_t *dst, int ndim, const int32_t *shape,
                         const int32_t *src_strides, const int32_t *dst_strides) {
  MT_COPY_STRIDED_BODY(int32_t);
}

/* A plane at a time: the top rows, then per row the left border, the row, the right border,
 * then the bottom rows (y written once, in order). */
void mt_pad_s8(const int8_t *x, int8_t *y, int planes, int h, int w, int top, int left, int bottom, int right,
               int32_t fill) {
  const int8_t v = (int8_t)(fill < -128 ? -128 : fill > 127 ? 127 : fill); /* saturated */
  const int32_t ow = left + w + right;
  int p, i, j;
  if (planes <= 0 || h <= 0 || w <= 0 || top < 0 || left < 0 || bottom < 0 || right < 0) return;
  for (p = 0; p < planes; ++p) {
    for (i = 0; i < top * ow; ++i) *y++ = v;
    for (i = 0; i < h; ++i) {
      for (j = 0; j < left; ++j) *y++ = v;
      for (j = 0; j < w; ++j) *y++ = *x++;
      for (j = 0; j < right; ++j) *y++ = v;
    }
    for (i = 0; i < bottom * ow; ++i) *y++ = v;
  }
}

/* One body for both types: row ids[i] of the table, or zeros for an id outside [0, num). */
#define MT_EMBEDDING_BODY(T)                                                      \
  int i, j, bad = 0;                                                              \
  for (i = 0; i < n; ++i) {                                                       \
    const int32_t id = ids[i];                                                    \
    T *o;                                                                         \
    if (id < 0 || id >= num) ++bad;                                               \
    if (dim <= 0) continue; /* count only: no row pointer is formed */            \
    o = out + i * dim;                                                            \
    if (id >= 0 && id < num) {                                                    \
      const T *t = table + id * dim;                                              \
      for (j = 0; j < dim; ++j) o[j] = t[j];                                      \
    } else {                                                                      \
      for (j = 0; j < dim; ++j) o[j] = 0;                                         \
    }                                                                             \
  }                                                                               \
  return bad

int mt_embedding_s16(const int32_t *ids, int n, const int16_t *table, int num, int dim, int16_t *out) {
  MT_EMBEDDING_BODY(int16_t);
}

int mt_embedding_s8(const int32_t *ids, int n, const int8_t *table, int num, int dim, int8_t *out) {
  MT_EMBEDDING_BODY(int8_t);
}

#if MT_F32
/* ==================================================================================== */
/* Float32 (training in float): strided copy and add, embedding                          */
/* ==================================================================================== */

void mt_copy_strided_f32(const float *src, float *dst, int ndim, const int32_t *shape, const int32_t *src_strides,
                         const int32_t *dst_strides) {
  MT_COPY_STRIDED_BODY(float);
}

/* The copy's index walk (runs merged the same way, so the order is the index order), adding:
 * the backward of a view or an expand (a dst stride of 0 sums those elements up, in order). */
void mt_add_strided_f32(const float *src, float *dst, int ndim, const int32_t *shape, const int32_t *src_strides,
                        const int32_t *dst_strides) {
  mt_walk w;
  if (!mt_walk_init(&w, ndim, shape, src_strides, dst_strides)) return;
  do {
    const float *s = src + w.off_s;
    float *d = dst + w.off_d;
    const int32_t ss = w.st_s[w.nd - 1], ds = w.st_d[w.nd - 1];
    int32_t j = w.len[w.nd - 1];
    for (;;) {
      *d = *d + *s;
      if (--j == 0) break;
      s += ss;
      d += ds;
    }
  } while (mt_walk_next(&w));
}

int mt_embedding_f32(const int32_t *ids, int n, const float *table, int num, int dim, float *out) {
  MT_EMBEDDING_BODY(float);
}
#endif
