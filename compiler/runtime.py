"""The native runtime that generated kernels call into: libgomp for parallel loops.

libgomp's worker threads spin after each parallel region before they sleep; the default spin lasts
milliseconds of CPU, which would steal a core from the next measurement. GOMP_SPINCOUNT=10000 cuts
that to ~0.4 ms (measured, ../shared/REFERENCE-llvmlite.md). It is read when the library loads, so
it is set here, before the first load, unless the user chose a value. libgomp's thread pool does not
survive fork(): processes that build kernels must be started with spawn or forkserver.
"""

from __future__ import annotations

import ctypes.util
import os
from functools import cache

import llvmlite.binding as llvm


class RuntimeMissingError(RuntimeError):
    """libgomp is not installed, so parallel loops cannot run."""


@cache
def load_runtime() -> None:
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
    path = ctypes.util.find_library("gomp")
    if path is None:
        raise RuntimeMissingError("libgomp (package libgomp1) is required to run parallel loops")
    llvm.load_library_permanently(path)
