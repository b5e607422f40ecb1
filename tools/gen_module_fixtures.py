"""PyTorch oracle fixtures for microtorch's nn modules (values and gradients).

Regenerate (from the repository root) with Debian's interpreter, which has PyTorch 1.13 and
numpy (a plain `python3` earlier on PATH may not):

    /usr/bin/python3 tools/gen_module_fixtures.py

The script removes only its own files, tests/fixtures/mod_*, and writes one
tests/fixtures/mod_<case>.npz per case (tools/fixture_io.py) whose members, read in C++ as
fixture("mod_<case>__<member>"), are:

    param__<dotted.name>.npy  each entry of the module's state dict, under the
                              name PyTorch gives it ("in_proj_weight",
                              "layers.0.self_attn.out_proj.bias", ...)
    buffer__<name>.npy        a buffer microtorch computes itself (the
                              sinusoidal table): compared, never loaded
    <input>.npy               each input (float32; token ids int64; masks bool
                              or float)
    out.npy                   the forward output
    weights.npy               attention weights, where the module returns them
    w.npy                     a fixed random weight of the output's shape
    grad__<dotted.name>.npy   d/d<parameter> of sum(out * w), every parameter
    grad_<input>.npy          d/d<input> of sum(out * w), every float input that
                              is not a mask (masks are constants)

Parameters are PyTorch's initialisation plus N(0, 0.2^2) noise: biases and LayerNorm
weights are then not 0 and 1, and the deep-copied layers of a TransformerEncoder differ,
so a swapped or ignored parameter cannot pass. The attention weights are not part of the
loss (microtorch returns them for inspection, not differentiable).

Each case seeds torch with a CRC of its name: cases are independent of their order and a
re-run gives byte-identical files. PyTorch 1.13 has no F.scaled_dot_product_attention and
no linear attention, so those references are written in torch ops below. No case has a
fully masked query row (PyTorch gives NaN there; microtorch defines zero output, tested in
tests/test_attention.cpp). The C++ side is tests/test_modules_oracle.cpp; tests never need
torch.
"""

import math

import torch
import torch.nn as nn

from oracle import Cases, perturb, randn, record_module_case

PREFIX = "mod_"

E, H = 8, 2  # attention cases: embed_dim 8, 2 heads of 4


# ---- input makers (the global generator, seeded per case) -----------------------------


def away_from_zero(x, gap=0.1):
    """Moves elements within `gap` of 0 (relu's kink) away from it."""
    return torch.where(x.abs() < gap, x + 2 * gap * torch.sign(x + 1e-12), x)


def away_from_bounds(x, bounds, gap=0.1):
    """Moves elements within `gap` of a clamp's bounds (its kinks) away from them."""
    for b in bounds:
        x = b + away_from_zero(x - b, gap)
    return x



def bool_tensor(rows):
    return torch.tensor(rows, dtype=torch.bool)


def causal_block(L, S):
    """PyTorch MHA polarity: True = blocked; query i may see keys 0..i (top-left)."""
    return torch.ones(L, S, dtype=torch.bool).triu(1)


# ---- reference implementations PyTorch 1.13 lacks ------------------------------------

def sdpa_ref(q, k, v, additive=None, keep=None, causal=False, scale=None):
    """softmax(q k^T * scale + mask) v; keep: bool, True = may attend (torch 2's SDPA
    polarity); causal: top-left aligned torch.ones(L, S).tril()."""
    L, S = q.shape[-2], k.shape[-2]
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(q, k.transpose(-2, -1)) * s
    if additive is not None:
        scores = scores + additive
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    if causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


