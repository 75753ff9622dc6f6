"""The native runtime that generated kernels call into: libgomp for parallel loops.

libgomp's worker threads spin after each parallel region before they sleep; the default spin lasts
milliseconds of CPU, which would steal a core from the next measurement. GOMP_SPINCOUNT=10000 cuts
that to ~0.4 ms (measured, ../shared/REFERENCE-llvmlite.md). It is read when the library loads, so
it is set here, before the first load, unless the user chose a value. libgomp's thread pool does not
survive fork(): processes that build kernels must be started with spawn or forkserver.

A kernel mallocs its large intermediates (a padded image, a Winograd transform) on each call and
frees them on return. glibc gives freed memory back to the system once more than a threshold sits
free at the top of the heap (or serves big blocks by mmap, unmapped on free), so the next call
faults every page in again: a 3x3 conv with two 3.2 MB Winograd intermediates took 3.30 ms a call
instead of 0.82 (bench/results/2026-11-24-b.md). `keep_freed_memory` raises both thresholds for the process,
as TVM's workspace pool keeps its pages, so a call reuses the previous call's pages.

What a compiled model keeps for its lifetime (its weights and its arena of intermediates) lives in
`huge_page_bytes`: one anonymous mapping per region, aligned to 2 MB and advised for transparent huge
pages. On a Rocket Lake the same kernel on the same data ran 0.58 or 0.71 ms by where numpy's heap
put its arrays, and ResNet-18, built three times each way in one process, three runs, averaged 12.28
ms a pass with heap memory and 11.98 with these regions (bench/results/2026-11-25-e.md): a huge page is
physically contiguous, so the caches' sets fill by virtual address, not by which pages the
process's history left free.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
from collections.abc import Sequence
from functools import cache

import llvmlite.binding as llvm
import numpy as np


class RuntimeMissingError(RuntimeError):
    """libgomp is not installed, so parallel loops cannot run."""


@cache
def load_runtime() -> None:
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
    path = ctypes.util.find_library("gomp")
    if path is None:
        raise RuntimeMissingError("libgomp (package libgomp1) is required to run parallel loops")
    llvm.load_library_permanently(path)
    keep_freed_memory()


# glibc's mallopt parameters (malloc.h) and the values set: blocks up to 32 MB (glibc's largest
# mmap threshold) come from the heap, and up to 256 MB may sit free at its top before it shrinks.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
HEAP_BLOCK_BYTES = 32 << 20
KEPT_FREE_BYTES = 256 << 20


def keep_freed_memory() -> bool:
    """Keep freed kernel workspaces mapped (see the module docstring); False where the C library
    is not glibc (no mallopt), which then keeps its own policy."""
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    heap = bool(mallopt(M_MMAP_THRESHOLD, HEAP_BLOCK_BYTES))
    return bool(mallopt(M_TRIM_THRESHOLD, KEPT_FREE_BYTES)) and heap


HUGE_PAGE_BYTES = 2 << 20
MADV_HUGEPAGE = 14  # linux/mman.h


def huge_page_bytes(nbytes: int) -> np.ndarray:
    """`nbytes` zeroed bytes at a 2 MB boundary of their own anonymous mapping, advised for
    transparent huge pages (see the module docstring); where madvise is missing or refuses, the
    mapping keeps small pages. The mapping lives as long as the returned array (its base). A
    mapping the memory limit refuses raises MemoryError, as numpy's allocations do."""
    total = max(1, nbytes) + HUGE_PAGE_BYTES
    try:
        mapping = mmap.mmap(-1, total)
    except OSError as e:
        if e.errno == errno.ENOMEM:
            raise MemoryError(f"cannot map {total} bytes") from e
        raise
    region = np.frombuffer(mapping, np.uint8)
    madvise = getattr(ctypes.CDLL(None), "madvise", None)
    if madvise is not None:
        madvise(ctypes.c_void_p(region.ctypes.data), ctypes.c_size_t(total), MADV_HUGEPAGE)
    skip = -region.ctypes.data % HUGE_PAGE_BYTES
    return region[skip : skip + nbytes]


def in_huge_pages(arrays: Sequence[np.ndarray], alignment: int = 64) -> list[np.ndarray]:
    """Copies of `arrays`, C-contiguous, each at an `alignment` boundary of one `huge_page_bytes`
    region: a compiled model's weights, a measured candidate's arguments."""
    offsets, end = [], 0
    for a in arrays:
        offsets.append(end)
        end += -(-a.nbytes // alignment) * alignment
    region = huge_page_bytes(end)
    out = []
    for a, at in zip(arrays, offsets):
        copy = region[at : at + a.nbytes].view(a.dtype).reshape(a.shape)
        copy[...] = a
        out.append(copy)
    return out
