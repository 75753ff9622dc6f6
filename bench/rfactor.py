"""rfactor where the default schedule applies it (`compiler/schedule_rules/add_rfactor.py`): reductions
with fewer spatial iterations than cores (batch-1 row sums, a dot product), each built with the
default rules and with the same rules minus AddRFactor, timed side by side in this process on all
cores, with numpy's single-threaded sum and dot beside them.

    python -m bench rfactor
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from bench.common import best_seconds, set_kernel_threads
from compiler import Schedule, build, te
from compiler.ir import PrimFunc
from compiler.schedule_rules import DEFAULT_RULES, RuleConfig, RuleContext, apply_rules
from compiler.schedule_rules.add_rfactor import AddRFactor
from compiler.schedule_rules.heuristic import Heuristic
from compiler.target import host_hardware


def row_sum(rows: int, length: int) -> PrimFunc:
    A = te.placeholder((rows, length), name="A")
    k = te.reduce_axis((0, length), name="k")
    Y = te.compute((rows,), lambda i: te.sum(A[i, k], axis=k), name="Y")
    return te.create_prim_func([A, Y], name="row_sum")


def dot(length: int) -> PrimFunc:
    a = te.placeholder((length,), name="a")
    b = te.placeholder((length,), name="b")
    k = te.reduce_axis((0, length), name="k")
    y = te.compute((1,), lambda _: te.sum(a[k] * b[k], axis=k), name="y")
    return te.create_prim_func([a, b, y], name="dot")


def scheduled(func: PrimFunc, with_rfactor: bool) -> PrimFunc:
    target = host_hardware().target
    cfg = RuleConfig.for_target(target)
    rules = [r for r in DEFAULT_RULES if with_rfactor or not isinstance(r, AddRFactor)]
    sch = Schedule(func, seed=0)
    apply_rules(sch, rules, RuleContext(cfg, Heuristic(cfg, target.cores)))
    return sch.func


CASES: list[tuple[str, PrimFunc, Callable[..., object]]] = [
    ("sum 1 x 2^20", row_sum(1, 1 << 20), lambda a: a.sum(axis=1)),
    ("sum 1 x 2^16", row_sum(1, 1 << 16), lambda a: a.sum(axis=1)),
    ("sum 1 x 2^15", row_sum(1, 1 << 15), lambda a: a.sum(axis=1)),
    ("dot 2^20", dot(1 << 20), np.dot),
]


def main() -> None:
    cores = host_hardware().target.cores
    set_kernel_threads(cores)
    print(f"float32, {cores} threads, default rules with and without AddRFactor; numpy single-threaded")
    rng = np.random.default_rng(0)
    for title, func, numpy_fn in CASES:
        inputs = [rng.standard_normal(b.shape).astype("float32") for b in func.params[:-1]]
        micros = {flag: _micros(func, flag, inputs, numpy_fn) for flag in (False, True)}
        time.sleep(0.3)
        theirs = best_seconds(lambda fn=numpy_fn, xs=inputs: fn(*xs)) * 1e6
        print(
            f"    {title:14s} without {micros[False]:8.1f} us   rfactor {micros[True]:8.1f} us   "
            f"gain {micros[False] / micros[True]:5.2f}x   numpy {theirs:8.1f} us"
        )


def _micros(
    func: PrimFunc, with_rfactor: bool, inputs: list[np.ndarray], numpy_fn: Callable[..., object]
) -> float:
    """The kernel's best time, after checking it against numpy."""
    kernel = build(scheduled(func, with_rfactor), listings=False)
    out = np.empty(func.params[-1].shape, "float32")
    kernel(*inputs, out)
    np.testing.assert_allclose(out.ravel(), np.ravel(numpy_fn(*inputs)), rtol=1e-3)
    time.sleep(0.3)
    return best_seconds(lambda: kernel(*inputs, out)) * 1e6


__all__ = ["main"]
