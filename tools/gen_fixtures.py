"""PyTorch oracle fixtures for microtorch's differentiable ops.

Regenerate (from the repository root) with Debian's interpreter, which has PyTorch and
numpy (a plain `python3` earlier on PATH may not):

    /usr/bin/python3 tools/gen_fixtures.py

The script rewrites its own fixtures and no others: one tests/fixtures/<case>.npz per case (tools/fixture_io.py), holding:

    <input>        each input (float32 unless the case says float64; index tensors int64,
                   masks and conditions bool)
    out            the forward output (`out0`, `out1`, ... for split/chunk)
    idx            extra non-differentiable outputs (indices of max)
    w              a fixed random weight of the output's shape (`w0`, ...)
    grad_<input>   d/d<input> of  sum_i (out_i * w_i).sum()  for each float input

plus io_*.npy files that numpy itself wrote, for tests/test_io.cpp. The C++ side reads
member <tensor> of <case>.npz as fixture("<case>__<tensor>").

Weighting the output by a random `w` (instead of backpropagating ones) makes every
gradient element distinct, so a transposed or mis-broadcast gradient cannot pass.

Each case seeds torch with a CRC of its own name, so cases are independent of their order
and re-running the script gives byte-identical files. Inputs that sit on a kink (relu, abs,
clamp, maximum) are nudged away from it so the derivative is unambiguous. The C++ side is
tests/test_oracle.cpp; tests never need torch.
"""

import os
import zlib

import numpy as np
import torch

from fixture_io import OUT_DIR, remove, to_numpy, write_npz

OTHER_GENERATORS = ("mod_", "loss_", "optim_", "ckpt_", "gen_")

F32 = torch.float32
F64 = torch.float64


# ---- input makers (use the global generator, seeded per case) --------------------------

def randn(*shape, dtype=F32):
    return torch.randn(*shape, dtype=dtype)


def positive(*shape, dtype=F32, lo=0.5, hi=2.0):
    """Uniform in [lo, hi): for log, sqrt, rsqrt, pow bases and divisors."""
    return torch.rand(*shape, dtype=dtype) * (hi - lo) + lo


def away_from(x, points, gap=0.1):
    """Moves elements closer than `gap` to any of `points` (kinks) by 2*gap."""
    x = x.clone()
    for p in points:
        near = (x - p).abs() < gap
        x[near] = x[near] + 2 * gap
    return x


def bools(*shape):
    return torch.rand(*shape) < 0.5


# ---- the recorder ---------------------------------------------------------------------

CASES = []
NAMES = set()


def case(name, make_inputs, fn):
    """Registers a case: make_inputs() -> dict of input tensors; fn(**inputs) -> output.

    fn may return a tensor (`out`), a list/tuple of tensors (`out0`, `out1`, ...) or a dict
    whose key "out" is the differentiable output and whose other keys are extra outputs
    saved without a weight.
    """
    assert name not in NAMES, name
    assert "__" not in name, name
    NAMES.add(name)
    CASES.append((name, make_inputs, fn))


def run_case(name, make_inputs, fn):
    arrays = {}

    def save(_, tensor_name, t):
        arrays[tensor_name] = to_numpy(t)

    torch.manual_seed(zlib.crc32(name.encode()))
    inputs = make_inputs()
    leaves = {}
    for k, v in inputs.items():
        save(name, k, v)
        if v.is_floating_point():
            v = v.detach().clone().requires_grad_(True)
        leaves[k] = v

    result = fn(**leaves)
    if isinstance(result, dict):
        outs = {"out": result["out"]}
        for k, v in result.items():
            if k != "out":
                save(name, k, v)
        weights = {"out": "w"}
    elif isinstance(result, (list, tuple)):
        outs = {"out%d" % i: r for i, r in enumerate(result)}
        weights = {"out%d" % i: "w%d" % i for i in range(len(result))}
    else:
        outs = {"out": result}
        weights = {"out": "w"}

    loss = 0
    for k, out in outs.items():
        w = torch.randn(out.shape, dtype=out.dtype)
        save(name, k, out)
        save(name, weights[k], w)
        loss = loss + (out * w).sum()

    diff = [k for k, v in leaves.items() if v.is_floating_point()]
    grads = torch.autograd.grad(loss, [leaves[k] for k in diff])
    for k, g in zip(diff, grads):
        save(name, "grad_" + k, g)
    write_npz(name, arrays)


