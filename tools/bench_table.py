#!/usr/bin/python3
"""`make bench`: microtorch next to PyTorch, one table, plus peak memory.

    /usr/bin/python3 tools/bench_table.py --build build [--rounds 15] [--filter mha_]

The timings come from tools/bench_paired.py: every step of benchmarks/steps.hpp (matmul,
softmax, MultiheadAttention forward / forward+backward / inference, the attention core's
forward+backward, the Iris transformer's training step, the convolution chains) at 1 and 2 threads, microtorch and
forward+backward, the Iris transformer's training step, the decoder-only language model's
training step and its decoding with a KV cache) at 1 and 2 threads, microtorch and
PyTorch timed back to back in one process with the reference sgemm between them; each
side's best round. "x faster" is PyTorch's time over microtorch's; "% sgemm" is the step's
GEMM FLOP rate over the cblas_sgemm 1024^3 FLOP rate measured beside it.

Both libraries run as they come: PyTorch's CPU tensors live in glibc malloc, which hands
large freed blocks back to the kernel, so that every step pays page faults again (several
milliseconds per step on a VM, and most of PyTorch's run-to-run spread); microtorch keeps
them in its block cache (include/microtorch/memory.hpp). A second pass therefore times the
goal rows (1 thread) again with glibc told to keep freed memory (MALLOC_ENV_KEEP below, for
the whole process, so for both libraries): PyTorch without its page faults, the harder
comparison. The goals table under the results says, for both passes, which goals hold.

Under the goals, the long sequence's steps against the roofline: one core's FMA rate on the
attention kernels' vectors (microtorch-bench --fma-peak), the FLOPs each step executes (the
backward's recomputed scores included), the least time those take at that rate, and the most
"x faster" that time would give against PyTorch's.

Peak memory of MultiheadAttention forward+backward (three runs after a warm-up, so that
microtorch's block cache is counted as it stands in a training loop) is measured in a fresh
process per shape and library, with one method for both (benchmarks/peak_memory.hpp). Without
torch (python3-torch) the PyTorch columns stay empty. Everything also goes to
<build>/bench/table.md, and the rows to <build>/bench/*.json; docs/benchmarks.md publishes a
run made on a quiet machine, with this method written out.

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
SHAPES = ["1x16x32x2", "8x64x64x4", "8x128x256x8", "4x512x512x8", "1x1024x512x8-noweights",
          "1x2048x512x8-noweights", "1x4096x512x8-noweights"]  # benchmarks/shapes.hpp
LONG = "1x4096x512x8-noweights"
# One thread for OpenBLAS and OpenMP at start-up; both libraries raise it through their own
# set_num_threads for the 2-thread rows.
ONE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# Fixed, so that freed buffers go back to the system in both processes (glibc otherwise
# raises its mmap threshold after the first large free and keeps later buffers in the heap).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}
# glibc keeps every freed block (no mmap for large ones, no trimming of the heap).
MALLOC_ENV_KEEP = {"MALLOC_MMAP_THRESHOLD_": str(2**32), "MALLOC_TRIM_THRESHOLD_": str(2**32),
                   "MALLOC_TOP_PAD_": str(2**29)}
GOAL_FILTER = r"^(mha_(fwd_bwd|infer)/|mha_fwd/1x4096|sensor_|dscnn_pair_|decoder_)"
# (kind, shape, x faster at least) at 1 thread.
SPEED_GOALS = [("mha_fwd_bwd", "1x16x32x2", 5.0), ("mha_fwd_bwd", "8x64x64x4", 2.0),
               ("mha_fwd_bwd", "8x128x256x8", 1.2), ("mha_fwd_bwd", "4x512x512x8", 1.5),
               ("mha_infer", "1x16x32x2", 5.0), ("mha_infer", "8x64x64x4", 2.0),
               ("mha_infer", "8x128x256x8", 1.2), ("mha_infer", "4x512x512x8", 1.2),
               ("mha_fwd_bwd", LONG, 2.5), ("mha_fwd", LONG, 2.0),
               ("sensor_fwd", "32x3x128", 1.5), ("sensor_fwd_bwd", "32x3x128", 1.5),
               ("dscnn_pair_fwd", "32x64x25x5", 1.0), ("dscnn_pair_fwd_bwd", "32x64x25x5", 1.0),
               # the decoder-only language model (benchmarks/decoder_model.hpp): an AdamW
               # step on 16 x 128 tokens, and 128 tokens decoded through the KV cache
               ("decoder_train_step", "16x128", 1.5), ("decoder_decode", "1x128", 3.0)]
# The attention core's GEMM rate over sgemm's at 1 thread, head dim 64, S >= 512.
SGEMM_GOALS = [("attn_fwd_bwd", shape, 0.80) for shape in SHAPES[3:]]
# microtorch's 1-thread time over its 2-thread time.
THREAD_GOALS = [("mha_fwd_bwd", "4x512x512x8", 1.8), ("mha_fwd_bwd", LONG, 1.8)]
PEAK_LONG_GOAL = 0.25  # peak memory at LONG, a fraction of PyTorch's
PAGE = 4096
RESOLVED = 64 * 1024

BASE_ENV = {}  # OPENBLAS_CORETYPE when the harness has to choose it


def run(cmd, env=None):
    full_env = dict(os.environ, **BASE_ENV, **(env or {}))
    return subprocess.run(cmd, env=full_env, check=True, text=True, stdout=subprocess.PIPE).stdout


def choose_blas_core(exe):
    """The OpenBLAS kernel set to use, and a line for the table saying how it was chosen."""
    detected = run([exe, "--blas-core"]).strip()
    if "OPENBLAS_CORETYPE" in os.environ:
        own = subprocess.run([exe, "--blas-core"], env={k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"},
                             check=True, text=True, stdout=subprocess.PIPE).stdout.strip()
        return (f"OpenBLAS kernels: {detected} (OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} from the "
                f"environment; without it OpenBLAS would choose {own})")
    with open("/proc/cpuinfo") as f:
        flags = next((line.split() for line in f if line.startswith("flags")), [])
    core = "SkylakeX" if "avx512f" in flags else "Haswell" if "avx2" in flags else None
    if detected.lower() not in ("prescott", "core2", "nehalem", "unknown") or core is None:
        return f"OpenBLAS kernels: {detected} (detected)"
    BASE_ENV["OPENBLAS_CORETYPE"] = core
    return (f"OpenBLAS kernels: {core} (OPENBLAS_CORETYPE={core} set for both libraries: this OpenBLAS "
            f"detects the CPU as {detected})")


def machine_lines(exe):
    """The CPU the run is on, the instruction set microtorch's attention kernels ran, and a
    line for the table naming both."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    cpu = (f"CPU: {info.get('model name', 'unknown')} (family {info.get('cpu family', '?')}, model "
           f"{info.get('model', '?')}), {os.cpu_count()} logical cores")
    isa = run([exe, "--cpu-capability"]).strip()
    cap = os.environ.get("MICROTORCH_ISA")
    return cpu, isa, (f"microtorch attention kernels: {isa} (its own register tiles, src/ops/gemm_tiles.hpp"
                      f"{f'; MICROTORCH_ISA={cap} from the environment' if cap else ''})")


