"""A runner that measures nothing: deterministic timings derived from the candidate, for testing
the layers above (search, database, service) fast and exactly."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence

from runner.results import Candidate, RunResult, Status, TimingConfig


def hashed_seconds(candidate: Candidate) -> float:
    """A stable pseudo-random time in [1 ms, 2 ms) from the candidate's content."""
    digest = hashlib.sha256(candidate.key.encode()).digest()
    return 1e-3 * (1.0 + int.from_bytes(digest[:8], "big") / 2**64)


class NullRunner:
    """Returns `seconds(candidate)` for every candidate, with `repeat` identical repeats."""

    def __init__(self, seconds: Callable[[Candidate], float] = hashed_seconds, repeat: int = 3) -> None:
        self.seconds = seconds
        self.repeat = repeat

    timing: TimingConfig | None = None  # it times nothing

    def run(self, candidates: Sequence[Candidate]) -> list[RunResult]:
        return list(self.iter_run(candidates))

    def iter_run(self, candidates: Sequence[Candidate]) -> Iterator[RunResult]:
        for c in candidates:
            yield RunResult(Status.OK, [self.seconds(c)] * self.repeat)

    def run_side_by_side(self, candidates: Sequence[Candidate]) -> list[RunResult]:
        return self.run(candidates)

    def close(self) -> None:
        """Nothing to release; present so every runner can be closed the same way."""
