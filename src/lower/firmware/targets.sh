# shellcheck shell=bash
# src/lower/firmware/targets.sh — the CPUs the firmware builds run on under QEMU and how to build
# for each, sourced by the scripts beside it (and, installed, from <prefix>/share/microtorch):
#
#   mcu_board CPU       the board QEMU 7.2 emulates it on (status 1 for another CPU)
#   mcu_qemu CPU        the QEMU command for that board, without -kernel: qemu-system-arm -M <board>,
#                       or qemu-system-riscv32 -M virt -bios none -cpu <the core's extensions only>
#   mcu_cc CPU          its cross compiler: arm-none-eabi-gcc or riscv64-unknown-elf-gcc
#   mcu_tool CPU TOOL   a binutils program for it (mcu_tool rv32imc nm: riscv64-unknown-elf-nm)
#   mcu_cflags CPU      code flags for it (-O1 and above): -mcpu=CPU -mthumb (cortex-m55 also
#                       -mfloat-abi=softfp: GCC enables MVE only with an FPU ABI; picolibc has a
#                       library for it); -march=CPU -mabi=ilp32 (ilp32f for rv32imafc) and
#                       picolibc's specs (Debian's riscv64-unknown-elf-gcc has no other C library:
#                       <stdint.h> is picolibc's)
#   mcu_link CPU        link flags for a program run there: its code flags, picolibc with
#                       semihosting (printf and the exit status reach the host), the board's
#                       flash and RAM, a 16 KB stack
#
# Arm: Cortex-M0/M0+ code runs on mps2-an385, a Cortex-M3 board (Armv6-M code is Armv7-M code).
# mps2-an505 (Cortex-M33) and mps3-an547 (Cortex-M55) boot in the secure state: flash and RAM
# at their secure aliases (the AN547's 512 KB ITCM at 0x10000000, its DTCM at 0x30000000).
# RISC-V: rv32imc (ESP32-C3, CH32V203), rv32imac (ESP32-C6 and -H2, GD32VF103) and rv32imafc
# (hard float) on QEMU's virt board: -bios none (else QEMU loads an OpenSBI image Debian does not
# ship) and the ELF run from its entry in machine mode, its "flash" the first MB of virt's RAM at
# 0x80000000 and its RAM the 256 KB after it. QEMU's rv32 core has A, F, D and the bit-manipulation
# extensions on by default: -cpu turns off what the core lacks, so an instruction it does not have
# traps. -march is the bare ISA (no _zicsr): GCC 12 then links the multilib of picolibc and libgcc
# built for it (rv32imc takes rv32im's), where rv32imc_zicsr falls back to the rv64 default set.
# The firmware folders' Makefile (lower::emit_c) chooses the same flags and memory map from its CPU.
# shellcheck disable=SC2034 # the CPUs mcu_board knows, for the scripts' messages
mcu_cpus="cortex-m0, -m0plus, -m3, -m4, -m7, -m33, -m55, rv32imc, rv32imac, rv32imafc"

mcu_board() {
  case $1 in
    cortex-m0 | cortex-m0plus | cortex-m3) echo mps2-an385 ;;
    cortex-m4) echo mps2-an386 ;;
    cortex-m7) echo mps2-an500 ;;
    cortex-m33) echo mps2-an505 ;;
    cortex-m55) echo mps3-an547 ;;
    rv32imc | rv32imac | rv32imafc) echo virt ;;
    *) return 1 ;;
  esac
}

mcu_riscv() { [[ $1 == rv32* ]]; }

mcu_qemu() {
  local board
  board=$(mcu_board "$1") || return 1
  if mcu_riscv "$1"; then
    local a=false f=false
    [[ $1 == rv32imac || $1 == rv32imafc ]] && a=true
    [[ $1 == rv32imafc ]] && f=true
    echo "qemu-system-riscv32 -M virt -bios none" \
      "-cpu rv32,a=$a,f=$f,d=false,c=true,v=false,h=false,zba=false,zbb=false,zbc=false,zbs=false"
  else
    echo "qemu-system-arm -M $board"
  fi
}

mcu_cc() { if mcu_riscv "$1"; then echo riscv64-unknown-elf-gcc; else echo arm-none-eabi-gcc; fi; }

mcu_tool() { if mcu_riscv "$1"; then echo "riscv64-unknown-elf-$2"; else echo "arm-none-eabi-$2"; fi; }

mcu_cflags() {
  case $1 in
    rv32*f*) echo "-march=$1 -mabi=ilp32f --specs=picolibc.specs" ;;
    rv32*) echo "-march=$1 -mabi=ilp32 --specs=picolibc.specs" ;;
    cortex-m55) echo "-mcpu=$1 -mthumb -mfloat-abi=softfp" ;;
    *) echo "-mcpu=$1 -mthumb" ;;
  esac
}

mcu_link() {
  local flash=0x0 ram=0x20000000 size=1M
  [[ $1 == cortex-m33 ]] && flash=0x10000000 ram=0x38000000
  [[ $1 == cortex-m55 ]] && flash=0x10000000 ram=0x30000000 size=512K
  local specs=--specs=picolibc.specs
  mcu_riscv "$1" && flash=0x80000000 ram=0x80100000 specs= # in its code flags already
  echo "$(mcu_cflags "$1")" $specs --oslib=semihost --crt0=semihost \
    -Wl,--defsym=__flash=$flash -Wl,--defsym=__flash_size=$size \
    -Wl,--defsym=__ram=$ram -Wl,--defsym=__ram_size=256K -Wl,--defsym=__stack_size=16K
}
