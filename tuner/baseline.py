"""The numpy baseline, measured honestly: in a child process whose environment has no
OPENBLAS_CORETYPE (these machines set it to Haswell, which halves OpenBLAS), because the variable
is read when numpy loads OpenBLAS and this process has long imported numpy.

`python -m tuner.baseline '<spec JSON>'` prints the best seconds per call of the workload's numpy
reference on random inputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any


def numpy_seconds(spec: dict[str, Any], timeout_s: float = 300.0) -> float:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    out = subprocess.run(
        [sys.executable, "-m", "tuner.baseline", json.dumps(spec)],
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
    print(_best_seconds(json.loads(sys.argv[1])))
