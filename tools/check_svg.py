#!/usr/bin/env python3
"""Checks pictures with a real SVG renderer: each renders, and nothing is drawn outside it.

    python3 tools/check_svg.py FILE.svg ...
    python3 tools/check_svg.py --build build     # the figures the doctest suite draws

For each SVG, rsvg-convert (Debian's librsvg2-bin) renders it twice: as it is (it must render
without an error, at its declared size), and with its viewBox grown by a margin on every side.
In the second picture every pixel of the margin must be transparent: a title cut off at the
right edge, a rotated label above the top, a tick label left of the image all land in the
margin and fail the check, naming the side. The PNGs are decoded here (standard library only).

With --build, the doctest case "display: the demo's figures ..." writes its SVGs into a
temporary folder first (MICROTORCH_FIGURES_DIR), so the pictures checked are the ones the demo
and the notebooks draw. Prints "pictures: N passed, M failed" last.
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

MARGIN = 40  # pixels added on each side


def decode_png(data):
    """(width, height, rows of RGBA bytes) of an 8-bit RGBA or RGB non-interlaced PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, colour type {color}, interlace {interlace})")
            channels = 4 if color == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line if channels == 4 else bytearray(b"".join(bytes(line[k:k + 3]) + b"\xff"
                                                                  for k in range(0, stride, 3))))
        prev = line
    return width, height, rows


def render(svg_text, work):
    src = os.path.join(work, "in.svg")
    out = os.path.join(work, "out.png")
    with open(src, "w", encoding="utf-8") as f:
        f.write(svg_text)
    r = subprocess.run(["rsvg-convert", "-f", "png", "-o", out, src], capture_output=True, text=True)
    if r.returncode != 0:
        raise ValueError("rsvg-convert failed: " + r.stderr.strip())
    with open(out, "rb") as f:
        return decode_png(f.read())


def grown(svg_text):
    """The same picture with the viewBox (and size) grown by MARGIN on every side."""
    head = re.search(r"<svg\b[^>]*>", svg_text)
    if not head:
        raise ValueError("no <svg> element")
    tag = head.group(0)
    w = re.search(r'\bwidth="([\d.]+)"', tag)
    h = re.search(r'\bheight="([\d.]+)"', tag)
    vb = re.search(r'\bviewBox="([-\d.]+)[ ,]+([-\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)"', tag)
    if not (w and h and vb):
        raise ValueError("the root <svg> needs width, height and a viewBox")
    x0, y0, vw, vh = (float(v) for v in vb.groups())
    new = tag.replace(w.group(0), f'width="{float(w.group(1)) + 2 * MARGIN:g}"')
    new = new.replace(h.group(0), f'height="{float(h.group(1)) + 2 * MARGIN:g}"')
    new = new.replace(vb.group(0), f'viewBox="{x0 - MARGIN:g} {y0 - MARGIN:g} {vw + 2 * MARGIN:g} {vh + 2 * MARGIN:g}"')
    return svg_text.replace(tag, new, 1), float(w.group(1)), float(h.group(1))


def check(path, work):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    width, height, _ = render(text, work)
    big, w, h = grown(text)
    if (width, height) != (round(w), round(h)):
        return f"renders at {width} x {height}, not its declared {w:g} x {h:g}"
    bw, bh, rows = render(big, work)
    outside = {}
    for y in range(bh):
        row = rows[y]
        for x in range(bw):
            if row[4 * x + 3] == 0:
                continue
            inside_x, inside_y = MARGIN <= x < bw - MARGIN, MARGIN <= y < bh - MARGIN
            if inside_x and inside_y:
                continue
            side = "top" if y < MARGIN else "bottom" if y >= bh - MARGIN else "left" if x < MARGIN else "right"
            outside[side] = outside.get(side, 0) + 1
    if outside:
        where = ", ".join(f"{n} pixels beyond the {side}" for side, n in sorted(outside.items()))
        return f"draws outside its {w:g} x {h:g} canvas: {where} (text cut off?)"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--build", help="draw the doctest suite's figures with this build and check them")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="microtorch-svg-") as work:
        files = list(args.files)
        if args.build:
            figures = os.path.join(work, "figures")
            os.makedirs(figures)
            env = dict(os.environ, MICROTORCH_FIGURES_DIR=figures)
            r = subprocess.run([os.path.join(args.build, "tests", "microtorch-tests"), "-tc=display: the demo's figures*"],
                               env=env, capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stdout[-3000:], r.stderr[-2000:], file=sys.stderr)
                print("pictures: 0 passed, 1 failed (the figures test failed)")
                return 1
            files += sorted(os.path.join(figures, f) for f in os.listdir(figures) if f.endswith(".svg"))
        if not files:
            print("pictures: 0 passed, 1 failed (no SVG files)")
            return 1
        passed = failed = 0
        for path in files:
            try:
                problem = check(path, work)
            except (ValueError, OSError, zlib.error) as e:
                problem = str(e)
            name = os.path.basename(path)
            if problem:
                print(f"pictures: {name}: FAILED: {problem}", file=sys.stderr)
                failed += 1
            else:
                print(f"pictures: {name}: ok")
                passed += 1
    print(f"pictures: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
