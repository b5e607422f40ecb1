"""PyTorch oracle fixtures for microtorch's generation ops and decoder-only modules.

Regenerate (from the repository root) with Debian's interpreter, which has PyTorch 1.13 and
numpy (a plain `python3` earlier on PATH may not):

    /usr/bin/python3 tools/gen_generation_fixtures.py

The script removes only its own files, tests/fixtures/gen_*, and writes one
tests/fixtures/gen_<case>.npz per case (tools/fixture_io.py) in the format of
tools/gen_module_fixtures.py, read in C++ as fixture("gen_<case>__<member>"):

    param__<dotted.name>   each entry of the module's state dict (Hugging Face's names:
                           model.layers.0.self_attn.q_proj.weight, ...)
    <input>                each input (float32; token ids and indices int64)
    out, idx               the forward output; the indices of sort and topk
    w                      a fixed random weight of the output's shape
    grad__<dotted.name>    d/d<parameter> of sum(out * w), every parameter (a tied weight once)
    grad_<input>           d/d<input> of sum(out * w), every float input

PyTorch 1.13 has neither RoPE, RMSNorm nor grouped-query attention, so they are written out
below in torch ops, each the way its source writes it: RMSNorm as Llama's
x * rsqrt(mean(x^2) + eps) * weight; RoPE half-split as Hugging Face's rotate_half, and
interleaved as Meta's Llama, a complex multiplication by polar(1, angle) (torch.view_as_complex);
grouped-query attention as Hugging Face's repeat_kv (each key/value head copied to its group)
followed by softmax(q k^T / sqrt(D) + causal) v. Angles are computed in float64 and rounded
to float32, as microtorch's tables are. The decoder references use the module tree and names
of Hugging Face's LlamaForCausalLM, so the state dicts load into nn::DecoderLM unchanged.

Each case seeds torch with a CRC of its name: a re-run gives byte-identical files. The C++
side is tests/test_generation_oracle.cpp; tests never need torch.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from oracle import Cases, perturb, randn, record_module_case

PREFIX = "gen_"




# ---- references PyTorch 1.13 lacks ---------------------------------------------------

def rms_norm_ref(x, weight, eps, dims=1):
    axes = tuple(range(-dims, 0))
    y = x * torch.rsqrt(x.pow(2).mean(axes, keepdim=True) + eps)
    return y * weight if weight is not None else y


def rope_angles(D, positions, base=10000.0):
    """[L, D/2] angles p theta_i, theta_i = base^(-2i/D), in float64."""
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    return torch.outer(positions.to(torch.float64), theta)


def rope_half_ref(x, angles):
    """Hugging Face's apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, cos = [c, c];
    x [N, L, H, D], angles [L, D/2]."""
    cos = torch.cat([angles.cos(), angles.cos()], -1).to(torch.float32)[:, None, :]
    sin = torch.cat([angles.sin(), angles.sin()], -1).to(torch.float32)[:, None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def rope_interleaved_ref(x, angles):
    """Meta's Llama apply_rotary_emb: pairs (2i, 2i+1) as complex numbers times e^(i angle)."""
    freqs_cis = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)[:, None, :]
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(-2)


