#!/usr/bin/env python3
"""Compiles and runs the C++ examples of README.md and docs/*.md and checks their links, so
the pages stay true (make test).

    python3 tools/check_readme.py --build build [-v] [PAGE...]     (default: all of them)

Every ```cpp block of these pages carries a marker on the line before it:

    <!-- example: program -->            a whole program: compiled, linked, run (exit status 0)
    <!-- example: program, prints -->    the same, and its output must equal the next plain
                                         ``` block of the page (the "prints" that follows)
    <!-- example: fragment NAME -->      statements: compiled and run inside main() after the
                                         declarations PRELUDES[NAME] below gives them
    <!-- example: fragment -->           statements that need nothing declared first
    <!-- example: skip REASON -->        not C++ a compiler takes (e.g. cling's #pragma lines)

A ```cpp block without a marker fails the check, so a new example cannot go untested.
Examples are compiled as C++20 (docs/tensors.md says why: designated initializers such as
{.batch_first = true}) with -Wall -Wextra -Wpedantic -Werror against the library in --build,
two at a time, each in a scratch folder that is its working directory when it runs.

Links: every relative link and picture of a page, [text](path), [text](path#anchor) or
[text](#anchor), must name a file of the repository, and an anchor must be a heading of
that Markdown file as GitHub names it (the heading's text in lower case without
punctuation, spaces as hyphens; -1, -2, ... for a repeated heading). Links inside code are
not links. README.md must also link every page of docs/. Each page's links are one check.

Prints one line per example, then "readme: PAGE: N passed, M failed" per page and
"readme: N passed, M failed" last (tools/run-tests.sh reads that line); exits non-zero
when M > 0.
"""
import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STD = "c++20"
HEADERS = """#include <microtorch/microtorch.hpp>
#include <microtorch/nn.hpp>
#include <microtorch/io.hpp>
namespace mt = microtorch;
namespace nn = microtorch::nn;
namespace F = microtorch::nn::functional;
"""
# What a fragment needs declared before it runs, by the name its marker gives.
PRELUDES = {
    # docs/modules.md "PyTorch interoperability": a checkpoint with MultiheadAttention(8, 2)'s keys
    "interop": 'nn::save(nn::MultiheadAttention(8, 2, {.batch_first = true}), "mha.npz");',
    # docs/lowering.md, the steps one by one: any trained model taking [1, 4], its training
    # inputs and one input
    "lowering": "nn::Linear model(4, 3);\nmt::Tensor x_train = mt::randn({32, 4}), x = x_train.narrow(0, 0, 1);",
    # docs/lowering.md, the front door: the same model, training and evaluation inputs
    "lowering_front_door": "nn::Linear model(4, 3);\nmt::Tensor x_train = mt::randn({32, 4}), x_test = mt::randn({16, 4});",
    # docs/bad-inputs.md "Anomaly mode": a model whose outputs are positive (their log is
    # finite, so the guard stays quiet) and an input that wants a gradient
    "anomaly": "nn::Sigmoid model;\nmt::Tensor x = mt::randn({4, 3}).requires_grad_();",
    # a fragment whose marker names nothing (docs/api.md's)
    "": "",
}

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


def check(page, block, build_flags, verbose):
    line, kind, arg, code, printed = block
    name = f"{page}:{line}"
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
        source = HEADERS + "\n".join(top) + "\nint main() {\n" + PRELUDES[arg] + "\n" + "\n".join(body) + "\n}\n"
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
            return name, False, f"prints\n{r.stdout}\nbut {page} says it prints\n{printed}"
        return name, True, r.stdout if verbose else ""
    finally:
        shutil.rmtree(work, ignore_errors=True)


def blank(m):
    """A match's text as spaces, its newlines kept (so that line numbers stay)."""
    return re.sub(r"[^\n]", " ", m.group(0))


def without_fences(text):
    """The text with its fenced code blocks blanked (a '#' line of a sh block is no heading)."""
    return re.sub(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", blank, text, flags=re.M | re.S)


def prose(text):
    """The text with code and HTML comments blanked: what is left of a page where a bracket
    or a parenthesis can be a link."""
    text = re.sub(r"<!--.*?-->", blank, without_fences(text), flags=re.S)
    return re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", blank, text, flags=re.S)


def anchors(text):
    """The anchors GitHub gives the headings of a Markdown text."""
    seen = {}
    out = set()
    for m in re.finditer(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$", without_fences(text), flags=re.M):
        heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link's or picture's text
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")


def check_links(page):
    """(name, ok, problems) for the links of one page (a path relative to ROOT)."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        text = f.read()
    problems = []
    linked = set()
    for m in LINK.finditer(prose(text)):
        target = m.group(1)
        line = text.count("\n", 0, m.start()) + 1
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # http:, https:, mailto:
        path, _, anchor = urllib.parse.unquote(target).partition("#")
        file = os.path.normpath(os.path.join(os.path.dirname(os.path.join(ROOT, page)), path)) if path else \
            os.path.join(ROOT, page)
        if not os.path.exists(file):
            problems.append(f"{page}:{line}: {target}: no such file")
            continue
        linked.add(os.path.relpath(file, ROOT))
        if anchor and file.endswith(".md"):
            with open(file, encoding="utf-8") as f:
                if anchor not in anchors(f.read()):
                    problems.append(f"{page}:{line}: {target}: no heading of {os.path.relpath(file, ROOT)} has "
                                    f"the anchor #{anchor}")
    if page == "README.md":
        for doc in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
            if os.path.relpath(doc, ROOT) not in linked:
                problems.append(f"README.md: no link to {os.path.relpath(doc, ROOT)} (its list of pages)")
    return f"{page} links", not problems, "\n".join(problems)


def pages():
    """README.md and every page of docs/, as paths relative to ROOT."""
    return ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("pages", nargs="*", metavar="PAGE", help="README.md or docs/NAME.md (default: all)")
    args = ap.parse_args()
    chosen = [os.path.relpath(os.path.abspath(p), ROOT) for p in args.pages] or pages()
    jobs = []
    for page in chosen:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            jobs += [(page, b) for b in blocks(f.read())]
    build_flags = flags(args.build) if jobs else None
    counts = {page: [0, 0] for page in chosen}

    def tally(page, name, ok, detail):
        print(f"readme: {name}: {'ok' if ok else 'FAILED'}{' ' + detail if ok and detail else ''}")
        if not ok:
            print(detail, file=sys.stderr)
        counts[page][0 if ok else 1] += 1

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for (page, _), result in zip(jobs, pool.map(lambda j: check(j[0], j[1], build_flags, args.verbose), jobs)):
            tally(page, *result)
    for page in chosen:
        tally(page, *check_links(page))
    for page in chosen:
        print(f"readme: {page}: {counts[page][0]} passed, {counts[page][1]} failed")
    passed = sum(c[0] for c in counts.values())
    failed = sum(c[1] for c in counts.values())
    print(f"readme: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
