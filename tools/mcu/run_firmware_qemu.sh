#!/usr/bin/env bash
# tools/mcu/run_firmware_qemu.sh — prove that an emitted firmware folder computes what the
# simulator computed: DIR holds <name>.h/.c, mt_kernels.h/.c and the Makefile (lower::emit_c),
# <name>_check.c (lower::emit_check) and expected.txt (lower::expected_check_output). Every
# build goes through the folder's Makefile, the one recipe. Exit status 0 only when every
# step passes.
#
#   1. <name>.c and mt_kernels.c compile warning-free (-std=c99 -Wall -Wextra -Wconversion -Werror)
#      with the host's cc and with arm-none-eabi-gcc for cortex-m0, cortex-m4, cortex-m7 and
#      cortex-m33; the M0 objects may call no division and no float helper;
#   2. the check program on the host (-O2) prints expected.txt exactly;
#   3. the same under -fsanitize=undefined,address -fno-sanitize-recover=all: no report;
#   4. on QEMU, every kernel variant prints it too: the Cortex-M0 build (portable C) on
#      mps2-an385, the DSP variants on Cortex-M4 (mps2-an386), M7 (mps2-an500) and M33
#      (mps2-an505, linked at its secure aliases: BOARD_LINK passed to the Makefile).
#
#   5. (COUNT_INSTRUCTIONS=1) instructions per inference on Cortex-M4: the check program
#      built with -DCHECK_RUNS=1 and =2 runs under the counting plugin tools/mcu/insncount.c;
#      the difference of the two whole-program counts is one inference.
#
#   tools/mcu/run_firmware_qemu.sh DIR NAME
#   COUNT_INSTRUCTIONS=1 tools/mcu/run_firmware_qemu.sh DIR NAME
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

dir=$(cd "$1" && pwd)
name=$2
for tool in make cc arm-none-eabi-gcc arm-none-eabi-nm qemu-system-arm; do
  command -v "$tool" >/dev/null || { echo "run_firmware_qemu: $tool not found (tools/install-deps.sh installs it)" >&2; exit 2; }
done
for f in "$name.c" "$name.h" "${name}_check.c" mt_kernels.c mt_kernels.h Makefile expected.txt; do
  [[ -f $dir/$f ]] || { echo "run_firmware_qemu: $dir/$f is missing" >&2; exit 2; }
done
work=$dir/build
mkdir -p "$work"

fail=0
bad() { printf 'FAIL: %s\n' "$*"; fail=1; }

# All builds in parallel, each one make invocation logging to $work/<build>.log.
declare -A pid
start() { local b=$1; shift; make --no-print-directory -C "$dir" "$@" >"$work/$b.log" 2>&1 & pid[$b]=$!; }
need() { wait "${pid[$1]}" || { bad "build $1"; sed 's/^/   /' "$work/$1.log" | head -20; return 1; }; }
start host host
start san san
for cpu in cortex-m0 cortex-m4 cortex-m7; do start "$cpu" CPU=$cpu check-elf; done
start cortex-m33 CPU=cortex-m33 check-elf "BOARD_LINK=--specs=picolibc.specs --oslib=semihost --crt0=semihost \
-Wl,--gc-sections -Wl,--defsym=__flash=0x10000000 -Wl,--defsym=__flash_size=1M -Wl,--defsym=__ram=0x38000000 \
-Wl,--defsym=__ram_size=256K -Wl,--defsym=__stack_size=16K"

echo "== 1. warning-free C99 builds (host, cortex-m0, cortex-m4, cortex-m7, cortex-m33)"
ok=1
for b in host cortex-m33 cortex-m7 cortex-m4 cortex-m0; do need $b || ok=0; done
if [[ $ok -eq 1 ]]; then
  undef=$(arm-none-eabi-nm -u "$work/cortex-m0/$name.o" | awk '{print $NF}' | tr '\n' ' ')
  echo "   all compile with -std=c99 -Wall -Wextra -Wconversion -Werror; $name.c on cortex-m0 calls: ${undef:-nothing}"
  if grep -Eq '__aeabi_(.*div|.*mod|[fd])|sf3|df3' <<<"$undef"; then bad "the cortex-m0 build needs a division or float helper"; fi
