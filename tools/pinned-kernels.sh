#!/usr/bin/env bash
# tools/pinned-kernels.sh COMMAND...: runs COMMAND with the same float kernels on every x86-64
# CPU that has AVX2, so that seeded training gives the same bits everywhere (the table
# `make demo` prints is the README's, not only on the machine that printed it).
#
# Which kernels run decides the rounding of every sum: OpenBLAS picks its sgemm for the CPU
# it finds (Haswell, SkylakeX, Cooperlake, ...) and microtorch's attention picks AVX-512 or
# AVX2. On a CPU with AVX2 this pins both to AVX2 (OPENBLAS_CORETYPE=Haswell,
# MICROTORCH_ISA=avx2) unless the caller set them; elsewhere it leaves them alone.
set -euo pipefail
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
  export MICROTORCH_ISA=${MICROTORCH_ISA:-avx2}
fi
exec "$@"
