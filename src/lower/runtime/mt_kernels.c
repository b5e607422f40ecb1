/* mt_kernels.c - microtorch fixed-point runtime kernels (C99). See mt_kernels.h for the
 * number format, the requantization and rounding, and each kernel's contract; README.md
 * beside this file for the measured errors and the memory of streaming vs two-pass
 * attention.
 *
 * One file per kernel family, named as the op families of the lowering (src/lower/rules) and
 * of the host (src/ops; docs/adding-an-op.md): this
 * file includes them in order after the private header mt_internal.h (the target's feature
 * macros, the tables, the shared helpers) and mt_primitives.c (requantization, reciprocal,
 * 2^-z, dot products), so that they compile as one translation unit. The firmware gets them
 * as one file: tools/embed_runtime.py writes this file with each include replaced by the
 * included text (the amalgamation), which the emitter copies beside mt_kernels.h.
 *
 * The int8 and int16 variants of a kernel share one body: each body is written once as a
 * macro over the element types (MT_DEFINE_<KERNEL>) and instantiated for the type
 * combinations mt_kernels.h declares, so the variants cannot drift apart; the macro takes
 * the variant's full name (and the functions it calls), so grep finds each definition. */
#include "mt_internal.h"
#include "mt_primitives.c"
#include "mt_linear.c"
#include "mt_elementwise.c"
#include "mt_activation.c"
#include "mt_shape.c"
#include "mt_softmax.c"
#include "mt_norm.c"
#include "mt_reduce.c"
#include "mt_loss.c"
#include "mt_optim.c"
#include "mt_attention.c"
#include "mt_decode.c"
#include "mt_conv.c"
