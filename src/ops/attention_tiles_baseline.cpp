// The attention tiles compiled for the baseline (SSE2 on x86-64, NEON on AArch64): attention_tiles_isa.hpp.
#include "simd.hpp"

#if defined(MICROTORCH_ISAS_BASELINE)
#define MICROTORCH_TILES_ISA Baseline
#define MICROTORCH_TILES_TARGET 
#include "attention_tiles_isa.hpp"
#endif
