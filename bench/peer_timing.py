"""The referee of `make bench-peers`: times our kernels, TVM's and numpy's in one process, by one
method, on the same inputs, after checking that each computes what numpy computes.

Runs in .venv-tvm and imports only TVM, numpy and the standard library: TVM's kernels are its
exported libraries (tvm.runtime.load_module), ours are plain shared libraries (ctypes) exporting
`<name>(buffers...)` and `<name>_repeat(buffers..., count)`, numpy's are the usual BLAS formulations
(a conv2d as im2col + one matmul, a depthwise conv2d as a sum of shifted products).

The method, the same for everything timed: `run(n)` makes n calls and is timed around them. After a
warm-up call, n doubles until a batch of n calls takes `min_batch_secs`. Then `repeat` rounds each
run one batch of every kernel of a shape and of numpy, interleaved, with a `pause_secs` sleep before
each batch (OpenBLAS's, libgomp's and TVM's idle threads spin for a while after a call and would slow
the next library down). A kernel's time is the minimum over the rounds of its batch's mean.

Kernels are called from Python (ctypes for ours, TVM's FFI for TVM's, numpy's own calls), as a user
calls them. Their "native" twins make the same n calls from native code (our `_repeat`, TVM's
`time_evaluator`), so the difference is the cost of each call's crossing from Python.

    python bench/peer_timing.py MANIFEST.json OUT.json
"""

from __future__ import annotations

import os

# numpy at its best: this environment may force OpenBLAS onto its AVX2 kernels (halving its matmul);
# the variable is read when numpy loads OpenBLAS. When the suite emulates an AVX2 machine, bench/peers.py
# asks for those kernels (PEER_OPENBLAS_CORETYPE=Haswell): the numpy such a machine would run.
# Our kernels' libgomp spins as our runtime sets it.
os.environ.pop("OPENBLAS_CORETYPE", None)
if os.environ.get("PEER_OPENBLAS_CORETYPE"):
    os.environ["OPENBLAS_CORETYPE"] = os.environ["PEER_OPENBLAS_CORETYPE"]
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import ctypes
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from peer_numpy import numpy_kernel

ALIGN = 64  # bytes; TVM allocates its tensors so, and our kernels get the same
RTOL = 1e-3  # float32, as runner/verify.py: sums of hundreds of products in another order

Run = Callable[[int], float]  # n calls -> their seconds


def aligned(values: np.ndarray) -> np.ndarray:
    raw = np.empty(values.size + ALIGN // 4, np.float32)
    skip = (-raw.ctypes.data % ALIGN) // 4
    out = raw[skip : skip + values.size].reshape(values.shape)
    out[...] = values
    return out


def mismatch(got: np.ndarray, want: np.ndarray) -> str | None:
    """None when `got` matches; NaN (an element never written) never does."""
    atol = RTOL * max(1.0, float(np.max(np.abs(want))))
    bad = ~np.isclose(got, want, rtol=RTOL, atol=atol)
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {got.size} elements differ, first at {where}: {got[where]} vs {want[where]}"


def timed(call: Callable[[], object]) -> Run:
    """n calls of `call` from Python, timed around the loop."""

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            call()
        return time.perf_counter() - start

    return run


def ours(path: str, symbol: str, inputs: list[np.ndarray], shape: list[int]) -> tuple[Run, Run, np.ndarray]:
    """Our kernel from Python (ctypes) and natively (`_repeat`), and its output after one call."""
    lib = ctypes.CDLL(path)
    out = aligned(np.full(shape, np.nan, np.float32))
    # Pointers that hold a reference to their array: the kernel writes into `out` long after this returns.
    args = [a.ctypes.data_as(ctypes.c_void_p) for a in (*inputs, out)]
    kernel, repeat = lib[symbol], lib[symbol + "_repeat"]
    kernel.argtypes, kernel.restype = [ctypes.c_void_p] * len(args), None
    repeat.argtypes, repeat.restype = [ctypes.c_void_p] * len(args) + [ctypes.c_int64], None

    def native(n: int) -> float:
        start = time.perf_counter()
        repeat(*args, n)
        return time.perf_counter() - start

    kernel(*args)
    return timed(lambda: kernel(*args)), native, out


def theirs(path: str, inputs: list[np.ndarray], shape: list[int]) -> tuple[Run, Run, np.ndarray]:
    """TVM's kernel from Python (its FFI) and natively (its `time_evaluator`, which times its n
    calls after a warm-up call), and its output after one call."""
    dev = tvm.cpu()
    module = tvm.runtime.load_module(path)
    main = module["main"]
    args = [tvm.runtime.tensor(a, dev) for a in inputs]
    args.append(tvm.runtime.tensor(np.full(shape, np.nan, np.float32), dev))

    def native(n: int) -> float:
        return float(module.time_evaluator("main", dev, number=n, repeat=1)(*args).mean) * n

    main(*args)
    return timed(lambda: main(*args)), native, args[-1].numpy()


def calibrate(run: Run, min_batch_secs: float) -> int:
    """Calls per batch: after a warm-up call, doubled until a batch takes min_batch_secs."""
    run(1)
    n = 1
    while run(n) < min_batch_secs:
        n *= 2
    return n


def time_shape(shape: dict[str, Any], method: dict[str, Any]) -> dict[str, Any]:
    """Check every kernel of one shape against numpy, then time the correct ones and numpy."""
    rng = np.random.default_rng(0)
    inputs = [aligned(rng.standard_normal(s).astype(np.float32)) for s in shape["inputs"]]
    expected = aligned(np.full(shape["output"], np.nan, np.float32))
    reference = numpy_kernel(shape["op"], shape["params"])
    reference(*inputs, expected)
    runs: dict[str, Run] = {"numpy": timed(lambda: reference(*inputs, expected))}
    errors: dict[str, str] = {}
    for label, kernel in shape["kernels"].items():
        if kernel["kind"] == "ours":
            call, native, got = ours(kernel["path"], kernel["symbol"], inputs, shape["output"])
        else:
            call, native, got = theirs(kernel["path"], inputs, shape["output"])
        wrong = mismatch(got, expected)
        if wrong:
            errors[label] = f"wrong result: {wrong}"
            continue
        runs[label], runs[label + " native"] = call, native
    number = {key: calibrate(run, method["min_batch_secs"]) for key, run in runs.items()}
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(method["repeat"]):
        for key, run in runs.items():
            time.sleep(method["pause_secs"])
            best[key] = min(best[key], run(number[key]) / number[key])
    return {"secs": best, "errors": errors}


def main() -> None:
    manifest_path, out_path = sys.argv[1:]
    with open(manifest_path) as f:
        manifest = json.load(f)
    results = {}
    for shape in manifest["shapes"]:
        results[shape["name"]] = time_shape(shape, manifest["method"])
        print(f"timed {shape['name']}", file=sys.stderr, flush=True)
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
