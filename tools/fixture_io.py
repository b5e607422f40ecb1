"""Writing the test fixtures: one deterministic .npz per case.

Every generator (gen_fixtures.py, gen_module_fixtures.py, gen_training_fixtures.py,
gen_cnn_fixtures.py) stores a case as tests/fixtures/<case>.npz holding <tensor>.npy
members, which tests/helpers.hpp reads as fixture("<case>__<tensor>"). Members are stored uncompressed
with a fixed timestamp, so regenerating gives byte-identical files.
"""

import io
import os
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "tests", "fixtures"))


def to_numpy(t):
    """A C-ordered numpy copy of a torch tensor or array (0-d shapes kept)."""
    if hasattr(t, "detach"):
        t = t.detach().cpu().numpy()
    return np.array(t, order="C")


def write_npz(case, arrays):
    """Writes OUT_DIR/<case>.npz with one <name>.npy member per entry, in order."""
    path = os.path.join(OUT_DIR, case + ".npz")
    assert not os.path.exists(path), "case written twice: " + case
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, a in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, to_numpy(a), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())
    return path


def clear(prefixes):
    """Removes the fixtures whose names start with one of `prefixes` (a tuple)."""
    os.makedirs(OUT_DIR, exist_ok=True)
    for f in sorted(os.listdir(OUT_DIR)):
        if f.startswith(prefixes) and f.endswith((".npz", ".npy")):
            os.remove(os.path.join(OUT_DIR, f))


def remove(cases):
    """Removes OUT_DIR/<case>.npz for each of `cases` (before rewriting them)."""
    for c in cases:
        path = os.path.join(OUT_DIR, c + ".npz")
        if os.path.exists(path):
            os.remove(path)
