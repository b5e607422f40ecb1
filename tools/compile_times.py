#!/usr/bin/env python3
"""tools/compile_times.py — the CPU time each translation unit takes to compile.

Compiles every TU of a Meson build directory one at a time, with the command its
compile_commands.json gives (ccache off, the object written to a scratch file, the build
directory untouched), and measures the compiler's user CPU seconds with /usr/bin/time:
unlike wall time, user time hardly moves when other work shares the machine. Prints one
line per TU, slowest first, then the total.

With a second build directory (another checkout, say the commit before a change) each TU
is compiled in both, alternately, so both see the same load; the table has both columns.

    python3 tools/compile_times.py build-lib                  # meson setup build-lib -Dlibrary_only=true
    python3 tools/compile_times.py build-lib /tmp/old/build-lib --top 15
    python3 tools/compile_times.py build --filter src/ops/    # only the TUs whose path contains it

Generated sources must exist: build the directory once first (or `ninja runtime_sources.cpp`).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile


def commands(build):
    """{source path relative to the source root: (directory, argv)} of a build directory."""
    root = os.path.dirname(os.path.abspath(build))
    out = {}
    for c in json.load(open(os.path.join(build, "compile_commands.json"))):
        src = os.path.normpath(os.path.join(c["directory"], c["file"]))
        key = os.path.relpath(src, root) if not os.path.relpath(src, root).startswith("..") else src
        if key.startswith(os.path.basename(os.path.abspath(build)) + os.sep):
            key = "<build>" + key[len(os.path.basename(os.path.abspath(build))):]  # generated sources
        args = shlex.split(c["command"])
        if args[0] == "ccache":
            args = args[1:]
        if "-c" not in args:  # Meson leaves -c out for generated sources
            args += ["-c", c["file"]]
        for flag in ("-MQ", "-MF"):
            while flag in args:
                i = args.index(flag)
                del args[i:i + 2]
        out[key] = (c["directory"], [a for a in args if a != "-MD"])
    return out


def user_seconds(entry, scratch):
    directory, args = entry
    args = list(args)
    args[args.index("-o") + 1] = os.path.join(scratch, "tu.o")
    r = subprocess.run(["/usr/bin/time", "-f", "%U"] + args, cwd=directory, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, env=dict(os.environ, CCACHE_DISABLE="1"))
    if r.returncode != 0:
        sys.exit(f"compile_times: this failed in {directory}:\n{' '.join(args)}\n{r.stderr[-2000:]}")
    return float(r.stderr.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="a configured and built Meson build directory")
    ap.add_argument("before", nargs="?", help="a second one to compare with (its column comes first)")
    ap.add_argument("--filter", default="", help="only TUs whose path contains this")
    ap.add_argument("--top", type=int, default=0, help="print only the slowest N (the total counts all)")
    opts = ap.parse_args()
    after = {k: v for k, v in commands(opts.build).items() if opts.filter in k}
    before = {k: v for k, v in commands(opts.before).items() if opts.filter in k} if opts.before else {}
    scratch = tempfile.mkdtemp()
    rows = []
    for key in sorted(set(after) | set(before)):
        b = user_seconds(before[key], scratch) if key in before else None
        a = user_seconds(after[key], scratch) if key in after else None
        rows.append((b, a, key))
        print(f"  {key}", file=sys.stderr, flush=True)
    rows.sort(key=lambda r: -(r[1] if r[1] is not None else r[0]))
    cell = lambda v: "-" if v is None else f"{v:.2f}"
    shown = rows[:opts.top] if opts.top else rows
    if opts.before:
        print("before\tafter\tTU (user CPU seconds)")
        for b, a, key in shown:
            print(f"{cell(b)}\t{cell(a)}\t{key}")
        print(f"{sum(r[0] or 0 for r in rows):.2f}\t{sum(r[1] or 0 for r in rows):.2f}\t"
              f"total ({sum(r[0] is not None for r in rows)} / {sum(r[1] is not None for r in rows)} TUs)")
    else:
        print("seconds\tTU (user CPU seconds)")
        for _, a, key in shown:
            print(f"{cell(a)}\t{key}")
        print(f"{sum(r[1] or 0 for r in rows):.2f}\ttotal ({len(rows)} TUs)")


if __name__ == "__main__":
    main()
