"""Fresh names: every name the compiler invents (loop variables, block variables, staged buffers,
blocks) is its base name, or the base with the first free number: `_1`, `_2`, ..., or `1`, `2`, ...
for te's loops, which keeps `_` for the names split gives (`j_0`, `j_1`)."""

from __future__ import annotations

from collections.abc import Container


def unique_name(base: str, taken: Container[str], sep: str = "_") -> str:
    """`base`, or `base_1`, `base_2`, ... (with `sep` between): the first that is not `taken`."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}{sep}{n}"
    return name
