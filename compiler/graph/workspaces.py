"""The kernel workspaces of an exported library, kept from one forward pass to the next.

A kernel mallocs its large intermediates (a padded image, a Winograd transform) on each call and
frees them on return. In our own processes `compiler.runtime.keep_freed_memory` tunes glibc so that
the next call reuses the pages; a C program that loads an exported library keeps its own malloc
settings, under which each call faults megabytes of fresh pages in again (a Winograd 3x3 conv:
3.3 ms instead of 0.8, bench/results/2026-11-24-b.md). So the library links its kernels with the linker's
`--wrap=malloc --wrap=free`: their calls go to a small cache, compiled from `SOURCE` with the
system compiler, that keeps each freed block for the next request of the same size, and passes
whatever it cannot keep to the C library. Other code in the process is not affected: the wrap
applies only to the objects of this link.
"""

from __future__ import annotations

from pathlib import Path

SLOTS = 64

SOURCE = f"""\
/* tensor-tuner: the kernels' workspaces, reused from one call to the next. */
#include <pthread.h>
#include <stddef.h>

void *__real_malloc(size_t size);
void __real_free(void *ptr);

struct slot {{ void *ptr; size_t size; int used; }};
static struct slot slots[{SLOTS}];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void *__wrap_malloc(size_t size) {{
  void *ptr = NULL;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < {SLOTS} && !ptr; i++)
    if (slots[i].ptr && !slots[i].used && slots[i].size == size) {{ slots[i].used = 1; ptr = slots[i].ptr; }}
  if (!ptr && (ptr = __real_malloc(size)))
    for (int i = 0; i < {SLOTS}; i++)
      if (!slots[i].ptr) {{ slots[i].ptr = ptr; slots[i].size = size; slots[i].used = 1; break; }}
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
"""

LINK_FLAGS = ("-Wl,--wrap=malloc", "-Wl,--wrap=free", "-lpthread")


def compile_command(cc: str, work: Path) -> tuple[list[str], Path]:
    """The command that compiles the cache into an object in `work`, and that object's path."""
    source, obj = work / "workspaces.c", work / "workspaces.o"
    source.write_text(SOURCE)
    return [cc, "-c", "-O2", "-fPIC", "-o", str(obj), str(source)], obj
