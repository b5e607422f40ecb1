#!/usr/bin/env bash
# tools/mcu/bench_kernels.sh — instructions per call of the runtime kernels on emulated
# Cortex-M0 / M4 / M7 / M33 / M55 and RISC-V rv32imc, each Armv7E-M and Armv8-M core twice: the
# portable C kernels (-DMT_NO_DSP) and the DSP variants its feature macros select; Cortex-M55
# with the DSP variants alone (-DMT_NO_MVE) and with its MVE variants; rv32imc (the ESP32-C3
# class) with the portable C (-DMT_NO_RV) and with the RISC-V variants. One markdown table on
# stdout.
#
# tools/mcu/kernel_bench.c runs one kernel REPS times; built per CPU (arm-none-eabi-gcc or
# riscv64-unknown-elf-gcc -O2, picolibc, semihosting) and run under QEMU with the counting
# plugin src/lower/firmware/insncount.c for REPS = 1 and 2: the difference is one call. Every
# build must print the same output hash (the variants are bit-exact with the portable C), or
# the script fails.
#
#   tools/mcu/bench_kernels.sh [KERNEL...]      (default: every kernel of kernel_bench.c)
#   KEEP=dir tools/mcu/bench_kernels.sh         keep builds and logs in dir
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
rt=$root/src/lower/runtime
if [[ -n ${KEEP:-} ]]; then work=$KEEP; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
for tool in gcc arm-none-eabi-gcc qemu-system-arm riscv64-unknown-elf-gcc qemu-system-riscv32; do
  command -v "$tool" >/dev/null || { echo "bench_kernels: $tool not found (tools/install-deps.sh installs it)" >&2; exit 2; }
done

