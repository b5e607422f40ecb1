#!/usr/bin/env bash
# tools/install-deps.sh — install the Debian 12 / Ubuntu packages microtorch needs.
#
# Asks dpkg first: on a machine that already has everything this does no apt work and
# prints nothing. Otherwise it runs `apt-get update` once and installs only what is
# missing (with sudo when not root).
#
#   tools/install-deps.sh            # the default set below
#   tools/install-deps.sh pkg ...    # ... plus extra packages
set -euo pipefail

# One package per line; later features add theirs here (Arm toolchain, QEMU, ...).
PACKAGES=(
  build-essential
  pkg-config
  meson
  ninja-build
  cmake               # tools/check-install.sh: a CMake project using find_package(microtorch)
  libxtensor-dev
  xtl-dev
  libxsimd-dev
  libxtensor-blas-dev
  libopenblas-dev
  libfmt-dev
  doctest-dev
  libzip-dev          # meson.build: dependency('libzip')
  nlohmann-json3-dev  # meson.build: dependency('nlohmann_json'), the graph IR's JSON (src/lower/graph.cpp)
  libcli11-dev        # tools/lower: the microtorch-lower command line
  doxygen             # the API reference: make docs, and its check in make test (tools/check_docs.py)
  gcc-arm-none-eabi   # Cortex-M cross compiler: tools/mcu/run_kernels_qemu.sh, lowering tests
  picolibc-arm-none-eabi
  qemu-system-arm     # runs the Cortex-M builds (mps2-an385 / mps2-an386)
  gcc-riscv64-unknown-elf  # RISC-V cross compiler (rv32imc, rv32imac, rv32imafc): the same scripts and tests
  picolibc-riscv64-unknown-elf
  qemu-system-misc    # qemu-system-riscv32: runs the RISC-V builds (virt board)
  libbenchmark-dev    # Google Benchmark: benchmarks/ (make bench)
  clang               # the libFuzzer targets in tests/fuzz (make test, make fuzz)
  libclang-rt-14-dev  # libFuzzer and clang's sanitizer runtimes
  librsvg2-bin        # rsvg-convert: tools/check_svg.py renders the demo's figures
  clang-tools-22      # clang-repl: tools/run_notebooks.py runs the notebooks cell by cell (bookworm-security)
)
PACKAGES+=("$@")

if ! command -v dpkg-query >/dev/null; then
  echo "install-deps: not a Debian/Ubuntu system; install these (or your system's equivalents) yourself:" >&2
  echo "  ${PACKAGES[*]}" >&2
  exit 0  # meson setup names anything still missing
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; run as root: apt-get install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
