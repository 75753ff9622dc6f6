"""The new-best rule of the embedded tuner: a candidate that beats the best known time is measured a
second time, and it is the new best only if both runs beat it. Its result keeps every repeat of both
runs, so a lucky first run cannot carry the median alone. (The service applies the same rule with a
second lease, which any worker may hold: `tuner.database.queue`.)"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from math import inf
from typing import TypeVar

from runner.results import Candidate, Runner, RunResult, Status

G = TypeVar("G", bound=Hashable)  # what identifies a group (the callers: a task id)


@dataclass(frozen=True)
class Measured:
    result: RunResult
    remeasured: bool  # a would-be best, measured twice


def measure_confirming(
    runner: Runner,
    candidates: Sequence[Candidate],
    groups: Sequence[G],
    best: MutableMapping[G, float],
) -> Iterator[Measured]:
    """Each candidate's result, in order. `groups` says whose best each candidate competes with (a
    batch may mix tasks, and one workload's time says nothing of another's); `best` holds each
    group's best seconds (missing: none yet) and is lowered as new bests are confirmed."""
    for candidate, group, result in zip(candidates, groups, runner.iter_run(candidates), strict=True):
        known = best.get(group, inf)
        if not (result.ok and result.median_secs < known):
            yield Measured(result, False)
            continue
        again = runner.run([candidate])[0]
        merged = merge_remeasurement(result, again)
        if merged.ok and max(result.median_secs, again.median_secs) < known:
            best[group] = merged.median_secs
        yield Measured(merged, True)


def merge_remeasurement(first: RunResult, again: RunResult) -> RunResult:
    """Both measurements of a would-be best: every repeat of both runs; if the second run failed,
    that failure is the result."""
    if not again.ok:
        return RunResult(again.status, [], again.message, first.build_secs)
    return RunResult(Status.OK, first.run_secs + again.run_secs, first.message, first.build_secs)
