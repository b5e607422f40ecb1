#!/usr/bin/python3
"""`make bench`'s timings: microtorch and PyTorch in one process, back to back.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 tools/bench_paired.py --build build [--rounds 15]

On a shared host the machine's speed drifts by tens of percent within seconds (a 1024^3
sgemm loop here swings between about 80 and 150 GFLOP/s), so medians of separate runs,
minutes apart, do not compare two libraries well. This harness loads microtorch's steps
(benchmarks/steps.hpp, through <build>/benchmarks/libmicrotorch-bench-steps.so) next to
PyTorch's (tools/bench_torch.py, same names) in one Python process; both use the same
OpenBLAS. For each step and thread count it takes --rounds rounds; a round times one sample
of the reference cblas_sgemm 1024 x 1024 x 1024, the microtorch step, the sgemm again, and
the PyTorch step (before the three in odd rounds, after them in even ones). A sample is as
many runs as fill --sample-time; a row takes --rounds rounds, or fewer (5 at least) when
they would take longer than --row-seconds (the long sequences). The table shows each
side's best round (its shortest time: what other processes on a shared machine add only
ever lengthens a round), and from those:

    x faster      = PyTorch's time / microtorch's time
    GFLOP/s       = the step's GEMM FLOPs / microtorch's time
    sgemm GFLOP/s = sgemm FLOPs / the sgemm's time (a round's: the mean of its two samples)
    % sgemm       = GFLOP/s / sgemm GFLOP/s

plus the lowest and highest x faster of a single round. The sgemm runs at the row's
thread count. The microtorch side is timed inside C++ (no Python
call in a sample). Without torch the PyTorch columns stay empty.

PyTorch at n > 1 threads: torch.set_num_threads(n) sets its OpenMP threads, and Debian's
build leaves OpenBLAS's thread count alone, so PyTorch is timed twice, with OpenBLAS at n
threads and at 1 (its OpenMP loops calling single-thread GEMMs), and the faster of the two
is its time (marked * when that is OpenBLAS at 1 thread). At 2 threads on 2 cores the two
pools oversubscribe the cores on batched attention (8x64x64x4 forward+backward: 15.9 ms
against 2.8 ms with OpenBLAS at 1 thread), while a lone matmul wants OpenBLAS's threads.
microtorch keeps OpenBLAS at one thread a call and splits its products over its own threads;
after a sample that ran OpenBLAS's threads (the sgemm or PyTorch at n > 1), OpenBLAS's
workers spin for about 0.1 s (2^28 TSC ticks, its THREAD_TIMEOUT) before they sleep, so a
microtorch sample at n > 1 starts SPIN_SETTLE seconds after the previous sample.
"""
import argparse
import ctypes
import json
import math
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch

    import bench_torch
except ImportError:
    torch = None

SGEMM_N = 1024
SPIN_SETTLE = 0.2


def load(build):
    path = os.path.join(build, "benchmarks", "libmicrotorch-bench-steps.so")
    if not os.path.exists(path):
        sys.exit(f"bench_paired: {path} is missing; build with benchmarks enabled (libbenchmark-dev)")
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.mtb_step_new.restype = ctypes.c_void_p
    lib.mtb_step_new.argtypes = [ctypes.c_char_p]
    lib.mtb_step_free.argtypes = [ctypes.c_void_p]
    lib.mtb_step_seconds.restype = ctypes.c_double
    lib.mtb_step_seconds.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.mtb_step_flops.restype = ctypes.c_double
    lib.mtb_step_flops.argtypes = [ctypes.c_char_p]
    lib.mtb_step_names.restype = ctypes.c_char_p
    lib.mtb_sgemm_seconds.restype = ctypes.c_double
    lib.mtb_sgemm_seconds.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.mtb_set_threads.argtypes = [ctypes.c_int]
    lib.mtb_set_blas_threads.argtypes = [ctypes.c_int]
    lib.mtb_blas_core.restype = ctypes.c_char_p
    return lib


def timed_python(fn, runs):
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    return time.perf_counter() - t0


