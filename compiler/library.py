"""A module's compiled functions by name, as TVM's `tvm.build(mod, target="llvm")` returns them:
`lib["mm_relu"](a, b, c)` and `lib.time_evaluator("mm_relu", tvm.cpu())(a, b, c).mean`, the MLC
course's way of running and timing what it builds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from compiler.build import Kernel


@dataclass(frozen=True)
class Device:
    """TVM's `tvm.cpu()`: kernels run on this machine's CPU, so this only names it."""

    kind: str = "cpu"
    index: int = 0


def cpu(index: int = 0) -> Device:
    return Device("cpu", index)


@dataclass(frozen=True)
class ProfileResult:
    """Seconds per call: `mean` over all calls, `results` the mean of each repeat (TVM's fields)."""

    mean: float
    results: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)


class Library(Mapping[str, Kernel]):
    """The kernels of a built module, by function name."""

    def __init__(self, kernels: Mapping[str, Kernel]) -> None:
        self.kernels = dict(kernels)

    def __getitem__(self, name: str) -> Kernel:
        if name not in self.kernels:
            raise KeyError(f"no function {name!r} in the library; it has {sorted(self.kernels)}")
        return self.kernels[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.kernels)

    def __len__(self) -> int:
        return len(self.kernels)

    def time_evaluator(
        self,
        name: str,
        device: Device | None = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: int = 0,
    ) -> Callable[..., ProfileResult]:
        """A timer of the function `name`: each of `repeat` measurements runs it `number` times in
        a native loop (more, until one takes `min_repeat_ms`), after one untimed call."""
        return timer(self[name], number, repeat, min_repeat_ms)


def timer(
    kernel: Kernel, number: int = 10, repeat: int = 1, min_repeat_ms: int = 0
) -> Callable[..., ProfileResult]:
    if number < 1 or repeat < 1:
        raise ValueError(f"number and repeat must be at least 1, got {number} and {repeat}")

    def measure(*arrays: np.ndarray) -> ProfileResult:
        pointers = kernel.pointers(*arrays)
        kernel(*arrays)
        results = []
        for _ in range(repeat):
            calls = number
            while True:
                start = time.perf_counter()
                kernel.repeat(pointers, calls)
                secs = time.perf_counter() - start
                if secs * 1e3 >= min_repeat_ms:
                    break
                calls *= 2
            results.append(secs / calls)
        return ProfileResult(sum(results) / len(results), tuple(results))

    return measure
