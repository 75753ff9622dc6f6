"""LLVM types and value-level operations shared by the scalar and the vector code generators.

They work on scalars and on vectors alike (llvmlite's builder does), so both generators lower an
IR operator the same way.

Floating-point semantics: arithmetic carries the fast-math flags `contract` (fuse a*b+c into FMA),
`reassoc` (let reductions be vectorized and reordered) and `nsz` (ignore the sign of zero). We do
not use `nnan`/`ninf`: NaN and infinity must propagate so verification catches them. Results stay
within rtol 1e-4 of numpy, which sums in a different order too.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ll

from compiler.ir import FLOAT_DTYPES, Buffer

FAST_MATH = ("contract", "reassoc", "nsz")
I64 = ll.IntType(64)
I32 = ll.IntType(32)
I8P = ll.PointerType(ll.IntType(8))
LL_TYPES: dict[str, ll.Type] = {
    "float32": ll.FloatType(),
    "float64": ll.DoubleType(),
    "int32": ll.IntType(32),
    "int64": I64,
    "bool": ll.IntType(1),
}
_FLOAT_ARITH = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
_INT_ARITH = {"add": "add", "sub": "sub", "mul": "mul"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def align(buf: Buffer) -> int:
    """Element alignment: numpy only guarantees this much, and wider alignment faults (vmovaps)."""
    return 8 if buf.dtype in ("float64", "int64") else 4


def like(value: ll.Value, scalar: ll.Type) -> ll.Type:
    """`scalar`, or a vector of it with as many lanes as `value` has."""
    return ll.VectorType(scalar, value.type.count) if isinstance(value.type, ll.VectorType) else scalar


def intrinsic_suffix(ty: ll.Type) -> str:
    """LLVM's overload suffix: f32, f64, v16f32, ..."""
    if isinstance(ty, ll.VectorType):
        return f"v{ty.count}{intrinsic_suffix(ty.element)}"
    return "f32" if isinstance(ty, ll.FloatType) else "f64"


def binary_values(cg: Any, op: str, operand_dtype: str, x: ll.Value, y: ll.Value) -> ll.Value:
    """Apply an IR binary operator to two LLVM values (`cg` provides builder and declare)."""
    b = cg.builder
    is_float = operand_dtype in FLOAT_DTYPES
    if op in _CMP:
        return b.fcmp_ordered(_CMP[op], x, y) if is_float else b.icmp_signed(_CMP[op], x, y)
    if op == "and":
        return b.and_(x, y)
    if op == "or":
        return b.or_(x, y)
    if op in ("min", "max"):
        return _min_max(cg, op, x, y, is_float)
    if is_float:
        return getattr(b, _FLOAT_ARITH[op])(x, y, flags=FAST_MATH)
    if op in _INT_ARITH:
        return getattr(b, _INT_ARITH[op])(x, y)
    if op in ("floordiv", "floormod"):
        return _floor_divmod(b, op, x, y)
    raise TypeError(f"operator {op} is not defined on {operand_dtype}")


def _min_max(cg: Any, op: str, x: ll.Value, y: ll.Value, is_float: bool) -> ll.Value:
    if is_float:
        name = f"llvm.{'minnum' if op == 'min' else 'maxnum'}.{intrinsic_suffix(x.type)}"
        fn = cg.declare(name, x.type, [x.type, x.type])
        return cg.builder.call(fn, [x, y], fastmath=FAST_MATH)
    return cg.builder.select(cg.builder.icmp_signed("<" if op == "min" else ">", x, y), x, y)


def _floor_divmod(b: ll.IRBuilder, op: str, x: ll.Value, y: ll.Value) -> ll.Value:
    """Python semantics (round toward -inf); LLVM's sdiv/srem round toward zero. Scalars only."""
    q, r = b.sdiv(x, y), b.srem(x, y)
    zero = x.type(0)
    adjust = b.and_(
        b.icmp_signed("!=", r, zero),
        b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)),
    )
    if op == "floordiv":
        return b.select(adjust, b.sub(q, x.type(1)), q)
    return b.select(adjust, b.add(r, y), r)


def cast_value(b: ll.IRBuilder, src: str, dst: str, v: ll.Value) -> ll.Value:
    """Convert between IR dtypes (bool conversions on scalars only)."""
    if src == dst:
        return v
    ty = like(v, LL_TYPES[dst])
    if src in FLOAT_DTYPES and dst in FLOAT_DTYPES:
        return b.fpext(v, ty) if dst == "float64" else b.fptrunc(v, ty)
    if src in FLOAT_DTYPES:
        return b.fcmp_unordered("!=", v, v.type(0)) if dst == "bool" else b.fptosi(v, ty)
    if dst in FLOAT_DTYPES:
        return b.uitofp(v, ty) if src == "bool" else b.sitofp(v, ty)
    if dst == "bool":
        return b.icmp_signed("!=", v, v.type(0))
    if src == "bool":
        return b.zext(v, ty)
    return b.sext(v, ty) if LL_TYPES[dst].width > LL_TYPES[src].width else b.trunc(v, ty)