# ---- elementwise binary, with broadcasting ---------------------------------------------

case("add_bcast", lambda: dict(a=randn(2, 3, 4), b=randn(3, 1)), lambda a, b: torch.add(a, b))
case("add_same", lambda: dict(a=randn(3, 4), b=randn(3, 4)), lambda a, b: a + b)
case("add_0d", lambda: dict(a=randn(2, 3), b=randn(())), lambda a, b: a + b)
case("sub_bcast_left", lambda: dict(a=randn(3, 1), b=randn(2, 3, 4)), lambda a, b: torch.sub(a, b))
case("sub_bcast_row", lambda: dict(a=randn(2, 3, 4), b=randn(4)), lambda a, b: a - b)
case("mul_bcast", lambda: dict(a=randn(2, 3, 4), b=randn(3, 1)), lambda a, b: torch.mul(a, b))
case("mul_bcast_both", lambda: dict(a=randn(2, 1, 4), b=randn(3, 1)), lambda a, b: a * b)
case("div_bcast", lambda: dict(a=randn(2, 3, 4), b=positive(3, 1)), lambda a, b: torch.div(a, b))
case("div_bcast_both", lambda: dict(a=randn(2, 1, 4), b=-positive(3, 1)), lambda a, b: a / b)
case("pow_scalar_int", lambda: dict(x=randn(2, 3)), lambda x: torch.pow(x, 3.0))
case("pow_scalar_frac", lambda: dict(x=positive(2, 3)), lambda x: torch.pow(x, 2.5))
case("pow_scalar_neg", lambda: dict(x=positive(2, 3)), lambda x: torch.pow(x, -0.5))
case("pow_tensor", lambda: dict(a=positive(2, 3, 4), b=randn(3, 1)), lambda a, b: torch.pow(a, b))
case("pow_tensor_same", lambda: dict(a=positive(3, 4), b=randn(3, 4)), lambda a, b: torch.pow(a, b))


def _no_ties(shape_a, shape_b):
    """a has the output shape; elements of a within 0.05 of their partner in b move by 0.1."""
    def make():
        a = randn(*shape_a)
        b = randn(*shape_b)
        a = torch.where((a - b).abs() < 0.05, a + 0.1, a)
        assert ((a - b).abs() >= 0.05).all()
        return dict(a=a, b=b)
    return make


case("maximum_bcast", _no_ties((2, 3, 4), (3, 1)), lambda a, b: torch.maximum(a, b))
case("maximum_bcast_row", _no_ties((2, 3, 4), (4,)), lambda a, b: torch.maximum(a, b))
case("minimum_bcast", _no_ties((2, 3, 4), (4,)), lambda a, b: torch.minimum(a, b))
case("minimum_bcast_col", _no_ties((2, 3, 4), (3, 1)), lambda a, b: torch.minimum(a, b))
case("maximum_same", _no_ties((3, 4), (3, 4)), lambda a, b: torch.maximum(a, b))

# ---- elementwise unary -----------------------------------------------------------------

