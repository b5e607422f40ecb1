"""PyTorch oracle fixtures for microtorch's convolution, pooling and batch-norm modules.

Regenerate (from the repository root) with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tools/gen_cnn_fixtures.py

The script removes only its own files, tests/fixtures/cnn_*, and writes one
tests/fixtures/cnn_<case>.npz per case (tools/fixture_io.py) whose members, read in C++ as
fixture("cnn_<case>__<member>") by tests/test_conv.cpp, are:

    param__<dotted.name>.npy  the module's state dict before the first step, under PyTorch's
                              names (buffers included: running_mean, num_batches_tracked ...)
    x.npy                     the input of a one-step case, or
    x0.npy, x1.npy, ...       the inputs of a training case's steps, in order
    out.npy                   the output of the last step
    w.npy                     a fixed random weight of the output's shape
    grad__<dotted.name>.npy   d/d<parameter> of sum(out * w) at the last step
    grad_x.npy                d/d<last input> of sum(out * w)
    after__<dotted.name>.npy  each buffer after the last step (running statistics)
    train.npy                 bool: the steps ran in training mode

Parameters are PyTorch's initialisation plus N(0, 0.2^2) noise (BatchNorm weights are then
not 1, biases not 0), and running statistics of eval cases are set to random values, so a
swapped or ignored parameter or buffer cannot pass. Each case seeds torch with a CRC of its
name: a re-run gives byte-identical files. Inputs of max pooling have no ties.
"""

import numpy as np
import torch
import torch.nn as nn

from fixture_io import to_numpy
from oracle import Cases, perturb, randn

PREFIX = "cnn_"
CASES = Cases(PREFIX)


