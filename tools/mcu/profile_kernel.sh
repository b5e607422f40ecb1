#!/usr/bin/env bash
# tools/mcu/profile_kernel.sh — where one runtime kernel spends its instructions on an
# emulated Cortex-M: per function and per source line, one call.
#
#   tools/mcu/profile_kernel.sh KERNEL [CPU] [CFLAGS...]
#   tools/mcu/profile_kernel.sh attention_s16_dense                 Cortex-M4, DSP variants
#   tools/mcu/profile_kernel.sh attention_s8 cortex-m4 -DMT_NO_DSP  its portable C
#   LINES=60 KEEP=dir tools/mcu/profile_kernel.sh ...               more lines; keep the build
#
# KERNEL is one of tools/mcu/kernel_bench.c's (bench_kernels.sh lists them); CPU one of
# cortex-m0, -m3, -m4, -m7, -m33. kernel_bench.c is built with -g against the runtime
# preprocessed (-E -P) and, when clang-format is installed, reformatted to 100 columns, so
# that the kernels defined by macros (the streaming attention, the layer norms, ...) get a
# source line per statement. It runs under QEMU with src/lower/firmware/insncount.c's per-address
# profile for one and two calls; src/lower/firmware/profile_functions.py --lines gives the
# difference, one call, per function and per line of that preprocessed file.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rt=$(cd "$here/../../src/lower/runtime" && pwd)
[[ $# -ge 1 ]] || { sed -n '2,16p' "$0" >&2; exit 2; }
kernel=$1 cpu=${2:-cortex-m4}
shift $(($# >= 2 ? 2 : 1))
# shellcheck source=src/lower/firmware/targets.sh
source "$here/../../src/lower/firmware/targets.sh"
board=$(mcu_board "$cpu") || { echo "profile_kernel: unknown CPU '$cpu' ($mcu_cpus)" >&2; exit 2; }
for tool in gcc arm-none-eabi-gcc arm-none-eabi-addr2line qemu-system-arm; do
  command -v "$tool" >/dev/null || { echo "profile_kernel: $tool not found (tools/install-deps.sh installs it)" >&2; exit 2; }
done
if [[ -n ${KEEP:-} ]]; then work=$KEEP; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi

read -r -a cflags <<<"$(mcu_cflags "$cpu")"
cflags+=(-std=c99 -O2 "$@")
arm-none-eabi-gcc "${cflags[@]}" -I"$rt" -E -P "$rt/mt_kernels.c" >"$work/mt_kernels_pp.c"
if command -v clang-format >/dev/null; then
  clang-format --style='{ColumnLimit: 100}' "$work/mt_kernels_pp.c" >"$work/mt_kernels_flat.c"
else
  echo "profile_kernel: no clang-format: a macro-defined kernel's lines stay one line" >&2
  cp "$work/mt_kernels_pp.c" "$work/mt_kernels_flat.c"
fi
gcc -O2 -shared -fPIC -o "$work/libinsncount.so" "$here/../../src/lower/firmware/insncount.c"
# shellcheck disable=SC2046
arm-none-eabi-gcc "${cflags[@]}" -g -I"$rt" $(mcu_link "$cpu") "$here/kernel_bench.c" "$work/mt_kernels_flat.c" \
  -o "$work/bench.elf"
for reps in 1 2; do
  timeout 600 qemu-system-arm -M "$board" -display none -serial null -monitor none \
    -semihosting-config enable=on,target=native,arg=kernel_bench,arg="$kernel",arg="$reps" \
    -plugin "$work/libinsncount.so,profile=$work/profile$reps.txt" -d plugin -D "$work/insns$reps.txt" \
    -kernel "$work/bench.elf" </dev/null >"$work/out$reps.txt" 2>&1 || true
  [[ -s $work/profile$reps.txt ]] || { cat "$work/out$reps.txt" >&2; echo "profile_kernel: $kernel did not run" >&2; exit 1; }
done
echo "$kernel on $cpu ($board), one call, ${cflags[*]}:"
echo
python3 "$here/../../src/lower/firmware/profile_functions.py" "$work/bench.elf" "$work/profile1.txt" "$work/bench.elf" "$work/profile2.txt" \
  --top 12 --lines "${LINES:-30}"
