"""PyTorch oracle fixtures for microtorch's losses, optimizers and LR schedules.

Regenerate (from the repository root) with Debian's interpreter, which has PyTorch 1.13
and numpy (a plain `python3` earlier on PATH may not):

    /usr/bin/python3 tools/gen_training_fixtures.py

It rewrites tests/fixtures/loss_*.npz and tests/fixtures/optim_*.npz and touches no other
file there. As for every generator (tools/fixture_io.py), a case is one <case>.npz whose
<tensor>.npy members tests/helpers.hpp reads as fixture("<case>__<tensor>").

Losses (tests/test_loss.cpp), for each case loss_<name>.npz holds:
    <input>          inputs (float32 logits/targets, int64 class targets, float32 class
                     weights / pos_weight)
    out              the loss (0-d, or per element for reduction "none")
    w                reduction "none" only: a fixed random weight of out's shape
    grad_<input>     d/d<input> of out (scalar) or of (out * w).sum() (none)

Optimizers (tests/test_optim.cpp): one fixed problem, parameters W [3, 4] and b [4],
    loss(W, b) = mean((X @ W + b - Y)^2) + 0.1 * sum(tanh(X @ W + b)),  X [5, 3], Y [5, 4]
    optim_problem.npz: X, Y, W0, b0
    optim_<case>.npz: W [5, 3, 4] and b [5, 4], the parameters after each of 5 steps;
                      loss [5], the loss before each step
    optim_clip_<case>.npz: grad_W, grad_b, total_norm   clip_grad_norm_ at (W0, b0)
    optim_steplr.npz, optim_cosine.npz: lr              lr after 0..11 scheduler steps

Every case seeds torch with a CRC of its own name, so re-running gives identical files.
"""

import math
import os
import zlib

import numpy as np
import torch
import torch.nn.functional as F

from fixture_io import clear, to_numpy, write_npz

PREFIXES = ("loss_", "optim_")

CASES = {}  # case -> {tensor name: array}, in insertion order


def seed(name):
    torch.manual_seed(zlib.crc32(name.encode()))


def save(name, tensor_or_array):
    """Stores "<case>__<tensor>" as member <tensor> of <case>.npz (written by main())."""
    case, tensor = name.split("__")
    assert case.startswith(PREFIXES), name
    arrays = CASES.setdefault(case, {})
    assert tensor not in arrays, "written twice: " + name
    arrays[tensor] = to_numpy(tensor_or_array)


# ---- losses ---------------------------------------------------------------------------

def loss_case(name, inputs, fn, none=False):
    """inputs: dict of tensors (floats requiring grad get a gradient file); fn(**inputs)."""
    full = "loss_" + name
    seed(full + "/w")
    for k, v in inputs.items():
        save(full + "__" + k, v)
    leaves = {k: v.clone().requires_grad_(v.is_floating_point() and k not in ("weight", "pos_weight"))
              for k, v in inputs.items()}
    out = fn(**leaves)
    save(full + "__out", out)
    if none:
        w = torch.randn(out.shape)
        save(full + "__w", w)
        (out * w).sum().backward()
    else:
        assert out.dim() == 0
        out.backward()
    for k, v in leaves.items():
        if v.requires_grad:
            save(full + "__grad_" + k, v.grad)


def targets(n, c, ignore=(), ignore_index=-100):
    t = torch.randint(0, c, (n,))
    for i in ignore:
        t[i] = ignore_index
    return t


