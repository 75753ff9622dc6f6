"""LLVM types and the value-level helpers shared by the scalar and the vector code generators.

They work on scalars and on vectors alike (llvmlite's builder does), so both generators lower an
IR operation the same way; how each op lowers is declared with the op, in `compiler.ops`.

Floating-point semantics: arithmetic carries the fast-math flags `contract` (fuse a*b+c into FMA),
`reassoc` (let reductions be vectorized and reordered) and `nsz` (ignore the sign of zero). We do
not use `nnan`/`ninf`: NaN and infinity must propagate so verification catches them. Results stay
within rtol 1e-4 of numpy, which sums in a different order too.
"""

from __future__ import annotations

from typing import Protocol

import llvmlite.ir as ll

from compiler.dtypes import FLOAT_DTYPES, ITEMSIZE

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
# How each dtype is kept in memory: a bool is a byte, as numpy keeps it (0 or 1), and an i1 in values.
MEMORY_TYPES: dict[str, ll.Type] = {**LL_TYPES, "bool": ll.IntType(8)}


def from_memory(b: ll.IRBuilder, dtype: str, loaded: ll.Value) -> ll.Value:
    """A value (scalar or vector) as loaded from memory, as the code computes with it: a bool byte is
    true where it is not 0."""
    if dtype != "bool":
        return loaded
    return b.icmp_unsigned("!=", loaded, ll.Constant(loaded.type, None))


def to_memory(b: ll.IRBuilder, dtype: str, value: ll.Value) -> ll.Value:
    """A value (scalar or vector) as it is stored: a bool as the byte 0 or 1."""
    if dtype != "bool":
        return value
    memory = MEMORY_TYPES["bool"]
    return b.zext(
        value, ll.VectorType(memory, value.type.count) if isinstance(value.type, ll.VectorType) else memory
    )


class Emitter(Protocol):
    """What emitting an op needs of a code generator: the builder at the current position, and a way
    to declare (once per module) the intrinsics and library functions it calls."""

    builder: ll.IRBuilder

    def declare(self, name: str, ret: ll.Type, args: list[ll.Type]) -> ll.Function: ...


def align(dtype: str) -> int:
    """Element alignment: numpy only guarantees the element's size, and wider alignment faults
    (vmovaps on an unaligned address)."""
    return ITEMSIZE[dtype]


def like(value: ll.Value, scalar: ll.Type) -> ll.Type:
    """`scalar`, or a vector of it with as many lanes as `value` has."""
    return ll.VectorType(scalar, value.type.count) if isinstance(value.type, ll.VectorType) else scalar


def intrinsic_suffix(ty: ll.Type) -> str:
    """LLVM's overload suffix: f32, f64, i32, v16f32, ..."""
    if isinstance(ty, ll.VectorType):
        return f"v{ty.count}{intrinsic_suffix(ty.element)}"
    if isinstance(ty, ll.IntType):
        return f"i{ty.width}"
    return "f32" if isinstance(ty, ll.FloatType) else "f64"


def call_intrinsic(cg: Emitter, name: str, args: list[ll.Value]) -> ll.Value:
    """`llvm.<name>.<suffix>` on float scalars or vectors, with the fast-math flags."""
    ty = args[0].type
    fn = cg.declare(f"llvm.{name}.{intrinsic_suffix(ty)}", ty, [ty] * len(args))
    return cg.builder.call(fn, args, fastmath=FAST_MATH)


def cast_value(cg: Emitter, src: str, dst: str, v: ll.Value) -> ll.Value:
    """Convert between IR dtypes (bool conversions on scalars only). A float becomes an int by
    `llvm.fptosi.sat`: truncated, saturated at the int's range, NaN as 0 (`dtypes.convert`), where
    plain fptosi would make NaN and out-of-range values poison."""
    b = cg.builder
    if src == dst:
        return v
    ty = like(v, LL_TYPES[dst])
    if src in FLOAT_DTYPES and dst in FLOAT_DTYPES:
        return b.fpext(v, ty) if dst == "float64" else b.fptrunc(v, ty)
    if src in FLOAT_DTYPES and dst == "bool":
        return b.fcmp_unordered("!=", v, v.type(0))
    if src in FLOAT_DTYPES:
        name = f"llvm.fptosi.sat.{intrinsic_suffix(ty)}.{intrinsic_suffix(v.type)}"
        return b.call(cg.declare(name, ty, [v.type]), [v])
    if dst in FLOAT_DTYPES:
        return b.uitofp(v, ty) if src == "bool" else b.sitofp(v, ty)
    if dst == "bool":
        return b.icmp_signed("!=", v, v.type(0))
    if src == "bool":
        return b.zext(v, ty)
    return b.sext(v, ty) if LL_TYPES[dst].width > LL_TYPES[src].width else b.trunc(v, ty)
