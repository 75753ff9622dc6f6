"""One graph operator checked end to end on concrete inputs: its type rule, its numpy reference
against the framework's result, and its te compute, compiled, against the reference."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
import torch

from compiler import te
from compiler.build import build
from compiler.graph import OPS, GraphBuilder, GraphError, run_reference
from compiler.graph.ir import Call, Module
from compiler.target import Target

Expected = Callable[..., np.ndarray]


def case(op: str, inputs: Sequence[np.ndarray], expected: Expected, id: str, **attrs: object) -> Any:
    """A pytest parameter: `op` with `attrs` on `inputs` must give `expected(*inputs)`."""
    return pytest.param(op, list(inputs), attrs, expected, id=f"{op}-{id}")


def with_torch(fn: Callable[..., torch.Tensor]) -> Expected:
    """The expectation computed by PyTorch on the same arrays."""
    return lambda *arrays: fn(*(torch.from_numpy(a) for a in arrays)).numpy()


def one_node(op: str, inputs: Sequence[np.ndarray], attrs: Mapping[str, object]) -> tuple[Module, Call]:
    b = GraphBuilder()
    args = [b.input(f"x{k}", a.shape, str(a.dtype)) for k, a in enumerate(inputs)]
    node = b.call_attrs(op, args, attrs, name="y")
    assert isinstance(node, Call)
    return b.module([node]), node


def check_op(op: str, inputs: Sequence[np.ndarray], attrs: Mapping[str, object], expected: Expected) -> None:
    module, node = one_node(op, inputs, attrs)
    (ref,) = run_reference(module, inputs)
    want = expected(*inputs)
    assert want.shape == node.type.shape, "the type rule's shape is the framework's"
    tol = {"rtol": 1e-5, "atol": 1e-6}
    np.testing.assert_allclose(ref, want, **tol)

    placeholders = [te.placeholder(a.shape, str(a.dtype), f"x{k}") for k, a in enumerate(inputs)]
    out = OPS[op].compute(placeholders, node.attrs, "y")
    assert (out.name, out.shape, out.dtype) == ("y", node.type.shape, node.type.dtype)
    kernel = build(te.create_prim_func([*placeholders, out]), Target.host())
    got = np.full(node.type.shape, np.nan, node.type.dtype)
    kernel(*inputs, got)
    np.testing.assert_allclose(got, ref, **tol)


def check_refused(
    op: str, args: Sequence[tuple[tuple[int, ...], str]], attrs: Mapping[str, object], reason: str
) -> None:
    """The type rule refuses `op` on arguments of these (shape, dtype) with a GraphError that names
    the node and the op and says `reason` (a regular expression)."""
    b = GraphBuilder()
    nodes = [b.input(f"x{k}", shape, dtype) for k, (shape, dtype) in enumerate(args)]
    with pytest.raises(GraphError, match=reason) as info:
        b.call_attrs(op, nodes, attrs, name="bad")
    assert (info.value.node, info.value.op) == ("bad", op)


def owned_ops(module: str) -> set[str]:
    """The operators a module of compiler.graph.ops registers."""
    return {name for name, d in OPS.items() if d.infer_type.__module__ == module}
