#!/usr/bin/env bash
# tools/check-install.sh — proves that an installed microtorch serves other projects.
#
# Builds the library alone (-Dlibrary_only=true) into a temporary prefix with Meson's
# default (multiarch) libdir, installs it, then:
#   1. builds a program with nothing but `pkg-config --cflags --libs microtorch`,
#   2. builds the same program as a CMake project with find_package(microtorch),
#   3. runs both, and the installed microtorch-lower, in an empty environment (env -i: no
#      LD_LIBRARY_PATH, no PKG_CONFIG_PATH), where they must start and give the right result.
# Leaves nothing behind. Prints "check-install: N passed, M failed" last and exits non-zero
# when anything failed.   Usage: tools/check-install.sh [--keep DIR]
set -uo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/microtorch-install.XXXXXX")
if [[ ${1:-} == --keep ]]; then
  tmp=$2
  mkdir -p "$tmp"
else
  trap 'rm -rf "$tmp"' EXIT
fi
prefix=$tmp/prefix
passed=0
failed=0
check() {  # check NAME COMMAND...: runs it, counts it, shows its output when it fails
  local name=$1
  shift
  if "$@" >"$tmp/$name.log" 2>&1; then
    echo "check-install: $name: ok"
    passed=$((passed + 1))
  else
    echo "check-install: $name: FAILED ($*):" >&2
    tail -n 30 "$tmp/$name.log" >&2
    failed=$((failed + 1))
  fi
}
finish() {
  echo "check-install: $passed passed, $failed failed"
  [[ $failed -eq 0 ]]
  exit
}

# -O0 (plain): the consumers do little work, and the library builds twice as fast.
install_library() {
  meson setup "$tmp/build" "$src" --buildtype=plain --prefix="$prefix" -Dlibrary_only=true &&
    ninja -C "$tmp/build" && meson install -C "$tmp/build" --no-rebuild
}
check install install_library
[[ $failed -eq 0 ]] || finish

pc=$(find "$prefix" -name microtorch.pc | head -n 1)
config=$(find "$prefix" -name microtorchConfig.cmake | head -n 1)
echo "check-install: installed $(cd "$prefix" && find . -name 'libmicrotorch.so*' | head -n 1), ${pc#"$prefix"/}, ${config#"$prefix"/}"

# A user's program: train a layer, save it, load it into a fresh one, check the result.
mkdir -p "$tmp/user"
cat >"$tmp/user/user.cpp" <<'CPP'
#include <cstdio>
#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>
namespace mt = microtorch;
int main(int argc, char** argv) {
  mt::manual_seed(0);
  mt::Tensor w = mt::tensor({{1.0, 2.0}, {3.0, 4.0}}).requires_grad_();
  mt::Tensor loss = mt::tensor({{1.0, 2.0}}).matmul(w).sum();  // 1*1 + 2*3 + 1*2 + 2*4 = 17
  loss.backward();                                               // dloss/dw = [[1, 1], [2, 2]]
  bool ok = loss.item() == 17.0 && mt::allclose(w.grad(), mt::tensor({{1.0, 1.0}, {2.0, 2.0}}));
  mt::nn::Linear fc(3, 2), copy(3, 2);
  const std::string path = std::string(argc > 1 ? argv[1] : ".") + "/fc.npz";
  mt::nn::save(fc, path);
  mt::nn::load(copy, path);
  ok = ok && mt::equal(fc.weight, copy.weight);
  std::printf("%s\n", ok ? "user program: ok" : "user program: WRONG RESULT");
  return ok ? 0 : 1;
}
CPP
build_pkgconfig() {
  local flags
  flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs microtorch) || return 1
  echo "g++ -std=c++17 user.cpp $flags"
  # shellcheck disable=SC2086  # the flags are meant to split into words
  g++ -std=c++17 -O1 "$tmp/user/user.cpp" -o "$tmp/user/user-pkgconfig" $flags
}
check pkg-config-build build_pkgconfig
check pkg-config-run env -i "$tmp/user/user-pkgconfig" "$tmp/user"

cat >"$tmp/user/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(microtorch_user CXX)
find_package(microtorch 0.1 REQUIRED)
add_executable(user user.cpp)
target_link_libraries(user PRIVATE microtorch::microtorch)
CMAKE
build_cmake() {
  cmake -S "$tmp/user" -B "$tmp/user/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$tmp/user/cmake-build"
}
check cmake-build build_cmake
check cmake-run env -i "$tmp/user/cmake-build/user" "$tmp/user"

check microtorch-lower-starts env -i "$prefix/bin/microtorch-lower" --help
check state-dict-tool-installed test -x "$prefix/bin/microtorch-state-dict"
# The firmware runner finds its counting plugin's source and its board table (targets.sh,
# which it sources before printing its usage) in the prefix.
runner_usage() {
  local usage
  usage=$(env -i PATH=/usr/bin:/bin "$prefix/bin/microtorch-run-firmware-qemu" --help) || return 1  # --help: exit 0
  echo "$usage"
  grep -q "plugin source: .*/bin/../share/microtorch/insncount.c" <<<"$usage" && test -f "$prefix/share/microtorch/insncount.c" &&
    test -f "$prefix/share/microtorch/targets.sh"
}
check firmware-runner-installed runner_usage
finish
