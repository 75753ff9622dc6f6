"""float32 exp, erf, tanh, log, expm1 and log1p as inline LLVM arithmetic, on scalars and vectors alike.

LLVM has no vector math library configured here, so `llvm.exp` on a vector (and libm's erff on every
lane) becomes one scalar library call per lane: softmax ran at 3.7 GFLOPS and a BERT FFN matmul fused
with its exact gelu at 128 GFLOPS against 220 bare. These are branch-free polynomials instead, which
the vector code generator emits on `<lanes x float>` values and LLVM's vectorizers widen in scalar
loops. float64 keeps the intrinsic and libm (`compiler.ops`).

Accuracy, measured against float64 (tests/compiler/test_vector_math.py checks it on dense grids):
exp within 2 ulp (relative 1.5e-7 on normal results); erf within relative 5e-7 on [-6, 6], tiny
arguments included; tanh within relative 3e-7; log within 2 ulp on normal and subnormal arguments;
expm1 and log1p within relative 5e-7, tiny arguments included.

The arithmetic here carries only the `contract` fast-math flag (FMA where the target has it): not
`reassoc`, which would let LLVM regroup the range reduction or the two scalings of exp, and not `nsz`,
since erf(-0) is -0.
"""

from __future__ import annotations

import math

import llvmlite.ir as ll

from compiler.llvm_ops import I32, Emitter, intrinsic_suffix, like

FLAGS = ("contract",)

# exp: x = n ln2 + r, |r| <= ln2/2, e^x = 2^n e^r. x is clamped first to [EXP_LO, EXP_HI]: above
# ln(FLT_MAX) = 88.72 the result rounds to inf, below -103.98 (half the smallest subnormal) to 0, and
# the clamp keeps n within [-150, 128] so that 2^n splits into two normal scalings.
EXP_LO, EXP_HI = -104.0, 89.0
LOG2E = 1.0 / math.log(2)
# Cody-Waite: ln2 = LN2_HI + LN2_LO with LN2_HI = 355/512 (9 significant bits), so n * LN2_HI is exact
# for |n| < 2^15 and x - n * LN2_HI loses nothing.
LN2_HI = 0.693359375
LN2_LO = math.log(2) - LN2_HI
# e^r ~ 1 + r + r^2 (c2 + c3 r + c4 r^2 + c5 r^3 + c6 r^4) on [-ln2/2, ln2/2]: a weighted least-squares
# fit of the relative error on 4000 Chebyshev nodes, reweighted toward minimax (Lawson), rounded to
# float32. Its own relative error is 3.8e-9 (the Taylor coefficients 1/k! give 1.6e-7), so what
# remains is float32 rounding.
EXP_POLY = (
    0.4999999403953552,
    0.1666652113199234,
    0.04166838899254799,
    0.008368710055947304,
    0.001381461275741458,
)

# erf(x) = x P(x^2) for |x| < ERF_SMALL: the Taylor series 2/sqrt(pi) sum (-1)^k x^(2k+1) / (k! (2k+1)),
# 7 terms (truncation 1.1e-8 relative at 0.6). Elsewhere Abramowitz & Stegun 7.1.26,
# 1 - t (a1 + t (a2 + ...)) e^(-x^2) with t = 1 / (1 + p |x|): absolute error 1.5e-7, 1.7e-7 relative
# above 0.6. |x| >= ERF_ONE gives +-1 (erf(3.92) already rounds to 1 in float32).
ERF_SMALL, ERF_ONE = 0.6, 4.0
ERF_TAYLOR = tuple(2 / math.sqrt(math.pi) * (-1) ** k / (math.factorial(k) * (2 * k + 1)) for k in range(7))
AS_P = 0.3275911
AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)

# tanh(x) = x + x^3 P(x^2) for |x| < TANH_SMALL (a reweighted least-squares fit of the relative error,
# as EXP_POLY, on 4000 Chebyshev nodes: 2.6e-9 relative before float32 rounding); elsewhere
# 1 - 2 / (e^(2|x|) + 1), whose cancellation costs nothing there (the result is at least 0.55).
TANH_SMALL = 0.625
TANH_POLY = (
    -0.3333333134651184,
    0.1333320587873459,
    -0.05394676327705383,
    0.021700706332921982,
    -0.008177406154572964,
    0.002142968587577343,
)

# log: x = 2^e m with m in [sqrt(1/2), sqrt(2)), found on the bits (the exponent field of x over
# sqrt(1/2)'s); log(x) = e ln2 + log1p(f), f = m - 1 in [-0.293, 0.415], log1p(f) = f - f^2/2 +
# f^3 P(f) (fit as TANH_POLY: 7.5e-9 relative). Subnormal x is scaled by 2^23 first.
SQRT_HALF_BITS = 0x3F3504F3
MANTISSA_MASK = 0x7FFFFF
TWO_23 = float(1 << 23)
LOG_POLY = (
    0.3333333134651184,
    -0.250008225440979,
    0.20001226663589478,
    -0.16623353958129883,
    0.14201776683330536,
    -0.13160233199596405,
    0.12761467695236206,
    -0.07634225487709045,
)
FLOAT32_TINY = 2.0**-126


