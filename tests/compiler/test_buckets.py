"""A symbolic kernel with a schedule per bucket of lengths, chosen inside the kernel at the call
(`compiler.buckets`): every length computes what numpy does, whichever bucket runs it, and each
bucket's program alone is valid for the whole range."""

import numpy as np
import pytest

from compiler import build, te
from compiler.buckets import Bucket, BucketedFunc, default_buckets, lower_buckets
from compiler.ir import IfThenElse, SizeVar
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
