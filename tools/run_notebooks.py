#!/usr/bin/env python3
"""Run the notebooks the way a Jupyter C++ kernel does: what `make test` uses to test them.

xeus-cling and xeus-cpp keep one C++ interpreter alive per notebook and hand it one cell at
a time; a cell sees everything the cells before it declared. clang-repl (Debian's
clang-tools-22) is the incremental interpreter xeus-cpp is built on, so each notebook is fed
to one long-lived clang-repl, cell by cell, in order:

  * the interpreter starts as the xeus-cpp kernelspec in examples/notebooks/kernels/ starts
    it: its -I/-D/-std flags, and libmicrotorch preloaded (LD_PRELOAD) from --build;
  * `#pragma cling ...` lines (how xeus-cling finds headers and the library) are left in:
    clang-repl ignores them, as xeus-cpp does;
  * the last line of a cell without a final `;` is what Jupyter displays: it becomes
    `notebook_runner::show(<line>);`, which calls the same `mime_bundle_repr` the kernels
    use (argument-dependent lookup), checks that it gives a non-empty bundle and prints its
    text/plain part; values without one are printed with operator<<;
  * each cell is written to <build>/notebooks/<notebook>/cell_NN.cpp and sent as one input,
    `#include "<that file>"`, so the interpreter gets the cell's text with its lines, and a
    compiler error names the cell's file and line;
  * after each cell a marker is printed, so every line of output, every compiler error and
    the point where the interpreter died belong to one cell.

A cell fails when it does not compile, when it throws (the interpreter ends with the
exception's message), or when a CHECK in it fails (examples/notebooks/check.hpp throws).
Before running anything, each cell is also checked for what cling (xeus-cling) cannot do
although clang-repl can, so that a notebook passing here runs in both kernels:
  * a structured binding at the top level of a cell (`auto [a, b] = f();`): cling leaves
    its names undeclared in later cells (root-project/cling issue 193);
  * an RAII guard at the top level (`mt::NoGradGuard g;`): it would live for the rest of
    the session; put it in a `{ ... }` block;
  * a magic (`%timeit`): not C++;
  * a lambda inside a top-level statement other than `auto f = [](...) {...};`: clang-repl 22
    crashes compiling one inside an expression statement, a { } block or a try block; and
    a top-level lambda that captures: clang-repl makes cell variables globals, where a
    lambda may not capture (it needs no capture to use them).

  python3 tools/run_notebooks.py --build build                # every examples/notebooks/*.ipynb
  python3 tools/run_notebooks.py --build build 02_attention   # the notebooks whose name contains it
  python3 tools/run_notebooks.py --build build 02 -v          # ... printing every cell's output

The last line printed is `notebooks: N passed, M failed`; the exit status is 1 when any failed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = os.path.join(ROOT, "examples", "notebooks")
KERNELSPEC = os.path.join(NOTEBOOKS, "kernels", "xcpp17-microtorch", "kernel.json")
KERNEL_NAMES = ("xcpp17", "xcpp17-microtorch")  # xeus-cling's, and the xeus-cpp kernelspec above
CLANG_REPL = ["clang-repl", "/usr/lib/llvm-22/bin/clang-repl"]
MARK = "@@notebook-cell-done"

# Displays a cell's last value as the kernels do: through mime_bundle_repr when an overload
# exists for the type (ADL), else operator<<. Sent once, before the first display.
RUNTIME = r"""#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
namespace notebook_runner {
template <class T, class = void>
struct has_mime : std::false_type {};
template <class T>
struct has_mime<T, std::void_t<decltype(mime_bundle_repr(std::declval<const T&>()))>> : std::true_type {};
template <class T, class = void>
struct has_ostream : std::false_type {};
template <class T>
struct has_ostream<T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<const T&>())>> : std::true_type {};
template <class T>
void show(const T& value) {
  if constexpr (has_mime<T>::value) {
    const auto bundle = mime_bundle_repr(value);
    if (!bundle.is_object() || bundle.empty()) throw std::runtime_error("mime_bundle_repr gave an empty bundle");
    std::string mimes;
    for (auto it = bundle.begin(); it != bundle.end(); ++it) {
      if (!it.value().is_string() || it.value().template get<std::string>().empty()) {
        throw std::runtime_error("mime_bundle_repr: empty " + it.key() + " representation");
      }
      mimes += (mimes.empty() ? "" : ", ") + it.key();
    }
    std::cout << "[display: " << mimes << "]\n";
    if (bundle.contains("text/plain")) std::cout << bundle["text/plain"].template get<std::string>() << "\n";
  } else if constexpr (has_ostream<T>::value) {
    std::cout << value << "\n";
  } else {
    std::cout << "[a value without a display]\n";
  }
  std::cout << std::flush;
}
}  // namespace notebook_runner"""

