/* mt_reduce.c - sums over the middle dim and argmax (the lowering's reduce family,
 * src/lower/rules/reduce.cpp): mt_sum_*, mt_argmax_*. Portable C only. Part of
 * mt_kernels.c. */
#include "mt_internal.h"

/* Exact sum of x[0], x[inner], .., x[(n-1) inner]: int32 chunks (65536 int16 terms sum to
 * at most 2^31 in magnitude; 2^24 int8 terms to 2^31), added into int64. */
#define MT_DEFINE_COLSUM(NAME, CT, CHUNK)                                         \
  static int64_t NAME(const CT *x, int n, int inner) {                            \
    int64_t acc = 0;                                                              \
    int j = 0;                                                                    \
    while (j < n) {                                                               \
      const int end = n - j > (CHUNK) ? j + (CHUNK) : n;                          \
      int32_t s = 0;                                                              \
      for (; j < end; ++j) s += x[j * inner];                                     \
      acc += s;                                                                   \
    }                                                                             \
    return acc;                                                                   \
  }
MT_DEFINE_COLSUM(mt_colsum_s8, int8_t, 16777216)
MT_DEFINE_COLSUM(mt_colsum_s16, int16_t, 65536)

/* y = y_zero + rq(the exact column sum (COLSUM: mt_colsum_*) - n x_zero), saturated by OUT (mt_out_*) */
#define MT_DEFINE_SUM(NAME, XT, YT, COLSUM, OUT)                                                            \
  void NAME(const XT *x, YT *y, int outer, int n, int inner, int32_t x_zero, int32_t m, int s,              \
            int32_t y_zero) {                                                                               \
    int o, c;                                                                                               \
    for (o = 0; o < outer; ++o)                                                                             \
      for (c = 0; c < inner; ++c) {                                                                         \
        int64_t acc = 0; /* n <= 0: the empty sum, x is not read */                                         \
        if (n > 0) acc = COLSUM(x + o * n * inner + c, n, inner) - (int64_t)n * x_zero;                    \
        y[o * inner + c] = OUT(mt_rq(acc, m, s), y_zero);                                                  \
      }                                                                                                     \
  }
MT_DEFINE_SUM(mt_sum_s8_s8, int8_t, int8_t, mt_colsum_s8, mt_out_s8)
MT_DEFINE_SUM(mt_sum_s8_s16, int8_t, int16_t, mt_colsum_s8, mt_out_s16)
MT_DEFINE_SUM(mt_sum_s16_s8, int16_t, int8_t, mt_colsum_s16, mt_out_s8)
MT_DEFINE_SUM(mt_sum_s16_s16, int16_t, int16_t, mt_colsum_s16, mt_out_s16)

/* the first index of each row's max */
#define MT_DEFINE_ARGMAX(NAME, CT)                                                \
  void NAME(const CT *x, int32_t *idx, int rows, int n) {                         \
    int r, j;                                                                     \
    for (r = 0; r < rows; ++r) {                                                  \
      const CT *xr = x + r * n;                                                   \
      int best = 0;                                                               \
      for (j = 1; j < n; ++j)                                                     \
        if (xr[j] > xr[best]) best = j;                                           \
      idx[r] = best;                                                              \
    }                                                                             \
  }
MT_DEFINE_ARGMAX(mt_argmax_s8, int8_t)
MT_DEFINE_ARGMAX(mt_argmax_s16, int16_t)
