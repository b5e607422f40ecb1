#!/usr/bin/env bash
# src/lower/firmware/run_firmware_qemu.sh — prove that an emitted firmware folder computes what the
# simulator computed: DIR holds <name>.h/.c, mt_kernels.h/.c and the Makefile (lower::emit_c);
# WORK (default DIR) holds <name>_check.c (lower::emit_check) and expected.txt
# (lower::expected_check_output), and every build goes to WORK/build, through DIR's Makefile,
# the one recipe (lower::verify writes WORK beside the firmware folder, so that folder keeps
# only what goes into an MCU project). Exit status 0 only when every step passes.
#
#   1. <name>.c and mt_kernels.c compile warning-free (-std=c99 -Wall -Wextra -Wconversion -Werror)
#      with the host's cc and with arm-none-eabi-gcc for each CPU; the Cortex-M0 objects may call
#      no division and no float helper;
#   2. the check program on the host (-O2) prints expected.txt exactly;
#   3. the same under -fsanitize=undefined,address -fno-sanitize-recover=all: no report;
#   4. on QEMU, every CPU's build prints it too: Cortex-M0 and M3 (portable C) on mps2-an385,
#      the DSP variants on Cortex-M4 (mps2-an386), M7 (mps2-an500), M33 (mps2-an505) and,
#      when CPUS names it, M55 (mps3-an547; targets.sh beside this script names the boards, the
#      Makefile links for each one's memory map).
#   5. (COUNT_INSTRUCTIONS=1) instructions per inference on each CPU: the check program built
#      with -DCHECK_RUNS=1 and =2 runs under the counting plugin insncount.c (beside it); the
#      difference of the two whole-program counts is one inference. PROFILE=1 also counts each
#      instruction address (the plugin's profile=FILE) and writes WORK/<cpu>-profile.md, the
#      instructions per inference in each function (profile_functions.py), most first.
#
#   src/lower/firmware/run_firmware_qemu.sh DIR NAME [WORK]
#   COUNT_INSTRUCTIONS=1 CPUS="cortex-m0 cortex-m4" src/lower/firmware/run_firmware_qemu.sh DIR NAME [WORK]
#   PROFILE=1 COUNT_INSTRUCTIONS=1 CPUS=cortex-m4 src/lower/firmware/run_firmware_qemu.sh DIR NAME [WORK]
#   src/lower/firmware/run_firmware_qemu.sh --help
#
# CPUS (default "cortex-m0 cortex-m4 cortex-m7 cortex-m33") lists the CPUs; empty: the host
# steps only (then neither arm-none-eabi-gcc nor QEMU is needed). One line per result:
#   "   <cpu> on <board>: N inferences, identical to the simulator",
#   "   instructions per inference (<cpu>): N", and last "run_firmware_qemu: PASS (...)" or FAIL.
#
# Installed as microtorch-run-firmware-qemu (meson install), with the plugin's source in
# <prefix>/share/microtorch/insncount.c.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
plugin_src=$here/insncount.c
[[ -f $plugin_src ]] || plugin_src=$here/../share/microtorch/insncount.c
profiler=$here/profile_functions.py
[[ -f $profiler ]] || profiler=$here/../share/microtorch/profile_functions.py
targets=$here/targets.sh
[[ -f $targets ]] || targets=$here/../share/microtorch/targets.sh
# shellcheck source=src/lower/firmware/targets.sh
source "$targets"

usage() {
  echo "usage: $(basename "$0") DIR NAME [WORK]   (COUNT_INSTRUCTIONS=1 also counts instructions per inference;"
  echo "       CPUS=\"cortex-m0 cortex-m4 ...\" chooses the CPUs; DIR is a folder lower::emit_c wrote, WORK holds"
  echo "       what lower::emit_check and expected_check_output wrote (default DIR); plugin source: $plugin_src)"
}
if [[ ${1-} == -h || ${1-} == --help ]]; then
  usage
  exit 0
