#!/usr/bin/python3
"""The PyTorch baseline of `make bench`: the benchmarks of benchmarks/ on PyTorch, same shapes.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 tools/bench_torch.py --threads 1 --out torch-1.json
    /usr/bin/python3 tools/bench_torch.py --peak-memory 3      # bytes of one MHA forward+backward

Names, shapes and losses match benchmarks/*.cpp: nn.MultiheadAttention(E, H, batch_first=True)
called as mha(x, x, x) with its defaults (need_weights=True), loss = output.sum(); SDPA is
torch 1.13's F._scaled_dot_product_attention with the weights returned. Each benchmark is
timed in 5 repetitions of at least --min-time seconds (after a warm-up); the JSON holds the
median wall-clock and process-CPU microseconds per iteration. tools/bench_table.py runs this and prints the table.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = [(1, 16, 32, 2), (8, 64, 64, 4), (8, 128, 256, 8), (4, 512, 512, 8)]  # benchmarks/shapes.hpp


def tag(s):
    return "x".join(str(v) for v in s)


def make_mha(s):
    torch.manual_seed(0)
    n, l, e, h = s
    return torch.nn.MultiheadAttention(e, h, batch_first=True), torch.randn(n, l, e)


def mha_fwd(s):
    mha, x = make_mha(s)
    return lambda: mha(x, x, x)


def mha_fwd_bwd(s):
    mha, x = make_mha(s)

    def step():
        mha.zero_grad(set_to_none=True)
        out, _ = mha(x, x, x)
        out.sum().backward()

    return step


def mha_infer(s):
    mha, x = make_mha(s)

    def step():
        with torch.no_grad():
            mha(x, x, x)

    return step


def sdpa_fwd_bwd(s):
    torch.manual_seed(0)
    n, l, e, h = s
    q, k, v = (torch.randn(n, h, l, e // h, requires_grad=True) for _ in range(3))

    def step():
        for t in (q, k, v):
            t.grad = None
        out, _ = F._scaled_dot_product_attention(q, k, v, None, 0.0, True, False)
        out.sum().backward()

    return step


class IrisTransformer(torch.nn.Module):  # benchmarks/iris_model.hpp
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(4, 32)
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        tokens = torch.relu(self.embed(x)).reshape(-1, 4, 8)
        y, _ = self.attn(tokens, tokens, tokens)
        return self.head(y.mean(1))


def iris_train_step():
    torch.manual_seed(0)
    model = IrisTransformer()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def no_grad(fn):
    def step():
        with torch.no_grad():
            fn()

    return step


def benchmarks(threads):
    t = f"threads:{threads}"
    a = torch.ones(1024, 1024) * 0.5
    yield f"sgemm/1024/{t}", no_grad(lambda: torch.mm(a, a))
    for n in (64, 256):
        x, y = torch.randn(n, n), torch.randn(n, n)
        yield f"matmul/{n}/{t}", no_grad(lambda x=x, y=y: torch.matmul(x, y))
    for rows, n in ((256, 16), (16384, 512)):
        x = torch.randn(rows, n)
        yield f"softmax/{rows}x{n}/{t}", no_grad(lambda x=x: torch.softmax(x, -1))
    for s in SHAPES:
        yield f"mha_fwd/{tag(s)}/{t}", mha_fwd(s)
        yield f"mha_fwd_bwd/{tag(s)}/{t}", mha_fwd_bwd(s)
        yield f"mha_infer/{tag(s)}/{t}", mha_infer(s)
        yield f"sdpa_fwd_bwd/{tag(s)}/{t}", sdpa_fwd_bwd(s)
    yield f"iris_train_step/batch:16/{t}", iris_train_step()


def median_us(fn, min_time, repetitions=5):
    """(wall, CPU) microseconds per call, each the median over the repetitions."""
    start = time.perf_counter()
    while time.perf_counter() - start < min_time / 2:  # warm-up
        fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    iters = max(1, int(min_time / once))
    wall, cpu = [], []
    for _ in range(repetitions):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(iters):
            fn()
        wall.append((time.perf_counter() - t0) / iters * 1e6)
        cpu.append((time.process_time() - c0) / iters * 1e6)
    return statistics.median(wall), statistics.median(cpu)


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def peak_memory(index):
    """benchmarks/peak_memory.hpp's method, as bench_attention.cpp uses it: one warm-up run,
    reset VmHWM, three runs, VmHWM - VmRSS before."""
    step = mha_fwd_bwd(SHAPES[index])
    step()  # first-use costs are not the op's
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_kib("VmRSS")
    for _ in range(3):
        step()
    return (status_kib("VmHWM") - before) * 1024


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--min-time", type=float, default=0.1)
    p.add_argument("--filter", default="", help="only benchmarks whose name contains this")
    p.add_argument("--out", help="write the JSON here (default: stdout)")
    p.add_argument("--peak-memory", type=int, metavar="I", help="print peak bytes of MHA forward+backward at shape I")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.peak_memory is not None:
        print(peak_memory(args.peak_memory))
        return
    results, cpu = {}, {}
    for name, fn in benchmarks(args.threads):
        if args.filter in name:
            results[name], cpu[name] = median_us(fn, args.min_time)
            print(f"{name:45s} {results[name]:12.1f} us", file=sys.stderr)
    out = json.dumps({"torch": torch.__version__, "threads": args.threads, "median_us": results,
                      "median_cpu_us": cpu}, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(out + "\n")
    else:
        print(out)


if __name__ == "__main__":
    main()
