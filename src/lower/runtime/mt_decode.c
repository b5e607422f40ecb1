/* mt_decode.c - the kernels of a decoder's step (one token at a time against a key/value
 * cache; src/lower/decoder.cpp): rotary position embedding from fixed-point tables, the
 * append of a position's keys and values to the cache, the position counter, and attention
 * of one query per head over the cached positions with grouped-query head sharing (each
 * group of query heads one mt_attention_stream_s16 call). Part of mt_kernels.c. */
#include "mt_internal.h"

/* The row of the tables for the position *pos: the last row when the cache is full (the
 * append reports that step as bad data). */
static int mt_decode_row(const int32_t *pos, int capacity) {
  const int32_t p = *pos;
  return p < 0 ? 0 : p >= capacity ? capacity - 1 : (int)p;
}

void mt_rope_s16(int16_t *x, int heads, int dim, const int16_t *cos_q14, const int16_t *sin_q14,
                 const int32_t *pos, int capacity, int interleaved) {
  const int half = dim >> 1;
  const int16_t *c = cos_q14 + mt_decode_row(pos, capacity) * half;
  const int16_t *s = sin_q14 + mt_decode_row(pos, capacity) * half;
  int h, i;
  for (h = 0; h < heads; ++h, x += dim) {
    for (i = 0; i < half; ++i) {
      int16_t *pa = interleaved ? x + 2 * i : x + i;
      int16_t *pb = interleaved ? x + 2 * i + 1 : x + i + half;
      const int32_t a = *pa, b = *pb;
      /* |a c| + |b s| <= 2^15 2^14 2: fits int32 */
      *pa = mt_sat_s16(mt_rshift_s32(a * c[i] - b * s[i], 14));
      *pb = mt_sat_s16(mt_rshift_s32(b * c[i] + a * s[i], 14));
    }
  }
}

/* The cache append and the attention over the cache, one body per element type. */
#define MT_DEFINE_CACHE_APPEND(NAME, T)                                                  \
  int NAME(const T *x, T *cache, int n, const int32_t *pos, int capacity) {              \
    int j;                                                                               \
    if (*pos < 0 || *pos >= capacity) return 1;                                          \
    cache += *pos * n;                                                                   \
    for (j = 0; j < n; ++j) cache[j] = x[j];                                             \
    return 0;                                                                            \
  }
MT_DEFINE_CACHE_APPEND(mt_cache_append_s16, int16_t)
MT_DEFINE_CACHE_APPEND(mt_cache_append_s8, int8_t)

void mt_position_next(int32_t *pos, int capacity) {
  if (*pos < capacity) *pos += 1;
}

#define MT_DEFINE_ATTENTION_CACHED(NAME, T, ACC, STREAM)                                                 \
  void NAME(const int32_t *p, const int32_t *pos, int kv_heads, int group, const T *q, const T *k, const T *v, \
            T *out, ACC *acc) {                                                                           \
    int32_t pp[MT_ATTN_PARAMS];                                                                           \
    const int D = p[MT_ATTN_D], Dv = p[MT_ATTN_DV];                                                       \
    int i, g;                                                                                             \
    for (i = 0; i < MT_ATTN_PARAMS; ++i) pp[i] = p[i];                                                    \
    pp[MT_ATTN_L] = group; /* the group's query heads, consecutive rows of q and out */                  \
    pp[MT_ATTN_S] = *pos < 0 ? 1 : *pos >= p[MT_ATTN_S] ? p[MT_ATTN_S] : *pos + 1;                        \
    pp[MT_ATTN_Q_STRIDE] = D, pp[MT_ATTN_OUT_STRIDE] = Dv;                                                \
    pp[MT_ATTN_FLAGS] = 0;                                                                                \
    for (g = 0; g < kv_heads; ++g, k += D, v += Dv, q += group * D, out += group * Dv)                    \
      STREAM(pp, 0, q, k, v, out, acc);                                                                   \
  }
MT_DEFINE_ATTENTION_CACHED(mt_attention_cached_s16, int16_t, int64_t, mt_attention_stream_s16)
MT_DEFINE_ATTENTION_CACHED(mt_attention_cached_s8, int8_t, int32_t, mt_attention_stream_s8)

/* xorshift32 (Marsaglia, "Xorshift RNGs", 2003): the next state, never 0 (a zero state
 * starts from 2463534242). */
static uint32_t mt_xorshift32(uint32_t *state) {
  uint32_t x = *state != 0 ? *state : 2463534242u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *state = x;
  return x;
}

int32_t mt_sample_s16(const int16_t *logits, int n, int top_k, int32_t logit_q24, int32_t inv_t_q16,
                      uint32_t *state) {
  int32_t idx[MT_SAMPLE_MAX_K];
  uint32_t w[MT_SAMPLE_MAX_K];
  uint64_t sum = 0, r;
  int32_t prev_v = 32768, prev_i = -1;
  int k, i, count = 0;
  if (n <= 0) return -1;
  if (top_k < 1) top_k = 1;
  if (top_k > MT_SAMPLE_MAX_K) top_k = MT_SAMPLE_MAX_K;
  if (top_k > n) top_k = n;
  /* the top_k largest, by value then lowest index: each pass the largest after the last one */
  for (k = 0; k < top_k; ++k) {
    int32_t best = -1;
    for (i = 0; i < n; ++i) {
      const int32_t v = logits[i];
      if (v > prev_v || (v == prev_v && i <= prev_i)) continue;
      if (best < 0 || v > logits[best]) best = i;
    }
    idx[count++] = best;
    prev_v = logits[best], prev_i = best;
  }
  /* w_k = 2^-z_k in Q16, z_k = (max - l_k) scale log2(e) / T in Q16 (floored; 0 from 17 on) */
  for (k = 0; k < count; ++k) {
    const uint64_t d = (uint64_t)(uint32_t)(logits[idx[0]] - logits[idx[k]]); /* <= 65535 */
    uint64_t t = (d * (uint64_t)(uint32_t)(logit_q24 > 0 ? logit_q24 : 0)) >> 8; /* Q16 */
    uint64_t z;
    if (t > ((uint64_t)1 << 22)) t = (uint64_t)1 << 22;
    z = (t * (uint64_t)(uint32_t)(inv_t_q16 > 0 ? inv_t_q16 : 0)) >> 16;
    w[k] = z >= ((uint64_t)17 << 16) ? 0u : mt_exp2neg_q16((uint32_t)z);
    sum += w[k];
  }
  /* r uniform in [0, sum): the first k whose running sum passes r */
  r = ((uint64_t)mt_xorshift32(state) * sum) >> 32;
  for (k = 0; k < count; ++k) {
    if (r < w[k]) return idx[k];
    r -= w[k];
  }
  return idx[0];
}
