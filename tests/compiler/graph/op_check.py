"""Checks every graph operator test makes: the type rule through a checked call (a refusal is a
GraphError naming the node, the op and the reason), the numpy reference against the framework's
result, and the te compute, built and run (unscheduled, or as a schedule-space sample), against the
reference."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
import torch

from compiler import Schedule, Target, build, te
from compiler.graph import OPS, Attrs, GraphBuilder, GraphError, Input, TensorType, run_reference
from compiler.graph.op import call
from compiler.ir import PrimFunc
from compiler.schedule_rules import RuleConfig
from tuner.search.space import rule_space

Shapes = Sequence[tuple[int, ...]]
Expected = Callable[..., np.ndarray]


def random_inputs(shapes: Shapes, seed: int = 0, dtype: str = "float32") -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def infer(op: str, shapes: Shapes, attrs: Mapping[str, object], dtypes: Sequence[str] = ()) -> TensorType:
    """The output type of a checked call of `op` on inputs of `shapes` (float32 unless `dtypes`)."""
    dtypes = list(dtypes) or ["float32"] * len(shapes)
    args = [Input(f"in{k}", TensorType(s, d)) for k, (s, d) in enumerate(zip(shapes, dtypes))]
    return call("out", op, args, attrs).type


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


def prim_func(op: str, arrays: Sequence[np.ndarray], attrs: Mapping[str, object]) -> PrimFunc:
    """The operator's te compute over placeholders shaped like `arrays`, as a PrimFunc whose output
    has the type the type rule infers."""
    inputs = [te.placeholder(a.shape, str(a.dtype), f"in{k}") for k, a in enumerate(arrays)]
    out = OPS[op].compute(inputs, Attrs.of(attrs), "out")
    want = infer(op, [a.shape for a in arrays], attrs, [str(a.dtype) for a in arrays])
    assert (out.name, out.shape, out.dtype) == ("out", want.shape, want.dtype)
    return te.create_prim_func([*inputs, out])


def _tolerance(want: np.ndarray) -> dict[str, float]:
    """Relative to each element, and absolute relative to the output's largest element: an element
    that a sum of large terms cancels down to a small one carries their rounding error (a 3x3x4
    conv's -0.052 from terms near 10 was off by 2.3e-6 with AVX2's order of additions)."""
    finite = want[np.isfinite(want)] if np.issubdtype(want.dtype, np.floating) else want
    scale = max(1.0, float(np.abs(finite).max(initial=0)))
    if want.dtype == np.float32:
        return {"rtol": 1e-5, "atol": 1e-6 * scale}
    return {"rtol": 1e-10, "atol": 1e-10 * scale}


def assert_compiles_to_reference(
    op: str,
    arrays: Sequence[np.ndarray],
    attrs: Mapping[str, object],
    func: PrimFunc | None = None,
    rtol: float | None = None,
) -> np.ndarray:
    """Build the operator's compute (or `func`, a schedule of it), run it, and compare it with the
    reference, which it returns (ints and bools exactly). The output starts `poisoned`, so an element
    never written fails.
    `rtol` loosens the comparison (absolute and relative) for an algorithm whose float32 rounding
    error is larger than a direct sum's."""
    want = OPS[op].reference(arrays, Attrs.of(attrs))
    out_type = infer(op, [a.shape for a in arrays], attrs, [str(a.dtype) for a in arrays])
    assert (want.shape, str(want.dtype)) == (out_type.shape, out_type.dtype)
    got = poisoned(want.shape, str(want.dtype))
    build(func or prim_func(op, arrays, attrs), Target.host(), listings=False)(*arrays, got)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))
        return want
    tolerance = _tolerance(want) if rtol is None else {"rtol": rtol, "atol": rtol}
    np.testing.assert_allclose(got, want, **tolerance)
    return want


def poisoned(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An output array no kernel result looks like: NaN floats; ints and bools of bytes 0xAA (a
    bool neither true nor false), so an element never written fails."""
    if np.dtype(dtype).kind == "f":
        return np.full(shape, np.nan, dtype)
    size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return np.full(size, 0xAA, np.uint8).view(dtype).reshape(shape)


def case(op: str, inputs: Sequence[np.ndarray], expected: Expected, id: str, **attrs: object) -> Any:
    """A pytest parameter for `check_op`: `op` with `attrs` on `inputs` must give `expected(*inputs)`."""
    return pytest.param(op, list(inputs), attrs, expected, id=f"{op}-{id}")


def with_torch(fn: Callable[..., torch.Tensor]) -> Expected:
    """The expectation computed by PyTorch on the same arrays."""
    return lambda *arrays: fn(*(torch.from_numpy(a) for a in arrays)).numpy()


def check_op(op: str, inputs: Sequence[np.ndarray], attrs: Mapping[str, object], expected: Expected) -> None:
    """The reference of a one-node module agrees with the framework's `expected` (shape included),
    and the compiled compute with the reference."""
    b = GraphBuilder()
    node = b.call_attrs(op, [b.input(f"x{k}", a.shape, str(a.dtype)) for k, a in enumerate(inputs)], attrs)
    (ref,) = run_reference(b.module([node]), inputs)
    want = expected(*inputs)
    assert want.shape == node.type.shape, "the type rule's shape is the framework's"
    assert str(want.dtype) == node.type.dtype, "the type rule's dtype is the framework's"
    np.testing.assert_allclose(ref, want, rtol=1e-5, atol=1e-6)
    assert_compiles_to_reference(op, inputs, attrs)


def assert_schedules(
    func: PrimFunc, reference: Callable[..., np.ndarray], shapes: Shapes, seeds: range
) -> list[Schedule]:
    """Samples of the default schedule space over `func` (inputs of `shapes`, then one output)
    compute what `reference` computes; returns them."""
    arrays = random_inputs(shapes)
    want = reference(*arrays)
    samples = []
    for seed in seeds:
        sch = Schedule(func, seed=seed)
        rule_space(RuleConfig.for_target(Target.host()))(sch)
        got = np.full(want.shape, np.nan, want.dtype)
        build(sch.func, Target.host(), listings=False)(*arrays, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"seed {seed}")
        samples.append(sch)
    return samples


def conv_attrs(strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1)) -> dict:
    """The window attributes of the packed conv operators."""
    return {"strides": strides, "padding": padding, "dilation": dilation}


def torch_conv2d(x: np.ndarray, w: np.ndarray, attrs: Mapping[str, Any], groups: int = 1) -> np.ndarray:
    """PyTorch's conv2d with `conv_attrs` (asymmetric padding applied as an explicit pad)."""
    top, left, bottom, right = attrs["padding"]
    padded = torch.nn.functional.pad(torch.from_numpy(x), (left, right, top, bottom))
    return torch.nn.functional.conv2d(
        padded, torch.from_numpy(w), None, attrs["strides"], 0, attrs["dilation"], groups
    ).numpy()


def owned_ops(module: str) -> set[str]:
    """The operators a module of compiler.graph.ops registers."""
    return {name for name, d in OPS.items() if d.infer_type.__module__ == module}
