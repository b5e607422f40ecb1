#!/usr/bin/python3
"""The PyTorch side of `make bench`: the steps of benchmarks/steps.hpp in PyTorch, same names.

    /usr/bin/python3 tools/bench_torch.py --peak-memory 3      # bytes of MHA forward+backward at SHAPES[3]

steps() maps each name to a function doing one run: nn.MultiheadAttention(E, H,
batch_first=True) called as mha(x, x, x, need_weights=...) (weights averaged over the heads,
its default, or none for the -noweights shapes), loss = output.sum(); the attention core
(attn_fwd_bwd) is torch 1.13's F._scaled_dot_product_attention on q, k, v [N, H, L, E / H]
(its own layout) with the weights averaged over the heads when they are wanted, as
nn.MultiheadAttention does; matmul, softmax, the Iris transformer's Adam step and the
convolution chains (the sensor front end, the DS-CNN layer pair) as in steps.cpp. tools/bench_paired.py times them next to microtorch's.
"""
import argparse

import torch
import torch.nn.functional as F

# (N, L, E, H, need_weights); benchmarks/shapes.hpp lists the same seven.
SHAPES = [(1, 16, 32, 2, True), (8, 64, 64, 4, True), (8, 128, 256, 8, True), (4, 512, 512, 8, True),
          (1, 1024, 512, 8, False), (1, 2048, 512, 8, False), (1, 4096, 512, 8, False)]


def tag(s):
    return "x".join(str(v) for v in s[:4]) + ("" if s[4] else "-noweights")


def make_mha(s):
    torch.manual_seed(0)
    n, l, e, h, need_weights = s
    mha = torch.nn.MultiheadAttention(e, h, batch_first=True)
    x = torch.randn(n, l, e)
    return lambda: mha(x, x, x, need_weights=need_weights), mha


def mha_fwd(s):
    forward, _ = make_mha(s)
    return forward


def mha_fwd_bwd(s):
    forward, mha = make_mha(s)

    def step():
        mha.zero_grad(set_to_none=True)
        out, _ = forward()
        out.sum().backward()

    return step


def mha_infer(s):
    forward, _ = make_mha(s)

    def step():
        with torch.no_grad():
            forward()

    return step


def attn_fwd_bwd(s):
    torch.manual_seed(0)
    n, l, e, h, need_weights = s
    q, k, v = (torch.randn(n, h, l, e // h, requires_grad=True) for _ in range(3))

    def step():
        for t in (q, k, v):
            t.grad = None
        out, weights = F._scaled_dot_product_attention(q, k, v, None, 0.0, need_weights, False)
        if need_weights:
            weights.mean(1)
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


def conv_chain(layers, x, backward):
    """steps.cpp's ConvChainStep: forward (graph recorded), or zero_grad, forward, sum, backward."""
    net = torch.nn.Sequential(*layers)
    if not backward:
        return lambda: net(x)

    def step():
        net.zero_grad(set_to_none=True)
        net(x).sum().backward()

    return step


def sensor_step(backward):
    torch.manual_seed(0)
    layers = [torch.nn.Conv1d(3, 16, 5, stride=2, padding=2), torch.nn.Conv1d(16, 16, 3, padding=1, groups=16),
              torch.nn.Conv1d(16, 32, 1)]
    return conv_chain(layers, torch.randn(32, 3, 128), backward)


def dscnn_step(backward):
    torch.manual_seed(0)
    layers = [torch.nn.Conv2d(64, 64, 3, padding=1, groups=64), torch.nn.Conv2d(64, 64, 1)]
    return conv_chain(layers, torch.randn(32, 64, 25, 5), backward)


def no_grad(fn):
    def step():
        with torch.no_grad():
            fn()

    return step


def steps():
    """name -> one run, in the order of benchmarks/steps.cpp's step_names()."""
    torch.manual_seed(0)
    out = {}
    for n in (64, 256):
        x, y = torch.randn(n, n), torch.randn(n, n)
        out[f"matmul/{n}"] = no_grad(lambda x=x, y=y: torch.matmul(x, y))
    for rows, n in ((256, 16), (16384, 512)):
        x = torch.randn(rows, n)
        out[f"softmax/{rows}x{n}"] = no_grad(lambda x=x: torch.softmax(x, -1))
    for s in SHAPES:
        out[f"mha_fwd/{tag(s)}"] = mha_fwd(s)
        out[f"mha_fwd_bwd/{tag(s)}"] = mha_fwd_bwd(s)
        out[f"mha_infer/{tag(s)}"] = mha_infer(s)
        out[f"attn_fwd_bwd/{tag(s)}"] = attn_fwd_bwd(s)
    out["iris_train_step/batch:16"] = iris_train_step()
    out["sensor_fwd/32x3x128"] = sensor_step(False)
    out["sensor_fwd_bwd/32x3x128"] = sensor_step(True)
    out["dscnn_pair_fwd/32x64x25x5"] = dscnn_step(False)
    out["dscnn_pair_fwd_bwd/32x64x25x5"] = dscnn_step(True)
    return out


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def peak_memory(index):
    """benchmarks/peak_memory.hpp's method, as bench_steps.cpp uses it: one warm-up run,
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
    p.add_argument("--peak-memory", type=int, metavar="I", required=True,
                   help="print peak bytes of MHA forward+backward at shape I")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(peak_memory(args.peak_memory))


if __name__ == "__main__":
    main()
