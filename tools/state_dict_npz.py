#!/usr/bin/python3
"""Move weights between PyTorch state dicts and microtorch checkpoints (numpy .npz).

A microtorch checkpoint (`nn::save` / `save_npz` in C++) is a numpy .npz archive with one
`<key>.npy` member per state-dict entry, keys in state-dict order ("fc1.weight",
"attn.in_proj_weight", ...). This script converts both ways. Run it with Debian's
interpreter, which has PyTorch and numpy (a plain `python3` earlier on PATH may not):

    /usr/bin/python3 tools/state_dict_npz.py export MODEL.pt OUT.npz [--key K] [--allow-pickle]
        MODEL.pt is a file written by torch.save(model.state_dict(), ...). The archive gets
        the same keys in the same order; dtypes float32, float64, int64 and bool are kept,
        float16/bfloat16 are widened to float32 and int8/int16/int32/uint8 to int64 (both
        lossless, reported on stderr); anything else is refused.
        --key K        the state dict is entry K of a larger saved dict, e.g.
                       torch.save({"model": sd, "epoch": 3}, ...)  ->  --key model
        --allow-pickle also accept a whole pickled nn.Module (torch.save(model, ...)).
                       This runs arbitrary code from the file: only for files you trust.
                       Without it the file is read with torch.load(weights_only=True).

    /usr/bin/python3 tools/state_dict_npz.py import IN.npz OUT.pt
        Reads the archive (numpy.savez, savez_compressed or microtorch's save_npz) and
        torch.save's an OrderedDict of tensors, ready for model.load_state_dict(...).

    /usr/bin/python3 tools/state_dict_npz.py --selftest
        Round-trips a model with Linear, LayerNorm, MultiheadAttention and BatchNorm
        (int64 and bool buffers, a float16 buffer, a key named "file") through export and
        import in a temporary directory and checks keys, order, dtypes, values and outputs.

    /usr/bin/python3 tools/state_dict_npz.py fixtures [DIR]
        Writes the small fixtures tests/test_checkpoint.cpp reads (default DIR is
        tests/fixtures); the arrays are the same on every run (seeded; only the zip
        timestamps change):
          ckpt_torch_state.npz    state dict of torch nn.Linear(3, 2) ("proj.*") followed by
                                  nn.LayerNorm(2) ("norm.*", random affine), via `export`
          ckpt_torch_forward.npz  np.savez: x [4, 3], linear = proj(x), out = norm(linear)
          ckpt_numpy_dtypes.npz   np.savez_compressed (deflate) of every dtype microtorch
                                  reads, with dotted names, a 0-d and an empty array
        (The forward outputs live in an .npz rather than .npy files because
        tools/gen_fixtures.py empties tests/fixtures/*.npy when it regenerates.)

Both writers go through a temporary file in the target directory and os.replace, so an
interrupted run never leaves half a file. Errors print `state_dict_npz: error: ...` and exit 2.
"""

import argparse
import collections
import contextlib
import io
import os
import sys
import tempfile
import zipfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES_DIR = os.path.normpath(os.path.join(HERE, "..", "tests", "fixtures"))

# torch dtype -> numpy dtype written to the archive (None: refused).
KEEP = {torch.float32: np.float32, torch.float64: np.float64, torch.int64: np.int64, torch.bool: np.bool_}
WIDEN = {torch.float16: np.float32, torch.bfloat16: np.float32, torch.int8: np.int64, torch.int16: np.int64,
         torch.int32: np.int64, torch.uint8: np.int64}
READABLE = {np.dtype("<f4"), np.dtype("<f8"), np.dtype("<i8"), np.dtype("|b1")}


class ToolError(Exception):
    """A problem with the user's input: printed without a traceback."""


# ---- atomic files ---------------------------------------------------------------------

def _atomic_write(path, write):
    """Calls write(f) on a temporary file next to `path`, fsyncs it and renames it over `path`."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_npz(path, items):
    """numpy.savez's format (numpy/lib/npyio.py _savez: stored members, zip64 headers) for
    (name, array) pairs in order, without savez's keyword-argument limits (a key "file")."""
    def write(f):
        with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, arr in items:
                with zf.open(name + ".npy", "w", force_zip64=True) as member:
                    # not np.ascontiguousarray: it turns a 0-d array (num_batches_tracked) into 1-d
                    np.lib.format.write_array(member, np.require(arr, requirements="C"), allow_pickle=False)
    _atomic_write(path, write)