class LinearAttentionRef(nn.Module):
    """The formula of include/microtorch/nn/linear_attention.hpp, phi = relu:
    out_i = phi(q_i) (phi(K)^T V) / (phi(q_i) . sum_j phi(k_j) + eps), per head, between
    q_proj/k_proj/v_proj and out_proj (nn.Linear E -> E), heads by reshape."""

    def __init__(self, embed_dim, num_heads, bias=True, normalize=True, eps=1e-6):
        super().__init__()
        self.h, self.normalize, self.eps = num_heads, normalize, eps
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key, value):
        n, L, e = query.shape
        S = key.shape[1]

        def heads(t, length):
            return t.reshape(n, length, self.h, e // self.h).transpose(1, 2)

        q, k = heads(self.q_proj(query), L), heads(self.k_proj(key), S)
        # Off relu's kink: a projection within rounding of 0 could switch sides between
        # libraries (z then jumps by a whole term).
        assert min(q.abs().min(), k.abs().min()) > 1e-4, "projection too close to relu's kink"
        q, k = torch.relu(q), torch.relu(k)
        v = heads(self.v_proj(value), S)
        out = torch.matmul(q, torch.matmul(k.transpose(-2, -1), v))
        if self.normalize:
            z = torch.matmul(q, k.sum(dim=-2, keepdim=True).transpose(-2, -1))
            # z (a sum of non-negative terms) is 0 exactly when phi(q_i) is all zero; the
            # row is then 0 / eps = 0 with zero gradients, as in microtorch.
            out = out / (z + self.eps)
        return self.out_proj(out.transpose(1, 2).reshape(n, L, e))


class LearnedPositionalEncodingRef(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, d_model))

    def forward(self, x):
        return x + self.weight[: x.shape[1]]


def sinusoidal_table(max_len, d_model):
    """"Attention Is All You Need" (the PyTorch tutorial's construction, in float64):
    pe[pos, 2i] = sin(pos / 10000^(2i/E)), pe[pos, 2i+1] = cos(pos / 10000^(2i/E))."""
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe.to(torch.float32)


# ---- the recorder ---------------------------------------------------------------------

CASES = Cases(PREFIX)
case = CASES.case


# ---- Linear, Embedding, LayerNorm, Sequential ------------------------------------------

@case("linear_bias")
def _():
    return dict(module=perturb(nn.Linear(5, 4)), inputs=dict(x=randn(2, 3, 5)), forward=lambda m, x: m(x))


@case("linear_no_bias")
def _():
    return dict(module=perturb(nn.Linear(5, 4, bias=False)), inputs=dict(x=randn(2, 3, 5)),
                forward=lambda m, x: m(x))


@case("linear_2d")
def _():
    return dict(module=perturb(nn.Linear(3, 6)), inputs=dict(x=randn(4, 3)), forward=lambda m, x: m(x))


@case("embedding")
def _():
    # Repeated ids: the weight gradient must accumulate rows (2 appears three times).
    ids = torch.tensor([[0, 2, 5], [2, 2, 1]], dtype=torch.int64)
    return dict(module=nn.Embedding(6, 4), consts=dict(indices=ids), forward=lambda m, indices: m(indices))


@case("layernorm_last_dim")
def _():
    return dict(module=perturb(nn.LayerNorm(6)), inputs=dict(x=randn(2, 3, 6) * 2 + 1), forward=lambda m, x: m(x))


@case("layernorm_2d_shape")
def _():
    return dict(module=perturb(nn.LayerNorm([3, 4], eps=1e-3)), inputs=dict(x=randn(2, 3, 4) * 2 + 1),
                forward=lambda m, x: m(x))


@case("layernorm_no_affine")
def _():
    return dict(module=nn.LayerNorm(5, elementwise_affine=False), inputs=dict(x=randn(3, 5)),
                forward=lambda m, x: m(x))


@case("sequential_mlp")
def _():
    # Children "0", "1", "2": the ReLU at "1" has no parameters, so keys are 0.* and 2.*.
    m = perturb(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)))
    return dict(module=m, inputs=dict(x=randn(2, 5, 4)), forward=lambda m, x: m(x))


# ---- parameter-free modules -------------------------------------------------------------

