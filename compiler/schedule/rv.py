"""Random variables: the handles a schedule hands out, which a trace records by name.

They live apart from the Schedule so that the instruction registry can check what kind of handle each
argument holds without importing the Schedule. A handle's name starts with its type's `PREFIX` and
counts definitions (b0, l1, v2): the same trace always names things the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, eq=False)
class BlockRV:
    PREFIX: ClassVar[str] = "b"
    rv: str
    name: str

    def __repr__(self) -> str:
        return f"BlockRV({self.rv}: {self.name!r})"


@dataclass(frozen=True, eq=False)
class LoopRV:
    PREFIX: ClassVar[str] = "l"
    rv: str
    name: str

    def __repr__(self) -> str:
        return f"LoopRV({self.rv}: {self.name!r})"


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