def with_running_stats(module):
    """Random running statistics (mean N(0, 1), variance U(0.5, 1.5)) for eval cases."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats:
            m.running_mean.copy_(torch.randn_like(m.running_mean))
            m.running_var.copy_(torch.rand_like(m.running_var) + 0.5)
            m.num_batches_tracked.fill_(7)
    return module


def case(name, make_module, shapes, train=False):
    """A case: make_module() -> nn.Module (built after seeding); shapes: one input shape,
    or a list of them for the steps of a training case."""
    CASES.add(name, make_module, shapes, train)


def record(name, make_module, shapes, train):
    arrays = {}
    module = make_module()
    module.train(train)
    for k, v in module.state_dict().items():
        arrays["param__" + k] = to_numpy(v)
    steps = shapes if isinstance(shapes, list) else [shapes]
    xs = [randn(*s) for s in steps]
    names = ["x"] if len(xs) == 1 else ["x%d" % i for i in range(len(xs))]
    for n, x in zip(names, xs):
        arrays[n] = to_numpy(x)
    with torch.no_grad():
        for x in xs[:-1]:
            module(x)
    x = xs[-1].clone().requires_grad_(True)
    out = module(x)
    assert torch.isfinite(out).all(), name
    arrays["out"] = to_numpy(out)
    w = torch.randn(out.shape, dtype=out.dtype)
    arrays["w"] = to_numpy(w)
    params = list(module.named_parameters())
    grads = torch.autograd.grad((out * w).sum(), [p for _, p in params] + [x])
    for (k, _), g in zip(params, grads[:-1]):
        arrays["grad__" + k] = to_numpy(g)
    arrays["grad_x"] = to_numpy(grads[-1])
    for k, v in module.named_buffers():
        arrays["after__" + k] = to_numpy(v)
    arrays["train"] = np.array(train)
    return arrays


# ---- Conv1d: stride, padding, dilation, groups and their edges ---------------------------

case("conv1d_basic", lambda: perturb(nn.Conv1d(3, 4, 3)), (2, 3, 10))
case("conv1d_stride_pad", lambda: perturb(nn.Conv1d(3, 16, 5, stride=2, padding=2)), (2, 3, 17))
case("conv1d_dilation", lambda: perturb(nn.Conv1d(2, 3, 3, dilation=2, padding=1)), (2, 2, 9))
case("conv1d_groups", lambda: perturb(nn.Conv1d(4, 6, 3, padding=1, groups=2)), (2, 4, 8))
case("conv1d_depthwise", lambda: perturb(nn.Conv1d(4, 4, 3, padding=1, groups=4)), (2, 4, 9))
# A channel multiplier of 2, stride, dilation and padding together on the direct path.
case("conv1d_depthwise_multiplier", lambda: perturb(nn.Conv1d(3, 6, 4, stride=2, padding=1, dilation=2, groups=3)),
     (2, 3, 12))
case("conv1d_pointwise_no_bias", lambda: perturb(nn.Conv1d(4, 5, 1, bias=False)), (2, 4, 6))
case("conv1d_same_even_kernel", lambda: perturb(nn.Conv1d(2, 3, 4, padding="same")), (2, 2, 7))
case("conv1d_same_dilated", lambda: perturb(nn.Conv1d(2, 3, 3, padding="same", dilation=3)), (1, 2, 8))
case("conv1d_valid_unbatched", lambda: perturb(nn.Conv1d(3, 2, 3, padding="valid")), (3, 7))
# The kernel spans the whole padded input: one output.
case("conv1d_kernel_fills_padded", lambda: perturb(nn.Conv1d(1, 2, 7, padding=1)), (2, 1, 5))
# Stride larger than the kernel: inputs between windows get no gradient.
case("conv1d_stride_over_kernel", lambda: perturb(nn.Conv1d(2, 2, 2, stride=3)), (2, 2, 10))
# Padding larger than the kernel: outputs that read only zeros are the bias.
case("conv1d_wide_padding", lambda: perturb(nn.Conv1d(2, 3, 2, padding=3, stride=2)), (2, 2, 5))

# ---- Conv2d ---------------------------------------------------------------------------------

case("conv2d_basic", lambda: perturb(nn.Conv2d(3, 4, 3)), (2, 3, 6, 5))
case("conv2d_rectangular", lambda: perturb(nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
     (2, 2, 7, 6))
case("conv2d_depthwise", lambda: perturb(nn.Conv2d(4, 4, 3, padding=1, groups=4)), (2, 4, 5, 5))
case("conv2d_depthwise_stride_multiplier", lambda: perturb(nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4)),
     (2, 4, 7, 6))
case("conv2d_pointwise", lambda: perturb(nn.Conv2d(4, 6, 1)), (2, 4, 5, 3))
case("conv2d_groups", lambda: perturb(nn.Conv2d(6, 4, 3, padding=(0, 1), groups=2)), (2, 6, 5, 4))
case("conv2d_same", lambda: perturb(nn.Conv2d(3, 2, (2, 3), padding="same")), (2, 3, 5, 4))
case("conv2d_unbatched", lambda: perturb(nn.Conv2d(2, 3, 3, padding=1)), (2, 4, 4))

# ---- pooling and Flatten ----------------------------------------------------------------------

case("maxpool1d", lambda: nn.MaxPool1d(3, stride=2, padding=1), (2, 3, 9))
case("maxpool1d_default_stride", lambda: nn.MaxPool1d(2), (2, 3, 7))
case("maxpool2d", lambda: nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 1)), (2, 3, 6, 5))
case("maxpool2d_unbatched", lambda: nn.MaxPool2d(2), (3, 4, 5))
case("avgpool1d", lambda: nn.AvgPool1d(3, stride=2, padding=1), (2, 3, 8))
case("avgpool1d_exclude_pad", lambda: nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False), (2, 3, 8))
case("avgpool2d", lambda: nn.AvgPool2d(3, stride=2, padding=1), (2, 2, 7, 6))
case("avgpool2d_exclude_pad",
     lambda: nn.AvgPool2d((2, 3), stride=(1, 2), padding=(1, 1), count_include_pad=False), (2, 2, 5, 6))
case("adaptive_avgpool1d", lambda: nn.AdaptiveAvgPool1d(3), (2, 3, 8))
case("adaptive_avgpool1d_global", lambda: nn.AdaptiveAvgPool1d(1), (2, 3, 5))
case("adaptive_avgpool2d", lambda: nn.AdaptiveAvgPool2d((2, 3)), (2, 3, 5, 7))
case("adaptive_avgpool2d_larger", lambda: nn.AdaptiveAvgPool2d(4), (1, 2, 3, 3))
case("flatten", lambda: nn.Flatten(), (2, 3, 4, 5))

# ---- BatchNorm: training steps (running statistics after them) and eval ----------------------

case("bn1d_train_2d", lambda: perturb(nn.BatchNorm1d(4)), [(8, 4), (8, 4), (8, 4)], train=True)
case("bn1d_train_3d_momentum", lambda: perturb(nn.BatchNorm1d(3, momentum=0.2)), [(4, 3, 6)] * 3, train=True)
case("bn2d_train", lambda: perturb(nn.BatchNorm2d(3)), [(4, 3, 5, 4)] * 3, train=True)
case("bn2d_train_no_affine", lambda: nn.BatchNorm2d(3, affine=False), [(2, 3, 4, 4)] * 2, train=True)
case("bn1d_train_cumulative", lambda: perturb(nn.BatchNorm1d(4, momentum=None)), [(5, 4)] * 3, train=True)
case("bn2d_eval", lambda: with_running_stats(perturb(nn.BatchNorm2d(3, eps=1e-3))), (2, 3, 4, 5))
case("bn1d_eval_3d", lambda: with_running_stats(perturb(nn.BatchNorm1d(3))), (2, 3, 6))
case("bn2d_no_tracking_eval", lambda: perturb(nn.BatchNorm2d(3, track_running_stats=False)), (3, 3, 2, 4))

# ---- small networks: the sensor front end and a DS-CNN block ---------------------------------


def sensor_net():
    return nn.Sequential(nn.Conv1d(3, 16, 5, stride=2, padding=2), nn.BatchNorm1d(16), nn.ReLU(),
                         nn.Conv1d(16, 16, 3, padding=1, groups=16), nn.Conv1d(16, 8, 1), nn.ReLU(),
                         nn.MaxPool1d(2), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(8, 4))


def dscnn_block():
    return nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten())


case("sensor_net_eval", lambda: with_running_stats(perturb(sensor_net())), (2, 3, 32))
case("sensor_net_train", lambda: perturb(sensor_net()), [(4, 3, 32)] * 2, train=True)
case("dscnn_block_train", lambda: perturb(dscnn_block()), [(4, 8, 6, 5)] * 2, train=True)


def main():
    CASES.main(record)


if __name__ == "__main__":
    main()