def _stateless(name, module, make_x, consts=None, forward=None):
    @case(name)
    def _():
        return dict(module=module, inputs=dict(x=make_x()), consts=consts or {},
                    forward=forward or (lambda m, x: m(x)))


_stateless("relu", nn.ReLU(), lambda: away_from_zero(randn(2, 3, 4)))
_stateless("gelu", nn.GELU(), lambda: randn(2, 3, 4) * 2)
_stateless("gelu_tanh", nn.GELU(approximate="tanh"), lambda: randn(2, 3, 4) * 2)
_stateless("relu6", nn.ReLU6(), lambda: away_from_bounds(randn(2, 3, 4) * 4, (0.0, 6.0)))
_stateless("hardtanh", nn.Hardtanh(-0.5, 2.0), lambda: away_from_bounds(randn(2, 3, 4) * 2, (-0.5, 2.0)))
_stateless("tanh", nn.Tanh(), lambda: randn(2, 3, 4))
_stateless("sigmoid", nn.Sigmoid(), lambda: randn(2, 3, 4) * 2)
_stateless("softmax_dim1", nn.Softmax(dim=1), lambda: randn(2, 3, 4) * 2)
_stateless("log_softmax_last", nn.LogSoftmax(dim=-1), lambda: randn(2, 3, 4) * 2)
_stateless("identity", nn.Identity(), lambda: randn(2, 3))
_stateless("dropout_eval", nn.Dropout(0.5).eval(), lambda: randn(2, 3, 4))
_stateless("mean_pool", None, lambda: randn(2, 4, 3), forward=lambda m, x: x.mean(dim=1))


@case("mean_pool_keep")
def _():
    keep = bool_tensor([[True, True, False, False], [True, True, True, True]])

    def forward(m, x, keep):
        k = keep.to(x.dtype).unsqueeze(-1)
        return (x * k).sum(dim=1) / k.sum(dim=1)
    return dict(inputs=dict(x=randn(2, 4, 3)), consts=dict(keep=keep), forward=forward)


# ---- scaled dot-product attention (reference above) -------------------------------------

def _sdpa(name, batch, L, S, D=4, Dv=None, **kw):
    Dv = Dv or D
    make_consts = kw.pop("consts", lambda: {})

    @case(name)
    def _():
        inputs = dict(q=randn(*batch, L, D), k=randn(*batch, S, D), v=randn(*batch, S, Dv))
        consts = make_consts()
        return dict(inputs=inputs, consts=consts,
                    forward=lambda m, q, k, v, **c: sdpa_ref(q, k, v, **c, **kw))


_sdpa("sdpa_no_batch", (), 3, 5)
_sdpa("sdpa_batch_2_3", (2, 3), 3, 4)
_sdpa("sdpa_batch_2_3_3", (2, 3, 3), 2, 3)
_sdpa("sdpa_scale", (2,), 3, 4, scale=0.3)
_sdpa("sdpa_dv_differs", (2, 3), 3, 5, D=4, Dv=3)
# [L, S] float mask broadcast over batch dims (2, 3).
_sdpa("sdpa_additive_bcast", (2, 3), 3, 4, consts=lambda: dict(additive=randn(3, 4)))
# [3, 1, S] mask with -inf entries (no row fully blocked), broadcast over batch and queries.
_sdpa("sdpa_additive_inf_bcast", (2, 3), 3, 4,
      consts=lambda: dict(additive=torch.tensor([[[0.0, float("-inf"), 0.5, -1.0]],
                                     [[float("-inf"), 0.0, 0.0, float("-inf")]],
                                     [[0.3, 0.0, float("-inf"), 0.0]]])))
# bool keep mask [2, 1, L, S] (True = may attend), broadcast over the heads dim.
_sdpa("sdpa_bool_keep", (2, 3), 3, 4,
      consts=lambda: dict(keep=bool_tensor([[[[1, 0, 1, 1], [0, 1, 0, 0], [1, 1, 1, 0]]],
                                [[[0, 0, 0, 1], [1, 0, 1, 0], [1, 1, 1, 1]]]])))
