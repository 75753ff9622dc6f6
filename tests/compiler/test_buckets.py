"""A symbolic kernel with a schedule per bucket of lengths, chosen inside the kernel at the call
(`compiler.buckets`): every length computes what numpy does, whichever bucket runs it, and each
bucket's program alone is valid for the whole range."""

import numpy as np
import pytest

from compiler import build, te
from compiler.buckets import Bucket, BucketedFunc, default_buckets, lower_buckets
from compiler.ir import IfThenElse, PrimFunc, SizeVar
from compiler.target import Target
from tests.compiler.test_symbolic_shapes import matmul_rows

rng = np.random.default_rng(52)


def test_a_bucketed_matmul_computes_every_length_whichever_bucket_runs_it() -> None:
    n = te.var("n", range=(1, 300))
    assert isinstance(n, SizeVar)
    bucketed = default_buckets(matmul_rows(n), Target.host())
    assert [b.upto for b in bucketed.buckets][-1] == 300
    assert len(bucketed.buckets) > 2  # a matmul's row tile depends on the length
    conditions = []
    stmt = lower_buckets(bucketed).body
    while isinstance(stmt, IfThenElse):
        conditions.append(str(stmt.cond))
        assert stmt.else_case is not None
        stmt = stmt.else_case
    assert len(conditions) == len(bucketed.buckets) - 1
    kernel = build(bucketed)
    wv = rng.standard_normal((64, 96)).astype("float32")
    for m in (*range(1, 34), 299, 300):
        xv = rng.standard_normal((m, 64)).astype("float32")
        out = np.full((m + 1, 96), 7.0, "float32")
        kernel(xv, wv, out[:m])
        np.testing.assert_allclose(out[:m], xv @ wv, rtol=1e-4, atol=1e-4, err_msg=f"n = {m}")
        assert (out[m] == 7).all(), f"wrote past n = {m}"
    xv = rng.standard_normal((257, 64)).astype("float32")
    for bucket in bucketed.buckets:  # each program is valid past its bucket: the dispatch picks speed
        out = np.empty((257, 96), "float32")
        build(bucket.func)(xv, wv, out)
        np.testing.assert_allclose(out, xv @ wv, rtol=1e-4, atol=1e-4, err_msg=f"bucket {bucket.upto}")


def test_buckets_with_the_same_program_are_one_and_a_range_keeps_its_own() -> None:
    n = te.var("n", range=(5, 100))
    a = te.placeholder((n, 64), name="A")
    b = te.compute((n, 64), lambda i, j: a[i, j] * 2.0, name="B")
    scale = default_buckets(te.create_prim_func([a, b]), Target.host())
    assert [bk.upto for bk in scale.buckets] == [100]  # elementwise: one schedule for every length
    buckets = default_buckets(matmul_rows(n), Target.host()).buckets
    assert buckets[0].upto >= 5 and buckets[-1].upto == 100
    kernel = build(scale)
    av = rng.standard_normal((7, 64)).astype("float32")
    out = np.empty_like(av)
    kernel(av, out)
    np.testing.assert_allclose(out, av * 2, rtol=1e-6)


def test_malformed_buckets_are_refused() -> None:
    n = te.var("n", range=(1, 64))
    assert isinstance(n, SizeVar)
    func = matmul_rows(n)
    with pytest.raises(ValueError, match="must rise to its largest value 64"):
        BucketedFunc(func, n, (Bucket(8, func), Bucket(4, func)))
    with pytest.raises(ValueError, match="other parameters"):
        BucketedFunc(func, n, (Bucket(64, matmul_rows(n, width=16)),))
    with pytest.raises(ValueError, match="no symbolic dimension"):
        default_buckets(matmul_rows(8), Target.host())


def scores_softmax(n: te.Var) -> PrimFunc:
    """Attention's scores and their softmax: (4, n, 16) x (4, 16, n), masked by an (n, n) bias, then
    a softmax over n: n is rows, columns and a reduction at once, so a tile is guarded on a row, on
    a vectorized column and (for the softmax's sums) on a reduction step."""
    q, k = te.placeholder((4, n, 16), name="Q"), te.placeholder((4, 16, n), name="K")
    bias = te.placeholder((n, n), name="bias")
    d = te.reduce_axis((0, 16), name="d")
    s = te.compute((4, n, n), lambda h, i, j: te.sum(q[h, i, d] * k[h, d, j], axis=d), name="S")
    s = te.compute((4, n, n), lambda h, i, j: s[h, i, j] + bias[i, j], name="SB")
    c = te.reduce_axis((0, n), name="c")
    top = te.compute((4, n), lambda h, i: te.max(s[h, i, c], axis=c), name="top")
    e = te.compute((4, n, n), lambda h, i, j: te.exp(s[h, i, j] - top[h, i]), name="E")
    c2 = te.reduce_axis((0, n), name="c2")
    total = te.compute((4, n), lambda h, i: te.sum(e[h, i, c2], axis=c2), name="total")
    p = te.compute((4, n, n), lambda h, i, j: e[h, i, j] / total[h, i], name="P")
    return te.create_prim_func([q, k, bias, p], name="scores_softmax")


def test_attention_scores_over_a_range_compute_every_length() -> None:
    """The guards of the last partial tiles (a vectorized column's, a reduction's, a row's) become
    a shorter vector loop, a guard hoisted out of the tile and clamped rows: numpy's at every length."""
    n = te.var("n", range=(1, 80))
    kernel = build(default_buckets(scores_softmax(n), Target.host()))
    for m in (1, 2, 5, 16, 31, 32, 33, 47, 80):
        q = rng.standard_normal((4, m, 16)).astype("float32")
        k = rng.standard_normal((4, 16, m)).astype("float32")
        bias = rng.standard_normal((m, m)).astype("float32")
        out = np.full(4 * m * m + 16, 7.0, "float32")
        kernel(q, k, bias, out[: 4 * m * m].reshape(4, m, m))
        s = q @ k + bias
        want = np.exp(s - s.max(-1, keepdims=True))
        got = out[: 4 * m * m].reshape(4, m, m)
        np.testing.assert_allclose(
            got, want / want.sum(-1, keepdims=True), rtol=1e-4, atol=1e-5, err_msg=f"n = {m}"
        )
        assert (out[4 * m * m :] == 7).all(), f"wrote past n = {m}"
