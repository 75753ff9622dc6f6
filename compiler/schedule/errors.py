"""The error types of the schedule package: one for primitives, one for traces."""


class ScheduleError(ValueError):
    """A primitive cannot be applied; the message names the block or loop and the reason.

    Search code treats it as control flow: a candidate whose schedule raises it is dropped.
    """


class TraceError(ValueError):
    """A trace (usually its JSON) is malformed."""


def check(cond: bool, message: str) -> None:
    if not cond:
        raise ScheduleError(message)