def repeat_kv(t, groups):
    """Hugging Face's repeat_kv: [N, Hkv, S, D] -> [N, Hkv * groups, S, D], head h of the
    result being key/value head h // groups."""
    if groups == 1:
        return t
    n, hkv, s, d = t.shape
    return t[:, :, None].expand(n, hkv, groups, s, d).reshape(n, hkv * groups, s, d)


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(D) + causal) v with q [N, H, L, D], k, v [N, H, S, D]."""
    L, S = q.shape[-2], k.shape[-2]
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(S - L), float("-inf"))
    return torch.matmul(torch.softmax(scores, -1), v)


class RMSNormRef(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return rms_norm_ref(x, self.weight, self.eps)


class AttentionRef(nn.Module):
    """Hugging Face's LlamaAttention (eager): q_proj, k_proj, v_proj, o_proj, RoPE on q and
    k, repeat_kv, causal softmax attention."""

    def __init__(self, d, heads, kv_heads, bias=False, interleaved=False, base=10000.0):
        super().__init__()
        self.h, self.hkv, self.dh = heads, kv_heads, d // heads
        self.interleaved, self.base = interleaved, base
        self.q_proj = nn.Linear(d, heads * self.dh, bias=bias)
        self.k_proj = nn.Linear(d, kv_heads * self.dh, bias=bias)
        self.v_proj = nn.Linear(d, kv_heads * self.dh, bias=bias)
        self.o_proj = nn.Linear(heads * self.dh, d, bias=False)

    def forward(self, x):
        n, L, _ = x.shape
        q = self.q_proj(x).view(n, L, self.h, self.dh)
        k = self.k_proj(x).view(n, L, self.hkv, self.dh)
        v = self.v_proj(x).view(n, L, self.hkv, self.dh)
        angles = rope_angles(self.dh, torch.arange(L), self.base)
        rope = rope_interleaved_ref if self.interleaved else rope_half_ref
        q, k = rope(q, angles), rope(k, angles)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        g = self.h // self.hkv
        out = causal_attention(q, repeat_kv(k, g), repeat_kv(v, g))
        return self.o_proj(out.transpose(1, 2).reshape(n, L, self.h * self.dh))


class MLPRef(nn.Module):
    """Hugging Face's LlamaMLP: down_proj(silu(gate_proj(x)) * up_proj(x))."""

    def __init__(self, d, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayerRef(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden, eps, interleaved):
        super().__init__()
        self.input_layernorm = RMSNormRef(d, eps)
        self.self_attn = AttentionRef(d, heads, kv_heads, interleaved=interleaved)
        self.post_attention_layernorm = RMSNormRef(d, eps)
        self.mlp = MLPRef(d, hidden)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class DecoderModelRef(nn.Module):
    def __init__(self, vocab, d, layers, heads, kv_heads, hidden, eps, interleaved):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(DecoderLayerRef(d, heads, kv_heads, hidden, eps, interleaved)
                                    for _ in range(layers))
        self.norm = RMSNormRef(d, eps)

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class DecoderLMRef(nn.Module):
    """Hugging Face's LlamaForCausalLM: model + lm_head (tied: lm_head.weight is
    model.embed_tokens.weight, as tie_word_embeddings makes it)."""

    def __init__(self, vocab, d, layers, heads, kv_heads, hidden, eps=1e-5, interleaved=False, tie=False):
        super().__init__()
        self.model = DecoderModelRef(vocab, d, layers, heads, kv_heads, hidden, eps, interleaved)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tie:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, tokens):
        return self.lm_head(self.model(tokens))


class GQAMultiheadRef(nn.Module):
    """microtorch's MultiheadAttention with num_kv_heads, in torch ops: q_proj_weight [E, E],
    k_proj_weight and v_proj_weight [Hkv D, E], in_proj_bias [E + 2 Hkv D], out_proj; batch
    first; no mask."""

    def __init__(self, e, heads, kv_heads):
        super().__init__()
        self.h, self.hkv, self.dh = heads, kv_heads, e // heads
        kv = kv_heads * self.dh
        self.q_proj_weight = nn.Parameter(torch.randn(e, e) / math.sqrt(e))
        self.k_proj_weight = nn.Parameter(torch.randn(kv, e) / math.sqrt(e))
        self.v_proj_weight = nn.Parameter(torch.randn(kv, e) / math.sqrt(e))
        self.in_proj_bias = nn.Parameter(torch.zeros(e + 2 * kv))
        self.out_proj = nn.Linear(e, e)

    def forward(self, x):
        n, L, e = x.shape
        kv = self.hkv * self.dh
        b = self.in_proj_bias
        q = F.linear(x, self.q_proj_weight, b[:e]).view(n, L, self.h, self.dh).transpose(1, 2)
        k = F.linear(x, self.k_proj_weight, b[e:e + kv]).view(n, L, self.hkv, self.dh).transpose(1, 2)
        v = F.linear(x, self.v_proj_weight, b[e + kv:]).view(n, L, self.hkv, self.dh).transpose(1, 2)
        g = self.h // self.hkv
        scores = torch.matmul(q, repeat_kv(k, g).transpose(-2, -1)) / math.sqrt(self.dh)
        out = torch.matmul(torch.softmax(scores, -1), repeat_kv(v, g))
        return self.out_proj(out.transpose(1, 2).reshape(n, L, e))