# ---- export: torch -> npz -------------------------------------------------------------

def _load_torch(path, allow_pickle):
    if not os.path.isfile(path):
        raise ToolError("%s: no such file" % path)
    try:
        return torch.load(path, map_location="cpu", weights_only=not allow_pickle)
    except Exception as e:  # torch raises UnpicklingError, RuntimeError, ... for what it refuses
        hint = "" if allow_pickle else (" (if it is a whole pickled model you trust, pass --allow-pickle)")
        raise ToolError("%s: torch.load failed: %s%s" % (path, str(e).splitlines()[0] if str(e) else e, hint))


def state_dict_of(obj, key=None, source="the file"):
    """The ordered (name, tensor) pairs of a state dict, an nn.Module, or entry `key` of a dict."""
    if key is not None:
        if not isinstance(obj, dict) or key not in obj:
            keys = list(obj.keys()) if isinstance(obj, dict) else type(obj).__name__
            raise ToolError("%s has no entry %r (it holds %s)" % (source, key, keys))
        obj = obj[key]
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    if not isinstance(obj, dict):
        raise ToolError("%s holds a %s, not a state dict; save one with torch.save(model.state_dict(), path)"
                        % (source, type(obj).__name__))
    items = []
    for name, value in obj.items():
        if not isinstance(name, str) or not name:
            raise ToolError("%s: key %r is not a non-empty string" % (source, name))
        if not isinstance(value, torch.Tensor):
            hint = "; is the state dict one entry of a larger dict? pick it with --key" if key is None else ""
            raise ToolError("%s: entry %r is a %s, not a tensor%s" % (source, name, type(value).__name__, hint))
        items.append((name, value))
    return items


def to_numpy(name, t, notes):
    """A C-contiguous little-endian numpy array microtorch can read."""
    t = t.detach().cpu()
    if t.is_quantized or t.is_sparse or t.is_complex():
        raise ToolError("%r: %s tensors are not supported (microtorch reads float32, float64, int64, bool)"
                        % (name, t.dtype))
    if t.dtype in KEEP:
        target = KEEP[t.dtype]
    elif t.dtype in WIDEN:
        target = WIDEN[t.dtype]
        notes.append("%s: %s widened to %s" % (name, t.dtype, np.dtype(target).name))
    else:
        raise ToolError("%r: dtype %s is not supported (microtorch reads float32, float64, int64, bool)"
                        % (name, t.dtype))
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16
        t = t.float()
    return np.require(t.contiguous().numpy().astype(target, copy=False), requirements="C")


def export(model_pt, out_npz, key=None, allow_pickle=False):
    """torch.save'd state dict -> .npz; returns the (name, array) pairs written."""
    items = state_dict_of(_load_torch(model_pt, allow_pickle), key, model_pt)
    notes = []
    arrays = [(name, to_numpy(name, t, notes)) for name, t in items]
    write_npz(out_npz, arrays)
    for note in notes:
        print("state_dict_npz: note: " + note, file=sys.stderr)
    return arrays


# ---- import: npz -> torch -------------------------------------------------------------

