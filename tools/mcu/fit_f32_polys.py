#!/usr/bin/env python3
"""Print the polynomial coefficients of the runtime's float32 functions (mt_primitives.c,
the MT_F32 section): least-squares fits in relative error, reweighted towards the minimax
fit (Lawson's iteration), on Chebyshev nodes of each interval, in double precision, the
coefficients rounded to float one at a time from the lowest (the higher ones fitted again
after each rounding); printed with 9 significant digits (read back exactly).

    /usr/bin/python3 tools/mcu/fit_f32_polys.py

Needs numpy and scipy (scipy.special.erfcx: erfc(z) exp(z^2)). Its output goes between the
FITS BEGIN / FITS END markers of mt_primitives.c; regenerate only when a polynomial's form or
interval changes. The worst relative error of each fit (in double, its coefficients rounded)
is printed with it; tests/lower_kernels/test_primitives.cpp measures the float32 functions
themselves.
"""
import math

import numpy as np
from scipy.special import erf, erfcx


def fit(f, a, b, degree, var, nodes=6000, rounds=150):
    """Coefficients c (ascending, floats) of sum c_i var(x)^i ~ f(x) on [a, b] in relative
    error, each rounded to float in turn, the higher ones fitted again around it; the worst
    relative error of the final (rounded) fit."""
    k = np.arange(nodes)
    x = (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / nodes)
    y, t = f(x), var(x)
    V = np.vander(t, degree + 1, increasing=True)
    fixed = []
    for i in range(degree + 1):
        rest = y - V[:, :i] @ np.array(fixed) if fixed else y
        A = V[:, i:]
        w = np.full(nodes, 1.0 / nodes)
        best = None
        for _ in range(rounds):
            W = np.sqrt(w) / np.abs(y)
            c, *_ = np.linalg.lstsq(A * W[:, None], rest * W, rcond=None)
            e = np.abs(A @ c - rest) / np.abs(y)
            if best is None or e.max() < best[1]:
                best = (c, e.max())
            w = w * e
            w /= w.sum()
        fixed.append(float(np.float32(best[0][0])))
    return fixed, (np.abs(V @ np.array(fixed) - y) / np.abs(y)).max()


def f32(x):
    return f"{float(np.float32(x)):.9g}f"


def emit(name, coeffs, err, what):
    print(f"/* {what}; fit within {err:.1e} (relative) */")
    print(f"static const float {name}[{len(coeffs)}] = {{{', '.join(f32(c) for c in coeffs)}}};")


# tanh(x) = x + x^3 Q(x^2) on |x| < 0.625 (beyond it: 1 - 2 / (exp(2|x|) + 1))
c, e = fit(lambda x: (np.tanh(x) - x) / x**3, 1e-4, 0.625, 5, lambda x: x * x)
emit("mt_tanh_poly", c, e, "tanh(x) = x + x^3 Q(x^2), |x| < 0.625: Q")

# Phi(x) = 1/2 + x P(x^2) on |x| < 1/sqrt(2) (P = erf(x / sqrt 2) / (2 x))
c, e = fit(lambda x: erf(x / math.sqrt(2)) / (2 * x), 1e-6, 1 / math.sqrt(2), 5, lambda x: x * x)
emit("mt_phi_poly", c, e, "Phi(x) = 1/2 + x P(x^2), |x| < 1/sqrt(2): P")

# the tail: Phi(-a) = exp(-a^2/2) G(a) / 2 with G(a) = erfcx(a / sqrt 2), a >= 1/sqrt(2), as a
# polynomial in t - t0, t = 1 / (1 + a / 2) (an exact product), on two intervals of a
for name, lo, hi in (("mt_phi_tail1", 1 / math.sqrt(2), 2 * math.sqrt(2)), ("mt_phi_tail2", 2 * math.sqrt(2), 14.5)):
    t_lo, t_hi = 1 / (1 + hi / 2), 1 / (1 + lo / 2)
    t0 = float(np.float32((t_lo + t_hi) / 2))
    c, e = fit(lambda a: erfcx(a / math.sqrt(2)), lo, hi, 7, lambda a, t0=t0: 1 / (1 + a / 2) - t0)
    emit(name, c, e, f"erfcx(a / sqrt 2) on [{lo:.4f}, {hi:.4f}] in t - t0, t = 1 / (1 + a / 2)")
    print(f"#define {name.upper()}_T0 {f32(t0)}")