# ---- the recorder (tools/gen_module_fixtures.py's format) -----------------------------

CASES = Cases(PREFIX)
case = CASES.case


# ---- ops -------------------------------------------------------------------------------

@case("silu")
def _():
    return dict(inputs=dict(x=randn(2, 3, 4) * 3), forward=lambda m, x: F.silu(x))


@case("rms_norm")
def _():
    return dict(inputs=dict(x=randn(2, 3, 6) * 2 + 0.5, weight=randn(6)),
                forward=lambda m, x, weight: rms_norm_ref(x, weight, 1e-5))


@case("rms_norm_2d_default_eps")
def _():
    # normalized_shape [3, 4], no weight, eps = float32's machine epsilon (PyTorch's default)
    return dict(inputs=dict(x=randn(2, 3, 4)),
                forward=lambda m, x: rms_norm_ref(x, None, torch.finfo(torch.float32).eps, dims=2))


def _rope(name, interleaved, offset):
    @case(name)
    def _():
        x = randn(2, 5, 3, 8)
        angles = rope_angles(8, torch.arange(offset, offset + 5))
        ref = rope_interleaved_ref if interleaved else rope_half_ref
        return dict(inputs=dict(x=x), forward=lambda m, x: ref(x, angles))


_rope("rope_half", False, 0)
_rope("rope_half_offset", False, 9)
_rope("rope_interleaved", True, 0)
_rope("rope_interleaved_offset", True, 9)


def _indexed(values, idx):
    return dict(out=values, idx=idx)


@case("sort_descending")
def _():
    return dict(inputs=dict(x=randn(3, 7)), forward=lambda m, x: _indexed(*torch.sort(x, dim=-1, descending=True)))


@case("sort_dim0")
def _():
    return dict(inputs=dict(x=randn(5, 2, 3)), forward=lambda m, x: _indexed(*torch.sort(x, dim=0)))


@case("topk_largest")
def _():
    return dict(inputs=dict(x=randn(2, 3, 9)), forward=lambda m, x: _indexed(*torch.topk(x, 4, dim=-1)))


@case("topk_smallest_dim1")
def _():
    return dict(inputs=dict(x=randn(2, 6, 3)), forward=lambda m, x: _indexed(*torch.topk(x, 2, dim=1, largest=False)))


@case("gather_dim1")
def _():
    index = torch.tensor([[0, 2, 2, 1], [3, 0, 0, 0], [1, 1, 3, 2]], dtype=torch.int64)
    return dict(inputs=dict(x=randn(3, 4)), consts=dict(index=index),
                forward=lambda m, x, index: torch.gather(x, 1, index))


@case("gather_dim0_smaller")
def _():
    index = torch.tensor([[[1, 0], [2, 2]], [[0, 0], [1, 2]]], dtype=torch.int64)  # [2, 2, 2] of x [3, 3, 2]
    return dict(inputs=dict(x=randn(3, 3, 2)), consts=dict(index=index),
                forward=lambda m, x, index: torch.gather(x, 0, index))


@case("cumsum_last")
def _():
    return dict(inputs=dict(x=randn(2, 3, 5)), forward=lambda m, x: torch.cumsum(x, -1))


