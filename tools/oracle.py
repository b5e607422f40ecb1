"""What the PyTorch oracle generators share: seeded inputs, perturbed modules, the case
registry and the recorder of a module's values and gradients.

gen_module_fixtures.py (mod_*), gen_generation_fixtures.py (gen_*) and gen_cnn_fixtures.py
(cnn_*) each register their cases in a `Cases` and write them with `Cases.main`; the first
two record every case with `record_module_case`, whose members are described in
gen_module_fixtures.py. Each case seeds torch with a CRC of its name, so cases are
independent of their order and a re-run gives byte-identical files (fixture_io.py).
"""

import os
import zlib

import torch

from fixture_io import OUT_DIR, clear, to_numpy, write_npz


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def perturb(module, scale=0.2):
    """PyTorch's init + N(0, scale^2): no zero biases, no unit norm weights, and the
    deep-copied layers of a TransformerEncoder become different."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn_like(p))
    return module


def seed(name):
    torch.manual_seed(zlib.crc32(name.encode()))


class Cases:
    """The cases of one generator, written as OUT_DIR/<prefix><name>.npz."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.cases = []

    def add(self, name, *spec):
        assert "__" not in name and name not in [c[0] for c in self.cases], name
        self.cases.append((name,) + spec)

    def case(self, name):
        """A decorator registering a builder for record_module_case."""
        def register(build):
            self.add(name, build)
            return build
        return register

    def main(self, record):
        """Removes the prefix's fixtures and writes each case: record(name, *spec) -> arrays."""
        torch.set_num_threads(1)  # one reduction order: byte-identical reruns
        clear((self.prefix,))
        written = []
        for name, *spec in self.cases:
            seed(name)
            written.append(write_npz(self.prefix + name, record(name, *spec)))
        total = sum(os.path.getsize(p) for p in written)
        print("wrote %d cases, %.1f KB into %s" % (len(self.cases), total / 1024.0, OUT_DIR))


def record_module_case(name, build):
    """build() -> dict(module=nn.Module or None, inputs={differentiable float inputs},
    consts={masks, token ids, indices}, buffers={computed tables, compared only},
    forward=f(module, **inputs, **consts) -> out, (out, weights) or dict(out=..., idx=...)).
    Returns the members in order: param__*, buffer__*, inputs, consts, the forward's
    other outputs, out, weights, w, grad__<param>, grad_<input>."""
    arrays = {}
    spec = build()
    module = spec.get("module")
    params = []
    if module is not None:
        for k, v in module.state_dict().items():
            arrays["param__" + k] = to_numpy(v)
        params = list(module.named_parameters())  # a tied weight once
    for k, v in spec.get("buffers", {}).items():
        arrays["buffer__" + k] = to_numpy(v)
    leaves = {}
    for k, v in spec.get("inputs", {}).items():
        assert v.is_floating_point(), k
        arrays[k] = to_numpy(v)
        leaves[k] = v.detach().clone().requires_grad_(True)
    consts = spec.get("consts", {})
    for k, v in consts.items():
        arrays[k] = to_numpy(v)

    result = spec["forward"](module, **leaves, **consts)
    if isinstance(result, dict):
        outputs = [(k, v) for k, v in result.items() if k != "out"] + [("out", result["out"])]
    elif isinstance(result, tuple):
        outputs = [("out", result[0]), ("weights", result[1])]
    else:
        outputs = [("out", result)]
    out = dict(outputs)["out"]
    assert torch.isfinite(out).all(), name
    for k, v in outputs:
        if v is not None:
            arrays[k] = to_numpy(v)
    w = torch.randn(out.shape, dtype=out.dtype)
    arrays["w"] = to_numpy(w)

    targets = [p for _, p in params] + list(leaves.values())
    grads = torch.autograd.grad((out * w).sum(), targets)
    for (k, _), g in zip(params, grads[: len(params)]):
        arrays["grad__" + k] = to_numpy(g)
    for k, g in zip(leaves, grads[len(params):]):
        arrays["grad_" + k] = to_numpy(g)
    return arrays
