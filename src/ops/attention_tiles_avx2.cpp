// The attention tiles compiled for AVX2: attention_tiles_isa.hpp.
#include "simd.hpp"

#if defined(MICROTORCH_ISAS_AVX2)
#define MICROTORCH_TILES_ISA Avx2
#define MICROTORCH_TILES_TARGET MICROTORCH_TARGET_AVX2
#include "attention_tiles_isa.hpp"
#endif