def have_torch():
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


def peak(cmd, runs=3):
    return statistics.median(int(run(cmd, env=dict(MALLOC_ENV, **ONE_THREAD_ENV)).strip()) for _ in range(runs))


def peak_table(exe, with_torch):
    """The peak memory table, and (microtorch, PyTorch or None) bytes per shape."""
    peaks = []
    lines = ["Peak memory of MultiheadAttention forward+backward, three runs after a warm-up (1 thread; resident "
             "pages: one 4 KiB page is the resolution, and below 64 KiB heap placement, not working set, decides):", "",
             "| shape | microtorch KiB | PyTorch KiB | microtorch / PyTorch |", "|---|---:|---:|---:|"]
    for i, shape in enumerate(SHAPES):
        mt = peak([exe, f"--peak-memory={i}"])
        pt = peak([sys.executable, os.path.join(ROOT, "tools", "bench_torch.py"), "--peak-memory", str(i)]) \
            if with_torch else None
        ratio = f"{mt / pt:.2f}" if pt else "—"
        pt_s = f"{pt / 1024:,.0f}" if pt is not None else "—"
        lines.append(f"| {shape} | {mt / 1024:,.0f} | {pt_s} | {ratio} |")
        peaks.append((mt, pt))
    return "\n".join(lines), peaks


