// The attention tiles compiled for AVX-512: attention_tiles_isa.hpp.
#include "simd.hpp"

#if defined(MICROTORCH_ISAS_AVX512)
#define MICROTORCH_TILES_ISA Avx512
#define MICROTORCH_TILES_TARGET MICROTORCH_TARGET_AVX512
#include "attention_tiles_isa.hpp"
#endif