_sdpa("sdpa_causal_square", (2,), 4, 4, causal=True)
_sdpa("sdpa_causal_wide", (2,), 3, 5, causal=True)   # L < S, top-left aligned
_sdpa("sdpa_causal_tall", (2,), 5, 3, causal=True)   # L > S, top-left aligned
_sdpa("sdpa_causal_additive_scale", (2, 3), 3, 5, scale=0.7, causal=True, consts=lambda: dict(additive=randn(3, 5)))


# ---- nn.MultiheadAttention ------------------------------------------------------------

def mha(**kw):
    return perturb(nn.MultiheadAttention(E, H, **kw)).eval()


def _mha_self(name, shape, consts=None, call=None, **kw):
    """Self-attention: one input x passed as query, key and value (query is key is value)."""
    call = call or {}

    @case(name)
    def _():
        c = consts() if consts else {}
        return dict(module=mha(**kw), inputs=dict(x=randn(*shape)), consts=c,
                    forward=lambda m, x, **c: m(x, x, x, **c, **call))


_mha_self("mha_self_batch_first", (2, 3, E), batch_first=True)
_mha_self("mha_key_padding_per_head", (2, 4, E), batch_first=True,
          consts=lambda: dict(key_padding_mask=bool_tensor([[0, 0, 0, 1], [0, 0, 1, 1]])),
          call=dict(average_attn_weights=False))
_mha_self("mha_causal_bool", (2, 4, E), batch_first=True, consts=lambda: dict(attn_mask=causal_block(4, 4)))
_mha_self("mha_no_bias", (2, 3, E), batch_first=True, bias=False)
# Sequence first [L, N, E] with a key padding mask and a causal mask combined.
_mha_self("mha_seq_first", (4, 2, E),
          consts=lambda: dict(key_padding_mask=bool_tensor([[0, 0, 0, 1], [0, 0, 0, 0]]),
                              attn_mask=causal_block(4, 4)))
# Unbatched [L, E] with a [S] key padding mask.
_mha_self("mha_unbatched", (3, E), consts=lambda: dict(key_padding_mask=bool_tensor([0, 1, 0])))
# A float key padding mask is added to the scores.
_mha_self("mha_float_key_padding", (2, 4, E), batch_first=True,
          consts=lambda: dict(key_padding_mask=torch.tensor([[0.0, -1.0, 0.5, float("-inf")],
                                                 [0.0, 0.0, -2.0, 0.0]])))
# A bool key padding mask meets a float [L, S] attn_mask (PyTorch masked_fills it with -inf).
_mha_self("mha_padding_and_float_mask", (2, 4, E), batch_first=True,
          consts=lambda: dict(key_padding_mask=bool_tensor([[0, 1, 0, 0], [0, 0, 0, 1]]), attn_mask=randn(4, 4)))


def _mha_cross(name, L, S, kdim=E, vdim=E, consts=None, call=None, **kw):
    call = call or {}

    @case(name)
    def _():
        c = consts() if consts else {}
        module = mha(kdim=kdim, vdim=vdim, batch_first=True, **kw)
        inputs = dict(query=randn(2, L, E), key=randn(2, S, kdim), value=randn(2, S, vdim))
        return dict(module=module, inputs=inputs, consts=c,
                    forward=lambda m, query, key, value, **c: m(query, key, value, **c, **call))


# kdim/vdim differ from embed_dim: q_proj_weight, k_proj_weight, v_proj_weight.
_mha_cross("mha_cross_kdim_vdim", 3, 4, kdim=5, vdim=6)
# Same dims, different tensors: one packed in_proj_weight used by three projections.
_mha_cross("mha_cross_same_dims", 3, 5)
# A 3-D float attn_mask [N * H, L, S], per-head weights.
_mha_cross("mha_float_mask_3d", 3, 4, consts=lambda: dict(attn_mask=randn(2 * H, 3, 4)),
           call=dict(average_attn_weights=False))


