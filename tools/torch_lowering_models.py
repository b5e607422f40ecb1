"""Train the two transformers the lowering is measured on, in PyTorch, and export them.

    /usr/bin/python3 tools/torch_lowering_models.py [OUT_DIR]     (default tests/fixtures)

  sequence_classifier   token ids [N, 16] (vocabulary 6) -> embedding + learned positions
                        -> causal nn.MultiheadAttention(32, 4, batch_first) + residual
                        -> pre-LN feed-forward block (32 -> 64 -> 32, ReLU) + residual
                        -> the last position's LayerNorm -> Linear(32, 6). The task: the
                        token that occurs most often (ties: the smallest). The causal mask
                        is a non-persistent buffer (not in the state dict).
  token_tagger          token ids [N, 12] (vocabulary 8) -> embedding + learned positions
                        -> nn.TransformerEncoder of 2 pre-LN layers (d_model 32, 4 heads,
                        feed-forward 64, GELU) with a final LayerNorm -> Linear(32, 4) per
                        token. The task, per token: how often its token occurs in the
                        sequence (1, 2, 3, 4 or more).

The C++ twins are examples/models/sequence_classifier.hpp and token_tagger.hpp (the same
parameter names, so nn::load reads the state dicts unchanged). For each model this writes

  OUT_DIR/lower_<model>.npz        the state dict (tools/state_dict_npz.py's format)
  OUT_DIR/lower_<model>_data.npz   calibration inputs (256 sequences), held-out evaluation
                                   inputs (1000) with their labels, and PyTorch's logits on
                                   the first 100 evaluation inputs in eval mode

Training, calibration and evaluation sequences come from three differently seeded
generators. The run is seeded throughout; the committed files come from it (a few minutes
on one core of this machine). Run with Debian's interpreter (PyTorch 1.13 and numpy).
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import state_dict_npz  # noqa: E402  (its npz format and dtype rules)


class LearnedPositions(torch.nn.Module):
    """microtorch's nn::LearnedPositionalEncoding: a [max_len, d] table "weight" added to x."""

    def __init__(self, max_len, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(max_len, d) * 0.1)

    def forward(self, x):
        return x + self.weight[: x.shape[1]]


class SequenceClassifier(torch.nn.Module):
    def __init__(self, vocab=6, length=16, d=32, heads=4, classes=6):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.pos = LearnedPositions(length, d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm1 = torch.nn.LayerNorm(d)
        self.ff1 = torch.nn.Linear(d, 2 * d)
        self.ff2 = torch.nn.Linear(2 * d, d)
        self.norm2 = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, classes)
        self.register_buffer("causal", torch.triu(torch.ones(length, length, dtype=torch.bool), 1), persistent=False)

    def forward(self, ids):
        x = self.pos(self.embed(ids))
        a, _ = self.attn(x, x, x, attn_mask=self.causal, need_weights=False)
        h = x + a
        h = h + self.ff2(F.relu(self.ff1(self.norm1(h))))
        return self.head(self.norm2(h[:, -1]))


class TokenTagger(torch.nn.Module):
    def __init__(self, vocab=8, length=12, d=32, heads=4, classes=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.pos = LearnedPositions(length, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.1, activation="gelu",
                                                 batch_first=True, norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(d), enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, classes)

    def forward(self, ids):
        return self.head(self.encoder(self.pos(self.embed(ids))))


def majority(ids, vocab):
    counts = F.one_hot(ids, vocab).sum(1)  # [N, vocab]
    return counts.argmax(1)  # the first maximum: the smallest token among ties


def occurrences(ids, vocab):
    counts = F.one_hot(ids, vocab).sum(1)  # [N, vocab]
    return (counts.gather(1, ids) - 1).clamp(max=3)  # per token: 0..3 = once .. four or more times


def train(model, sample, steps, lr, batch=64, log_every=500):
    """AdamW with a one-cycle schedule on cross entropy over sample(batch)'s (inputs, classes)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    model.train()
    for step in range(steps):
        x, y = sample(batch)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps - 1:
            print(f"  step {step:5d} loss {loss.item():.4f}", flush=True)
    model.eval()


def write_fixture(out_dir, name, model, calib_x, eval_x, eval_y):
    """OUT_DIR/lower_<name>.npz (the state dict) and lower_<name>_data.npz (calibration and
    evaluation inputs, labels, and PyTorch's logits on the first 100 evaluation inputs)."""
    with torch.no_grad():
        logits = model(eval_x)
    acc = (logits.argmax(-1) == eval_y).float().mean().item()
    print(f"{name}: held-out accuracy {100 * acc:.1f}%")
    notes = []
    state = [(k, state_dict_npz.to_numpy(k, t, notes)) for k, t in model.state_dict().items()]
    state_dict_npz.write_npz(os.path.join(out_dir, f"lower_{name}.npz"), state)
    np.savez_compressed(os.path.join(out_dir, f"lower_{name}_data.npz"), calib_x=calib_x.numpy(),
                        eval_x=eval_x.numpy(), eval_y=eval_y.numpy(), eval_logits=logits[:100].numpy())
    print(f"wrote {out_dir}/lower_{name}.npz and lower_{name}_data.npz")


def export(out_dir, name, model, sample_calib, sample_eval):
    calib_x, _ = sample_calib(256)
    eval_x, eval_y = sample_eval(1000)
    write_fixture(out_dir, name, model, calib_x, eval_x, eval_y)


def sampler(seed, length, vocab, label):
    g = torch.Generator().manual_seed(seed)

    def sample(n):
        ids = torch.randint(0, vocab, (n, length), generator=g)
        return ids, label(ids, vocab)

    return sample


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
    torch.set_num_threads(1)
    print(f"PyTorch {torch.__version__}")

    torch.manual_seed(1)
    classifier = SequenceClassifier()
    train(classifier, sampler(10, 16, 6, majority), steps=6000, lr=3e-3)
    export(out_dir, "sequence_classifier", classifier, sampler(11, 16, 6, majority), sampler(12, 16, 6, majority))

    torch.manual_seed(2)
    tagger = TokenTagger()
    train(tagger, sampler(20, 12, 8, occurrences), steps=6000, lr=3e-3)
    export(out_dir, "token_tagger", tagger, sampler(21, 12, 8, occurrences), sampler(22, 12, 8, occurrences))


if __name__ == "__main__":
    main()