def _const(like_value: ll.Value, c: float) -> ll.Constant:
    """`c` with the type of `like_value` (a float or int scalar, or a vector of it)."""
    return _splat(like_value.type, c)


def _splat(ty: ll.Type, c: float) -> ll.Constant:
    """`c` as a `ty` (a float or int scalar, or a vector of it)."""
    if isinstance(ty, ll.VectorType):
        return ll.Constant(ty, [c] * ty.count)
    return ll.Constant(ty, c)


def _intrinsic(cg: Emitter, name: str, args: list[ll.Value]) -> ll.Value:
    """`llvm.<name>` with FLAGS (llvm_ops.call_intrinsic adds `nsz`, which would let copysign lose -0)."""
    ty = args[0].type
    fn = cg.declare(f"llvm.{name}.{intrinsic_suffix(ty)}", ty, [ty] * len(args))
    return cg.builder.call(fn, args, fastmath=FLAGS)


def _horner(b: ll.IRBuilder, x: ll.Value, coefficients: tuple[float, ...]) -> ll.Value:
    """c0 + x (c1 + x (c2 + ...)), each step one FMA."""
    acc: ll.Value = _const(x, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc = b.fadd(b.fmul(acc, x, flags=FLAGS), _const(x, c), flags=FLAGS)
    return acc


def _pow2(b: ll.IRBuilder, n: ll.Value, float_type: ll.Type) -> ll.Value:
    """2^n for int32 n in [-126, 127]: (n + 127) in the exponent bits."""
    biased = b.add(n, _const(n, 127))
    return b.bitcast(b.shl(biased, _const(n, 23)), float_type)


def exp_f32(cg: Emitter, x: ll.Value) -> ll.Value:
    """e^x. Overflow gives inf, gradual underflow subnormals then 0, NaN gives NaN."""
    b = cg.builder
    # The low clamp catches NaN too (unordered), so no NaN reaches fptosi (poison); it is put back last.
    xc = b.select(b.fcmp_unordered("<", x, _const(x, EXP_LO)), _const(x, EXP_LO), x)
    xc = b.select(b.fcmp_ordered(">", xc, _const(x, EXP_HI)), _const(x, EXP_HI), xc)
    n = _intrinsic(
        cg, "floor", [b.fadd(b.fmul(xc, _const(x, LOG2E), flags=FLAGS), _const(x, 0.5), flags=FLAGS)]
    )
    r = b.fsub(xc, b.fmul(n, _const(x, LN2_HI), flags=FLAGS), flags=FLAGS)
    r = b.fsub(r, b.fmul(n, _const(x, LN2_LO), flags=FLAGS), flags=FLAGS)
    p = b.fadd(b.fmul(b.fmul(r, r, flags=FLAGS), _horner(b, r, EXP_POLY), flags=FLAGS), r, flags=FLAGS)
    p = b.fadd(p, _const(x, 1.0), flags=FLAGS)
    # 2^n as 2^n1 2^n2 (n1 = floor(n/2)): both normal for n in [-150, 128], the first product exact,
    # the second rounding once, into a subnormal or to inf where the true result does.
    ni = b.fptosi(n, like(x, I32))
    n1 = b.ashr(ni, _const(ni, 1))
    y = b.fmul(b.fmul(p, _pow2(b, n1, x.type), flags=FLAGS), _pow2(b, b.sub(ni, n1), x.type), flags=FLAGS)
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


def erf_f32(cg: Emitter, x: ll.Value) -> ll.Value:
    """erf(x): odd, so computed on |x| (clamped to ERF_ONE) and given the sign of x (erf(-0) = -0)."""
    b = cg.builder
    a = _intrinsic(cg, "minimum", [_intrinsic(cg, "fabs", [x]), _const(x, ERF_ONE)])
    s = b.fmul(a, a, flags=FLAGS)
    small = b.fmul(a, _horner(b, s, ERF_TAYLOR), flags=FLAGS)
    t = b.fdiv(_const(x, 1.0), b.fadd(b.fmul(a, _const(x, AS_P), flags=FLAGS), _const(x, 1.0), flags=FLAGS))
    tail = b.fmul(b.fmul(t, _horner(b, t, AS_A), flags=FLAGS), exp_f32(cg, b.fneg(s)), flags=FLAGS)
    large = b.fsub(_const(x, 1.0), tail, flags=FLAGS)
    y = b.select(b.fcmp_ordered("<", a, _const(x, ERF_SMALL)), small, large)
    return _intrinsic(cg, "copysign", [y, x])


def tanh_f32(cg: Emitter, x: ll.Value) -> ll.Value:
    """tanh(x): odd, computed on |x| and given the sign of x (tanh(-0) = -0, NaN stays NaN)."""
    b = cg.builder
    a = _intrinsic(cg, "fabs", [x])
    s = b.fmul(a, a, flags=FLAGS)
    small = b.fadd(a, b.fmul(b.fmul(s, a, flags=FLAGS), _horner(b, s, TANH_POLY), flags=FLAGS), flags=FLAGS)
    e = exp_f32(cg, b.fadd(a, a, flags=FLAGS))
    large = b.fsub(
        _const(x, 1.0), b.fdiv(_const(x, 2.0), b.fadd(e, _const(x, 1.0), flags=FLAGS)), flags=FLAGS
    )
    y = b.select(b.fcmp_ordered("<", a, _const(x, TANH_SMALL)), small, large)
    return _intrinsic(cg, "copysign", [y, x])


def log_f32(cg: Emitter, x: ll.Value) -> ll.Value:
    """log(x): -inf at +-0, NaN below 0 and at NaN, inf at inf."""
    b = cg.builder
    i32 = like(x, I32)
    subnormal = b.fcmp_ordered("<", x, _const(x, FLOAT32_TINY))
    scaled = b.select(subnormal, b.fmul(x, _const(x, TWO_23), flags=FLAGS), x)
    bits = b.sub(b.bitcast(scaled, i32), _splat(i32, SQRT_HALF_BITS))
    exponent = b.sub(b.ashr(bits, _const(bits, 23)), b.select(subnormal, _const(bits, 23), _const(bits, 0)))
    m = b.bitcast(b.add(b.and_(bits, _const(bits, MANTISSA_MASK)), _const(bits, SQRT_HALF_BITS)), x.type)
    f = b.fsub(m, _const(x, 1.0), flags=FLAGS)
    f2 = b.fmul(f, f, flags=FLAGS)
    log1p = b.fmul(b.fmul(f2, f, flags=FLAGS), _horner(b, f, LOG_POLY), flags=FLAGS)
    log1p = b.fadd(b.fsub(f, b.fmul(f2, _const(x, 0.5), flags=FLAGS), flags=FLAGS), log1p, flags=FLAGS)
    e = b.sitofp(exponent, x.type)
    y = b.fadd(
        b.fmul(e, _const(x, LN2_HI), flags=FLAGS),
        b.fadd(b.fmul(e, _const(x, LN2_LO), flags=FLAGS), log1p, flags=FLAGS),
        flags=FLAGS,
    )
    y = b.select(b.fcmp_ordered("==", x, _const(x, 0.0)), _const(x, -math.inf), y)
    y = b.select(b.fcmp_unordered("<", x, _const(x, 0.0)), _const(x, math.nan), y)
    return b.select(b.fcmp_ordered("==", x, _const(x, math.inf)), x, y)


def expm1_f32(cg: Emitter, x: ll.Value) -> ll.Value:
    """e^x - 1, to a few ulp near 0 too: Kahan's (u - 1) x / log(u) with u = e^x rounded, exact where
    u rounds to 1; -1 where u underflows to 0 and inf where it overflows. Without `reassoc`, LLVM
    cannot fold u - 1 away."""
    b = cg.builder
    u = exp_f32(cg, x)
    y = b.fmul(b.fsub(u, _const(x, 1.0), flags=FLAGS), b.fdiv(x, log_f32(cg, u), flags=FLAGS), flags=FLAGS)
    y = b.select(b.fcmp_ordered("==", u, _const(x, math.inf)), u, y)
    y = b.select(b.fcmp_ordered("==", u, _const(x, 0.0)), _const(x, -1.0), y)
    return b.select(b.fcmp_ordered("==", u, _const(x, 1.0)), x, y)


def log1p_f32(cg: Emitter, x: ll.Value) -> ll.Value:
    """log(1 + x), to a few ulp near 0 too: Goldberg's log(u) x / (u - 1) with u = 1 + x rounded,
    exact where u rounds to 1; inf at inf."""
    b = cg.builder
    u = b.fadd(x, _const(x, 1.0), flags=FLAGS)
    y = b.fmul(log_f32(cg, u), b.fdiv(x, b.fsub(u, _const(x, 1.0), flags=FLAGS), flags=FLAGS), flags=FLAGS)
    y = b.select(b.fcmp_ordered("==", u, _const(x, math.inf)), u, y)
    return b.select(b.fcmp_ordered("==", u, _const(x, 1.0)), x, y)
