"""The new-best rule, one for the embedded tuner and the service: a result that beats the best known
time is a would-be best, measured a second time before it counts; the record keeps every repeat of
both runs and ranks by the slower of the two medians, so neither run alone decides its rank (a
lucky run, or a forged one with thousands of fast repeats, cannot carry it). A failed second run is
the record's failure.

Who measures the second time differs: the embedded tuner at once, with its own runner
(`measure_confirming`); the service with a second lease, which any worker may hold
(`tuner.database.queue`). Both judge and merge through `would_be_best` and `confirm`."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from math import inf
from typing import TypeVar

from runner.results import Candidate, Runner, RunResult, Status

G = TypeVar("G", bound=Hashable)  # what identifies a group (the callers: a task id)


def would_be_best(result: RunResult, best_secs: float | None) -> bool:
    """Whether the result must be measured again before it counts: it is ok and beats the best."""
    return result.ok and result.median_secs < (inf if best_secs is None else best_secs)


@dataclass(frozen=True)
class Confirmed:
    """A would-be best's record: `result` holds every repeat of both runs (or the second run's failure),
    `ranked_secs` the time it ranks by (None when the second run failed)."""

    result: RunResult
    ranked_secs: float | None


def confirm(first: RunResult, again: RunResult, by: str = "") -> Confirmed:
    """Both measurements of a would-be best merged into its record; `by` names who measured again."""
    if not again.ok:
        failed = f"its re-measurement failed: {again.message}"
        return Confirmed(RunResult(again.status, [], failed, first.build_secs), None)
    merged = RunResult(
        Status.OK,
        first.run_secs + again.run_secs,
        f"re-measured by {by}" if by else "re-measured",
        first.build_secs,
    )
    return Confirmed(merged, max(first.median_secs, again.median_secs))


@dataclass(frozen=True)
class Measured:
    result: RunResult
    remeasured: bool  # a would-be best, measured twice
    ranked_secs: float | None = None  # a confirmed best's rank (see `confirm`)


def measure_confirming(
    runner: Runner,
    candidates: Sequence[Candidate],
    groups: Sequence[G],
    best: MutableMapping[G, float],
) -> Iterator[Measured]:
    """Each candidate's result, in order, a would-be best measured again at once. `groups` says whose
    best each candidate competes with (a batch may mix tasks, and one workload's time says nothing of
    another's); `best` holds each group's best seconds (missing: none yet) and is lowered as records
    rank below it."""
    for candidate, group, result in zip(candidates, groups, runner.iter_run(candidates), strict=True):
        if not would_be_best(result, best.get(group)):
            yield Measured(result, False)
            continue
        confirmed = confirm(result, runner.run([candidate])[0])
        ranked = confirmed.ranked_secs
        if ranked is not None and ranked < best.get(group, inf):
            best[group] = ranked
        yield Measured(confirmed.result, True, ranked)
