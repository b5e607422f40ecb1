# shellcheck shell=bash
# src/lower/firmware/targets.sh — the QEMU boards the Cortex-M builds run on, sourced by the scripts
# beside it (and, installed, from <prefix>/share/microtorch):
#
#   mcu_board CPU   the mps2/mps3 board QEMU 7.2 emulates it on (status 1 for another CPU)
#   mcu_cflags CPU  arm-none-eabi-gcc code flags for it (-O1 and above): -mcpu=CPU -mthumb,
#                   for cortex-m55 also -mfloat-abi=softfp (GCC enables MVE only with an FPU
#                   ABI; picolibc has a library for it)
#   mcu_link CPU    arm-none-eabi-gcc link flags for a program run there: its code flags,
#                   picolibc with semihosting (printf and the exit status reach the host),
#                   the board's flash and RAM, a 16 KB stack
#
# Cortex-M0/M0+ code runs on mps2-an385, a Cortex-M3 board (Armv6-M code is Armv7-M code).
# mps2-an505 (Cortex-M33) and mps3-an547 (Cortex-M55) boot in the secure state: flash and RAM
# at their secure aliases (the AN547's 512 KB ITCM at 0x10000000, its DTCM at 0x30000000).
# The firmware folders' Makefile (lower::emit_c) chooses the same memory map from its CPU.
# shellcheck disable=SC2034 # the CPUs mcu_board knows, for the scripts' messages
mcu_cpus="cortex-m0, -m0plus, -m3, -m4, -m7, -m33, -m55"

mcu_board() {
  case $1 in
    cortex-m0 | cortex-m0plus | cortex-m3) echo mps2-an385 ;;
    cortex-m4) echo mps2-an386 ;;
    cortex-m7) echo mps2-an500 ;;
    cortex-m33) echo mps2-an505 ;;
    cortex-m55) echo mps3-an547 ;;
    *) return 1 ;;
  esac
}

mcu_cflags() {
  if [[ $1 == cortex-m55 ]]; then echo "-mcpu=$1 -mthumb -mfloat-abi=softfp"; else echo "-mcpu=$1 -mthumb"; fi
}

mcu_link() {
  local flash=0x0 ram=0x20000000 size=1M
  [[ $1 == cortex-m33 ]] && flash=0x10000000 ram=0x38000000
  [[ $1 == cortex-m55 ]] && flash=0x10000000 ram=0x30000000 size=512K
  echo "$(mcu_cflags "$1")" --specs=picolibc.specs --oslib=semihost --crt0=semihost \
    -Wl,--defsym=__flash=$flash -Wl,--defsym=__flash_size=$size \
    -Wl,--defsym=__ram=$ram -Wl,--defsym=__ram_size=256K -Wl,--defsym=__stack_size=16K
}