CONTROL = re.compile(r"^(for|if|else|while|do|switch|try|catch|return|namespace|using|template|struct|class)\b")
STRUCTURED_BINDING = re.compile(r"^\s*(?:const\s+|static\s+)*auto\s*&{0,2}\s*\[")
GUARD = re.compile(r"^\s*(?:[\w:]+::)?(NoGradGuard|DetectAnomalyGuard|GeneratorGuard|TraceGuard)\s+\w+")
LAMBDA = re.compile(r"\[[^\[\]]*\]\s*(\(|\{|mutable\b)")
NAMED_LAMBDA = re.compile(r"^\s*(?:const\s+)?auto\s+\w+\s*=\s*\[")


LAMBDA_HINT = ("clang-repl 22 (xeus-cpp's interpreter) crashes compiling a lambda inside a top-level expression "
               "statement, { } block or try block; name the lambda first (auto f = [...](...) { ... };) and use f")


class NotebookError(Exception):
    pass


def cell_source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def strip_comment(line):
    """The line without a trailing // comment (one outside string and character literals)."""
    quote = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def top_level_lines(lines):
    """The (index, text) of lines that start at brace depth 0 (not inside a function body or block)."""
    depth = 0
    out = []
    for i, line in enumerate(lines):
        code = strip_comment(line)
        if depth == 0:
            out.append((i, code))
        depth += code.count("{") - code.count("}")
    return out


def display_line(line):
    """The expression Jupyter would display: a last line that does not end a statement."""
    code = strip_comment(line).strip()
    if not code or code.startswith(("#", "/*", "*", "{", "}")) or CONTROL.match(code):
        return None
    if code.endswith((";", "{", ",")):
        return None
    if code.endswith("}") and code.count("{") != code.count("}"):
        return None
    return code


