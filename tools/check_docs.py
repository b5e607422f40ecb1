#!/usr/bin/env python3
"""tools/check_docs.py — builds the API reference and fails when it is incomplete.

Runs Doxygen with docs/Doxyfile (HTML in BUILD/docs/html, XML in BUILD/docs/xml), then
checks two things for every header under include/microtorch and the main page:

  1. Doxygen printed no warning at all (an undocumented class member, a broken \\ref, an
     unknown command, a misparsed declaration, ...);
  2. every public or protected symbol Doxygen found — namespace, file, class, function,
     variable, typedef, enum, enum value, macro — has a description. Doxygen itself warns
     only about some of these (not about namespace members of undocumented namespaces, nor
     about enum values), so this reads its XML output.

Each header, the main page and the configuration (warnings that name no file) is one
check: it passes when it has neither problem.
Prints every problem as `path:line: what`, then "check-docs: N passed, M failed" last,
and exits non-zero when anything failed. `make docs` and `make test` run it.

    python3 tools/check_docs.py [--build DIR]
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Doxygen's XML names files as STRIP_FROM_PATH leaves them (docs/Doxyfile strips "include/").
STRIPPED_PREFIX = "include/"

MEMBER_KINDS = {"function", "variable", "typedef", "enum", "define", "friend"}
COMPOUND_KINDS = {"class", "struct", "union", "namespace", "file"}


def repo_path(path):
    """A path as the repository names it ("include/microtorch/ops.hpp")."""
    if os.path.isabs(path):
        return os.path.relpath(path, ROOT)
    if path.startswith("microtorch/"):
        return STRIPPED_PREFIX + path
    return path


def run_doxygen(out):
    """Doxygen with docs/Doxyfile, its output and warning log redirected into `out`."""
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "warnings.log")
    with open(os.path.join(ROOT, "docs", "Doxyfile"), encoding="utf-8") as f:
        config = f.read()
    config += f'\nOUTPUT_DIRECTORY = "{out}"\nWARN_LOGFILE = "{log}"\n'
    result = subprocess.run(["doxygen", "-"], input=config, text=True, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        sys.stdout.write(result.stdout)
        raise SystemExit(f"check-docs: doxygen failed with status {result.returncode}")
    return log


def read_warnings(log):
    """(path or None, line, text) for each warning; continuation lines join their warning."""
    warnings = []
    pattern = re.compile(r"^(.+?):(\d+): (warning|error): (.*)$")
    with open(log, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    for line in lines:
        if not line.strip():
            continue
        m = pattern.match(line)
        if m:
            warnings.append([repo_path(m.group(1)), int(m.group(2)), m.group(4)])
        elif line.startswith(("warning:", "error:")):
            warnings.append([None, 0, line])
        elif warnings:
            warnings[-1][2] += " " + line.strip()
    # Doxygen repeats a warning for every class that inherits the member; keep one.
    unique = []
    for w in warnings:
        if w not in unique:
            unique.append(w)
    return unique


def description(element):
    """The description text of a compounddef, memberdef or enumvalue, whitespace collapsed."""
    parts = []
    for tag in ("briefdescription", "detaileddescription", "inbodydescription"):
        node = element.find(tag)
        if node is not None:
            parts.append(" ".join("".join(node.itertext()).split()))
    return " ".join(p for p in parts if p)


def described(element):
    return bool(description(element))


def location(element):
    loc = element.find("location")
    if loc is None:
        return None, 0
    return repo_path(loc.get("file", "")), int(loc.get("line", "0"))


def undocumented_symbols(xml_dir):
    """(path, line, message) for every public or protected symbol without a description."""
    problems = []
    seen = set()
    index = ET.parse(os.path.join(xml_dir, "index.xml")).getroot()
    for compound in index.findall("compound"):
        if compound.get("kind") not in COMPOUND_KINDS:
            continue
        tree = ET.parse(os.path.join(xml_dir, compound.get("refid") + ".xml"))
        for cdef in tree.getroot().findall("compounddef"):
            kind = cdef.get("kind")
            name = cdef.findtext("compoundname")
            path, line = location(cdef)
            if kind == "file" and not name.endswith(".hpp"):
                continue  # docs/api.md: a page, checked through Doxygen's warnings
            if cdef.get("prot", "public") != "private" and not described(cdef):
                problems.append((path, line, f"{kind} {name} has no description"))
            for section in cdef.findall("sectiondef"):
                # DISTRIBUTE_GROUP_DOC gives every member of a group the first member's
                # description. Only an unnamed group (///@{ ... ///@}) shares one comment on
                # purpose; in a named section (\name) a member needs a comment of its own.
                header = section.findtext("header")
                first = None
                for member in section.findall("memberdef"):
                    if member.get("kind") not in MEMBER_KINDS or member.get("prot") == "private":
                        continue
                    shared = header is not None and first is not None and description(member) == first
                    if first is None:
                        first = description(member)
                    if member.get("id") in seen:
                        continue
                    seen.add(member.get("id"))
                    mpath, mline = location(member)
                    scope = "" if kind == "file" else name + "::"
                    what = f"{member.get('kind')} {scope}{member.findtext('name')}"
                    args = member.findtext("argsstring") or ""
                    if not described(member):
                        problems.append((mpath, mline, f"{what}{args} has no description"))
                    elif shared:
                        problems.append((mpath, mline, f"{what}{args} has no comment of its own (in the section "
                                                       f"\"{header}\" it shows the first member's description)"))
                    for value in member.findall("enumvalue"):
                        if value.get("prot") != "private" and not described(value):
                            problems.append((mpath, mline, f"enum value {scope}{member.findtext('name')}::"
                                                             f"{value.findtext('name')} has no description"))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.environ.get("BUILD", "build"), help="build directory (default: build)")
    args = parser.parse_args()

    if shutil.which("doxygen") is None:
        raise SystemExit("check-docs: doxygen is not installed; tools/install-deps.sh installs it")
    out = os.path.abspath(os.path.join(ROOT, args.build, "docs"))
    log = run_doxygen(out)

    inputs = ["docs/api.md"] + sorted(
        os.path.relpath(os.path.join(d, f), ROOT)
        for d, _, files in os.walk(os.path.join(ROOT, "include", "microtorch"))
        for f in files if f.endswith(".hpp"))
    units = inputs + ["docs/Doxyfile"]
    problems = collections.defaultdict(list)
    for path, line, text in read_warnings(log):
        problems[path if path in units else "docs/Doxyfile"].append((line, "doxygen: " + text))
    for path, line, text in undocumented_symbols(os.path.join(out, "xml")):
        problems[path if path in units else "docs/Doxyfile"].append((line, text))

    failed = 0
    for path in units:
        found = sorted(set(problems.get(path, [])))
        if found:
            failed += 1
            print(f"check-docs: {path}: {len(found)} problem(s):", file=sys.stderr)
            for line, text in found:
                print(f"  {path}:{line}: {text}", file=sys.stderr)
    sys.stderr.flush()
    passed = len(units) - failed
    print(f"check-docs: the reference is in {os.path.relpath(out, ROOT)}/html/index.html")
    print(f"check-docs: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