# ---- TransformerEncoderLayer / TransformerEncoder ---------------------------------------

D_MODEL, FF = 6, 10  # 2 heads of 3: odd head size and FF != d_model catch layout slips


def encoder_layer(**kw):
    kw.setdefault("batch_first", True)
    return nn.TransformerEncoderLayer(D_MODEL, H, dim_feedforward=FF, dropout=0.0, **kw)


def _encoder(name, make_module, shape, consts=None):
    @case(name)
    def _():
        c = consts() if consts else {}
        return dict(module=perturb(make_module()).eval(), inputs=dict(x=randn(*shape)), consts=c,
                    forward=lambda m, x, **c: m(x, **c))


_encoder("encoder_layer_post_ln_relu", lambda: encoder_layer(), (2, 4, D_MODEL))
_encoder("encoder_layer_pre_ln_relu", lambda: encoder_layer(norm_first=True), (2, 4, D_MODEL))
_encoder("encoder_layer_post_ln_gelu", lambda: encoder_layer(activation="gelu"), (2, 4, D_MODEL))
_encoder("encoder_layer_pre_ln_gelu_padding", lambda: encoder_layer(activation="gelu", norm_first=True),
         (2, 4, D_MODEL),
         consts=lambda: dict(src_key_padding_mask=bool_tensor([[0, 0, 1, 1], [0, 0, 0, 0]])))
_encoder("encoder_layer_causal_src_mask", lambda: encoder_layer(), (2, 4, D_MODEL),
         consts=lambda: dict(src_mask=causal_block(4, 4)))
_encoder("encoder_layer_seq_first", lambda: encoder_layer(batch_first=False), (4, 2, D_MODEL),
         consts=lambda: dict(src_key_padding_mask=bool_tensor([[0, 0, 0, 1], [0, 0, 0, 0]])))
_encoder("encoder_two_layers_final_norm",
         lambda: nn.TransformerEncoder(encoder_layer(), 2, norm=nn.LayerNorm(D_MODEL), enable_nested_tensor=False),
         (2, 4, D_MODEL), consts=lambda: dict(src_key_padding_mask=bool_tensor([[0, 0, 0, 1], [0, 1, 0, 0]])))
_encoder("encoder_two_layers_pre_ln",
         lambda: nn.TransformerEncoder(encoder_layer(norm_first=True, activation="gelu"), 2,
                                       enable_nested_tensor=False), (2, 3, D_MODEL))


# ---- LinearAttention (reference above), positional encodings ----------------------------

def _linear_attention(name, num_heads, L, S, self_attention=True, **kw):
    @case(name)
    def _():
        module = perturb(LinearAttentionRef(E, num_heads, **kw))
        if self_attention:
            return dict(module=module, inputs=dict(x=randn(2, L, E)), forward=lambda m, x: m(x, x, x))
        inputs = dict(query=randn(2, L, E), key=randn(2, S, E), value=randn(2, S, E))
        return dict(module=module, inputs=inputs, forward=lambda m, query, key, value: m(query, key, value))


_linear_attention("linear_attention_multi_head", 2, 4, 4)
_linear_attention("linear_attention_single_head_cross", 1, 3, 5, self_attention=False)
_linear_attention("linear_attention_unnormalized", 2, 4, 4, normalize=False)
_linear_attention("linear_attention_no_bias_cross", 2, 3, 5, self_attention=False, bias=False)


@case("sinusoidal_pe")
def _():
    table = sinusoidal_table(16, 6)
    return dict(inputs=dict(x=randn(2, 5, 6)), buffers=dict(pe=table), forward=lambda m, x: x + table[:5])


@case("learned_pe")
def _():
    return dict(module=LearnedPositionalEncodingRef(6, 4), inputs=dict(x=randn(2, 4, 4)), forward=lambda m, x: m(x))


def main():
    CASES.main(record_module_case)


if __name__ == "__main__":
    main()