kernels=("$@")
[[ ${#kernels[@]} -gt 0 ]] || kernels=(linear_s8 linear_s16 linear_s16x8 enc_qkv_s16x8 enc_ff1_s8 enc_ff2_s8_s16 enc_qkv_s16 softmax_s8 softmax_s16 attention_s8 attention_s16 attention_s16_dense
  attention_s16_dense_h4 conv_stem conv_dw conv_pw dscnn_dw dscnn_pw dscnn)

# shellcheck source=src/lower/firmware/targets.sh
source "$here/../../src/lower/firmware/targets.sh"
# build: name cpu extra-flags
builds=(
  "m0|cortex-m0|"
  "m4-c|cortex-m4|-DMT_NO_DSP"
  "m4|cortex-m4|"
  "m7-c|cortex-m7|-DMT_NO_DSP"
  "m7|cortex-m7|"
  "m33-c|cortex-m33|-DMT_NO_DSP"
  "m33|cortex-m33|"
  "m55-dsp|cortex-m55|-DMT_NO_MVE"
  "m55|cortex-m55|"
  "rv-c|rv32imc|-DMT_NO_RV"
  "rv|rv32imc|"
)
if [[ -n ${ONLY:-} ]]; then # ONLY=m0,m4: a subset of the builds (while tuning)
  keep=(); for b in "${builds[@]}"; do [[ ,$ONLY, == *,${b%%|*},* ]] && keep+=("$b"); done; builds=("${keep[@]}")
fi
gcc -O2 -shared -fPIC -o "$work/libinsncount.so" "$here/../../src/lower/firmware/insncount.c"
pids=()
for b in "${builds[@]}"; do
  IFS='|' read -r name cpu flags <<<"$b"
  # shellcheck disable=SC2086,SC2046
  "$(mcu_cc "$cpu")" -std=c99 -Wall -Wextra -Wconversion -Werror -O2 $flags -I"$rt" \
    $(mcu_link "$cpu") "$here/kernel_bench.c" "$rt/mt_kernels.c" -o "$work/$name.elf" >"$work/$name.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { cat "$work"/*.log >&2; echo "bench_kernels: build failed" >&2; exit 1; }; done

count() { # name cpu kernel reps -> instructions; output line in $work/<name>-<kernel>-<reps>.txt
  local out=$work/$1-$3-$4 cmd
  read -r -a cmd <<<"$(mcu_qemu "$2")"
  timeout 600 "${cmd[@]}" -display none -serial null -monitor none \
    -semihosting-config enable=on,target=native,arg=kernel_bench,arg="$3",arg="$4" \
    -plugin "$work/libinsncount.so" -d plugin -D "$out.insns" -kernel "$work/$1.elf" </dev/null >"$out.txt" 2>&1
  sed -n 's/^insns: \([0-9]*\).*/\1/p' "$out.insns"
}
thousands() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }

declare -A n
fail=0
for k in "${kernels[@]}"; do
  for b in "${builds[@]}"; do
    IFS='|' read -r name cpu _ <<<"$b"
    c1=$(count "$name" "$cpu" "$k" 1) c2=$(count "$name" "$cpu" "$k" 2)
    n[$k,$name]=$((c2 - c1))
    line=$(cat "$work/$name-$k-1.txt")
    n[$k,hash,$name]=$line
    first=${builds[0]%%|*}
    if [[ $line != "$(cat "$work/$name-$k-2.txt")" || $line != "${n[$k,hash,$first]}" ]]; then
      echo "bench_kernels: $k on $name ($cpu) prints '$line', $first printed '${n[$k,hash,$first]}'" >&2
      fail=1
    fi
  done
done

# Anchors: Cortex-M4 instruction counts of other libraries on the same shapes, as measured for
# the project's Cortex-M speed work (arm-none-eabi-gcc -O2, QEMU mps2-an386, same inputs,
# outputs checked); quoted, not re-run here (neither library is a dependency). The
# convolutions: CMSIS-NN 99f736a6's arm_convolve_wrapper_s8 / arm_depthwise_conv_wrapper_s8
# (NHWC, the same shapes, per-channel requantization, the kernels its wrappers choose; its
# outputs, in another layout, not compared).
declare -A cmsis=([linear_s8]=502,328 [softmax_s8]=8,358,507 [attention_s8]="10,486,950 (composed)"
  [conv_stem]=97,818 [conv_dw]=78,375 [conv_pw]=129,887 [dscnn_dw]=553,022 [dscnn_pw]=1,047,199)
declare -A tinymind=([attention_s8]="6,873,407 (incl. projections)")
cell() { [[ -n ${n[$1,$2]:-} ]] && thousands "${n[$1,$2]}" || echo -; }
ratio() { # kernel build-a build-b: a / b as "1.23x"
  if [[ -n ${n[$1,$2]:-} && -n ${n[$1,$3]:-} ]]; then awk -v a="${n[$1,$2]}" -v b="${n[$1,$3]}" 'BEGIN { printf "%.2fx", a / b }'; else echo -; fi
}
echo "| kernel | MACs | Cortex-M0 | M4 portable | M4 DSP | M4 instr/MAC | M4 speed-up | M7 portable | M7 DSP | M33 portable | M33 DSP | M55 DSP | M55 MVE | rv32imc portable | rv32imc | rv32imc instr/MAC | rv32imc speed-up | rv32imc / M4 DSP | CMSIS-NN M4 (quoted) | tinymind M4 (quoted) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for k in "${kernels[@]}"; do
  first=${builds[0]%%|*}
  macs=$(sed -n 's/.* macs \([0-9]*\) .*/\1/p' "$work/$first-$k-1.txt")
  per=-
  [[ $macs -gt 0 && -n ${n[$k,m4]:-} ]] && per=$(awk -v a="${n[$k,m4]}" -v b="$macs" 'BEGIN { printf "%.2f", a / b }')
  up=$(ratio "$k" m4-c m4)
  rv_per=-
  [[ $macs -gt 0 && -n ${n[$k,rv]:-} ]] && rv_per=$(awk -v a="${n[$k,rv]}" -v b="$macs" 'BEGIN { printf "%.2f", a / b }')
  [[ $macs -gt 0 ]] || macs=-
  printf '| %s | %s | %s | %s | **%s** | %s | %s | %s | %s | %s | %s | %s | %s | %s | **%s** | %s | %s | %s | %s | %s |\n' \
    "$k" "$(thousands "$macs")" "$(cell "$k" m0)" "$(cell "$k" m4-c)" "$(cell "$k" m4)" "$per" "$up" \
    "$(cell "$k" m7-c)" "$(cell "$k" m7)" "$(cell "$k" m33-c)" "$(cell "$k" m33)" "$(cell "$k" m55-dsp)" \
    "$(cell "$k" m55)" "$(cell "$k" rv-c)" "$(cell "$k" rv)" "$rv_per" "$(ratio "$k" rv-c rv)" "$(ratio "$k" rv m4)" \
    "${cmsis[$k]:--}" "${tinymind[$k]:--}"
done
[[ $fail -eq 0 ]] || { echo "bench_kernels: outputs differ between builds" >&2; exit 1; }
