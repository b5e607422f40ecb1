#!/usr/bin/python3
"""The PyTorch side of `make bench`: the steps of benchmarks/steps.hpp in PyTorch, same names.

    /usr/bin/python3 tools/bench_torch.py --peak-memory 3      # bytes of MHA forward+backward at SHAPES[3]

steps() maps each name to a function doing one run: nn.MultiheadAttention(E, H,
batch_first=True) called as mha(x, x, x, need_weights=...) (weights averaged over the heads,
its default, or none for the -noweights shapes), loss = output.sum(); the attention core
(attn_fwd_bwd) is torch 1.13's F._scaled_dot_product_attention on q, k, v [N, H, L, E / H]
(its own layout) with the weights averaged over the heads when they are wanted, as
nn.MultiheadAttention does; matmul, softmax, the Iris transformer's Adam step and the
convolution chains (the sensor front end, the DS-CNN layer pair) as in steps.cpp; the
decoder-only language model's AdamW step and its decoding with a KV cache of its own
(DecLM below). tools/bench_paired.py times them next to microtorch's.
"""
import argparse
import math

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


# ---- decoder-only language model (benchmarks/decoder_model.hpp) -------------------------
# examples/char_lm.cpp's model: 4 layers of d_model 128, 4 query heads over 2 key/value heads,
# SwiGLU of 352, half-split RoPE, RMSNorm, tied embeddings; 16 x 128 tokens per training step.
DEC_VOCAB, DEC_D, DEC_LAYERS, DEC_H, DEC_HKV, DEC_FF, DEC_BATCH, DEC_CTX = 76, 128, 4, 4, 2, 352, 16, 128


class DecRMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def dec_rope(x, cos, sin):
    """Half-split RoPE (Hugging Face's rotate_half) of x [N, L, heads, D], cos/sin [L, 1, D/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class DecAttention(torch.nn.Module):
    """Grouped-query attention without copying the key/value heads: the H / Hkv query heads of
    a group become rows of one matmul against their shared keys ([N, Hkv, G L, D] @ [N, Hkv, D, S]),
    with a causal mask; with a cache, k and v are written into preallocated [N, Hkv, C, D]
    tensors at the new positions and read back as views of the first pos + L rows."""

    def __init__(self):
        super().__init__()
        self.dh = DEC_D // DEC_H
        self.q_proj = torch.nn.Linear(DEC_D, DEC_H * self.dh, bias=False)
        self.k_proj = torch.nn.Linear(DEC_D, DEC_HKV * self.dh, bias=False)
        self.v_proj = torch.nn.Linear(DEC_D, DEC_HKV * self.dh, bias=False)
        self.o_proj = torch.nn.Linear(DEC_H * self.dh, DEC_D, bias=False)

    def forward(self, x, cos, sin, cache=None, pos=0):
        n, L, _ = x.shape
        g, d = DEC_H // DEC_HKV, self.dh
        q = dec_rope(self.q_proj(x).view(n, L, DEC_H, d), cos, sin)
        k = dec_rope(self.k_proj(x).view(n, L, DEC_HKV, d), cos, sin).transpose(1, 2)
        v = self.v_proj(x).view(n, L, DEC_HKV, d).transpose(1, 2)
        if cache is not None:
            k_cache, v_cache = cache
            k_cache[:, :, pos:pos + L] = k
            v_cache[:, :, pos:pos + L] = v
            k, v = k_cache[:, :, :pos + L], v_cache[:, :, :pos + L]
        S = k.shape[2]
        q = q.transpose(1, 2).reshape(n, DEC_HKV, g * L, d)  # query head h = kv head h // g
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
        if L > 1:  # new query l sees keys j <= pos + l
            blocked = torch.ones(L, S, dtype=torch.bool).triu(S - L + 1).repeat(g, 1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = torch.matmul(torch.softmax(scores, -1), v)  # [n, Hkv, g L, d]
        return self.o_proj(out.view(n, DEC_H, L, d).transpose(1, 2).reshape(n, L, DEC_H * d))


class DecLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = DecRMSNorm(DEC_D), DecRMSNorm(DEC_D)
        self.self_attn = DecAttention()
        self.gate_proj = torch.nn.Linear(DEC_D, DEC_FF, bias=False)
        self.up_proj = torch.nn.Linear(DEC_D, DEC_FF, bias=False)
        self.down_proj = torch.nn.Linear(DEC_FF, DEC_D, bias=False)

    def forward(self, x, cos, sin, cache=None, pos=0):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, pos)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class DecLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(DEC_VOCAB, DEC_D)
        self.layers = torch.nn.ModuleList(DecLayer() for _ in range(DEC_LAYERS))
        self.norm = DecRMSNorm(DEC_D)
        self.lm_head = torch.nn.Linear(DEC_D, DEC_VOCAB, bias=False)
        self.lm_head.weight = self.embed_tokens.weight
        dh = DEC_D // DEC_H
        theta = 10000.0 ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
        angles = torch.outer(torch.arange(DEC_CTX, dtype=torch.float64), theta)
        self.register_buffer("cos", angles.cos().float()[:, None, :], persistent=False)
        self.register_buffer("sin", angles.sin().float()[:, None, :], persistent=False)

    def forward(self, tokens, caches=None, pos=0):
        L = tokens.shape[1]
        cos, sin = self.cos[pos:pos + L], self.sin[pos:pos + L]
        x = self.embed_tokens(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, caches[i] if caches is not None else None, pos)
        return self.lm_head(self.norm(x))


def decoder_train_step():
    torch.manual_seed(0)
    model = DecLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, DEC_VOCAB, (DEC_BATCH, DEC_CTX))
    y = torch.randint(0, DEC_VOCAB, (DEC_BATCH * DEC_CTX,))

    def step():
        loss = F.cross_entropy(model(x).view(-1, DEC_VOCAB), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

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


def decoder_decode():
    torch.manual_seed(0)
    model = DecLM().eval()
    tokens = torch.randint(0, DEC_VOCAB, (DEC_CTX,))
    caches = [(torch.zeros(1, DEC_HKV, DEC_CTX, DEC_D // DEC_H), torch.zeros(1, DEC_HKV, DEC_CTX, DEC_D // DEC_H))
              for _ in range(DEC_LAYERS)]

    def step():
        with torch.no_grad():
            for t in range(DEC_CTX):
                model(tokens[t].view(1, 1), caches, t)

    return step


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
    out[f"decoder_train_step/{DEC_BATCH}x{DEC_CTX}"] = decoder_train_step()
    out[f"decoder_decode/1x{DEC_CTX}"] = decoder_decode()
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
