"""Checks every graph operator test makes: the type rule through a checked call (GraphError on a
refusal), and the te compute, built and run (unscheduled, or as a schedule-space sample), against the
operator's numpy reference."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from compiler import Schedule, Target, build, te
from compiler.graph import OPS, Attrs, Input, TensorType
from compiler.graph.op import call
from compiler.ir import PrimFunc
from tuner.search.space import SpaceConfig, rule_space

Shapes = Sequence[tuple[int, ...]]


def random_inputs(shapes: Shapes, seed: int = 0, dtype: str = "float32") -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def infer(op: str, shapes: Shapes, attrs: Mapping[str, object], dtypes: Sequence[str] = ()) -> TensorType:
    """The output type of a checked call of `op` on inputs of `shapes` (float32 unless `dtypes`)."""
    dtypes = list(dtypes) or ["float32"] * len(shapes)
    args = [Input(f"in{k}", TensorType(s, d)) for k, (s, d) in enumerate(zip(shapes, dtypes))]
    return call("out", op, args, attrs).type


def prim_func(op: str, arrays: Sequence[np.ndarray], attrs: Mapping[str, object]) -> PrimFunc:
    """The operator's te compute over placeholders shaped like `arrays`, as a PrimFunc."""
    inputs = [te.placeholder(a.shape, str(a.dtype), f"in{k}") for k, a in enumerate(arrays)]
    out = OPS[op].compute(inputs, Attrs.of(attrs), "out")
    return te.create_prim_func([*inputs, out])


def assert_compiles_to_reference(
    op: str, arrays: Sequence[np.ndarray], attrs: Mapping[str, object], func: PrimFunc | None = None
) -> np.ndarray:
    """Build the operator's compute (or `func`, a schedule of it), run it, and compare it with the
    reference, which it returns. The output starts as NaN, so an element never written fails."""
    want = OPS[op].reference(arrays, Attrs.of(attrs))
    assert want.shape == infer(op, [a.shape for a in arrays], attrs, [str(a.dtype) for a in arrays]).shape
    got = np.full(want.shape, np.nan, want.dtype)
    build(func or prim_func(op, arrays, attrs), Target.host(), listings=False)(*arrays, got)
    tol = 1e-4 if want.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    return want


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
        rule_space(SpaceConfig.for_target(Target.host()))(sch)
        got = np.full(want.shape, np.nan, want.dtype)
        build(sch.func, Target.host(), listings=False)(*arrays, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"seed {seed}")
        samples.append(sch)
    return samples
