"""The built-in tensor intrinsics of x86 CPUs, each described as TensorIR (TVMScript text) with an
implementation emitted as LLVM IR:

- `dot_16x4_vnni`: sixteen int32 sums of four uint8 x int8 products, one AVX-512 VNNI `vpdpbusd`
  (TVM's `dot_16x4_vnni`). The uint8 row of four is broadcast to every lane; the int8 weights must be
  packed 16 x 4, four consecutive reduction steps of one output column side by side.
- `fma_4x16_f32`: a rank-1 update of a 4 x 16 float32 tile, C[i, j] += A[i] * B[j], as four vector
  FMAs on one load of B: the register tile of a matmul micro-kernel, written by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import llvmlite.ir as ll

from compiler.ir import PrimFunc
from compiler.script import from_source
from compiler.tensor_intrin import IntrinsicError, Operand, TensorIntrin

if TYPE_CHECKING:
    from compiler.codegen import CodeGen

I32 = ll.IntType(32)
F32 = ll.FloatType()

DOT_16X4_VNNI = """
@T.prim_func
def dot_16x4_vnni(A: T.Buffer((4,), "uint8"), B: T.Buffer((16, 4), "int8"), C: T.Buffer((16,), "int32")):
    for i in range(16):
        for k in range(4):
            with T.block("update"):
                vi = T.axis.spatial(16, i)
                vk = T.axis.reduce(4, k)
                C[vi] = C[vi] + T.Cast("int32", A[vk]) * T.Cast("int32", B[vi, vk])
"""

FMA_4X16_F32 = """
@T.prim_func
def fma_4x16_f32(
    A: T.Buffer((4,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((4, 16), "float32")
):
    for i in range(4):
        for j in range(16):
            with T.block("update"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(16, j)
                C[vi, vj] = C[vi, vj] + A[vi] * B[vj]
"""


def _function(text: str) -> PrimFunc:
    func = from_source(text)
    assert isinstance(func, PrimFunc)
    return func


def _require(op: Operand, intrin: str, strides: tuple[int | None, ...], hint: str) -> None:
    """IntrinsicError unless `op`'s strides are `strides` (None: any)."""
    if any(want is not None and got != want for got, want in zip(op.strides, strides)):
        raise IntrinsicError(f"{intrin}: {op.name} has strides {list(op.strides)}, it needs {hint}")


def _vnni(cg: CodeGen, ops: Sequence[Operand]) -> None:
    a, b, c = ops
    _require(a, "dot_16x4_vnni", (1,), "its four bytes contiguous")
    _require(b, "dot_16x4_vnni", (4, 1), "[4, 1]: pack it 16 x 4 (transform_layout of a staged panel)")
    _require(c, "dot_16x4_vnni", (1,), "its sixteen sums contiguous")
    bld = cg.builder
    v16 = ll.VectorType(I32, 16)
    quad = bld.load(bld.bitcast(a.pointer, I32.as_pointer()), align=1)
    row = bld.shuffle_vector(
        bld.insert_element(ll.Constant(v16, ll.Undefined), quad, I32(0)),
        ll.Constant(v16, ll.Undefined),
        ll.Constant(v16, [0] * 16),
    )
    weights = bld.load(bld.bitcast(b.pointer, v16.as_pointer()), align=1)
    acc_ptr = bld.bitcast(c.pointer, v16.as_pointer())
    acc = bld.load(acc_ptr, align=4)
    dot = cg.declare("llvm.x86.avx512.vpdpbusd.512", v16, [v16, v16, v16])
    bld.store(bld.call(dot, [acc, row, weights]), acc_ptr, align=4)


def _fma(cg: CodeGen, ops: Sequence[Operand]) -> None:
    a, b, c = ops
    _require(b, "fma_4x16_f32", (1,), "its sixteen values contiguous")
    _require(c, "fma_4x16_f32", (None, 1), "each row's sixteen values contiguous")
    bld = cg.builder
    v16 = ll.VectorType(F32, 16)
    fma = cg.declare("llvm.fma.v16f32", v16, [v16, v16, v16])
    vb = bld.load(bld.bitcast(b.pointer, v16.as_pointer()), align=4)
    for i in range(4):
        ai = bld.load(bld.gep(a.pointer, [ll.IntType(64)(i * a.strides[0])], inbounds=True), align=4)
        splat = bld.shuffle_vector(
            bld.insert_element(ll.Constant(v16, ll.Undefined), ai, I32(0)),
            ll.Constant(v16, ll.Undefined),
            ll.Constant(ll.VectorType(I32, 16), [0] * 16),
        )
        row = bld.bitcast(
            bld.gep(c.pointer, [ll.IntType(64)(i * c.strides[0])], inbounds=True), v16.as_pointer()
        )
        bld.store(bld.call(fma, [splat, vb, bld.load(row, align=4)]), row, align=4)


TensorIntrin.register("dot_16x4_vnni", _function(DOT_16X4_VNNI), _vnni, features=("avx512vnni",))
TensorIntrin.register("fma_4x16_f32", _function(FMA_4X16_F32), _fma, features=("fma",))
