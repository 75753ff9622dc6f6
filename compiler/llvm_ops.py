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

from compiler.dtypes import HALF_DTYPES, INT_DTYPES, ITEMSIZE, is_floating, is_unsigned

FAST_MATH = ("contract", "reassoc", "nsz")
I64 = ll.IntType(64)
I32 = ll.IntType(32)
I8P = ll.PointerType(ll.IntType(8))
# LLVM's integers have no sign: each op on them says how it reads them (`compiler.ops`).
LL_TYPES: dict[str, ll.Type] = {
    "float32": ll.FloatType(),
    "float64": ll.DoubleType(),
    "float16": ll.HalfType(),
    "bfloat16": ll.IntType(16),  # its bits: llvmlite has no bfloat type, and the conversions are a shift
    **{dtype: ll.IntType(8 * ITEMSIZE[dtype]) for dtype in INT_DTYPES},
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
    return {ll.HalfType: "f16", ll.FloatType: "f32", ll.DoubleType: "f64"}[type(ty)]


def call_intrinsic(cg: Emitter, name: str, args: list[ll.Value]) -> ll.Value:
    """`llvm.<name>.<suffix>` on float scalars or vectors, with the fast-math flags."""
    ty = args[0].type
    fn = cg.declare(f"llvm.{name}.{intrinsic_suffix(ty)}", ty, [ty] * len(args))
    return cg.builder.call(fn, args, fastmath=FAST_MATH)


def cast_value(cg: Emitter, src: str, dst: str, v: ll.Value) -> ll.Value:
    """Convert between IR dtypes (bool conversions on scalars only). A float becomes an int by
    `llvm.fptosi.sat` / `llvm.fptoui.sat`: truncated, saturated at the int's range, NaN as 0
    (`dtypes.convert`), where plain fptosi would make NaN and out-of-range values poison. An int
    widens by its own sign and narrows by dropping its high bits, as numpy's astype does."""
    b = cg.builder
    if src == dst:
        return v
    if src == "bfloat16":
        return cast_value(cg, "float32", dst, _bfloat16_to_float32(b, v))
    if dst == "bfloat16":
        return _float32_to_bfloat16(b, cast_value(cg, src, "float32", v))
    ty = like(v, LL_TYPES[dst])
    if src == "float64" and dst in HALF_DTYPES:
        # Through float32: x86 has no instruction for it, and LLVM's library call is not linked
        # here. Rounding twice can differ from rounding once by one unit in the last place, where
        # the double lies within 2^-29 of a point halfway between two halves.
        return cast_value(cg, "float32", dst, cast_value(cg, src, "float32", v))
    if is_floating(src) and is_floating(dst):
        return b.fpext(v, ty) if ITEMSIZE[dst] > ITEMSIZE[src] else b.fptrunc(v, ty)
    if is_floating(src) and dst == "bool":
        return b.fcmp_unordered("!=", v, v.type(0))
    if is_floating(src):
        kind = "fptoui" if is_unsigned(dst) else "fptosi"
        name = f"llvm.{kind}.sat.{intrinsic_suffix(ty)}.{intrinsic_suffix(v.type)}"
        return b.call(cg.declare(name, ty, [v.type]), [v])
    if is_floating(dst):
        return b.uitofp(v, ty) if src == "bool" or is_unsigned(src) else b.sitofp(v, ty)
    if dst == "bool":
        return b.icmp_signed("!=", v, v.type(0))
    if src == "bool":
        return b.zext(v, ty)
    src_width, dst_width = LL_TYPES[src].width, LL_TYPES[dst].width
    if dst_width == src_width:
        return v
    if dst_width < src_width:
        return b.trunc(v, ty)
    return b.zext(v, ty) if is_unsigned(src) else b.sext(v, ty)


def _bfloat16_to_float32(b: ll.IRBuilder, bits: ll.Value) -> ll.Value:
    """A bfloat16 is the high half of the float32 it stands for: exact."""
    wide = b.shl(b.zext(bits, like(bits, I32)), _splat(bits, I32(16)))
    return b.bitcast(wide, like(bits, ll.FloatType()))


def _float32_to_bfloat16(b: ll.IRBuilder, v: ll.Value) -> ll.Value:
    """Rounded to nearest, ties to even (ml_dtypes' and PyTorch's conversion): add 0x7fff plus the bit
    that will be the last one kept, then drop the low half; a NaN keeps its sign and becomes quiet."""
    bits = b.bitcast(v, like(v, I32))
    last = b.and_(b.lshr(bits, _splat(v, I32(16))), _splat(v, I32(1)))
    rounded = b.lshr(b.add(bits, b.add(last, _splat(v, I32(0x7FFF)))), _splat(v, I32(16)))
    quiet = b.or_(b.lshr(bits, _splat(v, I32(16))), _splat(v, I32(0x40)))
    is_nan = b.fcmp_unordered("uno", v, v)
    return b.trunc(b.select(is_nan, quiet, rounded), like(v, ll.IntType(16)))


def _splat(like_value: ll.Value, scalar: ll.Constant) -> ll.Value:
    """`scalar`, or a vector of it with as many lanes as `like_value` has."""
    if not isinstance(like_value.type, ll.VectorType):
        return scalar
    return ll.Constant(
        ll.VectorType(scalar.type, like_value.type.count), [scalar.constant] * like_value.type.count
    )