def measure(lib, name, threads, torch_fn, args):
    """One table row: each side's best round."""
    handle = lib.mtb_step_new(name.encode())
    if not handle:
        sys.exit(f"bench_paired: the steps library does not know {name}")

    def microtorch_side(fn):  # microtorch's setting before each sample
        def sample(runs):
            lib.mtb_set_threads(threads)
            if threads > 1:
                time.sleep(SPIN_SETTLE)
            return fn(runs)
        return sample

    def sgemm_side(runs):  # OpenBLAS on its own threads
        lib.mtb_set_blas_threads(threads)
        return lib.mtb_sgemm_seconds(SGEMM_N, runs)

    def torch_side(blas_threads):
        def sample(runs):
            lib.mtb_set_blas_threads(blas_threads)
            return timed_python(torch_fn, runs)
        return sample

    samplers = {"mt": microtorch_side(lambda runs: lib.mtb_step_seconds(handle, runs)),
                "sgemm": sgemm_side}
    torch_keys = []
    if torch_fn is not None:
        torch_keys = ["pt"] + (["pt_blas1"] if threads > 1 else [])
        samplers["pt"] = torch_side(threads)
        if threads > 1:
            samplers["pt_blas1"] = torch_side(1)
    try:
        runs, round_seconds = {}, 0.0
        for key, sample in samplers.items():  # warm-up, then size the samples
            deadline = time.perf_counter() + args.sample_time
            while time.perf_counter() < deadline:
                sample(1)
            once = max(sample(1), 1e-7)
            runs[key] = max(1, math.ceil(args.sample_time / once))
            round_seconds += runs[key] * once * (2 if key == "sgemm" else 1)
        rounds = []
        for r in range(max(5, min(args.rounds, int(args.row_seconds / round_seconds)))):
            order = ["sgemm", "mt", "sgemm"]
            order = torch_keys + order if r % 2 else order + torch_keys
            t = {}
            for key in order:
                t.setdefault(key, []).append(samplers[key](runs[key]) / runs[key])
            rounds.append({k: statistics.mean(v) for k, v in t.items()})
    finally:
        lib.mtb_set_threads(threads)
        lib.mtb_step_free(handle)
    kind, _, shape = name.partition("/")
    def best(key):
        return min(t[key] for t in rounds)

    row = {"benchmark": kind, "shape": shape, "threads": threads, "microtorch_us": best("mt") * 1e6,
           "rounds": len(rounds)}
    flops = lib.mtb_step_flops(name.encode())
    if flops > 0:
        row["gflops"] = flops / best("mt") / 1e9
        row["sgemm_gflops"] = 2.0 * SGEMM_N ** 3 / best("sgemm") / 1e9
        row["sgemm_fraction"] = row["gflops"] / row["sgemm_gflops"]
    if torch_keys:
        pt = min(torch_keys, key=best)
        ratios = [t[pt] / t["mt"] for t in rounds]
        row.update(torch_us=best(pt) * 1e6, torch_blas_threads=1 if pt == "pt_blas1" else threads,
                   x_faster=best(pt) / best("mt"), x_faster_min=min(ratios), x_faster_max=max(ratios))
    return row


def fmt_us(v):
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def table(rows):
    lines = ["| benchmark | shape | threads | microtorch µs | PyTorch µs | x faster | x faster, lowest – highest round "
             "| GFLOP/s | sgemm GFLOP/s | % sgemm |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        frac = f"{100 * r['sgemm_fraction']:.0f}%" if "sgemm_fraction" in r else ""
        rate = f"{r['gflops']:.0f} | {r['sgemm_gflops']:.0f}" if "gflops" in r else " | "
        if "torch_us" in r:
            star = "*" if r["torch_blas_threads"] != r["threads"] else ""
            pt, ratio = fmt_us(r["torch_us"]) + star, f"{r['x_faster']:.2f}"
            spread = f"{r['x_faster_min']:.2f} – {r['x_faster_max']:.2f}"
        else:
            pt = ratio = spread = "—"
        lines.append(f"| {r['benchmark']} | {r['shape']} | {r['threads']} | {fmt_us(r['microtorch_us'])} | {pt} | "
                     f"{ratio} | {spread} | {rate} | {frac} |")
    if any(r.get("torch_blas_threads", r["threads"]) != r["threads"] for r in rows):
        lines += ["", "\\* PyTorch's faster setting there: OpenBLAS at 1 thread under its OpenMP threads."]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--row-seconds", type=float, default=40.0,
                   help="fewer rounds (5 at least) where --rounds would take longer than this")
    p.add_argument("--sample-time", type=float, default=0.02, help="seconds each sample lasts at least")
    p.add_argument("--filter", default="", help="only steps whose name matches this regular expression")
    p.add_argument("--out", help="also write the rows as JSON here")
    args = p.parse_args()
    if args.rounds < 5:
        sys.exit("bench_paired: --rounds must be at least 5 (the best of several rounds is the result)")
    lib = load(args.build)
    names = [n for n in lib.mtb_step_names().decode().split("\n") if re.search(args.filter, n)]
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        lib.mtb_set_threads(threads)
        torch_steps = {}
        if torch is not None:
            torch.set_num_threads(threads)
            torch_steps = bench_torch.steps()
        for name in names:
            print(f"bench: {name}, {threads} thread(s), {args.rounds} rounds", file=sys.stderr)
            rows.append(measure(lib, name, threads, torch_steps.get(name), args))
        del torch_steps
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"blas_core": lib.mtb_blas_core().decode(), "rows": rows}, f, indent=1)
    print(table(rows))


if __name__ == "__main__":
    main()
