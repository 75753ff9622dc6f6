"""A workload spec over a range of one dimension, in JSON: a registry operator with one parameter
given as [low, high] (`{"op": "matmul", "params": {"M": [1, 512], "N": 768, "K": 768}}`), or a
TVMScript kernel whose function declares a size var (`n = T.size_var(1, 512)`).

It stands for the workload at a few sizes spread over the range (or the sizes given), each an
ordinary static workload with ordinary records, tuned together as one task set: `tuner tune M=1..512`
(`tuner.cli.ranges`) embedded, and `POST /v1/models` with a `workload` through the service.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from compiler.serialize import to_json
from compiler.workloads import Workload, WorkloadError, workload_from_spec
from compiler.workloads.primfunc_spec import leading_inputs, primfunc_workload
from compiler.workloads.script_spec import script_function
from tuner.range_tuning import spread_sizes


@dataclass(frozen=True)
class RangedWorkload:
    """A workload at sizes of one dimension over its range: (size, the workload at that size)."""

    name: str
    field: str  # where the range was given: params.M, or tvmscript
    dimension: str
    low: int
    high: int
    sizes: tuple[tuple[int, Workload], ...]
    spec: Mapping[str, Any]  # as given, with its range


def ranged_workload(
    spec: Mapping[str, Any], sizes: Sequence[int] | None = None, *, dimension: str | None = None
) -> RangedWorkload | None:
    """The spec's workload at `sizes` (by default spread over its range), or None for a spec with
    no range (no parameter given as [low, high], no size var in its script). A WorkloadError names
    the field: two ranges, a range that is not 1 <= low <= high, sizes outside it, or the workload
    refused at one of the sizes (the message says which). `dimension` names the range's dimension
    (by default its parameter's name)."""
    if "tvmscript" in spec:
        return _ranged_script(spec, sizes)
    params = spec.get("params")
    if not isinstance(params, Mapping):
        return None
    ranged = [name for name, value in params.items() if _is_range(value)]
    if not ranged:
        return None
    if len(ranged) > 1:
        raise WorkloadError(
            f"params.{ranged[1]}", f"one parameter may be a range, got ranges for {', '.join(ranged)}"
        )
    key = ranged[0]
    field = f"params.{key}"
    low, high = params[key]
    out = []
    for size in range_sizes(field, low, high, sizes):
        at = {**spec, "params": {**params, key: size}}
        out.append((size, _at_size(key, size, partial(workload_from_spec, at))))
    name = f"{spec.get('op')} {key}={low}..{high}"
    return RangedWorkload(name, field, dimension or key, low, high, tuple(out), spec)


def _is_range(value: object) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    )


def _ranged_script(spec: Mapping[str, Any], sizes: Sequence[int] | None) -> RangedWorkload | None:
    func = script_function(spec["tvmscript"])
    if not func.size_vars:
        return None
    if len(func.size_vars) > 1:
        names = ", ".join(v.name for v in func.size_vars)
        raise WorkloadError(
            "tvmscript", f"a range is tuned over one symbolic dimension; {func.name} has {names}"
        )
    var = func.size_vars[0]
    inputs = spec["num_inputs"] if "num_inputs" in spec else leading_inputs(func)
    out = []
    for size in range_sizes("tvmscript", var.lo, var.hi, sizes):
        static = to_json(func.specialize({var: size}))
        out.append((size, _at_size(var.name, size, partial(primfunc_workload, static, inputs))))
    name = f"{func.name} {var.name}={var.lo}..{var.hi}"
    return RangedWorkload(name, "tvmscript", var.name, var.lo, var.hi, tuple(out), spec)


def _at_size(dimension: str, size: int, make: Callable[[], Workload]) -> Workload:
    """The workload at one size of the range; its refusal says which size."""
    try:
        return make()
    except WorkloadError as e:
        raise WorkloadError(e.field, f"at {dimension} = {size}: {e.message}") from None


def range_sizes(field: str, low: int, high: int, given: Sequence[int] | None) -> list[int]:
    """`given` checked against the range low..high, else sizes spread over it."""
    if low < 1 or low > high:
        raise WorkloadError(field, f"a range [low, high] needs 1 <= low <= high, got [{low}, {high}]")
    if given is None:
        return spread_sizes(low, high)
    outside = [s for s in given if not low <= s <= high]
    if not given:
        raise WorkloadError("sizes", "give at least one size")
    if outside:
        raise WorkloadError("sizes", f"sizes {sorted(outside)} are outside the range [{low}, {high}]")
    return sorted(set(given))


__all__ = ["RangedWorkload", "range_sizes", "ranged_workload"]