case("neg", lambda: dict(x=randn(2, 3, 4)), lambda x: torch.neg(x))
case("exp", lambda: dict(x=randn(2, 3, 4)), lambda x: torch.exp(x))
case("log", lambda: dict(x=positive(2, 3, 4, lo=0.2, hi=3.0)), lambda x: torch.log(x))
case("sqrt", lambda: dict(x=positive(2, 3, 4, lo=0.2, hi=3.0)), lambda x: torch.sqrt(x))
case("rsqrt", lambda: dict(x=positive(2, 3, 4, lo=0.2, hi=3.0)), lambda x: torch.rsqrt(x))
case("abs", lambda: dict(x=away_from(randn(2, 3, 4), [0.0])), lambda x: torch.abs(x))
case("tanh", lambda: dict(x=randn(2, 3, 4)), lambda x: torch.tanh(x))
case("sigmoid", lambda: dict(x=randn(2, 3, 4) * 2), lambda x: torch.sigmoid(x))
case("relu", lambda: dict(x=away_from(randn(2, 3, 4), [0.0])), lambda x: torch.relu(x))
case("gelu_exact", lambda: dict(x=randn(2, 3, 4) * 2), lambda x: torch.nn.functional.gelu(x))
case("gelu_tanh", lambda: dict(x=randn(2, 3, 4) * 2),
     lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
case("clamp", lambda: dict(x=away_from(randn(2, 3, 4), [-0.5, 0.8], gap=0.05)),
     lambda x: torch.clamp(x, -0.5, 0.8))

# ---- where / masked_fill ----------------------------------------------------------------

case("where_bcast", lambda: dict(cond=bools(3, 4), a=randn(2, 3, 4), b=randn(4)),
     lambda cond, a, b: torch.where(cond, a, b))
case("where_same", lambda: dict(cond=bools(3, 4), a=randn(3, 4), b=randn(3, 4)),
     lambda cond, a, b: torch.where(cond, a, b))
case("masked_fill_bcast", lambda: dict(x=randn(2, 3, 4), mask=bools(3, 1)),
     lambda x, mask: x.masked_fill(mask, -1.5))
case("masked_fill_same", lambda: dict(x=randn(3, 4), mask=bools(3, 4)),
     lambda x, mask: x.masked_fill(mask, 2.0))

# ---- reductions ------------------------------------------------------------------------

case("sum_all", lambda: dict(x=randn(2, 3, 4)), lambda x: x.sum())
case("sum_dim1", lambda: dict(x=randn(2, 3, 4)), lambda x: x.sum(dim=[1]))
case("sum_neg_keepdim", lambda: dict(x=randn(2, 3, 4)), lambda x: x.sum(dim=[-1], keepdim=True))
case("sum_two_dims", lambda: dict(x=randn(2, 3, 4)), lambda x: x.sum(dim=[0, -1]))
case("sum_two_dims_keepdim", lambda: dict(x=randn(2, 3, 4)), lambda x: x.sum(dim=[0, 2], keepdim=True))
case("mean_all", lambda: dict(x=randn(2, 3, 4)), lambda x: x.mean())
case("mean_dim0", lambda: dict(x=randn(2, 3, 4)), lambda x: x.mean(dim=[0]))
case("mean_neg_keepdim", lambda: dict(x=randn(2, 3, 4)), lambda x: x.mean(dim=[-2], keepdim=True))
case("mean_two_dims", lambda: dict(x=randn(2, 3, 4)), lambda x: x.mean(dim=[1, -1]))
case("var_unbiased_dim1", lambda: dict(x=randn(2, 5, 3)), lambda x: torch.var(x, dim=[1], unbiased=True))
case("var_biased_neg_keepdim", lambda: dict(x=randn(2, 3, 5)),
     lambda x: torch.var(x, dim=[-1], unbiased=False, keepdim=True))
case("var_all", lambda: dict(x=randn(3, 4)), lambda x: torch.var(x))
case("logsumexp_neg", lambda: dict(x=randn(2, 3, 4) * 3), lambda x: torch.logsumexp(x, dim=[-1]))
case("logsumexp_dim0_keepdim", lambda: dict(x=randn(3, 4) * 3),
     lambda x: torch.logsumexp(x, dim=[0], keepdim=True))
case("logsumexp_two_dims", lambda: dict(x=randn(2, 3, 4)), lambda x: torch.logsumexp(x, dim=[0, 2]))


def _max_dim(dim, keepdim):
    def f(x):
        values, idx = torch.max(x, dim=dim, keepdim=keepdim)
        return {"out": values, "idx": idx}
    return f


case("max_dim1", lambda: dict(x=randn(2, 3, 4)), _max_dim(1, False))
case("max_neg_keepdim", lambda: dict(x=randn(2, 3, 4)), _max_dim(-1, True))

# ---- softmax family ---------------------------------------------------------------------

case("softmax_last", lambda: dict(x=randn(3, 5) * 2), lambda x: torch.softmax(x, dim=-1))
case("softmax_dim0", lambda: dict(x=randn(3, 5) * 2), lambda x: torch.softmax(x, dim=0))
case("softmax_3d_dim1", lambda: dict(x=randn(2, 3, 4) * 2), lambda x: torch.softmax(x, dim=1))
case("log_softmax_last", lambda: dict(x=randn(3, 5) * 2), lambda x: torch.log_softmax(x, dim=-1))
case("log_softmax_dim0", lambda: dict(x=randn(3, 5) * 2), lambda x: torch.log_softmax(x, dim=0))
case("log_softmax_3d_dim1", lambda: dict(x=randn(2, 3, 4) * 2), lambda x: torch.log_softmax(x, dim=1))

# ---- matmul ----------------------------------------------------------------------------

case("matmul_1d_1d", lambda: dict(a=randn(4), b=randn(4)), lambda a, b: torch.matmul(a, b))
case("matmul_1d_2d", lambda: dict(a=randn(4), b=randn(4, 3)), lambda a, b: torch.matmul(a, b))
case("matmul_2d_1d", lambda: dict(a=randn(3, 4), b=randn(4)), lambda a, b: torch.matmul(a, b))
case("matmul_2d_2d", lambda: dict(a=randn(3, 4), b=randn(4, 5)), lambda a, b: torch.matmul(a, b))
case("matmul_batched", lambda: dict(a=randn(2, 3, 4), b=randn(2, 4, 5)), lambda a, b: torch.matmul(a, b))
case("matmul_batched_bcast", lambda: dict(a=randn(2, 1, 3, 4), b=randn(5, 4, 2)), lambda a, b: torch.matmul(a, b))
case("matmul_3d_2d", lambda: dict(a=randn(2, 3, 4), b=randn(4, 5)), lambda a, b: torch.matmul(a, b))
case("matmul_1d_3d", lambda: dict(a=randn(4), b=randn(2, 4, 3)), lambda a, b: torch.matmul(a, b))
case("matmul_3d_1d", lambda: dict(a=randn(2, 3, 4), b=randn(4)), lambda a, b: torch.matmul(a, b))

# ---- shape ops --------------------------------------------------------------------------

case("reshape", lambda: dict(x=randn(2, 3, 4)), lambda x: x.reshape(4, -1))
case("reshape_3d", lambda: dict(x=randn(6, 4)), lambda x: x.reshape(2, -1, 3))
case("transpose_last2", lambda: dict(x=randn(2, 3, 4)), lambda x: x.transpose(-2, -1))
case("transpose_0_2", lambda: dict(x=randn(2, 3, 4)), lambda x: x.transpose(0, 2))
case("permute", lambda: dict(x=randn(2, 3, 4)), lambda x: x.permute(2, 0, 1))
case("permute_neg", lambda: dict(x=randn(2, 3, 4)), lambda x: x.permute(-1, -3, -2))
case("expand", lambda: dict(x=randn(3, 1)), lambda x: x.expand(2, 3, 4))
case("expand_keep", lambda: dict(x=randn(1, 3, 1)), lambda x: x.expand(2, -1, 4))
case("slice_step", lambda: dict(x=randn(2, 5, 3)), lambda x: x[:, 0:5:2])
case("slice_neg_dim_clamped", lambda: dict(x=randn(3, 7)), lambda x: x[:, 1:100:3])
case("slice_neg_start", lambda: dict(x=randn(6, 2)), lambda x: x[-4:-1])
case("select", lambda: dict(x=randn(2, 3, 4)), lambda x: x.select(1, 2))
case("select_neg", lambda: dict(x=randn(2, 3, 4)), lambda x: x.select(-1, -1))
case("index_select_dim0", lambda: dict(x=randn(4, 3), index=torch.tensor([2, 0, 2, 3], dtype=torch.int64)),
     lambda x, index: torch.index_select(x, 0, index))
case("index_select_neg", lambda: dict(x=randn(2, 3, 4), index=torch.tensor([3, 1, 1], dtype=torch.int64)),
     lambda x, index: torch.index_select(x, -1, index))
case("cat_dim1", lambda: dict(a=randn(2, 1, 3), b=randn(2, 2, 3), c=randn(2, 3, 3)),
     lambda a, b, c: torch.cat([a, b, c], dim=1))
case("cat_neg", lambda: dict(a=randn(2, 3), b=randn(2, 2)), lambda a, b: torch.cat([a, b], dim=-1))
case("stack_last", lambda: dict(a=randn(2, 3), b=randn(2, 3), c=randn(2, 3)),
     lambda a, b, c: torch.stack([a, b, c], dim=-1))
case("stack_dim0", lambda: dict(a=randn(3, 2), b=randn(3, 2)), lambda a, b: torch.stack([a, b], dim=0))
case("split_size", lambda: dict(x=randn(2, 5, 3)), lambda x: torch.split(x, 2, dim=1))
case("split_sizes_neg", lambda: dict(x=randn(3, 4)), lambda x: torch.split(x, [1, 3], dim=-1))
case("chunk_uneven", lambda: dict(x=randn(5, 2)), lambda x: torch.chunk(x, 3, dim=0))
# torch.chunk(x, 3) of 4 rows gives 2 chunks of ceil(4/3) = 2, not 3.
case("chunk_fewer", lambda: dict(x=randn(2, 4)), lambda x: torch.chunk(x, 3, dim=-1))

# ---- float64 -----------------------------------------------------------------------------

case("f64_mul_bcast", lambda: dict(a=randn(2, 3, 4, dtype=F64), b=randn(3, 1, dtype=F64)),
     lambda a, b: a * b)
case("f64_div_bcast", lambda: dict(a=randn(2, 3, 4, dtype=F64), b=positive(4, dtype=F64)),
     lambda a, b: a / b)
case("f64_matmul_batched_bcast", lambda: dict(a=randn(2, 1, 3, 4, dtype=F64), b=randn(5, 4, 2, dtype=F64)),
     lambda a, b: torch.matmul(a, b))
case("f64_softmax_3d_dim1", lambda: dict(x=randn(2, 3, 4, dtype=F64) * 2), lambda x: torch.softmax(x, dim=1))
case("f64_log_softmax_last", lambda: dict(x=randn(3, 5, dtype=F64) * 2), lambda x: torch.log_softmax(x, dim=-1))
case("f64_var_unbiased", lambda: dict(x=randn(2, 5, 3, dtype=F64)), lambda x: torch.var(x, dim=[1]))
case("f64_logsumexp", lambda: dict(x=randn(2, 3, 4, dtype=F64) * 3), lambda x: torch.logsumexp(x, dim=[-1]))
case("f64_gelu_exact", lambda: dict(x=randn(2, 3, 4, dtype=F64) * 2), lambda x: torch.nn.functional.gelu(x))
case("f64_gelu_tanh", lambda: dict(x=randn(2, 3, 4, dtype=F64) * 2),
     lambda x: torch.nn.functional.gelu(x, approximate="tanh"))


def write_io_fixtures():
    """Files numpy itself writes, for tests/test_io.cpp: Fortran order and the other dtypes."""
    np.save(os.path.join(OUT_DIR, "io_fortran_order.npy"), np.asfortranarray(np.arange(6.0).reshape(2, 3)))
    np.save(os.path.join(OUT_DIR, "io_int64.npy"), np.arange(-3, 3, dtype=np.int64).reshape(3, 2))
    np.save(os.path.join(OUT_DIR, "io_bool.npy"), np.array([[True, False, True]]))


def main():
    torch.set_num_threads(1)  # one reduction order: byte-identical reruns
    os.makedirs(OUT_DIR, exist_ok=True)
    remove(n for n, _, _ in CASES)
    for name, make_inputs, fn in CASES:
        run_case(name, make_inputs, fn)
    write_io_fixtures()
    files = [f for f in os.listdir(OUT_DIR) if not f.startswith(OTHER_GENERATORS)]
    total = sum(os.path.getsize(os.path.join(OUT_DIR, f)) for f in files)
    print("wrote %d cases, %d files, %.1f KB into %s" % (len(CASES), len(files), total / 1024.0, OUT_DIR))


if __name__ == "__main__":
    main()
