"""Expressions compare as TVM's do: `==` builds a comparison where an expression is wanted and means
"the same expression" where Python wants a bool; structural equality has a name; an expression has
no truth value; hashes are structural and do not travel between processes."""

import pickle

import numpy as np
import pytest

from compiler import build, te
from compiler.ir import Binary, Const, EqualOp, Var, const, structural_equal
from compiler.ops import Op


def test_equality_builds_a_comparison_where_an_expression_is_wanted():
    i = Var("i")
    eq, ne = i == 0, i != 0
    assert isinstance(eq, EqualOp)
    assert structural_equal(eq.as_expr(), Binary(Op.EQ, i, const(0)))
    assert structural_equal(ne.as_expr(), Binary(Op.NE, i, const(0)))
    assert not bool(i == 0)  # in a bool context: is `i` the expression `0`? No.
    assert i == Var("i") and i != Var("j")
    assert {Var("i"): 1}[Var("i")] == 1  # dictionary keys compare structurally


def test_select_on_an_equality_computes_it():
    A = te.placeholder((5, 7), name="A")
    out = te.compute((5, 7), lambda i, j: te.select(te.any(i == 0, j == 6), A[i, j], -A[i, j]), name="out")
    a = np.random.default_rng(0).standard_normal((5, 7), dtype=np.float32)
    got = np.full((5, 7), np.nan, np.float32)
    build(te.create_prim_func([A, out]))(a, got)
    edge = np.zeros((5, 7), bool)
    edge[0, :] = edge[:, 6] = True
    np.testing.assert_array_equal(got, np.where(edge, a, -a))


def test_an_expression_has_no_truth_value():
    i = Var("i")
    with pytest.raises(TypeError, match="no truth value"):
        bool(i < 4)
    with pytest.raises(TypeError, match="no truth value"):
        if i:
            pass


def test_structural_equal_and_hash_agree():
    i, j = Var("i"), Var("j")
    a, b = (i * 4 + j) // 2, (Var("i") * 4 + Var("j")) // 2
    assert a is not b and structural_equal(a, b) and hash(a) == hash(b)
    assert not structural_equal(a, (i * 4 + j) // 3)
    assert not structural_equal(Const(1, "int64"), Const(1.0, "float32"))
    assert not structural_equal(i, 0)
    assert len({a, b, (j * 4 + i) // 2}) == 2


def test_pickled_expressions_rehash_in_the_receiving_process():
    i = Var("i")
    e = pickle.loads(pickle.dumps(i * 3 + 1))
    assert structural_equal(e, i * 3 + 1) and hash(e) == hash(i * 3 + 1)
    assert pickle.loads(pickle.dumps(Op.ADD)) is Op.ADD
