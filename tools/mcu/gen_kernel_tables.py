#!/usr/bin/env python3
"""Print the constant tables of src/lower/runtime/mt_tables.h (pure stdlib, deterministic).

    /usr/bin/python3 tools/mcu/gen_kernel_tables.py > /tmp/tables.c

The kernels never compute these at run time (no float on the target); regenerate only when
the table layout changes, and paste the output between the TABLES markers of mt_tables.h.
"""
import decimal
import math


def rnd(x):
    """Round half away from zero, the rounding mode of the kernels."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def emit(name, ctype, values, per_line=12, comment=""):
    if comment:
        print(f"/* {comment} */")
    print(f"static const {ctype} {name}[{len(values)}] = {{")
    for i in range(0, len(values), per_line):
        print("    " + ", ".join(str(v) for v in values[i:i + per_line]) + ",")
    print("};")


# 2^-f on [0, 1] in 64 segments for the quadratic interpolation: with g(k) = round(2^24 *
# 2^(-k/64)), Q24 (2^23 .. 2^24), k = 0..65, each segment's g0 = g(k), 2 (g0 - g1) and the
# second difference g2 + g0 - 2 g1 (the kernel's operands, exact integers).
g = [rnd(2 ** 24 * 2.0 ** (-k / 64)) for k in range(66)]
emit("mt_exp2_seg", "uint32_t",
     [v for k in range(64) for v in (g[k], 2 * (g[k] - g[k + 1]), g[k + 2] + g[k] - 2 * g[k + 1])], per_line=6,
     comment="per segment k = 0..63 of g(k) = round(2^24 * 2^(-k/64)): g(k), 2 (g(k) - g(k+1)), "
             "g(k+2) + g(k) - 2 g(k+1)")

# 2^-f for f = h/128 + l/65536 (h = 0..127, l = 0..511), the streaming attention's weights: a
# table of factors 2^(-h/128) in Q31 (2^31 at 0), exact to the rounding (decimal arithmetic, 40
# digits), times the factor 2^(-l/65536) from the minimax line A - l C in Q31 (C the integer slope
# with the smallest worst error among 22500..22799, around ln(2) 2^15 = 22713, the tangent's
# slope at 0; A the middle of the range of exact + l C, rounded).
with decimal.localcontext() as ctx:
    ctx.prec = 40
    two = decimal.Decimal(2)
    emit("mt_exp2_hi", "uint32_t",
         [int((two ** (31 - decimal.Decimal(h) / 128)).to_integral_value(decimal.ROUND_HALF_UP)) for h in range(128)],
         per_line=8, comment="round(2^31 * 2^(-h/128)), h = 0..127")
    exact = [two ** (31 - decimal.Decimal(l) / 65536) for l in range(512)]
    fits = []
    for c in range(22500, 22800):
        f = [exact[l] + l * c for l in range(512)]
        fits.append(((max(f) - min(f)) / 2, c, (max(f) + min(f)) / 2))
    err, c, mid = min(fits)
    a = int(mid.to_integral_value(decimal.ROUND_HALF_UP))
    err = max(abs(a - l * c - exact[l]) for l in range(512))
    print(f"/* 2^31 * 2^(-l/65536) ~ MT_EXP2_LO_A - l * MT_EXP2_LO_C, l = 0..511: the minimax line, "
          f"within {int(err.to_integral_value(decimal.ROUND_CEILING))} */")
    print(f"#define MT_EXP2_LO_A {a}u")
    print(f"#define MT_EXP2_LO_C {c}u")

# tanh and Phi (standard normal CDF) on [0, 8] in steps of 1/32, Q0.16, clamped to 65535;
# one entry past 8 for the quadratic interpolation of the last interval.
emit("mt_tanh_q16", "uint16_t", [min(65535, rnd(65536 * math.tanh(k / 32))) for k in range(258)],
     comment="min(65535, round(2^16 * tanh(k/32))), k = 0..257")
emit("mt_phi_q16", "uint16_t",
     [min(65535, rnd(65536 * 0.5 * (1 + math.erf(k / 32 / math.sqrt(2))))) for k in range(258)],
     comment="min(65535, round(2^16 * Phi(k/32))), Phi = standard normal CDF, k = 0..257")

# Initial guess of 1/sqrt(m) for m in [i/16, (i+1)/16), i = 4..15, Q2.30: the value at the
# geometric middle of the interval's end values (minimises the worst relative error).
rs = []
for i in range(4, 16):
    lo, hi = 1 / math.sqrt((i + 1) / 16), 1 / math.sqrt(i / 16)
    rs.append(rnd(math.sqrt(lo * hi) * 2 ** 30))
emit("mt_rsqrt_seed", "uint32_t", rs, per_line=4,
     comment="round(2^30 * 1/sqrt(m)) at the geometric middle of m in [i/16, (i+1)/16), i = 4..15")
