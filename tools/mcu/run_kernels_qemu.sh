#!/usr/bin/env bash
# tools/mcu/run_kernels_qemu.sh — prove that the runtime kernels (src/lower/runtime) compute
# the same bits on the host, on emulated Cortex-M and on emulated RISC-V, and that they are free
# of undefined behaviour. Exit status 0 only when every step passes.
#
#   1. compile mt_kernels.c warning-free (-std=c99 -Wall -Wextra -Wconversion -Werror) with
#      gcc, with arm-none-eabi-gcc for cortex-m0 / m4 / m7 / m33 / m55 and with
#      riscv64-unknown-elf-gcc for rv32imc, rv32imac and rv32imafc; the M0 object may call no division and
#      no float helper (only __aeabi_lmul / llsl / llsr, memset), the RISC-V ones no division
#      or float helper either;
#   2. run tools/mcu/kernel_vectors.c on the host (gcc -O2): the reference text;
#   3. the same under -fsanitize=undefined,address -fno-sanitize-recover: no report, same text;
#   4. every kernel variant on its core under QEMU: Cortex-M0 code (-mcpu=cortex-m0: no
#      divide, no DSP: the portable C) on mps2-an385 (a Cortex-M3 board, runs v6-M code), and
#      the Armv7E-M DSP variants on Cortex-M4 (mps2-an386), M7 (mps2-an500), M33
#      (mps2-an505, its secure memory map) and M55 (mps3-an547, Armv8.1-M: the DSP variants
#      and its MVE ones); every output must equal the host's (the portable
#      C, which the simulator runs) byte for byte (semihosting, picolibc); and the Cortex-M4
#      build at -O0 too (a frame pointer takes a register from the DSP variants' inline
#      assembly: it must still build, and compute the same bytes), and with every variant
#      switch of mt_internal.h at 0 (what a firmware's mt_kernels.c turns off when its model
#      takes no such path: those calls go to the reference, the same bytes); the RISC-V variants on
#      rv32imc (ESP32-C3 class), rv32imac and rv32imafc on QEMU's virt board, each core restricted to its
#      extensions (src/lower/firmware/targets.sh).
#
#   tools/mcu/run_kernels_qemu.sh            # all steps
#   KEEP=dir tools/mcu/run_kernels_qemu.sh   # keep the builds and outputs in dir
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
rt=$root/src/lower/runtime
if [[ -n ${KEEP:-} ]]; then
  work=$KEEP
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

for tool in gcc arm-none-eabi-gcc arm-none-eabi-nm qemu-system-arm riscv64-unknown-elf-gcc riscv64-unknown-elf-nm \
  qemu-system-riscv32; do
  command -v "$tool" >/dev/null || { echo "run_kernels_qemu: $tool not found (tools/install-deps.sh installs it)" >&2; exit 2; }
done

# shellcheck source=src/lower/firmware/targets.sh
source "$here/../../src/lower/firmware/targets.sh"
warn=(-std=c99 -Wall -Wextra -Wconversion -Werror)
fail=0
step() { printf '== %s\n' "$*"; }
bad() { printf 'FAIL: %s\n' "$*"; fail=1; }

# The builds run in parallel (compiling dominates the run time), each logging to $work:
# first the kernel objects and the sanitizer build, then the programs linked with them.
declare -A pid
start() { # name command...: run in the background
  local name=$1
  shift
  "$@" >"$work/$name.build.log" 2>&1 &
  pid[$name]=$!
}
need() { # name: wait for that build; report its log on failure
  if ! wait "${pid[$1]}"; then
    bad "build $1"
    sed 's/^/   /' "$work/$1.build.log" | head -20
    return 1
  fi
}
start k-host gcc "${warn[@]}" -O2 -c "$rt/mt_kernels.c" -o "$work/k-host.o"
# a build: a cpu, cortex-m4-O0 (that cpu's kernels at -O0) or cortex-m4-off (every variant switch
# of mt_internal.h, #ifndef MT_... #define MT_... 1, at 0)
switches_off=$(sed -n 's/^#ifndef \(MT_[A-Z0-9_]*\)$/-D\1=0/p' "$rt/mt_internal.h" | grep -v MT_INTERNAL_H | tr '\n' ' ')
cpu_of() { local c=${1%-O0}; echo "${c%-off}"; }
opt_of() { [[ $1 == *-O0 ]] && echo -O0 || echo -O2; }
flags_of() { [[ $1 == *-off ]] && echo "$switches_off" || true; }
cfgs=(cortex-m0 cortex-m4 cortex-m7 cortex-m33 cortex-m55 cortex-m4-O0 cortex-m4-off rv32imc rv32imac rv32imafc)
for cfg in "${cfgs[@]}"; do
  # shellcheck disable=SC2046
  start k-$cfg "$(mcu_cc "$(cpu_of $cfg)")" $(mcu_cflags "$(cpu_of $cfg)") $(flags_of $cfg) "${warn[@]}" "$(opt_of $cfg)" -c "$rt/mt_kernels.c" \
    -o "$work/k-$cfg.o"
