#!/usr/bin/python3
"""The goal rows of `make bench`, microtorch and PyTorch timed in one process, back to back.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 tools/bench_paired.py --build build [--rounds 15]

On a shared host the machine's speed drifts by tens of percent within seconds (a 1024^3
sgemm loop here swings between about 80 and 150 GFLOP/s), so medians of separate runs,
minutes apart, do not compare two libraries well. This harness loads microtorch's steps
(benchmarks/steps.hpp, through <build>/benchmarks/libmicrotorch-bench-steps.so) next to
PyTorch in one Python process (both use the same OpenBLAS, one thread) and, in every
round, times one sample of each of: the microtorch step, the PyTorch step (the same
model, input and loss, tools/bench_torch.py) and the reference cblas_sgemm 1024 x 1024 x
1024, in an order that rotates from round to round. A sample is as many runs as fill
--sample-time. Per round it forms

    x faster  = PyTorch's time / microtorch's time
    % sgemm   = the step's GEMM FLOPs / (sgemm FLOPs / sgemm time) / microtorch's time

and prints the medians over the rounds (and the lowest and highest round's x faster, to
show the spread). The microtorch side is timed inside C++ (no Python call in the sample).
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch  # noqa: E402  (the PyTorch steps)

import torch  # noqa: E402

SGEMM_N = 1024
ROWS = [("mha_fwd_bwd", s) for s in bench_torch.SHAPES] + [("mha_infer", s) for s in bench_torch.SHAPES] + [
    ("iris_train_step", None)]


def gemm_flops(kind, s):
    """benchmarks/shapes.hpp's count: input projection, q k^T and P v, output projection."""
    if s is None:
        return 0.0
    n, l, e, _ = s
    forward = 2 * n * l * e * 3 * e + 4 * n * l * l * e + 2 * n * l * e * e
    return 3 * forward if kind == "mha_fwd_bwd" else forward


def load(build):
    path = os.path.join(build, "benchmarks", "libmicrotorch-bench-steps.so")
    if not os.path.exists(path):
        sys.exit(f"bench_paired: {path} is missing; build with benchmarks enabled (libbenchmark-dev)")
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.mtb_step_new.restype = ctypes.c_void_p
    lib.mtb_step_new.argtypes = [ctypes.c_char_p] + [ctypes.c_long] * 4
    lib.mtb_step_free.argtypes = [ctypes.c_void_p]
    lib.mtb_step_seconds.restype = ctypes.c_double
    lib.mtb_step_seconds.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.mtb_sgemm_seconds.restype = ctypes.c_double
    lib.mtb_sgemm_seconds.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.mtb_set_threads.argtypes = [ctypes.c_int]
    lib.mtb_blas_core.restype = ctypes.c_char_p
    return lib


def torch_step(kind, s):
    if kind == "mha_fwd_bwd":
        return bench_torch.mha_fwd_bwd(s)
    if kind == "mha_infer":
        return bench_torch.mha_infer(s)
    return bench_torch.iris_train_step()


def timed_python(fn, runs):
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    return time.perf_counter() - t0


def runs_for(seconds_once, sample_time):
    return max(1, math.ceil(sample_time / max(seconds_once, 1e-7)))


def measure_row(lib, kind, s, args):
    shape = s or (0, 0, 0, 0)
    handle = lib.mtb_step_new(kind.encode(), *shape)
    if not handle:
        sys.exit(f"bench_paired: the steps library does not know {kind}")
    try:
        pt = torch_step(kind, s)
        samplers = {
            "mt": lambda runs: lib.mtb_step_seconds(handle, runs),
            "pt": lambda runs: timed_python(pt, runs),
            "sgemm": lambda runs: lib.mtb_sgemm_seconds(SGEMM_N, runs),
        }
        runs = {}
        for name, sample in samplers.items():  # warm-up, then size the samples
            deadline = time.perf_counter() + args.sample_time
            while time.perf_counter() < deadline:
                sample(1)
            runs[name] = runs_for(sample(1), args.sample_time)
        order = list(samplers)
        per_round = []
        for r in range(args.rounds):
            t = {}
            for name in order[r % 3:] + order[:r % 3]:
                t[name] = samplers[name](runs[name]) / runs[name]
            per_round.append(t)
    finally:
        lib.mtb_step_free(handle)
    flops = gemm_flops(kind, s)
    ratios = [t["pt"] / t["mt"] for t in per_round]
    row = {
        "benchmark": kind,
        "shape": "x".join(map(str, s)) if s else "batch:16",
        "microtorch_us": statistics.median(t["mt"] for t in per_round) * 1e6,
        "torch_us": statistics.median(t["pt"] for t in per_round) * 1e6,
        "x_faster": statistics.median(ratios),
        "x_faster_min": min(ratios),
        "x_faster_max": max(ratios),
        "rounds": args.rounds,
    }
    if flops:
        sgemm_flops = 2.0 * SGEMM_N ** 3
        row["sgemm_fraction"] = statistics.median(flops / (sgemm_flops / t["sgemm"]) / t["mt"] for t in per_round)
    return row


def fmt_us(v):
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def table(rows):
    lines = ["| benchmark | shape | microtorch µs | PyTorch µs | x faster (median) | x faster (lowest – highest round) "
             "| % sgemm |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        frac = f"{100 * r['sgemm_fraction']:.0f}%" if "sgemm_fraction" in r else ""
        lines.append(f"| {r['benchmark']} | {r['shape']} | {fmt_us(r['microtorch_us'])} | {fmt_us(r['torch_us'])} | "
                     f"{r['x_faster']:.2f} | {r['x_faster_min']:.2f} – {r['x_faster_max']:.2f} | {frac} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--sample-time", type=float, default=0.02, help="seconds each sample lasts at least")
    p.add_argument("--filter", default="", help="only rows whose 'benchmark/shape' contains this")
    p.add_argument("--out", help="also write the rows as JSON here")
    args = p.parse_args()
    if args.rounds < 5:
        sys.exit("bench_paired: --rounds must be at least 5 (the medians are the result)")
    lib = load(args.build)
    lib.mtb_set_threads(1)
    torch.set_num_threads(1)
    rows = []
    for kind, s in ROWS:
        name = f"{kind}/{'x'.join(map(str, s)) if s else 'batch:16'}"
        if args.filter not in name:
            continue
        print(f"bench: paired {name} ({args.rounds} rounds)", file=sys.stderr)
        rows.append(measure_row(lib, kind, s, args))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"blas_core": lib.mtb_blas_core().decode(), "rows": rows}, f, indent=1)
    print(table(rows))


if __name__ == "__main__":
    main()
