"""The workload vocabulary: one concrete tensor program to tune, the one error type, and the limits.

A workload bundles the PrimFunc with what a tuner needs to judge a candidate: a numpy reference for
correctness, a flop count for throughput, and the canonical JSON spec the workload was made from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.ir import FLOAT_DTYPES, Buffer, PrimFunc, static_shape

# Specs arrive over an API; these bound what one spec may ask of a worker.
MAX_RANK = 6
MAX_EXTENT = 65536
MAX_TOTAL_BYTES = 1 << 30  # every buffer: inputs, outputs and intermediates
MAX_EXPR_CHARS = 4096
MAX_STATEMENTS = 16
MAX_PRIMFUNC_BYTES = 256 << 10  # a serialized PrimFunc's JSON: a fused conv2d + bias + relu takes ~4 KiB
# Blocks of a serialized PrimFunc: a fused layer_norm or softmax has about 8; a fusion pass cuts here.
MAX_BLOCKS = 32
DTYPES = FLOAT_DTYPES


class WorkloadError(ValueError):
    """A spec that does not describe a valid workload; `field` is the dotted path of the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(field, message)  # both in args, so the error pickles across processes
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class Workload:
    """A concrete tensor workload: `func`'s first `num_inputs` params are inputs, the rest outputs."""

    name: str
    spec: dict[str, Any] = field(hash=False)
    func: PrimFunc
    num_inputs: int
    reference: Callable[..., list[np.ndarray]] = field(compare=False)
    flops: int

    def __post_init__(self) -> None:
        if self.func.size_vars:
            names = ", ".join(v.name for v in self.func.size_vars)
            raise WorkloadError(
                "func", f"its dimensions {names} are symbolic: a tuned workload has static shapes (issue 40)"
            )

    @property
    def inputs(self) -> tuple[Buffer, ...]:
        return self.func.params[: self.num_inputs]

    @property
    def outputs(self) -> tuple[Buffer, ...]:
        return self.func.params[self.num_inputs :]

    def random_inputs(self, rng: np.random.Generator) -> list[np.ndarray]:
        """Standard-normal floats; integer buffers get small ints so sums cannot overflow; bools are
        true or false alike."""
        out = []
        for b in self.inputs:
            if b.dtype in FLOAT_DTYPES:
                out.append(rng.standard_normal(static_shape(b.shape, "a workload")).astype(b.dtype))
            elif b.dtype == "bool":
                out.append(rng.random(static_shape(b.shape, "a workload")) < 0.5)
            else:
                out.append(rng.integers(-8, 8, static_shape(b.shape, "a workload")).astype(b.dtype))
        return out

    def empty_outputs(self) -> list[np.ndarray]:
        """Float outputs are NaN-filled, so an element a kernel forgets to write fails any comparison."""
        return [
            np.full(
                static_shape(b.shape, "a workload"), np.nan if b.dtype in FLOAT_DTYPES else 0, dtype=b.dtype
            )
            for b in self.outputs
        ]


def show(value: object) -> str:
    """A short repr for error messages: specs are user input and may be huge."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_int(value: object, field: str, minimum: int = 1, what: str = "") -> int:
    """A JSON integer in [minimum, MAX_EXTENT]; bools are rejected although Python calls them ints."""
    prefix = f"{what} " if what else ""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise WorkloadError(field, f"{prefix}must be an integer, got {type(value).__name__} {show(value)}")
    if value < minimum:
        raise WorkloadError(field, f"{prefix}must be >= {minimum}, got {value}")
    if value > MAX_EXTENT:
        raise WorkloadError(field, f"{prefix}must be <= {MAX_EXTENT}, got {value}")
    return int(value)


def check_shape(value: object, field: str) -> tuple[int, ...]:
    """A non-empty list of positive extents, at most MAX_RANK long."""
    if not isinstance(value, (list, tuple)) or not value:
        raise WorkloadError(field, f"must be a non-empty list of extents, got {show(value)}")
    if len(value) > MAX_RANK:
        raise WorkloadError(field, f"rank {len(value)} exceeds the limit of {MAX_RANK}")
    return tuple(check_int(v, field, what=f"extent {k}") for k, v in enumerate(value))


def check_bytes(buffers: Iterable[Buffer], field: str) -> None:
    """Reject programs whose buffers together exceed MAX_TOTAL_BYTES."""
    total = sum(b.size * np.dtype(b.dtype).itemsize for b in buffers)
    if total > MAX_TOTAL_BYTES:
        raise WorkloadError(field, f"buffers need {total} bytes, over the limit of {MAX_TOTAL_BYTES}")
