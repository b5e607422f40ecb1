#!/usr/bin/env python3
"""Compiles and runs the C++ examples of README.md, so the README stays true (make test).

    python3 tools/check_readme.py --build build [-v]

Every ```cpp block of the README carries a marker on the line before it:

    <!-- example: program -->            a whole program: compiled, linked, run (exit status 0)
    <!-- example: program, prints -->    the same, and its output must equal the next plain
                                         ``` block of the README (the "prints" that follows)
    <!-- example: fragment NAME -->      statements: compiled and run inside main() after the
                                         declarations PRELUDES[NAME] below gives them
    <!-- example: skip REASON -->        not C++ a compiler takes (e.g. cling's #pragma lines)

A ```cpp block without a marker fails the check, so a new example cannot go untested.
Examples are compiled as C++20 (the README says why: designated initializers such as
{.batch_first = true}) with -Wall -Wextra -Wpedantic -Werror against the library in --build,
two at a time, each in a scratch folder that is its working directory when it runs.
Prints "readme: N passed, M failed" last; exits non-zero when M > 0.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STD = "c++20"
HEADERS = """#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>
#include <microtorch/io.hpp>
#include <thread>
namespace mt = microtorch;
namespace nn = microtorch::nn;
namespace F = microtorch::nn::functional;
"""
# What a fragment needs declared before it runs, by the name its marker gives.
PRELUDES = {
    # README "Threads": a worker thread with its own generator
    "threads": "",
    # README "PyTorch interoperability": a checkpoint with MultiheadAttention(8, 2)'s keys
    "interop": 'nn::save(nn::MultiheadAttention(8, 2, {.batch_first = true}), "mha.npz");',
    # README "Lowering": any trained model taking [1, 4], its training inputs and one input
    "lowering": "nn::Linear model(4, 3);\nmt::Tensor x_train = mt::randn({32, 4}), x = x_train.narrow(0, 0, 1);",
    "lowering_front_door": "nn::Linear model(4, 3);\nmt::Tensor x_train = mt::randn({32, 4}), x_test = mt::randn({16, 4});",
}
EPILOGUES = {"threads": "worker.join();"}

MARKER = re.compile(r"<!--\s*example:\s*(program|fragment|skip)\b(.*?)-->")


def blocks(text):
    """(line, kind, argument, code, printed) for every ```cpp block."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            start = i
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            code = "\n".join(lines[i + 1:j])
            marker = None
            k = start - 1
            while k >= 0 and lines[k].strip() == "":
                k -= 1
            m = MARKER.search(lines[k]) if k >= 0 else None
            kind, arg = (m.group(1), m.group(2).strip().lstrip(",:").strip()) if m else (None, "")
            printed = None
            if kind == "program" and arg == "prints":
                p = j + 1
                while lines[p].strip() != "```":
                    p += 1
                q = p + 1
                while lines[q].strip() != "```":
                    q += 1
                printed = "\n".join(lines[p + 1:q]) + "\n"
            out.append((start + 1, kind, arg, code, printed))
            i = j
        i += 1
    return out


def flags(build):
    deps = ["xtensor", "xtl", "xsimd", "fmt", "nlohmann_json"]
    cflags = subprocess.run(["pkg-config", "--cflags"] + deps, capture_output=True, text=True, check=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs"] + deps, capture_output=True, text=True, check=True).stdout.split()
    lib = os.path.abspath(build)
    return (["-std=" + STD, "-O1", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-DXTENSOR_USE_XSIMD",
             "-I" + os.path.join(ROOT, "include")] + cflags,
            ["-L" + lib, "-lmicrotorch", "-Wl,-rpath," + lib] + libs)


def check(block, build_flags, verbose):
    line, kind, arg, code, printed = block
    name = f"README.md:{line}"
    if kind is None:
        return name, False, "no <!-- example: ... --> marker on the line before it"
    if kind == "skip":
        return name, True, f"skipped ({arg})"
    if kind == "fragment":
        if arg not in PRELUDES:
            return name, False, f"unknown fragment '{arg}' (tools/check_readme.py PRELUDES)"
        # #include and namespace-alias lines of a fragment go above main()
        top = [l for l in code.split("\n") if l.startswith("#include") or re.match(r"namespace \w+ = ", l)]
        body = [l for l in code.split("\n") if l not in top]
        source = (HEADERS + "\n".join(top) + "\nint main() {\n" + PRELUDES[arg] + "\n" + "\n".join(body) + "\n" +
                  EPILOGUES.get(arg, "") + "\n}\n")
    else:
        source = code + "\n"
    work = tempfile.mkdtemp(prefix="microtorch-readme-")
    try:
        src = os.path.join(work, "example.cpp")
        with open(src, "w") as f:
            f.write(f'#line 1 "{name}"\n' if kind == "program" else "")
            f.write(source)
        cflags, lflags = build_flags
        c = subprocess.run(["g++"] + cflags + [src, "-o", os.path.join(work, "example")] + lflags,
                           capture_output=True, text=True)
        if c.returncode != 0:
            return name, False, "does not compile:\n" + c.stderr[-3000:]
        r = subprocess.run([os.path.join(work, "example")], cwd=work, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return name, False, f"exits with status {r.returncode}:\n{r.stdout[-1500:]}{r.stderr[-1500:]}"
        if printed is not None and r.stdout != printed:
            return name, False, f"prints\n{r.stdout}\nbut the README says it prints\n{printed}"
        return name, True, r.stdout if verbose else ""
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    with open(os.path.join(ROOT, "README.md")) as f:
        found = blocks(f.read())
    build_flags = flags(args.build)
    passed = failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for name, ok, detail in pool.map(lambda b: check(b, build_flags, args.verbose), found):
            print(f"readme: {name}: {'ok' if ok else 'FAILED'}{' ' + detail if ok and detail else ''}")
            if not ok:
                print(detail, file=sys.stderr)
            passed += ok
            failed += not ok
    print(f"readme: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
