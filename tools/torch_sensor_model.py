"""Train a Conv1d + attention sensor model in PyTorch on generated gesture windows and export it.

    /usr/bin/python3 tools/torch_sensor_model.py [OUT_DIR]     (default tests/fixtures)

  sensor_cnn   3-axis accelerometer windows [N, 3, 128] (x, y, z in g at 50 Hz)
               -> Conv1d(3, 16, 5, stride 2, padding 2) + BatchNorm1d + ReLU
               -> depthwise Conv1d(16, 16, 3, padding 1, groups 16) -> pointwise Conv1d(16, 32, 1) + ReLU
               -> MaxPool1d(2) -> transpose(1, 2): 32 steps of 32 channels
               -> post-LN nn.TransformerEncoderLayer(32, 4 heads, feed-forward 64, ReLU, batch_first)
               -> mean over time -> Linear(32, 6)

The classes and their signals are those of examples/gesture_data.hpp (idle, walking,
running, shaking, flick, circle), written again here in numpy; on top of each window, per
window and per axis, a gain in [0.85, 1.15] and an offset in [-0.2, 0.2] g (sensors that
differ, held differently), and readings rounded to 1/256 g (a 13-bit accelerometer's
resolution, which also keeps the data files small).

The C++ twin is examples/models/sensor_cnn.hpp (the same parameter names, so nn::load reads
the state dict with strict = true). This writes

  OUT_DIR/lower_sensor_cnn.npz        the state dict (tools/state_dict_npz.py's format)
  OUT_DIR/lower_sensor_cnn_data.npz   calibration inputs (128 windows), held-out evaluation
                                      inputs (400) with their labels, and PyTorch's logits on
                                      the first 100 evaluation inputs in eval mode

Training, calibration and evaluation windows come from three differently seeded generators.
The run is seeded throughout (6 minutes on this shared 2-core machine under load). Run with
Debian's interpreter (PyTorch 1.13 and numpy).
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_lowering_models import train, write_fixture  # noqa: E402

AXES, WINDOW, CLASSES, RATE = 3, 128, 6, 50.0
NAMES = ["idle", "walking", "running", "shaking", "flick", "circle"]


class SensorCNN(torch.nn.Module):
    def __init__(self, classes=CLASSES, stem=16, d=32, heads=4, ff=64):
        super().__init__()
        self.conv = torch.nn.Conv1d(AXES, stem, 5, stride=2, padding=2)
        self.bn = torch.nn.BatchNorm1d(stem)
        self.depthwise = torch.nn.Conv1d(stem, stem, 3, padding=1, groups=stem)
        self.pointwise = torch.nn.Conv1d(stem, d, 1)
        self.pool = torch.nn.MaxPool1d(2)
        self.encoder = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=ff, dropout=0.1, batch_first=True)
        self.head = torch.nn.Linear(d, classes)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        h = F.relu(self.pointwise(self.depthwise(h)))
        h = self.pool(h).transpose(1, 2)
        return self.head(self.encoder(h).mean(1))


def windows(rng, labels, noise=0.05):
    """[n, 3, WINDOW] float32 windows of the given classes (examples/gesture_data.hpp's signals)."""
    n = len(labels)
    u = rng.random(n)[:, None]
    phase = 6.283 * rng.random(n)[:, None]
    t = np.arange(WINDOW, dtype=np.float64)[None, :]
    freq = np.select([labels[:, None] == c for c in range(CLASSES)],
                     [0 * u, 1.6 + 0.8 * u, 2.6 + 0.8 * u, 5.0 + 2.0 * u, 0 * u, 0.8 + 0.4 * u])
    amp = np.select([labels[:, None] == c for c in range(CLASSES)],
                    [0 * u, 0.3 + 0.2 * u, 0.8 + 0.4 * u, 0.5 + 0.3 * u, 1.5 + 1.0 * u, 0.5 + 0.3 * u])
    s = np.sin(6.283 * freq * t / RATE + phase)
    co = np.cos(6.283 * freq * t / RATE)
    at = (0.15 + 0.7 * phase / 6.283) * WINDOW
    c = labels[:, None]
    x = np.where((c == 1) | (c == 2), 0.3 * amp * s, 0.0)
    x = np.where((c == 3) | (c == 5), amp * s, x)
    x = np.where(c == 4, amp * np.exp(-0.5 * (t - at) ** 2 / 2.25), x)
    y = np.where(c == 3, amp * co, 0.0)
    y = np.where(c == 5, amp * np.cos(6.283 * freq * t / RATE + phase), y)
    z = np.where((c == 1) | (c == 2), amp * s * s, 0.0)
    z = np.where(c == 3, amp * s, z)
    w = np.stack([x, y, 1.0 + z], axis=1) + noise * rng.standard_normal((n, AXES, WINDOW))
    gain = rng.uniform(0.85, 1.15, (n, AXES, 1))
    offset = rng.uniform(-0.2, 0.2, (n, AXES, 1))
    w = np.round((w * gain + offset) * 256) / 256
    return w.astype(np.float32)


def sampler(seed):
    rng = np.random.default_rng(seed)

    def sample(n):
        labels = rng.integers(0, CLASSES, n)
        return torch.from_numpy(windows(rng, labels)), torch.from_numpy(labels)

    return sample


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
    torch.set_num_threads(1)
    print(f"PyTorch {torch.__version__}")
    torch.manual_seed(5)
    model = SensorCNN()
    train(model, sampler(50), steps=1500, lr=3e-3, log_every=250)
    calib_x, _ = sampler(51)(128)
    eval_x, eval_y = sampler(52)(400)
    write_fixture(out_dir, "sensor_cnn", model, calib_x, eval_x, eval_y)

if __name__ == "__main__":
    main()