def read_npz(path):
    """(name, array) pairs of a .npz archive in archive order."""
    if not os.path.isfile(path):
        raise ToolError("%s: no such file" % path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            return [(name, npz[name]) for name in npz.files]
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise ToolError("%s: not a readable .npz archive: %s" % (path, e))


def import_(in_npz, out_pt):
    """.npz -> torch.save'd OrderedDict of tensors; returns that dict."""
    state = collections.OrderedDict()
    for name, arr in read_npz(in_npz):
        if arr.dtype.hasobject:
            raise ToolError("%s: %r holds Python objects, not numbers" % (in_npz, name))
        state[name] = torch.from_numpy(np.array(arr, copy=True))
    _atomic_write(out_pt, lambda f: torch.save(state, f))
    return state


# ---- fixtures for tests/test_checkpoint.cpp --------------------------------------------

class _LinearNorm(torch.nn.Module):
    """nn.Linear(3, 2) then nn.LayerNorm(2): state keys proj.weight, proj.bias, norm.weight, norm.bias."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 2)
        self.norm = torch.nn.LayerNorm(2)

    def forward(self, x):
        return self.norm(self.proj(x))


def fixtures(out_dir=FIXTURES_DIR):
    torch.manual_seed(2024)
    torch.set_num_threads(1)
    model = _LinearNorm()
    with torch.no_grad():  # a non-trivial affine, so loading the wrong values shows
        model.norm.weight.uniform_(0.5, 1.5)
        model.norm.bias.uniform_(-0.5, 0.5)
    x = torch.randn(4, 3)
    with torch.no_grad():
        linear = model.proj(x)
        out = model.norm(linear)
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pt = os.path.join(tmp, "linear_norm.pt")
        torch.save(model.state_dict(), pt)
        export(pt, os.path.join(out_dir, "ckpt_torch_state.npz"))
    np.savez(os.path.join(out_dir, "ckpt_torch_forward.npz"), x=x.numpy(), linear=linear.numpy(), out=out.numpy())
    np.savez_compressed(
        os.path.join(out_dir, "ckpt_numpy_dtypes.npz"),
        **collections.OrderedDict([
            ("encoder.layers.0.weight", np.arange(6, dtype=np.float32).reshape(2, 3) / 4),
            ("f64", np.array([0.5, -1.25, 1e300], dtype=np.float64)),
            ("steps", np.array([[-3, 0], [7, 2 ** 40]], dtype=np.int64)),
            ("mask", np.array([True, False, True])),
            ("scalar", np.array(2.5, dtype=np.float32)),
            ("empty", np.zeros((0, 3), dtype=np.float32)),
        ]))
    for f in ("ckpt_torch_state.npz", "ckpt_torch_forward.npz", "ckpt_numpy_dtypes.npz"):
        print("wrote %s (%d bytes)" % (os.path.join(out_dir, f), os.path.getsize(os.path.join(out_dir, f))))


# ---- selftest --------------------------------------------------------------------------

class _SelfTestModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.attn = torch.nn.MultiheadAttention(4, 2, batch_first=True)
        self.bn = torch.nn.BatchNorm1d(4)  # running stats and int64 num_batches_tracked
        self.register_buffer("keep", torch.tensor([True, False, True, True]))
        self.register_buffer("f16", torch.tensor([0.5, -2.0], dtype=torch.float16))

    def forward(self, x):
        h = self.norm(self.fc(x))
        h, _ = self.attn(h, h, h)
        return self.bn(h.transpose(1, 2)).transpose(1, 2) * self.keep


def selftest():
    checks = 0

    def check(cond, what):
        nonlocal checks
        if not cond:
            raise AssertionError("selftest failed: " + what)
        checks += 1

    def fails(argv, message):
        """main(argv) exits with status 2 and prints `message` on stderr."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = main(argv)
        check(status == 2 and message in err.getvalue(), "%s: expected %r, got status %d and %r"
              % (" ".join(argv[:1]), message, status, err.getvalue()))

    torch.manual_seed(0)
    model = _SelfTestModel()
    model.train()
    model(torch.randn(3, 5, 4))  # moves the BatchNorm running stats off their defaults
    model.eval()
    sd = model.state_dict()
    with tempfile.TemporaryDirectory() as tmp:
        pt, npz, back_pt = (os.path.join(tmp, n) for n in ("model.pt", "model.npz", "back.pt"))
        torch.save(sd, pt)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            check(main(["export", pt, npz]) == 0, "export exit status")

        # The archive: numpy's layout, the state dict's keys in order, microtorch's dtypes.
        with zipfile.ZipFile(npz) as zf:
            infos = zf.infolist()
            check([i.filename for i in infos] == [k + ".npy" for k in sd], "member names and order")
            check(all(i.compress_type == zipfile.ZIP_STORED for i in infos), "members stored, as numpy.savez")
        arrays = read_npz(npz)
        check([n for n, _ in arrays] == list(sd), "np.load keys in state-dict order")
        for name, arr in arrays:
            want = sd[name].float() if sd[name].dtype == torch.float16 else sd[name]
            check(arr.dtype in READABLE, "%s: dtype %s readable by microtorch" % (name, arr.dtype))
            check(arr.shape == tuple(want.shape), "%s: shape" % name)
            check(np.array_equal(arr, want.numpy()), "%s: values" % name)
        check(dict(arrays)["bn.num_batches_tracked"].dtype == np.int64, "int64 buffer stays int64")
        check(dict(arrays)["keep"].dtype == np.bool_, "bool buffer stays bool")
        check(dict(arrays)["f16"].dtype == np.float32, "float16 widened to float32")

        # Back to torch: same keys and values; a fresh model loads it strictly and agrees.
        with contextlib.redirect_stdout(io.StringIO()):
            check(main(["import", npz, back_pt]) == 0, "import exit status")
        back = torch.load(back_pt, weights_only=True)
        check(list(back) == list(sd), "imported keys in order")
        for name, t in sd.items():
            check(torch.equal(back[name].to(t.dtype), t), "%s: imported values" % name)
        torch.manual_seed(1)
        fresh = _SelfTestModel()
        fresh.load_state_dict(back, strict=True)
        fresh.eval()
        x = torch.randn(2, 5, 4)
        check(torch.equal(fresh(x), model(x)), "re-imported model computes the same outputs")

        # A key numpy.savez could not take as a keyword, and a name with dots.
        write_npz(npz, [("file", np.ones(2, np.float32)), ("a.b.c", np.zeros((1, 2), np.int64))])
        check([n for n, _ in read_npz(npz)] == ["file", "a.b.c"], "keys 'file' and 'a.b.c'")

        # Refusals: a non-tensor entry, an unsupported dtype, a missing key, a bad archive.
        torch.save({"model": sd, "epoch": 3}, pt)
        fails(["export", pt, npz], "pick it with --key")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            check(main(["export", pt, npz, "--key", "model"]) == 0, "--key picks the nested state dict")
        fails(["export", pt, npz, "--key", "nope"], "has no entry 'nope'")
        torch.save({"z": torch.zeros(2, dtype=torch.complex64)}, pt)
        fails(["export", pt, npz], "torch.complex64 tensors are not supported")
        with open(npz, "wb") as f:
            f.write(b"PK\x03\x04 truncated")
        fails(["import", npz, back_pt], "not a readable .npz archive")

        # Atomic writes: a write that fails half-way leaves the previous archive as it was.
        write_npz(npz, [("w", np.arange(3, dtype=np.float32))])
        before = open(npz, "rb").read()
        try:
            write_npz(npz, [("a", np.ones(1000, np.float32)), ("b", np.array([object()], dtype=object))])
            check(False, "writing an object array must fail")
        except ValueError:
            pass
        check(open(npz, "rb").read() == before, "the previous archive is untouched")
        check(sorted(os.listdir(tmp)) == sorted(["model.pt", "model.npz", "back.pt"]), "no temporary files left")
    print("state_dict_npz selftest: OK (%d checks)" % checks)
    return 0


# ---- command line ----------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(prog="state_dict_npz.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--selftest", action="store_true", help="round-trip a model through export and import")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("export", help="torch.save'd state dict -> .npz")
    p.add_argument("model_pt")
    p.add_argument("out_npz")
    p.add_argument("--key", help="the state dict is this entry of the saved dict")
    p.add_argument("--allow-pickle", action="store_true", help="accept a whole pickled nn.Module (trusted files only)")
    p = sub.add_parser("import", help=".npz -> torch.save'd state dict")
    p.add_argument("in_npz")
    p.add_argument("out_pt")
    p = sub.add_parser("fixtures", help="write the fixtures of tests/test_checkpoint.cpp")
    p.add_argument("out_dir", nargs="?", default=FIXTURES_DIR)
    args = parser.parse_args(argv)
    try:
        if args.selftest:
            return selftest()
        if args.command == "export":
            arrays = export(args.model_pt, args.out_npz, args.key, args.allow_pickle)
            print("wrote %d arrays to %s" % (len(arrays), args.out_npz))
        elif args.command == "import":
            state = import_(args.in_npz, args.out_pt)
            print("wrote %d tensors to %s" % (len(state), args.out_pt))
        elif args.command == "fixtures":
            fixtures(args.out_dir)
        else:
            parser.print_help()
            return 2
    except ToolError as e:
        print("state_dict_npz: error: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