def cells_of(path):
    """[(cell number, code to send, needs the display runtime)] for one notebook."""
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    name = os.path.basename(path)
    if nb.get("nbformat") != 4:
        raise NotebookError(f"{name}: nbformat {nb.get('nbformat')} (expected 4)")
    kernel = nb.get("metadata", {}).get("kernelspec", {}).get("name")
    if kernel not in KERNEL_NAMES:
        raise NotebookError(f"{name}: kernel {kernel!r}, expected one of {KERNEL_NAMES}")
    out = []
    for number, cell in enumerate(nb.get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        where = f"{name} cell {number}"
        lines = cell_source(cell).split("\n")
        for i, code in top_level_lines(lines):
            if code.lstrip().startswith("%"):
                raise NotebookError(f"{where}, line {i + 1}: magics ({code.strip()}) are not C++")
            if STRUCTURED_BINDING.match(code):
                raise NotebookError(f"{where}, line {i + 1}: a structured binding at the top level of a cell "
                                    f"(`{code.strip()}`): cling leaves its names undeclared in later cells; use "
                                    "std::tie or std::get")
            if GUARD.match(code):
                raise NotebookError(f"{where}, line {i + 1}: `{code.strip()}` at the top level of a cell lives for "
                                    "the rest of the session; put it and the code it guards in a { ... } block")
            if NAMED_LAMBDA.match(code) and re.search(r"=\s*\[[^\]]", code):
                raise NotebookError(f"{where}, line {i + 1}: a lambda at the top level of a cell captures "
                                    f"(`{code.strip()}`): clang-repl declares cell variables as globals, where a "
                                    "lambda may not capture; write [] (the cell variables are visible without it)")
            if LAMBDA.search(code) and not NAMED_LAMBDA.match(code):
                raise NotebookError(f"{where}, line {i + 1}: a lambda inside a statement at the top level of a cell: "
                                    f"{LAMBDA_HINT}")
        while lines and not lines[-1].strip():
            lines.pop()
        shown = False
        if lines:
            expr = display_line(lines[-1])
            if expr is not None:
                lines[-1] = f"notebook_runner::show({expr});"
                shown = True
        out.append((number, "\n".join(lines), shown))
    return out


def kernelspec_flags():
    """The interpreter flags of the xeus-cpp kernelspec, with its relative paths resolved from
    the notebooks' folder (where Jupyter starts the kernel)."""
    with open(KERNELSPEC, encoding="utf-8") as f:
        spec = json.load(f)
    argv = spec["argv"]
    flags = argv[argv.index("{connection_file}") + 1:]
    out = []
    for flag in flags:
        if flag.startswith("-I") and not os.path.isabs(flag[2:]):
            flag = "-I" + os.path.normpath(os.path.join(NOTEBOOKS, flag[2:]))
        out.append(flag)
    return out


def find_clang_repl():
    for c in CLANG_REPL:
        if shutil.which(c):
            return shutil.which(c)
    return None


def run_one(path, args, repl):
    name = os.path.splitext(os.path.basename(path))[0]
    log = []
    try:
        cells = cells_of(path)
    except (NotebookError, json.JSONDecodeError, OSError) as e:
        return False, f"FAIL {name}: {e}", log
    flags = kernelspec_flags()
    env = dict(os.environ)
    env["LD_PRELOAD"] = os.path.join(os.path.abspath(args.build), "libmicrotorch.so")  # the kernelspec's, from --build
    # Each cell is written to a file and sent as one input, `#include "<file>"`: the
    # interpreter reads it with its lines (preprocessor lines anywhere, diagnostics with
    # the cell's own line numbers), exactly as a kernel receives a cell's text.
    cell_dir = os.path.join(os.path.abspath(args.build), "notebooks", name)
    os.makedirs(cell_dir, exist_ok=True)

    def as_input(label, code):
        path = os.path.join(cell_dir, label + ".cpp")
        with open(path, "w", encoding="utf-8") as f:
            f.write(code + "\n")
        return f'#include "{path}"\n'

    stdin = ["#include <cstdio>\n", "std::setvbuf(stdout, nullptr, _IONBF, 0);\n"]
    runtime_sent = False
    for number, code, shown in cells:
        if shown and not runtime_sent:
            stdin.append(as_input("display_runtime", RUNTIME))
            runtime_sent = True
        stdin.append(as_input(f"cell_{number:02d}", code))
        stdin.append(f'std::printf("\\n{MARK} {number}\\n");\n')
    t0 = time.time()
    try:
        # stdout and stderr in one pipe, in order (stdout is unbuffered in the session)
        r = subprocess.run([repl] + [f"-Xcc={f}" for f in flags], input="".join(stdin), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, cwd=os.path.dirname(path), env=env,
                           timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return False, f"FAIL {name}: still running after {args.timeout} s", log
    seconds = time.time() - t0
    # Split the output at the markers: segment k belongs to cells[k].
    segments, current = [], []
    for line in r.stdout.split("\n"):
        if line.startswith(MARK):
            segments.append("\n".join(current))
            current = []
        else:
            current.append(line)
    tail = "\n".join(current)
    for k, (number, _, _) in enumerate(cells):
        text = segments[k] if k < len(segments) else tail
        error = re.search(r"(:\d+:\d+: error:|^error: )", text, re.M) or (k >= len(segments))
        if args.verbose or error:
            log.append(f"--- cell {number}\n{text.strip()}")
        if error:
            why = "did not compile" if k < len(segments) else f"stopped the interpreter (exit status {r.returncode})"
            if r.returncode == -11 and k >= len(segments):
                why += f": the interpreter crashed ({LAMBDA_HINT})"
            return False, f"FAIL {name}: cell {number} {why}", log
    return True, f"PASS {name}: {len(cells)} code cells, one interpreter, {seconds:.1f} s", log


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("filters", nargs="*", help="run only the notebooks whose file name contains one of these")
    ap.add_argument("--build", default="build", help="the Meson build directory holding libmicrotorch (default: build)")
    ap.add_argument("--notebooks", default=NOTEBOOKS)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="notebooks run at once (default 2)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds a notebook may run")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each cell's output")
    args = ap.parse_args()

    paths = sorted(os.path.join(args.notebooks, f) for f in os.listdir(args.notebooks) if f.endswith(".ipynb"))
    if args.filters:
        paths = [p for p in paths if any(s in os.path.basename(p) for s in args.filters)]
    repl = find_clang_repl()
    problem = None
    if not paths:
        problem = "no notebooks found"
    elif repl is None:
        problem = "clang-repl not found (Debian: apt-get install clang-tools-22; tools/install-deps.sh installs it)"
    elif not os.path.exists(os.path.join(args.build, "libmicrotorch.so")):
        problem = f"no libmicrotorch.so in {args.build}; build first (make build)"
    if problem:
        print(f"run_notebooks: {problem}", file=sys.stderr)
        print(f"notebooks: 0 passed, {max(1, len(paths))} failed")
        return 1

    t0 = time.time()
    passed = failed = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for ok, line, log in pool.map(lambda p: run_one(p, args, repl), paths):
            print(line, flush=True)
            for chunk in log:
                if chunk.strip():
                    print("  " + chunk.rstrip().replace("\n", "\n  "), flush=True)
            passed += ok
            failed += not ok
    print(f"run_notebooks: {time.time() - t0:.1f} s")
    print(f"notebooks: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