def write_losses():
    # cross_entropy [N, C]
    seed("ce_plain")
    loss_case("ce_plain", {"logits": torch.randn(6, 5), "target": targets(6, 5)},
              lambda logits, target: F.cross_entropy(logits, target))
    seed("ce_ignore")
    loss_case("ce_ignore", {"logits": torch.randn(6, 5), "target": targets(6, 5, ignore=(1, 4))},
              lambda logits, target: F.cross_entropy(logits, target))
    seed("ce_ignore_class")  # ignore_index is a valid class id (2)
    t = torch.tensor([2, 0, 2, 4, 1, 3, 2])
    loss_case("ce_ignore_class", {"logits": torch.randn(7, 5), "target": t},
              lambda logits, target: F.cross_entropy(logits, target, ignore_index=2))
    seed("ce_smooth")
    loss_case("ce_smooth", {"logits": torch.randn(6, 5), "target": targets(6, 5, ignore=(2,))},
              lambda logits, target: F.cross_entropy(logits, target, label_smoothing=0.1))
    seed("ce_weight")
    loss_case("ce_weight", {"logits": torch.randn(6, 5), "target": targets(6, 5, ignore=(3,)),
                            "weight": torch.rand(5) + 0.5},
              lambda logits, target, weight: F.cross_entropy(logits, target, weight=weight))
    seed("ce_weight_smooth")
    loss_case("ce_weight_smooth", {"logits": torch.randn(6, 5), "target": targets(6, 5, ignore=(0,)),
                                   "weight": torch.rand(5) + 0.5},
              lambda logits, target, weight: F.cross_entropy(logits, target, weight=weight, label_smoothing=0.25))
    seed("ce_sum")
    loss_case("ce_sum", {"logits": torch.randn(6, 5), "target": targets(6, 5, ignore=(5,))},
              lambda logits, target: F.cross_entropy(logits, target, reduction="sum", label_smoothing=0.2))
    seed("ce_none")
    loss_case("ce_none", {"logits": torch.randn(6, 5), "target": targets(6, 5, ignore=(1,)),
                          "weight": torch.rand(5) + 0.5},
              lambda logits, target, weight: F.cross_entropy(logits, target, weight=weight, reduction="none",
                                                             label_smoothing=0.1),
              none=True)
    seed("ce_nd")  # [N, C, d] logits with [N, d] targets
    t = torch.randint(0, 4, (3, 5))
    t[0, 2] = -100
    t[2, 4] = -100
    loss_case("ce_nd", {"logits": torch.randn(3, 4, 5), "target": t},
              lambda logits, target: F.cross_entropy(logits, target, label_smoothing=0.1))
    seed("ce_nd_none")  # [N, C, d1, d2]
    t = torch.randint(0, 3, (2, 2, 3))
    t[1, 0, 1] = -100
    loss_case("ce_nd_none", {"logits": torch.randn(2, 3, 2, 3), "target": t},
              lambda logits, target: F.cross_entropy(logits, target, reduction="none"), none=True)
    seed("ce_unbatched")
    loss_case("ce_unbatched", {"logits": torch.randn(5), "target": torch.tensor(3)},
              lambda logits, target: F.cross_entropy(logits, target, label_smoothing=0.1))
    seed("ce_large")  # logits of magnitude 100: needs the stable log_softmax
    loss_case("ce_large", {"logits": torch.randn(4, 3) * 100, "target": targets(4, 3)},
              lambda logits, target: F.cross_entropy(logits, target))

    # nll_loss
    seed("nll_plain")
    loss_case("nll_plain", {"log_probs": torch.randn(6, 4).log_softmax(1), "target": targets(6, 4, ignore=(2,))},
              lambda log_probs, target: F.nll_loss(log_probs, target))
    seed("nll_weight_none")
    loss_case("nll_weight_none", {"log_probs": torch.randn(6, 4), "target": targets(6, 4, ignore=(0,)),
                                  "weight": torch.rand(4) + 0.5},
              lambda log_probs, target, weight: F.nll_loss(log_probs, target, weight=weight, reduction="none"),
              none=True)

    # mse_loss
    for red in ("mean", "sum", "none"):
        seed("mse_" + red)
        loss_case("mse_" + red, {"input": torch.randn(3, 4), "target": torch.randn(3, 4)},
                  lambda input, target, red=red: F.mse_loss(input, target, reduction=red), none=red == "none")

    # binary_cross_entropy_with_logits: soft targets, exact zeros and large logits
    def bce_logits(*shape):
        x = torch.randn(*shape) * 3
        x.view(-1)[0] = 0.0
        x.view(-1)[1] = 40.0
        x.view(-1)[2] = -40.0
        return x

    seed("bce_mean")
    loss_case("bce_mean", {"logits": bce_logits(4, 3), "target": torch.rand(4, 3)},
              lambda logits, target: F.binary_cross_entropy_with_logits(logits, target))
    seed("bce_sum")
    loss_case("bce_sum", {"logits": bce_logits(5), "target": (torch.rand(5) < 0.5).float()},
              lambda logits, target: F.binary_cross_entropy_with_logits(logits, target, reduction="sum"))
    seed("bce_pos_weight")
    loss_case("bce_pos_weight", {"logits": bce_logits(4, 3), "target": torch.rand(4, 3),
                                 "pos_weight": torch.rand(3) * 3 + 0.5},
              lambda logits, target, pos_weight: F.binary_cross_entropy_with_logits(logits, target,
                                                                                    pos_weight=pos_weight))
    seed("bce_weight_none")
    loss_case("bce_weight_none", {"logits": bce_logits(4, 3), "target": torch.rand(4, 3),
                                  "weight": torch.rand(4, 1) + 0.5, "pos_weight": torch.rand(3) + 0.5},
              lambda logits, target, weight, pos_weight: F.binary_cross_entropy_with_logits(
                  logits, target, weight=weight, pos_weight=pos_weight, reduction="none"),
              none=True)


