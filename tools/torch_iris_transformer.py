"""Train the Iris transformer in PyTorch and export it for microtorch.

The same architecture as examples/models/iris_transformer.hpp (standardisation buffers,
Linear(4, 32) + ReLU, 4 tokens of 8, nn.MultiheadAttention(8, 2, batch_first=True), mean
over tokens, Linear(8, 3)), so the state dict's names are the C++ module's names.
Run with Debian's interpreter (it has torch, numpy and scikit-learn's copy of Iris):

    /usr/bin/python3 tools/torch_iris_transformer.py [OUT_DIR]     (default examples/data)

Writes OUT_DIR/iris_transformer_torch.npz (the state dict, via tools/state_dict_npz.py's
format: one <key>.npy member per entry) and OUT_DIR/iris_transformer_torch_check.npz
(x: the 30 test flowers, y: their labels, logits: PyTorch's outputs in eval mode).
examples/pytorch_interop.cpp loads both, checks its outputs equal PyTorch's and lowers the
model to firmware. The run is seeded; the committed files come from it.
"""
import os
import sys

import numpy as np
import torch
from sklearn.datasets import load_iris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import state_dict_npz  # noqa: E402  (its npz format and dtype rules)


class IrisTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("inv_std", torch.ones(4))
        self.embed = torch.nn.Linear(4, 32)
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        tokens = torch.relu(self.embed((x - self.mean) * self.inv_std)).reshape(x.shape[0], 4, 8)
        mixed, _ = self.attn(tokens, tokens, tokens, need_weights=False)
        return self.head(mixed.mean(1))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "examples", "data")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = load_iris()
    x = torch.tensor(data.data, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.int64)
    order = torch.randperm(150)
    train, test = order[:120], order[120:]
    model = IrisTransformer()
    with torch.no_grad():
        model.mean.copy_(x[train].mean(0))
        model.inv_std.copy_(1.0 / x[train].std(0, unbiased=False))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(120):
        perm = train[torch.randperm(120)]
        for b in range(0, 120, 16):
            idx = perm[b:b + 16]
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        logits = model(x[test])
    acc = (logits.argmax(1) == y[test]).float().mean().item()
    print(f"PyTorch {torch.__version__}: Iris transformer test accuracy {100 * acc:.1f}%")
    notes = []
    state = [(k, state_dict_npz.to_numpy(k, t, notes)) for k, t in model.state_dict().items()]
    state_dict_npz.write_npz(os.path.join(out_dir, "iris_transformer_torch.npz"), state)
    np.savez(os.path.join(out_dir, "iris_transformer_torch_check.npz"), x=x[test].numpy(), y=y[test].numpy(),
             logits=logits.numpy())
    print(f"wrote {out_dir}/iris_transformer_torch.npz and iris_transformer_torch_check.npz")


if __name__ == "__main__":
    main()