done
start vectors-san gcc -std=c99 -O1 -g -fno-omit-frame-pointer -fsanitize=undefined,address \
  -fno-sanitize-recover=all -I"$rt" "$here/kernel_vectors.c" "$rt/mt_kernels.c" -o "$work/vectors-san"
link() { # cpu: kernel_vectors.c + that cpu's kernel object
  if [[ $1 == host ]]; then
    gcc "${warn[@]}" -O2 -I"$rt" "$here/kernel_vectors.c" "$work/k-host.o" -o "$work/vectors-host"
  else
    # shellcheck disable=SC2046
    "$(mcu_cc "$(cpu_of $1)")" "${warn[@]}" -O2 -I"$rt" $(mcu_link "$(cpu_of $1)") \
      "$here/kernel_vectors.c" "$work/k-$1.o" -o "$work/vectors-$1.elf"
  fi
}
for cpu in host "${cfgs[@]}"; do
  if need k-$cpu; then start vectors-$cpu link $cpu; else start vectors-$cpu false; fi
done

step "1. warning-free C99 builds of mt_kernels.c (host, cortex-m0, cortex-m4, cortex-m7, cortex-m33, cortex-m55, rv32imc, rv32imac, rv32imafc; cortex-m4 at -O0 and with $switches_off)"
ok=1
for n in k-host "${cfgs[@]/#/k-}"; do [[ -f $work/$n.o ]] || ok=0; done # awaited above
if [[ $ok -eq 1 ]]; then
  undef=$(arm-none-eabi-nm -u "$work/k-cortex-m0.o" | awk '{print $NF}' | tr '\n' ' ')
  rv_undef=$(riscv64-unknown-elf-nm -u "$work/k-rv32imc.o" | awk '{print $NF}' | tr '\n' ' ')
  echo "   all eleven compile with ${warn[*]}; the cortex-m0 object calls: ${undef% }; rv32imc: ${rv_undef% }"
  if grep -Eq 'div|mod|__aeabi_[fd]|2f|2d|f2|d2|sf3|df3|float|fix' <<<"$undef"; then
    bad "the cortex-m0 build needs a division or float helper"
  fi
  if grep -Eq 'div|mod|sf|df|float|fix' <<<"$rv_undef"; then bad "the rv32imc build needs a division or float helper"; fi
fi

step "2. host run (gcc -O2)"
if need vectors-host; then
  "$work/vectors-host" >"$work/host.txt"
  tail -n 1 "$work/host.txt" | sed 's/^/   /'
else
  : >"$work/host.txt"
fi

step "3. host run under -fsanitize=undefined,address -fno-sanitize-recover=all"
if need vectors-san; then
  if ! "$work/vectors-san" >"$work/san.txt" 2>"$work/san.err" || [[ -s $work/san.err ]]; then
    sed 's/^/   /' "$work/san.err" | head -20
    bad "sanitizer report"
  elif ! cmp -s "$work/host.txt" "$work/san.txt"; then
    bad "sanitizer build prints different results"
  else
    echo "   no report; identical output"
  fi
fi

run_qemu() { # cpu, on its board
  local cpu=$1 board rc=0 cmd
  board=$(mcu_board "$(cpu_of $cpu)")
  read -r -a cmd <<<"$(mcu_qemu "$(cpu_of $cpu)")"
  need "vectors-$cpu" || return 0
  # picolibc's semihosted stdout reaches QEMU's stderr: capture both streams
  timeout 300 "${cmd[@]}" -nographic -semihosting-config enable=on,target=native \
    -kernel "$work/vectors-$cpu.elf" >"$work/$cpu.txt" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    bad "$cpu on $board exited with status $rc"
    tail -n 5 "$work/$cpu.txt" | sed 's/^/   /'
  elif [[ -s $work/host.txt ]] && cmp -s "$work/host.txt" "$work/$cpu.txt"; then
    echo "   $cpu on $board: $(wc -l <"$work/$cpu.txt") lines, byte-identical to the host"
  else
    bad "$cpu on $board differs from the host"
    diff "$work/host.txt" "$work/$cpu.txt" | head -20 | sed 's/^/   /'
  fi
}

step "4. Cortex-M0 code (mps2-an385) and the DSP variants on Cortex-M4 (mps2-an386; also built at -O0 and with the variant switches off), M7 (mps2-an500), M33 (mps2-an505), M55 (mps3-an547), the RISC-V variants on rv32imc, rv32imac and rv32imafc (virt) under QEMU"
for cpu in "${cfgs[@]}"; do run_qemu "$cpu"; done

if [[ $fail -eq 0 ]]; then
  echo "run_kernels_qemu: PASS (host == UBSan/ASan host == cortex-m0 == cortex-m4 (-O2, -O0, switches off) == cortex-m7 == cortex-m33 == cortex-m55 == rv32imc == rv32imac == rv32imafc)"
else
  echo "run_kernels_qemu: FAIL"
fi
exit $fail