# ---- optimizers -------------------------------------------------------------------------

STEPS = 5


def problem():
    seed("optim_problem")
    X = torch.randn(5, 3)
    Y = torch.randn(5, 4)
    W0 = torch.randn(3, 4) * 0.5
    b0 = torch.randn(4) * 0.5
    return X, Y, W0, b0


def objective(X, Y, W, b):
    h = X @ W + b
    return ((h - Y) ** 2).mean() + 0.1 * torch.tanh(h).sum()


def trajectory(name, make_optimizer):
    X, Y, W0, b0 = problem()
    W = W0.clone().requires_grad_()
    b = b0.clone().requires_grad_()
    opt = make_optimizer([W, b])
    Ws, bs, losses = [], [], []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = objective(X, Y, W, b)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        Ws.append(W.detach().clone())
        bs.append(b.detach().clone())
    full = "optim_" + name
    save(full + "__W", torch.stack(Ws))
    save(full + "__b", torch.stack(bs))
    save(full + "__loss", np.array(losses, dtype=np.float32))


def write_optimizers():
    X, Y, W0, b0 = problem()
    for k, v in {"X": X, "Y": Y, "W0": W0, "b0": b0}.items():
        save("optim_problem__" + k, v)

    O = torch.optim
    trajectory("sgd", lambda p: O.SGD(p, lr=0.1, foreach=False))
    trajectory("sgd_momentum", lambda p: O.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, foreach=False))
    trajectory("sgd_nesterov", lambda p: O.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05,
                                               foreach=False))
    trajectory("sgd_maximize", lambda p: O.SGD(p, lr=0.01, momentum=0.5, maximize=True, foreach=False))
    trajectory("adam", lambda p: O.Adam(p, lr=0.05, foreach=False))
    trajectory("adam_wd", lambda p: O.Adam(p, lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1,
                                           foreach=False))
    trajectory("adam_amsgrad", lambda p: O.Adam(p, lr=0.05, amsgrad=True, foreach=False))
    trajectory("adamw", lambda p: O.AdamW(p, lr=0.05, weight_decay=0.1, foreach=False))
    trajectory("adamw_amsgrad", lambda p: O.AdamW(p, lr=0.05, weight_decay=0.1, amsgrad=True, foreach=False))

    # clip_grad_norm_ at (W0, b0)
    for name, max_norm, norm_type in (("l2", 0.5, 2.0), ("l1", 1.0, 1.0), ("inf", 0.1, math.inf),
                                      ("noclip", 100.0, 2.0)):
        W = W0.clone().requires_grad_()
        b = b0.clone().requires_grad_()
        objective(X, Y, W, b).backward()
        total = torch.nn.utils.clip_grad_norm_([W, b], max_norm, norm_type=norm_type)
        full = "optim_clip_" + name
        save(full + "__grad_W", W.grad)
        save(full + "__grad_b", b.grad)
        save(full + "__total_norm", np.array(total.item(), dtype=np.float64))

    # LR schedules: the lr after 0..11 scheduler steps.
    p = [torch.zeros(1, requires_grad=True)]
    opt = O.SGD(p, lr=0.2)
    sched = O.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    lrs = []
    for _ in range(12):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    save("optim_steplr__lr", np.array(lrs, dtype=np.float64))

    # Cosine with linear warmup (plain python: torch 1.13 has no such scheduler).
    base, warmup, total, min_lr = 0.2, 3, 10, 0.01
    lrs = []
    for t in range(12):
        if t < warmup:
            lrs.append(base * t / warmup)
        else:
            progress = min(1.0, (t - warmup) / max(1, total - warmup))
            lrs.append(min_lr + (base - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress)))
    save("optim_cosine__lr", np.array(lrs, dtype=np.float64))


def main():
    torch.set_num_threads(1)  # one reduction order: identical reruns
    clear(PREFIXES)
    write_losses()
    write_optimizers()
    paths = [write_npz(case, arrays) for case, arrays in CASES.items()]
    total = sum(os.path.getsize(p) for p in paths)
    print("wrote %d cases, %.1f KB into tests/fixtures" % (len(paths), total / 1024.0))


if __name__ == "__main__":
    main()
