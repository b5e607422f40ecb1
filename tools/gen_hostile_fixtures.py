"""Hostile .npz archives for tests/test_hostile_inputs.cpp (standard library only).

    python3 tools/gen_hostile_fixtures.py

writes tests/fixtures/hostile_*.npz, byte-identical on every run:

    hostile_bomb.npz       member 'w.npy' (a float32 [4] header) whose deflated data goes on
                           with 64 MiB of zeros; the directory states the real size, so the
                           member disagrees with its own header
    hostile_bomb_lie.npz   the same stream, but both the local header and the central
                           directory claim the 144 bytes of the valid .npy: only reading past
                           them shows the lie
    hostile_dup.npz        two members named 'w.npy'

An archive of this kind is a few tens of KiB and inflates to gigabytes if a reader trusts
the stream; load_npz must inflate no more than the declared shape needs.
"""

import os
import struct
import zipfile
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")
DATE = (2020, 1, 1, 0, 0, 0)  # fixed timestamps: identical bytes on every run


def npy_f32_4():
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"  # the data starts at a multiple of 64
    data = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def write_zip(path, members, compress):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for name, payload in members:
            info = zipfile.ZipInfo(name, date_time=DATE)
            info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
            z.writestr(info, payload)


def patch_sizes(path, claimed):
    """Rewrites the uncompressed size of the first member in its local header and in the
    central directory (the CRC stays that of the whole stream)."""
    b = bytearray(open(path, "rb").read())
    assert b[:4] == b"PK\x03\x04"
    struct.pack_into("<I", b, 22, claimed)  # local header: uncompressed size
    cd = b.find(b"PK\x01\x02")
    struct.pack_into("<I", b, cd + 24, claimed)  # central directory: uncompressed size
    open(path, "wb").write(bytes(b))


def main():
    valid = npy_f32_4()
    bomb = valid + bytes(64 << 20)
    write_zip(os.path.join(OUT, "hostile_bomb.npz"), [("w.npy", bomb)], compress=True)
    lie = os.path.join(OUT, "hostile_bomb_lie.npz")
    write_zip(lie, [("w.npy", bomb)], compress=True)
    patch_sizes(lie, len(valid))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name, which is the point
        write_zip(os.path.join(OUT, "hostile_dup.npz"), [("w.npy", valid), ("w.npy", valid)], compress=False)
    for name in ("hostile_bomb.npz", "hostile_bomb_lie.npz", "hostile_dup.npz"):
        print(name, os.path.getsize(os.path.join(OUT, name)), "bytes")


if __name__ == "__main__":
    main()