@case("cumsum_dim0")
def _():
    return dict(inputs=dict(x=randn(4, 3)), forward=lambda m, x: torch.cumsum(x, 0))


@case("tril_batched")
def _():
    return dict(inputs=dict(x=randn(2, 4, 5)), forward=lambda m, x: torch.tril(x))


@case("tril_diagonal_neg")
def _():
    return dict(inputs=dict(x=randn(5, 4)), forward=lambda m, x: torch.tril(x, -1))


@case("triu_diagonal")
def _():
    return dict(inputs=dict(x=randn(2, 4, 4)), forward=lambda m, x: torch.triu(x, 1))


# ---- grouped-query attention -----------------------------------------------------------

@case("sdpa_gqa_causal")
def _():
    # q [2, 4, 5, 3], k and v [2, 2, 5, 3]: two query heads per key/value head
    return dict(inputs=dict(q=randn(2, 4, 5, 3), k=randn(2, 2, 5, 3), v=randn(2, 2, 5, 3)),
                forward=lambda m, q, k, v: causal_attention(q, repeat_kv(k, 2), repeat_kv(v, 2)))


@case("mha_heads_gqa")
def _():
    # multi_head_attention on projections [N, L, H D] with H = 6, Hkv = 2, D = 2, no mask
    n, L, S, h, hkv, d = 2, 3, 4, 6, 2, 2

    def forward(m, q, k, v):
        qh = q.view(n, L, h, d).transpose(1, 2)
        kh = repeat_kv(k.view(n, S, hkv, d).transpose(1, 2), h // hkv)
        vh = repeat_kv(v.view(n, S, hkv, d).transpose(1, 2), h // hkv)
        scores = torch.matmul(qh, kh.transpose(-2, -1)) / math.sqrt(d)
        return torch.matmul(torch.softmax(scores, -1), vh).transpose(1, 2).reshape(n, L, h * d)
    return dict(inputs=dict(q=randn(n, L, h * d), k=randn(n, S, hkv * d), v=randn(n, S, hkv * d)), forward=forward)


@case("multihead_attention_gqa")
def _():
    return dict(module=perturb(GQAMultiheadRef(8, 4, 2)), inputs=dict(x=randn(2, 3, 8)), forward=lambda m, x: m(x))


# ---- modules ---------------------------------------------------------------------------

@case("rmsnorm_module")
def _():
    return dict(module=perturb(RMSNormRef(6, 1e-6)), inputs=dict(x=randn(2, 3, 6)), forward=lambda m, x: m(x))


@case("causal_self_attention_gqa_half")
def _():
    return dict(module=perturb(AttentionRef(16, 4, 2, bias=True)), inputs=dict(x=randn(2, 5, 16)),
                forward=lambda m, x: m(x))


@case("causal_self_attention_interleaved")
def _():
    return dict(module=perturb(AttentionRef(12, 3, 3, interleaved=True, base=500.0)), inputs=dict(x=randn(2, 4, 12)),
                forward=lambda m, x: m(x))


@case("decoder_lm_gqa")
def _():
    model = perturb(DecoderLMRef(11, 16, 2, 4, 2, 24))
    tokens = torch.tensor([[1, 5, 0, 10, 3, 3], [7, 2, 9, 4, 4, 6]], dtype=torch.int64)
    return dict(module=model, consts=dict(tokens=tokens), forward=lambda m, tokens: m(tokens))


@case("decoder_lm_tied_interleaved")
def _():
    model = perturb(DecoderLMRef(13, 12, 2, 3, 1, 20, eps=1e-6, interleaved=True, tie=True))
    tokens = torch.tensor([[12, 0, 4, 4, 8], [3, 1, 2, 11, 6]], dtype=torch.int64)
    return dict(module=model, consts=dict(tokens=tokens), forward=lambda m, tokens: m(tokens))


def main():
    CASES.main(record_module_case)


if __name__ == "__main__":
    main()
