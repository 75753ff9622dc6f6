"""The one error type of the schedule package."""


class ScheduleError(ValueError):
    """A primitive cannot be applied; the message names the block or loop and the reason.

    Search code treats it as control flow: a candidate whose schedule raises it is dropped.
    """


def check(cond: bool, message: str) -> None:
    if not cond:
        raise ScheduleError(message)
