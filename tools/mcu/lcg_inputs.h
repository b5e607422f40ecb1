/* lcg_inputs.h - the pseudo-random inputs of tools/mcu/kernel_vectors.c and kernel_bench.c:
 * a 32-bit LCG (no libc rand, so host and every target draw the same numbers), seeded by
 * LCG_SEED, which the including file defines first. */
#ifndef MT_LCG_INPUTS_H
#define MT_LCG_INPUTS_H
#include <stdint.h>

static uint32_t lcg_state = LCG_SEED;

static inline uint32_t lcg(void) {
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return lcg_state;
}

/* uniform in [lo, hi] (hi - lo < 2^16) */
static inline int32_t rnd(int32_t lo, int32_t hi) {
  return lo + (int32_t)((lcg() >> 16) % (uint32_t)(hi - lo + 1));
}

static inline void fill16(int16_t *x, int n, int32_t lo, int32_t hi) {
  int i;
  for (i = 0; i < n; ++i) x[i] = (int16_t)rnd(lo, hi);
}

static inline void fill8(int8_t *x, int n, int32_t lo, int32_t hi) {
  int i;
  for (i = 0; i < n; ++i) x[i] = (int8_t)rnd(lo, hi);
}
#endif
