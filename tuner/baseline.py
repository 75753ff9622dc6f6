"""The numpy baseline, measured honestly: in a child process whose environment has no
OPENBLAS_CORETYPE (these machines set it to Haswell, which halves OpenBLAS), because the variable
is read when numpy loads OpenBLAS and this process has long imported numpy. For a target without
AVX-512 (an AVX2 machine emulated on this one: `tuner tune --target znver3`), the child runs
OpenBLAS's AVX2 kernels on purpose: the numpy that machine would run.

`python -m tuner.baseline '<spec JSON>' [CORETYPE]` prints the best seconds per call of the workload's
numpy reference on random inputs, with OpenBLAS's kernels for CORETYPE if given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from compiler.target import Target


def openblas_coretype(target: Target | None) -> str | None:
    """The OpenBLAS kernels an x86 machine with AVX2 and without AVX-512 runs ("Haswell", which
    OpenBLAS also picks for AMD's Zen 1-3); None for any other target (OpenBLAS at its best here)."""
    if target is None or "x86" not in target.triple:
        return None
    features = target.feature_set
    return "Haswell" if "avx2" in features and "avx512f" not in features else None


def numpy_seconds(spec: dict[str, Any], timeout_s: float = 300.0, target: Target | None = None) -> float:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    coretype = openblas_coretype(target)
    out = subprocess.run(
        [sys.executable, "-m", "tuner.baseline", json.dumps(spec), *([coretype] if coretype else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _best_seconds(spec: dict[str, Any], min_total_s: float = 1.0, repeat: int = 7) -> float:
    import numpy as np

    from compiler.workloads import workload_from_spec

    workload = workload_from_spec(spec)
    inputs = workload.random_inputs(np.random.default_rng(0))
    workload.reference(*inputs)
    start = time.perf_counter()
    workload.reference(*inputs)
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(min_total_s / repeat / once))
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            workload.reference(*inputs)
        best = min(best, (time.perf_counter() - start) / number)
    return best


if __name__ == "__main__":
    if "OPENBLAS_CORETYPE" in os.environ:
        sys.exit("OPENBLAS_CORETYPE is set: the numpy baseline would not be OpenBLAS at its best")
    if len(sys.argv) > 2:
        os.environ["OPENBLAS_CORETYPE"] = sys.argv[2]  # read when numpy loads OpenBLAS, below
    print(_best_seconds(json.loads(sys.argv[1])))