fi
if [[ $# -lt 2 || $# -gt 3 ]]; then
  usage >&2
  exit 2
fi
dir=$(cd "$1" && pwd)
name=$2
check=$(cd "${3:-$1}" && pwd)
read -r -a cpus <<<"${CPUS-cortex-m0 cortex-m4 cortex-m7 cortex-m33}"
for cpu in "${cpus[@]}"; do
  mcu_board "$cpu" >/dev/null || { echo "run_firmware_qemu: no QEMU board for $cpu ($mcu_cpus)" >&2; exit 2; }
done
tools=(make cc)
[[ ${#cpus[@]} -gt 0 ]] && tools+=(arm-none-eabi-gcc arm-none-eabi-nm qemu-system-arm)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || { echo "run_firmware_qemu: $tool not found (tools/install-deps.sh installs it)" >&2; exit 2; }
done
for f in "$dir/$name.c" "$dir/$name.h" "$dir/mt_kernels.c" "$dir/mt_kernels.h" "$dir/Makefile" "$check/${name}_check.c" \
  "$check/expected.txt"; do
  [[ -f $f ]] || { echo "run_firmware_qemu: $f is missing" >&2; exit 2; }
done
work=$check/build
mkdir -p "$work"

fail=0
bad() { printf 'FAIL: %s\n' "$*"; fail=1; }

# All builds in parallel, each one make invocation logging to $work/<build>.log.
declare -A pid
start() { local b=$1; shift; make --no-print-directory -C "$dir" BUILD="$work" CHECK_DIR="$check" "$@" >"$work/$b.log" 2>&1 & pid[$b]=$!; }
need() { wait "${pid[$1]}" || { bad "build $1"; sed 's/^/   /' "$work/$1.log" | head -20; return 1; }; }
start host host
start san san
for cpu in "${cpus[@]}"; do start "$cpu" CPU="$cpu" check-elf; done

echo "== 1. warning-free C99 builds (host${cpus[*]:+, ${cpus[*]}})"
ok=1
need host || ok=0
for cpu in "${cpus[@]}"; do need "$cpu" || ok=0; done
if [[ $ok -eq 1 ]]; then
  echo "   all compile with -std=c99 -Wall -Wextra -Wconversion -Werror"
  if [[ -f $work/cortex-m0/$name.o ]]; then
    undef=$(arm-none-eabi-nm -u "$work/cortex-m0/$name.o" | awk '{print $NF}' | tr '\n' ' ')
    echo "   $name.c on cortex-m0 calls: ${undef:-nothing}"
    if grep -Eq '__aeabi_(.*div|.*mod|[fd])|sf3|df3' <<<"$undef"; then bad "the cortex-m0 build needs a division or float helper"; fi
  fi
fi

compare() { # label file
  if cmp -s "$check/expected.txt" "$2"; then
    echo "   $1: $(wc -l <"$2") inferences, identical to the simulator"
  else
    bad "$1 differs from the simulator"
    diff "$check/expected.txt" "$2" | head -10 | sed 's/^/   /'
  fi
}

echo "== 2. host (cc -O2)"
[[ -x $work/host/check ]] && { "$work/host/check" >"$work/host.txt" && compare host "$work/host.txt" || bad "host run failed"; }

echo "== 3. host under -fsanitize=undefined,address"
if need san; then
  # ASan must be the first library loaded: a preloaded one (a notebook kernel's) is dropped
  if ! env -u LD_PRELOAD "$work/san/check" >"$work/san.txt" 2>"$work/san.err" || [[ -s $work/san.err ]]; then
    sed 's/^/   /' "$work/san.err" | head -20
    bad "sanitizer report"
  else
    compare "UBSan/ASan host (no report)" "$work/san.txt"
  fi
fi

qemu() { # cpu elf out [extra args...]: on the cpu's board
  local board elf=$2 out=$3
  board=$(mcu_board "$1")
  shift 3
  timeout 300 qemu-system-arm -M "$board" -nographic -semihosting-config enable=on,target=native "$@" \
    -kernel "$elf" </dev/null >"$out" 2>&1
}

if [[ ${#cpus[@]} -gt 0 ]]; then
  echo "== 4. QEMU:$(for cpu in "${cpus[@]}"; do printf ' %s on %s' "$cpu" "$(mcu_board "$cpu")"; done)"
fi
for cpu in "${cpus[@]}"; do
  board=$(mcu_board "$cpu")
  [[ -f $work/$cpu/check.elf ]] || continue
  rc=0
  qemu "$cpu" "$work/$cpu/check.elf" "$work/$cpu.txt" || rc=$?
  if [[ $rc -ne 0 ]]; then bad "$cpu on $board exited with status $rc"; tail -n 5 "$work/$cpu.txt" | sed 's/^/   /'; continue; fi
  compare "$cpu on $board" "$work/$cpu.txt"
done

if [[ ${COUNT_INSTRUCTIONS:-0} == 1 && $fail -eq 0 && ${#cpus[@]} -gt 0 ]]; then
  echo "== 5. instructions per inference (counting plugin)"
  cc -O2 -shared -fPIC -o "$work/libinsncount.so" "$plugin_src"
  for cpu in "${cpus[@]}"; do start "count-$cpu" CPU="$cpu" count-elfs; done
  for cpu in "${cpus[@]}"; do
    counts=()
    if need "count-$cpu"; then
      for runs in 1 2; do
        plugin=$work/libinsncount.so
        [[ ${PROFILE:-0} == 1 ]] && plugin+=",profile=$work/$cpu-profile$runs.txt"
        qemu "$cpu" "$work/$cpu/count$runs.elf" "$work/$cpu-count$runs.txt" \
          -plugin "$plugin" -d plugin -D "$work/$cpu-insns$runs.txt" || bad "$cpu counting run $runs failed"
        head -n 1 "$check/expected.txt" | cmp -s - "$work/$cpu-count$runs.txt" ||
          bad "$cpu counting run $runs differs from the simulator"
        counts+=("$(sed -n 's/^insns: \([0-9]*\).*/\1/p' "$work/$cpu-insns$runs.txt")")
      done
    fi
    if [[ ${#counts[@]} -eq 2 && -n ${counts[0]} && -n ${counts[1]} ]]; then
      echo "   instructions per inference ($cpu): $((counts[1] - counts[0]))"
      if [[ ${PROFILE:-0} == 1 ]]; then
        python3 "$profiler" "$work/$cpu/count1.elf" "$work/$cpu-profile1.txt" "$work/$cpu/count2.elf" \
          "$work/$cpu-profile2.txt" >"$work/$cpu-profile.md" || bad "no profile on $cpu"
        echo "   instructions per inference by function ($cpu): $work/$cpu-profile.md"
      fi
    else
      bad "no instruction count on $cpu"
    fi
  done
fi

if [[ $fail -eq 0 ]]; then
  chain="host == UBSan/ASan host"
  for cpu in "${cpus[@]}"; do chain+=" == $cpu"; done
  echo "run_firmware_qemu: PASS ($name: $chain == simulator)"
else
  echo "run_firmware_qemu: FAIL"
fi
exit $fail