fi

compare() { # label file
  if cmp -s "$dir/expected.txt" "$2"; then
    echo "   $1: $(wc -l <"$2") inferences, identical to the simulator"
  else
    bad "$1 differs from the simulator"
    diff "$dir/expected.txt" "$2" | head -10 | sed 's/^/   /'
  fi
}

echo "== 2. host (cc -O2)"
[[ -x $work/host/check ]] && { "$work/host/check" >"$work/host.txt" && compare host "$work/host.txt" || bad "host run failed"; }

echo "== 3. host under -fsanitize=undefined,address"
if need san; then
  if ! "$work/san/check" >"$work/san.txt" 2>"$work/san.err" || [[ -s $work/san.err ]]; then
    sed 's/^/   /' "$work/san.err" | head -20
    bad "sanitizer report"
  else
    compare "UBSan/ASan host (no report)" "$work/san.txt"
  fi
fi

qemu() { # board elf out [extra args...]
  local board=$1 elf=$2 out=$3
  shift 3
  timeout 300 qemu-system-arm -M "$board" -nographic -semihosting-config enable=on,target=native "$@" \
    -kernel "$elf" >"$out" 2>&1
}

echo "== 4. QEMU: cortex-m0 code on mps2-an385, cortex-m4 on mps2-an386, cortex-m7 on mps2-an500, cortex-m33 on mps2-an505"
for pair in cortex-m0:mps2-an385 cortex-m4:mps2-an386 cortex-m7:mps2-an500 cortex-m33:mps2-an505; do
  cpu=${pair%%:*} board=${pair##*:}
  [[ -f $work/$cpu/check.elf ]] || continue
  rc=0
  qemu "$board" "$work/$cpu/check.elf" "$work/$cpu.txt" || rc=$?
  if [[ $rc -ne 0 ]]; then bad "$cpu on $board exited with status $rc"; tail -n 5 "$work/$cpu.txt" | sed 's/^/   /'; continue; fi
  compare "$cpu on $board" "$work/$cpu.txt"
done

if [[ ${COUNT_INSTRUCTIONS:-0} == 1 && $fail -eq 0 ]]; then
  echo "== 5. instructions per inference (cortex-m4 on mps2-an386, counting plugin)"
  cc -O2 -shared -fPIC -o "$work/libinsncount.so" "$here/insncount.c"
  start count CPU=cortex-m4 count-elfs
  counts=()
  if need count; then
    for runs in 1 2; do
      qemu mps2-an386 "$work/cortex-m4/count$runs.elf" "$work/count$runs.txt" \
        -plugin "$work/libinsncount.so" -d plugin -D "$work/insns$runs.txt" || bad "counting run $runs failed"
      head -n 1 "$dir/expected.txt" | cmp -s - "$work/count$runs.txt" || bad "counting run $runs differs from the simulator"
      counts+=("$(sed -n 's/^insns: \([0-9]*\).*/\1/p' "$work/insns$runs.txt")")
    done
  fi
  if [[ ${#counts[@]} -eq 2 && -n ${counts[0]} && -n ${counts[1]} ]]; then
    echo "   instructions per inference (cortex-m4): $((counts[1] - counts[0]))"
  else
    bad "no instruction count"
  fi
fi

if [[ $fail -eq 0 ]]; then
  echo "run_firmware_qemu: PASS ($name: host == UBSan/ASan host == cortex-m0 == cortex-m4 == cortex-m7 == cortex-m33 == simulator)"
else
  echo "run_firmware_qemu: FAIL"
fi
exit $fail
