"""The new-best rule, one for the embedded tuner and the service: a result that beats the best known
time is a would-be best, measured a second time before it counts; the record keeps every repeat of
both runs and ranks by the slower of the two medians, so neither run alone decides its rank (a
lucky run, or a forged one with thousands of fast repeats, cannot carry it). A failed second run is
the record's failure.

Where the best's program is at hand, the second run times the would-be best side by side with it
(`Runner.run_side_by_side`), and their ratio decides: a host's speed drifts (a cold, memory-bound
GEMV read 68-141 us from one block of repeats to the next), so a program measured in a slow phase
keeps a best it does not deserve against one measured in a quick phase, and a would-be best measured
in a quick phase beats a best it does not beat. Side by side, a would-be best that is not faster than
the best ranks at the best's time scaled by the ratio (above it), and one that is faster by its slower
run, or, where that does not beat the best, at the best's time scaled by the ratio (below it), yet
never below its own fastest repeat: no record ranks faster than it was ever measured.

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


@dataclass(frozen=True)
class Versus:
    """The best's own times from a second run that timed the would-be best side by side with it,
    and the time the best ranks by."""

    result: RunResult
    best_secs: float


def confirm(first: RunResult, again: RunResult, by: str = "", versus: Versus | None = None) -> Confirmed:
    """Both measurements of a would-be best merged into its record; `by` names who measured again;
    `versus`, when the second run was side by side with the best (and the best ran), ranks it by
    their ratio (the module's rule)."""
    if not again.ok:
        failed = f"its re-measurement failed: {again.message}"
        return Confirmed(RunResult(again.status, [], failed, first.build_secs), None)
    message = f"re-measured by {by}" if by else "re-measured"
    ranked = max(first.median_secs, again.median_secs)
    if versus is not None and versus.result.ok:
        ratio = again.median_secs / versus.result.median_secs
        scaled = versus.best_secs * ratio
        if ratio >= 1:
            ranked = max(ranked, scaled)
        elif ranked >= versus.best_secs:  # faster side by side, but its runs alone did not show it
            ranked = max(scaled, min(first.run_secs + again.run_secs))
        message += f" side by side with the best: {ratio:.3f}x its time"
    merged = RunResult(Status.OK, first.run_secs + again.run_secs, message, first.build_secs)
    return Confirmed(merged, ranked)


@dataclass(frozen=True)
class Measured:
    result: RunResult
    remeasured: bool  # a would-be best, measured twice
    ranked_secs: float | None = None  # a confirmed best's rank (see `confirm`)


@dataclass(frozen=True)
class Incumbent:
    """A group's best: the seconds it ranks by, and its candidate when known (to time a would-be best
    side by side with it)."""

    secs: float
    candidate: Candidate | None = None


def measure_confirming(
    runner: Runner,
    candidates: Sequence[Candidate],
    groups: Sequence[G],
    best: MutableMapping[G, Incumbent],
) -> Iterator[Measured]:
    """Each candidate's result, in order, a would-be best measured again at once (side by side with
    its group's best where that is known). `groups` says whose best each candidate competes with (a
    batch may mix tasks, and one workload's time says nothing of another's); `best` holds each
    group's best (missing: none yet) and is replaced as records rank below it."""
    for candidate, group, result in zip(candidates, groups, runner.iter_run(candidates), strict=True):
        incumbent = best.get(group)
        if not would_be_best(result, None if incumbent is None else incumbent.secs):
            yield Measured(result, False)
            continue
        confirmed = _measure_again(runner, candidate, result, incumbent)
        ranked = confirmed.ranked_secs
        if ranked is not None and ranked < (inf if incumbent is None else incumbent.secs):
            best[group] = Incumbent(ranked, candidate)
        yield Measured(confirmed.result, True, ranked)


def _measure_again(
    runner: Runner, candidate: Candidate, first: RunResult, incumbent: Incumbent | None
) -> Confirmed:
    if incumbent is None or incumbent.candidate is None:
        return confirm(first, runner.run([candidate])[0])
    again, versus = runner.run_side_by_side([candidate, incumbent.candidate])
    return confirm(first, again, versus=Versus(versus, incumbent.secs))
