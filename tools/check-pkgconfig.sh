#!/usr/bin/env bash
# tools/check-pkgconfig.sh — proves that an installed microtorch serves a user's own program.
#
# Configures a separate build with a temporary --prefix, runs `meson install`, then builds
# a small program with nothing but `pkg-config --cflags --libs microtorch` and runs it.
# Leaves nothing behind.   Usage: tools/check-pkgconfig.sh
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/microtorch-pkgconfig.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
log=$tmp/build.log

echo "check-pkgconfig: building and installing into $prefix"
if ! { meson setup "$tmp/build" "$src" --buildtype=release --prefix="$prefix" --libdir=lib \
         -Dtests=false -Dexamples=false &&
       ninja -C "$tmp/build" &&
       meson install -C "$tmp/build" --no-rebuild; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "check-pkgconfig: FAILED to build or install" >&2
  exit 1
fi

cat >"$tmp/user.cpp" <<'CPP'
#include <microtorch/microtorch.hpp>
namespace mt = microtorch;
int main() {
  mt::Tensor w = mt::tensor({{1.0, 2.0}, {3.0, 4.0}}).requires_grad_();
  mt::Tensor loss = mt::tensor({{1.0, 2.0}}).matmul(w).sum();  // 1*1 + 2*3 + 1*2 + 2*4 = 17
  loss.backward();                                               // dloss/dw = [[1, 1], [2, 2]]
  fmt::print("loss = {}\nw.grad = {}\n", loss.item(), w.grad());
  return loss.item() == 17.0 && mt::allclose(w.grad(), mt::tensor({{1.0, 1.0}, {2.0, 2.0}})) ? 0 : 1;
}
CPP

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
flags=$(pkg-config --cflags --libs microtorch)
echo "check-pkgconfig: g++ -std=c++17 user.cpp $flags"
# shellcheck disable=SC2086  # the flags are meant to split into words
g++ -std=c++17 -O2 "$tmp/user.cpp" -o "$tmp/user" $flags
if LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/user"; then
  echo "check-pkgconfig: OK"
else
  echo "check-pkgconfig: FAILED: the program built against the installed microtorch gave a wrong result" >&2
  exit 1
fi
