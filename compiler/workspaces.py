"""The kernels' workspaces, kept from one call to the next: a small cache in C that every kernel's
malloc and free go through.

A kernel mallocs its large intermediates (a padded image, a Winograd transform) on each call and
frees them on return. Served by glibc, a call in a fragmented heap pays for it: ResNet-18 ran 7.8
ms a pass in a fresh process and 9.9 ms once 1.6 GB of freed Python objects had left holes in the
heap, as a process that has tuned for 20 minutes does (its model read 9.51 ms against 7.7 in a new
process; bench/RESULTS.md). The cache keeps each freed block for the next request of the same size
(up to `SLOTS` blocks and `KEPT_LIMIT_BYTES`, the least recently asked for given back first).

An exported library links it in with the linker's --wrap (`compiler.graph.workspaces`); in our own
processes `jit_allocator` loads it as a shared library (compiled once per user with the system
compiler) and each JIT-compiled kernel's `malloc` and `free` resolve to it (`compiler.build.load`),
so the kernels run here as they would in the library. Without a C compiler they keep the C
library's malloc.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SLOTS = 64
# The most the cache keeps. A process that runs many kernels (a measuring process, a test run, a
# notebook) asks for ever new sizes: a new block takes the place of those not in use that were
# asked for longest ago, so the kernels run now keep theirs.
KEPT_LIMIT_BYTES = 1 << 30
KEPT = "tensor_tuner_workspaces_kept"

SOURCE = f"""\
/* tensor-tuner: the kernels' workspaces, reused from one call to the next. */
#include <pthread.h>
#include <stddef.h>

void *__real_malloc(size_t size);
void __real_free(void *ptr);

struct slot {{ void *ptr; size_t size; int used; unsigned long stamp; }};
static struct slot slots[{SLOTS}];
static size_t kept;
static unsigned long ticks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int empty_slot(void) {{
  for (int i = 0; i < {SLOTS}; i++)
    if (!slots[i].ptr) return i;
  return -1;
}}

/* The kept block not in use that was asked for longest ago, or -1. */
static int oldest_unused(void) {{
  int oldest = -1;
  for (int i = 0; i < {SLOTS}; i++)
    if (slots[i].ptr && !slots[i].used && (oldest < 0 || slots[i].stamp < slots[oldest].stamp)) oldest = i;
  return oldest;
}}

static void drop(int i) {{
  __real_free(slots[i].ptr);
  kept -= slots[i].size;
  slots[i].ptr = NULL;
}}

/* A new block is kept in place of the oldest unused ones when the slots or the bytes run out. */
static void keep(void *ptr, size_t size) {{
  int i;
  if (size > {KEPT_LIMIT_BYTES}UL) return;
  while (kept + size > {KEPT_LIMIT_BYTES}UL && (i = oldest_unused()) >= 0) drop(i);
  if ((i = empty_slot()) < 0 && (i = oldest_unused()) >= 0) drop(i);
  if (i < 0 || kept + size > {KEPT_LIMIT_BYTES}UL) return;
  slots[i].ptr = ptr; slots[i].size = size; slots[i].used = 1; slots[i].stamp = ++ticks;
  kept += size;
}}

void *__wrap_malloc(size_t size) {{
  void *ptr = NULL;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < {SLOTS} && !ptr; i++)
    if (slots[i].ptr && !slots[i].used && slots[i].size == size) {{
      slots[i].used = 1; slots[i].stamp = ++ticks; ptr = slots[i].ptr;
    }}
  if (!ptr && (ptr = __real_malloc(size))) keep(ptr, size);
  pthread_mutex_unlock(&lock);
  return ptr;
}}

void __wrap_free(void *ptr) {{
  pthread_mutex_lock(&lock);
  for (int i = 0; i < {SLOTS}; i++)
    if (ptr && slots[i].ptr == ptr) {{ slots[i].used = 0; pthread_mutex_unlock(&lock); return; }}
  pthread_mutex_unlock(&lock);
  __real_free(ptr);
}}

/* Bytes kept in blocks of `size`, or in all blocks for 0. */
size_t {KEPT}(size_t size) {{
  size_t bytes = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < {SLOTS}; i++)
    if (slots[i].ptr && (!size || slots[i].size == size)) bytes += slots[i].size;
  pthread_mutex_unlock(&lock);
  return bytes;
}}
"""


def jit_allocator(cc: str = "cc") -> ctypes.CDLL | None:
    """The cache, loaded (compiled once per user, `cached_library`); None without a C compiler (or
    where it fails). `jit_symbols` gives what a JIT-compiled kernel's malloc and free resolve to."""
    library = cached_library(cc)
    if library is None:
        return None
    cache = ctypes.CDLL(str(library))
    cache[KEPT].restype = ctypes.c_size_t
    cache[KEPT].argtypes = [ctypes.c_size_t]
    return cache


def jit_symbols(cache: ctypes.CDLL) -> dict[str, int]:
    """malloc and free of the JIT's kernels: the cache's two entry points."""
    entry = {name: cache[f"__wrap_{name}"] for name in ("malloc", "free")}
    return {name: int(ctypes.cast(f, ctypes.c_void_p).value or 0) for name, f in entry.items()}


def cached_library(cc: str = "cc") -> Path | None:
    """The cache as a shared library in the user's cache directory, named by its source's hash and
    compiled by the first process that needs it (a compile costs 0.1-0.2 s; every measuring process
    loads it); None without a C compiler or where compiling fails."""
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tensor-tuner"
    library = home / f"workspaces-{digest}.so"
    if library.exists():
        return library
    if shutil.which(cc) is None:
        return None
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=home) as tmp:
            source, built = Path(tmp) / "workspaces.c", Path(tmp) / "workspaces.so"
            source.write_text(SOURCE)
            command = [cc, "-shared", "-fPIC", "-O2", "-D__real_malloc=malloc", "-D__real_free=free"]
            done = subprocess.run([*command, "-o", str(built), str(source), "-lpthread"], capture_output=True)
            if done.returncode != 0:
                return None
            os.replace(built, library)  # whole or not at all, for a process compiling beside this one
    except OSError:
        return None
    return library