def paired(args, out_json, env, filter_, threads):
    """Runs tools/bench_paired.py; returns its table and its rows."""
    table = run([sys.executable, os.path.join(ROOT, "tools", "bench_paired.py"), "--build", args.build,
                 "--rounds", str(args.rounds), "--filter", filter_, "--threads", threads, "--out", out_json],
                env=env)
    with open(out_json) as f:
        return table.strip(), json.load(f)["rows"]


def find(rows, kind, shape, threads=1):
    return next((r for r in rows if r["benchmark"] == kind and r["shape"] == shape and r["threads"] == threads), None)


def executed_flops(kind, shape):
    """FLOPs a step without weights executes (x has no gradient): the projections 8 N L E^2
    forward (in 2 N L E 3E, out 2 N L E^2) and 10 N L E^2 backward (the output projection's
    two products, the input projection's weight gradient), the attention core 4 N L^2 E forward
    (q k^T, P v) and 10 N L^2 E backward (FlashAttention-2's five products: the scores again,
    dP = dO v^T, dv = P^T dO, dq = dS k, dk = dS^T q). None for steps with weights, whose
    backward may read kept weights instead."""
    if not shape.endswith("-noweights"):
        return None
    n, l, e, _ = (float(x) for x in shape.split("-")[0].split("x"))
    core_fwd, core_bwd, proj_fwd, proj_bwd = 4 * n * l * l * e, 10 * n * l * l * e, 8 * n * l * e * e, 10 * n * l * e * e
    return {"mha_fwd": proj_fwd + core_fwd, "mha_fwd_bwd": proj_fwd + proj_bwd + core_fwd + core_bwd,
            "attn_fwd_bwd": core_fwd + core_bwd}.get(kind)


