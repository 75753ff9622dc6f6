"""Compute definitions become the blocks and loops we expect, and compute what numpy computes."""

import numpy as np
import pytest

from compiler import build, te
from compiler.ir import Block, IRError
from compiler.serialize import from_json, to_json
from compiler.te import TensorError
from compiler.visit import blocks


def _run(func, *inputs, out_shapes):
    outs = [np.full(s, np.nan, dtype=np.float32) for s in out_shapes]
    build(func)(*inputs, *outs)
    return outs


def test_matmul_relu_has_reduction_block_with_init():
    A = te.placeholder((8, 8), name="A")
    B = te.placeholder((8, 8), name="B")
    k = te.reduce_axis((0, 8), name="k")
    Y = te.compute((8, 8), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((8, 8), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    func = te.create_prim_func([A, B, C])
    ys, cs = blocks(func.body)
    assert isinstance(ys, Block) and ys.name == "Y" and ys.init is not None
    assert [iv.kind for iv in ys.iter_vars] == ["S", "S", "R"]
    assert cs.init is None and [b.name for b in func.allocs] == ["Y"]


@pytest.mark.parametrize("reducer, np_fn", [(te.sum, np.sum), (te.max, np.max), (te.min, np.min)])
def test_reductions_with_offset_axis(reducer, np_fn):
    A = te.placeholder((13, 29), name="A")
    r = te.reduce_axis((3, 29), name="r")
    out = te.compute((13,), lambda i: reducer(A[i, r], axis=r), name="out")
    a = np.random.default_rng(0).standard_normal((13, 29), dtype=np.float32)
    (got,) = _run(te.create_prim_func([A, out]), a, out_shapes=[(13,)])
    np.testing.assert_allclose(got, np_fn(a[:, 3:], axis=1), rtol=1e-5, atol=1e-5)


def test_elementwise_math_select_cast():
    A = te.placeholder((97,), name="A")
    out = te.compute(
        (97,),
        lambda i: te.select(A[i] > 0.0, te.sqrt(A[i]) + te.exp(-A[i]), te.tanh(A[i]) * te.cast("float32", i)),
        name="out",
    )
    a = np.random.default_rng(1).standard_normal(97, dtype=np.float32)
    (got,) = _run(te.create_prim_func([A, out]), a, out_shapes=[(97,)])
    pos = np.sqrt(np.abs(a)) + np.exp(-a)
    expect = np.where(a > 0, pos, np.tanh(a) * np.arange(97, dtype=np.float32))
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6)


def test_padding_with_select_and_all():
    A = te.placeholder((5, 7), name="A")
    P = te.compute(
        (7, 9),
        lambda i, j: te.select(te.all(i >= 1, i < 6, j >= 1, j < 8), A[i - 1, j - 1], 0.0),
        name="P",
    )
    a = np.random.default_rng(2).standard_normal((5, 7), dtype=np.float32)
    (got,) = _run(te.create_prim_func([A, P]), a, out_shapes=[(7, 9)])
    np.testing.assert_array_equal(got, np.pad(a, 1))


def test_errors_are_clear():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(TensorError, match="rank 2"):
        te.compute((4,), lambda i: A[i], name="bad")
    with pytest.raises(TensorError, match="shape"):
        te.placeholder((0, 4), name="Z")
    with pytest.raises(TensorError, match="dtype"):
        te.placeholder((4,), "float8_e4m3fn", name="F8")
    half = te.placeholder((4,), "float16", name="H")  # stored and converted, never computed in
    with pytest.raises(IRError, match=r"add takes float32 or float64 .*got float16"):
        te.compute((4,), lambda i: half[i] + half[i], name="twice")
    orphan = te.placeholder((4, 4), name="orphan")
    C = te.compute((4, 4), lambda i, j: A[i, j] + orphan[i, j], name="C")
    with pytest.raises(TensorError, match="orphan"):
        te.create_prim_func([A, C])
    with pytest.raises(TypeError, match="dtype"):
        te.compute((4, 4), lambda i, j: A[i, j] + te.cast("float64", A[i, j]), name="D")


def test_reduce_axis_may_share_a_spatial_axis_name():
    A = te.placeholder((6, 6), name="A")
    r = te.reduce_axis((0, 6), name="i")
    S = te.compute((6,), lambda i: te.sum(A[i, r], axis=r), name="S")
    a = np.random.default_rng(5).standard_normal((6, 6), dtype=np.float32)
    (got,) = _run(te.create_prim_func([A, S]), a, out_shapes=[(6,)])
    np.testing.assert_allclose(got, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_varargs_and_explicit_axis_names():
    A = te.placeholder((3, 4, 5), name="A")
    B = te.compute((3, 4, 5), lambda *i: A[i] * 2.0, name="B")
    assert [a.name for a in B.axes] == ["i0", "i1", "i2"]
    C = te.compute((3, 4, 5), lambda *i: B[i] + 1.0, name="C", axis_names=["n", "h", "w"])
    assert [a.name for a in C.axes] == ["n", "h", "w"]
    a = np.random.default_rng(6).standard_normal((3, 4, 5), dtype=np.float32)
    (got,) = _run(te.create_prim_func([A, C]), a, out_shapes=[(3, 4, 5)])
    np.testing.assert_allclose(got, a * 2 + 1, rtol=1e-6)


def test_annotations_go_on_the_computing_block_and_into_the_identity():
    """A compute definition names the schedule rule of its block (as a Winograd conv's product does);
    the annotation survives serialization and makes a different workload than the same compute
    without it."""
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")

    def func(**annotations):
        Y = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="Y", annotations=annotations)
        return te.create_prim_func([A, Y])

    annotated = func(**{te.SCHEDULE_RULE: "winograd_product"})
    (block,) = blocks(annotated.body)
    assert block.annotations == ((te.SCHEDULE_RULE, "winograd_product"),)
    assert from_json(to_json(annotated)).structural_hash() == annotated.structural_hash()
    assert annotated.structural_hash() != func().structural_hash()
