"""The kernel workspaces of an exported library, kept from one forward pass to the next.

A kernel mallocs its large intermediates (a padded image, a Winograd transform) on each call and
frees them on return. In our own processes `compiler.runtime.keep_freed_memory` tunes glibc so that
the next call reuses the pages; a C program that loads an exported library keeps its own malloc
settings, under which each call faults megabytes of fresh pages in again (a Winograd 3x3 conv:
3.3 ms instead of 0.8, bench/RESULTS.md). So the library links its kernels with the linker's
`--wrap=malloc --wrap=free`: their calls go to a small cache, compiled from `SOURCE` with the
system compiler, that keeps each freed block for the next request of the same size, and passes
whatever it cannot keep to the C library. Other code in the process is not affected: the wrap
applies only to the objects of this link.
"""

from __future__ import annotations

from pathlib import Path

from compiler.workspaces import SOURCE

LINK_FLAGS = ("-Wl,--wrap=malloc", "-Wl,--wrap=free", "-lpthread")


def compile_command(cc: str, work: Path) -> tuple[list[str], Path]:
    """The command that compiles the cache into an object in `work`, and that object's path."""
    source, obj = work / "workspaces.c", work / "workspaces.o"
    source.write_text(SOURCE)
    return [cc, "-c", "-O2", "-fPIC", "-o", str(obj), str(source)], obj