def roofline_table(rows, peak_gflops, isa):
    """The long sequence's steps against one core's FMA peak: the least time their executed
    FLOPs take at that rate, and the most "x faster" that allows against PyTorch's time."""
    lines = [f"The long sequence against the FMA peak of one core: {peak_gflops:.1f} GFLOP/s on {isa} vectors "
             f"(microtorch-bench --fma-peak: 12 independent FMA chains), executed FLOPs (the backward's recomputed "
             f"scores included), 1 thread:", "",
             "| benchmark | shape | GFLOP executed | ms at the FMA peak | microtorch ms | % of FMA peak "
             "| PyTorch ms | x faster at most |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for kind in ("mha_fwd", "mha_fwd_bwd", "attn_fwd_bwd"):
        r, flops = find(rows, kind, LONG), executed_flops(kind, LONG)
        if r is None or flops is None:
            continue
        least_ms = flops / peak_gflops / 1e6
        torch = f"{r['torch_us'] / 1e3:,.0f} | {r['torch_us'] / 1e3 / least_ms:.2f}" if "torch_us" in r else "— | —"
        lines.append(f"| {kind} | {LONG} | {flops / 1e9:.1f} | {least_ms:,.0f} | {r['microtorch_us'] / 1e3:,.0f} "
                     f"| {100 * least_ms * 1e3 / r['microtorch_us']:.0f}% | {torch} |")
    return "\n".join(lines)


def goals_table(default_rows, keep_rows, peaks):
    """Every goal, against PyTorch as it comes and with glibc keeping memory."""
    def cell(rows, kind, shape, key, at_least, fmt):
        r = find(rows, kind, shape)
        if r is None or key not in r:
            return "—"
        return f"{fmt(r[key])}, {'holds' if r[key] >= at_least else 'misses'}"

    lines = ["| goal | against PyTorch as it comes | against PyTorch, glibc keeping memory |", "|---|---|---|"]
    for kind, shape, goal in SPEED_GOALS:
        cells = [cell(rows, kind, shape, "x_faster", goal, lambda v: f"{v:.2f}x") for rows in (default_rows, keep_rows)]
        lines.append(f"| {kind} {shape} ≥ {goal:g}x PyTorch, 1 thread | {cells[0]} | {cells[1]} |")
    for kind, shape, goal in SGEMM_GOALS:
        c = cell(default_rows, kind, shape, "sgemm_fraction", goal, lambda v: f"{100 * v:.0f}%")
        lines.append(f"| {kind} {shape} ≥ {100 * goal:.0f}% of sgemm's GFLOP/s, 1 thread | {c} | |")
    for kind, shape, goal in THREAD_GOALS:
        one, two = find(default_rows, kind, shape, 1), find(default_rows, kind, shape, 2)
        c = "—"
        if one and two:
            speedup = one["microtorch_us"] / two["microtorch_us"]
            c = f"{speedup:.2f}x, {'holds' if speedup >= goal else 'misses'}"
            if "torch_us" in one and "torch_us" in two:
                c += f" (PyTorch's own: {one['torch_us'] / two['torch_us']:.2f}x)"
        lines.append(f"| {kind} {shape}: 2 threads ≥ {goal:g}x 1 thread | {c} | |")
    # Below RESOLVED bytes both steps run in memory their heap already holds: the resident
    # set then moves by a few pages with where malloc places blocks, not with the working set.
    resolved = [(shape, mt, pt) for shape, (mt, pt) in zip(SHAPES, peaks) if pt and max(mt, pt) >= RESOLVED]
    if resolved:
        holds = all(mt <= pt + PAGE for _, mt, pt in resolved)
        worst = max(mt / pt for _, mt, pt in resolved)
        unresolved = len([1 for mt, pt in peaks if pt]) - len(resolved)
        lines.append(f"| peak memory of fwd+bwd ≤ PyTorch's, every shape | {worst:.2f} of PyTorch's at worst, "
                     f"{'holds' if holds else 'misses'}"
                     f"{f' ({unresolved} shape(s) under {RESOLVED // 1024} KiB: not resolved)' if unresolved else ''}"
                     f" | |")
        long = next(((mt, pt) for shape, mt, pt in resolved if shape == LONG), None)
        if long:
            ratio = long[0] / long[1]
            lines.append(f"| peak memory of fwd+bwd {LONG} ≤ {PEAK_LONG_GOAL:g} of PyTorch's | {ratio:.3f}, "
                         f"{'holds' if ratio <= PEAK_LONG_GOAL else 'misses'} | |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--filter", default="", help="only steps whose name matches this regular expression")
    args = p.parse_args()
    exe = os.path.join(args.build, "benchmarks", "microtorch-bench")
    if not os.path.exists(exe):
        sys.exit(f"bench: {exe} is missing; build with Google Benchmark installed (libbenchmark-dev)")
    out_dir = os.path.join(args.build, "bench")
    os.makedirs(out_dir, exist_ok=True)
    blas_line = choose_blas_core(exe)
    cpu_line, isa, isa_line = machine_lines(exe)
    for line in (cpu_line, isa_line, blas_line):
        print(f"bench: {line}", file=sys.stderr)
    with_torch = have_torch()
    if not with_torch:
        print("bench: torch is not importable by this python (install python3-torch); microtorch columns only",
              file=sys.stderr)
    timings, default_rows = paired(args, os.path.join(out_dir, "paired.json"), ONE_THREAD_ENV, args.filter, "1,2")
    print("bench: the goal rows again, glibc keeping freed memory", file=sys.stderr)
    keep_timings, keep_rows = paired(args, os.path.join(out_dir, "paired_keep_memory.json"),
                                     dict(ONE_THREAD_ENV, **MALLOC_ENV_KEEP), GOAL_FILTER, "1")
    peak_gflops = float(run([exe, "--fma-peak"]).strip())
    roofline = f"\n\n{roofline_table(default_rows, peak_gflops, isa)}" if peak_gflops > 0 else ""
    print("bench: peak memory", file=sys.stderr)
    peak_lines, peaks = peak_table(exe, with_torch)
    not_installed = "" if with_torch else "(not installed) "
    text = (f"microtorch and PyTorch {not_installed}timed back to back in one process (tools/bench_paired.py), "
            f"best of {args.rounds} rounds per side (5 at least for rows whose rounds would take longer than 40 s):\n\n{timings}\n\n"
            f"The goal rows again, glibc keeping freed memory in the process ({' '.join(f'{k}={v}' for k, v in MALLOC_ENV_KEEP.items())}):"
            f"\n\n{keep_timings}\n\n{peak_lines}\n\nGoals:\n\n{goals_table(default_rows, keep_rows, peaks)}{roofline}")
    load = os.getloadavg()
    text += f"\n\n- {cpu_line}\n- {isa_line}\n- {blas_line}"
    text += f"\n- Load average while measuring (1/5/15 min at the end): {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}\n"
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(text)
    print()
    print(text)
    print(f"bench: the tables are also in {os.path.join(out_dir, 'table.md')}; docs/benchmarks.md holds the "
          "published run (a run on a quiet machine replaces its tables)", file=sys.stderr)


if __name__ == "__main__":
    main()
