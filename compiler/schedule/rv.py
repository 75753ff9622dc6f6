"""Random variables: the handles a schedule hands out, which a trace records by name.

They live apart from the Schedule so that the instruction registry can check what kind of handle each
argument holds without importing the Schedule. A handle's name starts with its type's `PREFIX` and
counts definitions (b0, l1, v2): the same trace always names things the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, eq=False)
class _NamedRV:
    """A handle to a block or loop: its random variable's name, and the name of what it points at
    (for a block renamed by decompose_reduction, the name it had before: `Block.handle_name`;
    `Schedule.get(rv).name` is its name in the program now)."""

    PREFIX: ClassVar[str]
    rv: str
    name: str

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.rv}: {self.name!r})"


class BlockRV(_NamedRV):
    PREFIX = "b"


class LoopRV(_NamedRV):
    PREFIX = "l"


class IntRV(int):
    """A sampled integer: usable as a plain int, and recorded in the trace by name."""

    PREFIX: ClassVar[str] = "v"
    rv: str

    def __new__(cls, value: int, rv: str) -> IntRV:
        obj = super().__new__(cls, value)
        obj.rv = rv
        return obj

    def __reduce__(self) -> tuple[type[IntRV], tuple[int, str]]:
        return IntRV, (int(self), self.rv)


RV = BlockRV | LoopRV | IntRV
