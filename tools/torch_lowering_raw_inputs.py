"""Train two transformers on real-valued inputs in PyTorch, and export them: models as a
user brings them, whose inputs are raw numbers rather than token ids.

    /usr/bin/python3 tools/torch_lowering_raw_inputs.py [OUT_DIR]     (default tests/fixtures)

  sensor_encoder        raw 3-axis windows [N, 32, 3] -> Linear(3, 32) + learned positions
                        -> nn.TransformerEncoder of 2 post-LN layers (d_model 32, 4 heads,
                        feed-forward 64, ReLU) -> mean over time -> Linear(32, 4). The task:
                        which of four gestures (a sine on x, a sine on y, a step on z, a
                        double pulse on x and z) a window holds, under a per-window offset of
                        up to +-1.5 per axis, a bump of up to +-3 at a random place, noise,
                        and axes of unequal range (gains 1, 0.5, 2).
  digits_classifier     scikit-learn's 8x8 digits (pixels / 16, in [0, 1]) as 8 rows of 8
                        [N, 8, 8] -> Linear(8, 32) + learned positions -> nn.TransformerEncoder
                        of 3 pre-LN layers (d_model 32, 4 heads, feed-forward 64, GELU) with a
                        final LayerNorm -> mean over rows -> Linear(32, 10).

The C++ twins are examples/models/sensor_encoder.hpp and digits_classifier.hpp (the same
parameter names, so nn::load reads the state dicts unchanged). For each model this writes

  OUT_DIR/lower_<model>.npz        the state dict (tools/state_dict_npz.py's format)
  OUT_DIR/lower_<model>_data.npz   calibration inputs (200), held-out evaluation inputs (300)
                                   with their labels, and PyTorch's logits on the first 100
                                   evaluation inputs in eval mode (float32)

The sensor windows of training, calibration and evaluation come from three differently
seeded generators; the digits' 1797 images are shuffled once (seeded) into 1297 for training
(the first 200 of them also calibrate) and 300 held out (the last 200 are not used). Run with
Debian's interpreter (PyTorch 1.13, numpy, python3-sklearn); under a minute on one core.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_lowering_models import LearnedPositions, train, write_fixture  # noqa: E402

WINDOW, AXES = 32, 3


class SensorEncoder(torch.nn.Module):
    def __init__(self, d=32, heads=4, layers=2, classes=4):
        super().__init__()
        self.embed = torch.nn.Linear(AXES, d)
        self.pos = LearnedPositions(WINDOW, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.0, activation="relu",
                                                 batch_first=True, norm_first=False)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, classes)

    def forward(self, x):  # [N, 32, 3] -> [N, 4]
        return self.head(self.encoder(self.pos(self.embed(x))).mean(1))


class DigitsClassifier(torch.nn.Module):
    def __init__(self, d=32, heads=4, layers=3, classes=10):
        super().__init__()
        self.embed = torch.nn.Linear(8, d)
        self.pos = LearnedPositions(8, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.1, activation="gelu",
                                                 batch_first=True, norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, norm=torch.nn.LayerNorm(d), enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, classes)

    def forward(self, x):  # [N, 8, 8] -> [N, 10]
        return self.head(self.encoder(self.pos(self.embed(x))).mean(1))


def sensor_sampler(seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(0, 1, WINDOW)
    gain = torch.tensor([1.0, 0.5, 2.0])

    def sample(n):
        y = torch.randint(0, 4, (n,), generator=g)
        phase = torch.rand(n, 1, generator=g) * 6.2832
        freq = 2 + 2 * torch.rand(n, 1, generator=g)
        wave = torch.sin(6.2832 * freq * t + phase)  # [n, 32]
        at = torch.randint(4, WINDOW - 4, (n, 1), generator=g)
        step = (torch.arange(WINDOW) >= at).float() * 2 - 1
        pulse = torch.exp(-((torch.arange(WINDOW) - at) ** 2) / 4.0) + torch.exp(-((torch.arange(WINDOW) - at / 2) ** 2) / 4.0)
        x = torch.zeros(n, WINDOW, AXES)
        x[:, :, 0] += torch.where(y[:, None] == 0, wave, torch.zeros_like(wave))
        x[:, :, 1] += torch.where(y[:, None] == 1, wave, torch.zeros_like(wave))
        x[:, :, 2] += torch.where(y[:, None] == 2, step, torch.zeros_like(step))
        both = torch.where(y[:, None] == 3, pulse, torch.zeros_like(pulse))
        x[:, :, 0] += both
        x[:, :, 2] += both
        x += 0.1 * torch.randn(n, WINDOW, AXES, generator=g)
        x *= gain
        # a bump of up to +-3 on one random axis, 3 samples wide, in half of the windows
        where = torch.randint(0, WINDOW, (n, 1), generator=g)
        axis = torch.randint(0, AXES, (n,), generator=g)
        height = (torch.rand(n, 1, generator=g) * 6 - 3) * (torch.rand(n, 1, generator=g) < 0.5)
        bump = height * torch.exp(-((torch.arange(WINDOW) - where) ** 2) / 2.0)
        x[torch.arange(n), :, axis] += bump
        x += torch.rand(n, 1, AXES, generator=g) * 3 - 1.5  # the per-window offset, +-1.5 per axis
        return x, y

    return sample


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
    torch.set_num_threads(1)
    print(f"PyTorch {torch.__version__}")

    torch.manual_seed(3)
    sensor = SensorEncoder()
    train(sensor, sensor_sampler(30), steps=1200, lr=3e-3, batch=32)
    calib_x, _ = sensor_sampler(31)(200)
    eval_x, eval_y = sensor_sampler(32)(300)
    write_fixture(out_dir, "sensor_encoder", sensor, calib_x, eval_x, eval_y)

    from sklearn.datasets import load_digits
    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32)  # [1797, 8, 8] in [0, 1]
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(40))
    train_x, train_y = images[order[:1297]], labels[order[:1297]]
    held_x, held_y = images[order[1297:1597]], labels[order[1297:1597]]
    g = torch.Generator().manual_seed(41)

    def batches(n):
        i = torch.randint(0, len(train_y), (n,), generator=g)
        return train_x[i], train_y[i]

    torch.manual_seed(4)
    digits_model = DigitsClassifier()
    train(digits_model, batches, steps=1200, lr=3e-3, batch=32)
    write_fixture(out_dir, "digits_classifier", digits_model, train_x[:200], held_x, held_y)


if __name__ == "__main__":
    main()
