"""What a call from Python costs beyond the kernel: a 128-element kernel (well under a microsecond of
work) called as `kernel(a, y)` (arguments checked natively, compiler.numpy_entry), through the checks
in Python (the fallback path), and natively in a loop (`repeat`: the kernel alone); then a compiled
model of the same work called as `model(x)` (its inputs checked, its output allocated, the forward
pass called through ctypes) against the bare ctypes call of its forward pass.

    python -m bench call_cost
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from compiler import build, graph, te

CALLS = 20_000


def per_call_us(fn: Callable[[], object], calls: int = CALLS, repeat: int = 7) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main() -> None:
    a = te.placeholder((128,), "float32", name="A")
    y = te.compute((128,), lambda i: a[i] * 2.0, name="Y")
    kernel = build(te.create_prim_func([a, y], name="double"))
    x, out = np.ones(128, np.float32), np.empty(128, np.float32)
    pointers = kernel.pointers(x, out)
    native = per_call_us(lambda: kernel.repeat(pointers, 1000), calls=200) / 1000
    checked = per_call_us(lambda: kernel(x, out))
    python = per_call_us(lambda: kernel._cfunc(*kernel.pointers(x, out)))
    print(
        f"128-element kernel: {native:.3f} us natively; kernel(a, y) {checked:.2f} us "
        f"(native checks); {python:.2f} us with the checks in Python"
    )
    b = graph.GraphBuilder()
    model = graph.build(b.module([b.call("relu", [b.input("x", (1, 128), "float32")])]))
    x2 = x.reshape(1, 128)
    forward = model._forward
    forward.run_into([x2], [out.reshape(1, 128)], {})  # the pointer arrays now hold real arrays
    bare = per_call_us(
        lambda: forward._run(forward._input_pointers, forward._output_pointers, forward._size_values)
    )
    print(
        f"a model of it: model(x) {per_call_us(lambda: model(x2)):.2f} us; "
        f"its forward pass alone {bare:.2f} us"
    )


if __name__ == "__main__":
    main()
