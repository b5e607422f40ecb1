#!/usr/bin/python3
"""`make bench`: run microtorch-bench and the PyTorch baseline, print one table.

    /usr/bin/python3 tools/bench_table.py --build build [--min-time 0.1] [--repetitions 5]

Timings are medians over --repetitions runs of at least --min-time seconds each, wall
clock, for 1 and 2 threads (microtorch: set_num_threads(t); PyTorch: torch.set_num_threads(t)
with OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = t). "x faster" is PyTorch's time over
microtorch's. "% sgemm" is the op's GEMM FLOPs / the cblas_sgemm 1024^3 FLOP rate measured
in the same run at the same thread count / microtorch's time. The last two columns repeat
both from CPU time (single thread only): on a busy machine they show the code's speed
without the time the process spent waiting for a core. Peak memory of MultiheadAttention
forward+backward (three runs after a warm-up, so that microtorch's block cache is counted as
it stands in a training loop) is measured in a fresh process per shape and library, with
one method for both (benchmarks/peak_memory.hpp). Without torch (python3-torch) the
table has the microtorch columns only. The table also goes to <build>/bench/table.md.

Last, the goal rows (MultiheadAttention forward+backward and inference, the Iris training
step; one thread) are timed again by tools/bench_paired.py: microtorch and PyTorch in one
process, one sample of each and of the reference sgemm after the other, --rounds rounds.
The machine's speed drifts by tens of percent within seconds on a shared host, so that
table, not the medians above, is the one to judge speed-ups and % sgemm by.

OpenBLAS 0.3.21 (Debian 12) does not know CPUs newer than itself and falls back to its
Prescott (SSE3) kernels, about 5x slower than its AVX-512 ones; PyTorch loads the same
OpenBLAS. When that happens and OPENBLAS_CORETYPE is not set, the harness sets it (SkylakeX
on AVX-512 CPUs, Haswell on AVX2 ones) for both libraries and says so under the table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = ["1x16x32x2", "8x64x64x4", "8x128x256x8", "4x512x512x8"]  # benchmarks/shapes.hpp
THREADS = [1, 2]
# Fixed, so that freed buffers go back to the system in both processes (glibc otherwise
# raises its mmap threshold after the first large free and keeps later buffers in the heap).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


BASE_ENV = {}  # OPENBLAS_CORETYPE when the harness has to choose it


def run(cmd, env=None, capture=True):
    full_env = dict(os.environ, **BASE_ENV, **(env or {}))
    return subprocess.run(cmd, env=full_env, check=True, text=True,
                          stdout=subprocess.PIPE if capture else None).stdout


def torch_env(threads):
    return {"OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def choose_blas_core(exe):
    """The OpenBLAS kernel set to use, and a line for the table saying how it was chosen."""
    detected = run([exe, "--blas-core"]).strip()
    if "OPENBLAS_CORETYPE" in os.environ:
        return f"OpenBLAS kernels: {detected} (OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} from the environment)"
    with open("/proc/cpuinfo") as f:
        flags = next((line.split() for line in f if line.startswith("flags")), [])
    core = "SkylakeX" if "avx512f" in flags else "Haswell" if "avx2" in flags else None
    if detected.lower() not in ("prescott", "core2", "nehalem", "unknown") or core is None:
        return f"OpenBLAS kernels: {detected} (detected)"
    BASE_ENV["OPENBLAS_CORETYPE"] = core
    return (f"OpenBLAS kernels: {core} (OPENBLAS_CORETYPE={core} set for both libraries: this OpenBLAS "
            f"detects the CPU as {detected})")


def have_torch():
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


def microtorch_times(exe, out_dir, args):
    out = os.path.join(out_dir, "microtorch.json")
    cmd = [exe, f"--benchmark_repetitions={args.repetitions}", "--benchmark_report_aggregates_only=true",
           f"--benchmark_min_time={args.min_time}", f"--benchmark_min_warmup_time={args.min_time / 2}",
           f"--benchmark_out={out}", "--benchmark_out_format=json"]
    if args.filter:
        cmd.append(f"--benchmark_filter={args.filter}")
    print(f"bench: microtorch ({args.repetitions} repetitions of each benchmark, 1 and 2 threads)", file=sys.stderr)
    if not args.reuse:
        run(cmd)  # the console report is long; the JSON has everything
    with open(out) as f:
        data = json.load(f)
    times, cpu, flops = {}, {}, {}
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].removesuffix("/real_time")
        times[name] = b["real_time"] * scale[b["time_unit"]]
        cpu[name] = b["cpu_time"] * scale[b["time_unit"]]
        if "flop" in b:
            flops[name] = b["flop"]
    return times, cpu, flops


def torch_times(out_dir, args):
    times, cpu = {}, {}
    for t in THREADS:
        out = os.path.join(out_dir, f"torch-{t}.json")
        cmd = [sys.executable, os.path.join(ROOT, "tools", "bench_torch.py"), "--threads", str(t),
               "--min-time", str(args.min_time), "--out", out]
        if args.filter:
            cmd += ["--filter", args.filter]
        if not args.reuse:
            print(f"bench: PyTorch, {t} thread(s)", file=sys.stderr)
            run(cmd, env=torch_env(t), capture=False)
        with open(out) as f:
            data = json.load(f)
        times.update(data["median_us"])
        cpu.update(data.get("median_cpu_us", {}))
    return times, cpu


def peak(cmd, env, runs=3):
    return statistics.median(int(run(cmd, env=dict(MALLOC_ENV, **env)).strip()) for _ in range(runs))


def peaks(exe, with_torch):
    rows = []
    for i, shape in enumerate(SHAPES):
        mt = peak([exe, f"--peak-memory={i}"], {"MICROTORCH_NUM_THREADS": "1"})
        pt = peak([sys.executable, os.path.join(ROOT, "tools", "bench_torch.py"), "--peak-memory", str(i)],
                  torch_env(1)) if with_torch else None
        rows.append((shape, mt, pt))
    return rows


def fmt_us(v):
    return "—" if v is None else (f"{v:,.1f}" if v < 100 else f"{v:,.0f}")


def table(times, cpu, flops, torch, torch_cpu, mem):
    lines = ["| benchmark | shape | threads | microtorch µs | PyTorch µs | x faster | % sgemm "
             "| x faster (CPU time) | % sgemm (CPU time) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    kinds = list(dict.fromkeys(n.split("/")[0] for n in times))
    shapes = list(dict.fromkeys(n.split("/")[1] for n in times))

    def order(name):
        kind, shape, threads = name.split("/")
        return kinds.index(kind), shapes.index(shape), threads

    def sgemm_fraction(name, t, clock):
        ref = f"sgemm/1024/threads:{t}"
        if name not in flops or ref not in clock or clock[ref] <= 0:
            return ""
        return f"{100 * flops[name] / (flops[ref] / clock[ref]) / clock[name]:.0f}%"

    for name in sorted(times, key=order):
        us = times[name]
        kind, shape, threads = name.split("/")
        t = int(threads.split(":")[1])
        pt = torch.get(name)
        ratio = f"{pt / us:.2f}" if pt else "—"
        # CPU time only means something on one thread (the benchmark thread is all the work)
        cpu_ratio = f"{torch_cpu[name] / cpu[name]:.2f}" if t == 1 and torch_cpu.get(name) else "—"
        cpu_frac = sgemm_fraction(name, t, cpu) if t == 1 else "—"
        lines.append(f"| {kind} | {shape} | {t} | {fmt_us(us)} | {fmt_us(pt)} | {ratio} | "
                     f"{sgemm_fraction(name, t, times)} | {cpu_ratio} | {cpu_frac if name in flops else ''} |")
    lines += ["", "Peak memory of MultiheadAttention forward+backward, three runs after a warm-up (1 thread):", "",
              "| shape | microtorch MiB | PyTorch MiB | microtorch / PyTorch |", "|---|---:|---:|---:|"]
    for shape, mt, pt in mem:
        ratio = f"{mt / pt:.2f}" if pt else "—"
        pt_s = f"{pt / 2**20:.2f}" if pt is not None else "—"
        lines.append(f"| {shape} | {mt / 2**20:.2f} | {pt_s} | {ratio} |")
    return "\n".join(lines)


def paired(out_dir, args):
    """The goal rows, microtorch and PyTorch back to back in one process (tools/bench_paired.py)."""
    out = os.path.join(out_dir, "paired.json")
    cmd = [sys.executable, os.path.join(ROOT, "tools", "bench_paired.py"), "--build", args.build,
           "--rounds", str(args.rounds), "--out", out]
    if args.filter:
        cmd += ["--filter", args.filter]
    text = run(cmd, env=torch_env(1))
    return (f"Goal rows, one thread, microtorch and PyTorch timed back to back in one process "
            f"(tools/bench_paired.py, medians of {args.rounds} rounds):\n\n{text.strip()}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--min-time", type=float, default=0.1)
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--rounds", type=int, default=15, help="rounds of the paired goal rows (0: none)")
    p.add_argument("--reuse", action="store_true", help="print the table from the JSON of the last run (no timing)")
    p.add_argument("--filter", default="", help="only benchmarks matching (regex for microtorch, substring for torch)")
    args = p.parse_args()
    exe = os.path.join(args.build, "benchmarks", "microtorch-bench")
    if not os.path.exists(exe):
        sys.exit(f"bench: {exe} is missing; build with Google Benchmark installed (libbenchmark-dev)")
    out_dir = os.path.join(args.build, "bench")
    os.makedirs(out_dir, exist_ok=True)
    blas_line = choose_blas_core(exe)
    print(f"bench: {blas_line}", file=sys.stderr)
    with_torch = have_torch()
    if not with_torch:
        print("bench: torch is not importable by this python (install python3-torch); microtorch columns only",
              file=sys.stderr)
    times, cpu, flops = microtorch_times(exe, out_dir, args)
    torch, torch_cpu = torch_times(out_dir, args) if with_torch else ({}, {})
    print("bench: peak memory", file=sys.stderr)
    mem = peaks(exe, with_torch)
    text = table(times, cpu, flops, torch, torch_cpu, mem)
    if with_torch and args.rounds > 0 and not args.reuse:
        print("bench: goal rows, paired with PyTorch", file=sys.stderr)
        text += "\n\n" + paired(out_dir, args)
    load = os.getloadavg()
    text += f"\n\n{blas_line}"
    text += f"\nLoad average while measuring (1/5/15 min at the end): {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}\n"
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
