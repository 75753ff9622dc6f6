"""The error types of the schedule package: one for primitives, one for traces."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compiler.ir import Expr


class ScheduleError(ValueError):
    """A primitive cannot be applied; the message names the block or loop and the reason.

    Search code treats it as control flow: a candidate whose schedule raises it is dropped.
    """


class TraceError(ValueError):
    """A trace (usually its JSON) is malformed."""


def check(cond: bool, message: str) -> None:
    if not cond:
        raise ScheduleError(message)


def static_extent(extent: int | Expr, primitive: str, loop: str) -> int:
    """A loop's extent where the primitive needs a number: a symbolic one is refused by name."""
    if isinstance(extent, int):
        return extent
    raise ScheduleError(f"{primitive}: loop {loop} has a symbolic extent; it takes static extents only")
