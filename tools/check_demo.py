#!/usr/bin/env python3
"""Runs `make demo`'s program and checks what it prints against README.md.

    python3 tools/check_demo.py --build build

The demo (examples/demo.cpp) trains the Iris transformer with fixed seeds, lowers it to int16
and int8 firmware and verifies each on the host, under UBSan+ASan and on QEMU. It runs here
through tools/pinned-kernels.sh, as `make demo` runs it, so its float kernels are the same on
every AVX2 machine. Checks:
  1. the demo exits with status 0 and writes its pictures and firmware folders;
  2. every lowered model is bit-exact on the host, the sanitizers, Cortex-M0, M4, M7, M33 and rv32imc;
  3. its summary table is the one in README.md, character for character (the README's
     numbers are what a fresh `make demo` prints; on a mismatch both tables are shown).
Prints "demo: N passed, M failed" last.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = "| model   | test accuracy"


def table(lines):
    """The markdown table that starts with HEADER, as a list of lines ([] when absent)."""
    for i, line in enumerate(lines):
        if line.startswith(HEADER):
            end = i
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            return [l.rstrip() for l in lines[i:end]]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    demo = os.path.join(args.build, "examples", "demo")
    passed = failed = 0

    def check(ok, what, detail=""):
        nonlocal passed, failed
        print(f"demo: {'ok  ' if ok else 'FAIL'} {what}" + (f"\n{detail}" if detail and not ok else ""))
        passed, failed = passed + ok, failed + (not ok)

    if not os.path.exists(demo):
        check(False, f"{demo} exists", "build the examples (meson configure -Dexamples=enabled)")
    else:
        out = tempfile.mkdtemp(prefix="microtorch-demo-")
        try:
            run = subprocess.run([os.path.join(ROOT, "tools", "pinned-kernels.sh"), demo, out],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            print(run.stdout, end="")
            wrote = all(os.path.exists(os.path.join(out, f))
                        for f in ("training.svg", "attention.svg", "confusion.svg", "firmware_int16", "firmware_int8"))
            check(run.returncode == 0 and wrote, "the demo runs to the end and writes its pictures and firmware",
                  f"exit status {run.returncode}; files in {out}: {sorted(os.listdir(out))}")
            printed = table(run.stdout.splitlines())
            lowered = [row for row in printed[2:] if not row.startswith("| float")]
            check(len(lowered) >= 2 and all(row.rstrip(" |").endswith("yes") for row in lowered),
                  "every lowered model bit-exact on host, sanitizers, Cortex-M4 and M0", "\n".join(printed))
            with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
                readme = table(f.read().splitlines())
            check(bool(printed) and printed == readme, "the summary table is README.md's",
                  "README.md:\n" + "\n".join(readme) + "\nprinted:\n" + "\n".join(printed) +
                  "\n(copy the printed table into README.md when the change is intended)")
        finally:
            shutil.rmtree(out, ignore_errors=True)
    print(f"demo: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
