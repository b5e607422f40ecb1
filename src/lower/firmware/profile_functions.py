#!/usr/bin/env python3
"""Instructions per function of one unit of work on an emulated Cortex-M.

    src/lower/firmware/profile_functions.py ELF1 PROFILE1 ELF2 PROFILE2 [--top N] [--lines N]

PROFILEk is what insncount.c (beside it) writes with profile=FILE for ELFk, a program that
runs the work k times (the count1.elf / count2.elf of a firmware folder's `make
count-elfs`, or run_firmware_qemu.sh with PROFILE=1). Each instruction address
is given to the function symbol that contains it (arm-none-eabi-nm), and a function's
count in the second program minus its count in the first is what one run of the work
costs in it: start-up, the output check and the semihosting exit cancel out, as in the
whole-program counts. The two programs differ only in a constant, so their symbols are
looked up separately. Prints a table, most instructions first, with each function's share
of the total. With --lines N (ELFs built with -g) it also lists the N source lines that
cost most per run (arm-none-eabi-addr2line), each with its text.
"""
import argparse
import bisect
import collections
import functools
import shutil
import subprocess
import sys


def functions(elf, nm):
    """Sorted (start, end, name) of the code symbols of elf."""
    out = subprocess.run([nm, "-S", "-n", "--defined-only", elf], capture_output=True, text=True, check=True).stdout
    spans = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            start, size = int(parts[0], 16) & ~1, int(parts[1], 16)
            if size:
                spans.append((start, start + size, parts[3]))
    return sorted(spans)


def read_profile(profile):
    """{address: instructions} of one profile file ("address count" lines, hex and decimal)."""
    counts = collections.Counter()
    with open(profile) as f:
        for line in f:
            address, count = line.split()
            counts[int(address, 16)] += int(count)
    return counts


def per_function(elf, profile, nm):
    spans = functions(elf, nm)
    starts = [s for s, _, _ in spans]
    counts = collections.Counter()
    for a, count in read_profile(profile).items():
        i = bisect.bisect_right(starts, a) - 1
        counts[spans[i][2] if i >= 0 and a < spans[i][1] else "(outside any function)"] += count
    return counts


def per_line(elf, profile, addr2line):
    """Instructions per source line ("file:line") of one profile."""
    counts = read_profile(profile)
    addresses = sorted(counts)
    out = subprocess.run([addr2line, "-e", elf], input="\n".join(hex(a) for a in addresses), capture_output=True,
                         text=True, check=True).stdout.splitlines()
    lines = collections.Counter()
    for a, where in zip(addresses, out):
        lines[where.split(" (discriminator")[0]] += counts[a]
    return lines


def per_run(one, two):
    """(key, count) of the second program minus the first, nonzero, most first (ties by key)."""
    diff = {key: two[key] - one[key] for key in set(one) | set(two)}
    return sorted(((k, c) for k, c in diff.items() if c), key=lambda r: (-r[1], str(r[0])))


@functools.lru_cache(maxsize=None)
def source_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []


def source_text(where):
    path, _, number = where.rpartition(":")
    lines = source_lines(path)
    return lines[int(number) - 1].strip() if number.isdigit() and 0 < int(number) <= len(lines) else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("elf1")
    ap.add_argument("profile1")
    ap.add_argument("elf2")
    ap.add_argument("profile2")
    ap.add_argument("--top", type=int, default=25, help="functions to list (default 25)")
    ap.add_argument("--lines", type=int, default=0, help="also list the N costliest source lines (needs -g)")
    ap.add_argument("--nm", default="arm-none-eabi-nm")
    ap.add_argument("--addr2line", default="arm-none-eabi-addr2line")
    args = ap.parse_args()
    if not shutil.which(args.nm):
        sys.exit(f"profile_functions: {args.nm} not found (Debian: apt-get install binutils-arm-none-eabi)")
    rows = per_run(per_function(args.elf1, args.profile1, args.nm), per_function(args.elf2, args.profile2, args.nm))
    total = sum(c for _, c in rows)
    print(f"| function | instructions per run | share |")
    print(f"|---|---:|---:|")
    for name, count in rows[:args.top]:
        print(f"| {name} | {count:,} | {100.0 * count / total:.1f}% |")
    rest = sum(c for _, c in rows[args.top:])
    if rest:
        print(f"| ({len(rows) - args.top} more) | {rest:,} | {100.0 * rest / total:.1f}% |")
    print(f"| total | {total:,} | 100% |")
    if args.lines:
        rows = per_run(per_line(args.elf1, args.profile1, args.addr2line),
                       per_line(args.elf2, args.profile2, args.addr2line))
        print()
        print("| source line | instructions per run | share | text |")
        print("|---|---:|---:|---|")
        for where, count in rows[:args.lines]:
            text = source_text(where).replace("|", "\\|")[:100]
            print(f"| {where.rpartition('/')[2]} | {count:,} | {100.0 * count / total:.1f}% | `{text}` |")


if __name__ == "__main__":
    main()
