"""Task scheduler: the layers of a model share one trial budget, spent a batch at a time.

The objective is the model's latency, the sum over tasks of weight x best seconds (a layer that runs
twice counts twice). `round-robin` gives every task a batch in turn. `gradient` (MetaSchedule's
default, after Ansor) first gives each task one batch, then always picks the task whose next batch
promises the largest drop in model latency: a mix of its recent improvement per batch and an
optimistic guess (its latency shrinking like 1/batches), weighted by how often it runs. A task with
no valid schedule yet comes first: the model cannot run without one. Either way, a budget too small
for a whole first batch per task is shared over every task in the first round.

The policy (`next_batches`) is one for both drivers: `tune_tasks` here, which measures one batch at a
time, and the coordinator's model loop (`tuner/service/model_loop.py`), which keeps a few batches out
at once while workers measure them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiler import Trace
from compiler.schedule_rules import RuleConfig, default_schedule
from compiler.target import Hardware, host_hardware
from compiler.workloads import Workload
from runner import LocalRunner, LocalRunnerConfig, Runner
from tuner.database import Database
from tuner.search.cost_model import CostModel
from tuner.search.driver import warm_started_model
from tuner.search.space import rule_space
from tuner.tune import DEFAULT_DATABASE, TuneResult, Tuning, as_workload, opened

SCHEDULERS = ("gradient", "round-robin")


@dataclass(frozen=True)
class WeightedWorkload:
    workload: Workload | dict[str, Any]
    weight: int = 1  # how many times one run of the model executes this layer


@dataclass
class TasksResult:
    tasks: list[WeightedWorkload]
    results: list[TuneResult]
    order: list[int] = field(default_factory=list)  # the task of each batch, in order
    wall_secs: float = 0.0

    @property
    def latency_secs(self) -> float:
        """The model's latency from each task's best record (inf if a task has none)."""
        total = 0.0
        for t, r in zip(self.tasks, self.results):
            secs = r.best.median_secs if r.best else None
            total += t.weight * (float("inf") if secs is None else secs)
        return total


@dataclass(frozen=True)
class BatchProgress:
    """After each batch: the trials spent, the task that ran it, and every task's best seconds."""

    trials: int
    total: int
    task: int
    best_secs: tuple[float, ...]  # inf for a task without a valid record yet
    weights: tuple[int, ...]

    @property
    def latency_secs(self) -> float:
        """The model's estimated latency: each task's best time, times its calls per pass."""
        return sum(w * s for w, s in zip(self.weights, self.best_secs))


@dataclass(frozen=True)
class BatchHistory:
    """One task as the scheduler sees it: its calls per forward pass, its best seconds after each of
    its batches that came back (inf while it has no valid record), how many of its batches are still
    out, and whether it can take no more (its search is exhausted, or it ended)."""

    weight: int
    back: tuple[float, ...] = ()
    out: int = 0
    ended: bool = False


def next_batches(
    scheduler: str, members: Sequence[BatchHistory], *, left: int, batch_trials: int, in_flight: int
) -> list[tuple[int, int]]:
    """The batches to give out now, as (member index, trials), from a budget of `left` trials: first
    one batch for every member that never had one, all at once (`_first_batch`); after that, batches
    for the members the scheduler picks until `in_flight` are out."""
    fresh = [i for i, m in enumerate(members) if not m.back and not m.out and not m.ended]
    if fresh:
        chosen = fresh
    else:
        chosen = _picks(scheduler, members, in_flight - sum(m.out for m in members))
    out = []
    for k, i in enumerate(chosen):
        n = _first_batch(batch_trials, left, len(chosen) - k) if fresh else min(batch_trials, left)
        if n <= 0:
            break
        out.append((i, n))
        left -= n
    return out


def _first_batch(batch_trials: int, left: int, untried: int) -> int:
    """A member's first batch: a whole batch, unless the budget `left` is too small for one per member
    not yet tried (`untried`, this one included); then the budget is shared evenly, at least one trial
    each while any is left. 200 trials over 32 layers so measure each one's default schedule and a
    few more, where whole batches in turn left 19 layers unmeasured and the model's estimated latency
    unknown."""
    return min(batch_trials, left, max(1, left // untried))


def _picks(scheduler: str, members: Sequence[BatchHistory], count: int) -> list[int]:
    """`count` picks of the scheduler, as if each batch out had already come back no better than its
    member's last: a member may get a second batch while its first is measured (the scheduler's own
    estimate of its return then falls), but none before its first batch is back."""
    histories = [
        _History([*m.back, *m.back[-1:] * m.out], exhausted=m.ended or (m.out > 0 and not m.back))
        for m in members
    ]
    weights = [m.weight for m in members]
    chosen = []
    for _ in range(count):
        pick = _pick(scheduler, weights, histories)
        if pick is None:
            break
        chosen.append(pick)
        history = histories[pick]  # a pick had a batch back: one out and none back is exhausted
        history.latencies.append(history.latencies[-1])
    return chosen


@dataclass
class _History:
    latencies: list[float] = field(default_factory=list)
    exhausted: bool = False


def _pick(scheduler: str, weights: Sequence[int], histories: Sequence[_History]) -> int | None:
    """The task to give the next batch (None when every task is exhausted). `weights` are the tasks'
    calls per forward pass."""
    live = [i for i, h in enumerate(histories) if not h.exhausted]
    if not live:
        return None
    if scheduler == "round-robin":
        return min(live, key=lambda i: (len(histories[i].latencies), i))
    untried = [i for i in live if not histories[i].latencies]
    if untried:
        return untried[0]
    return max(live, key=lambda i: (_gradient(weights[i], histories[i].latencies), -i))


def _gradient(weight: int, latencies: list[float], alpha: float = 0.2, window: int = 3) -> float:
    """How much the model's latency may drop with this task's next batch."""
    n, last = len(latencies), latencies[-1]
    if last == float("inf"):
        return float("inf")
    recent = (latencies[-1 - window] - last) / window if n > window else 0.0
    if recent == float("inf"):
        recent = 0.0
    optimistic = last / n
    return weight * (alpha * recent + (1 - alpha) * optimistic)


def tune_tasks(
    tasks: list[WeightedWorkload],
    *,
    trials: int,
    database: Database | str = DEFAULT_DATABASE,
    scheduler: str = "gradient",
    strategy: str = "evolutionary",
    seed: int = 0,
    runner: Runner | None = None,
    batch_size: int = 16,
    progress: Callable[[BatchProgress], None] | None = None,
    hardware: Hardware | None = None,
) -> TasksResult:
    """Spend `trials` measurements over `tasks`, a batch at a time, to minimize the model's latency
    on `hardware` (this machine by default). The tasks share one cost model, warm-started from the
    database: what one layer's measurements teach about the machine guides the others' search."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {scheduler!r}")
    hardware = hardware or host_hardware()
    own_runner = runner is None
    runner = runner or LocalRunner(LocalRunnerConfig(seed=seed), hardware.target)
    start = time.perf_counter()
    try:
        with opened(database) as db:
            space = rule_space(RuleConfig.for_target(hardware.target))
            workloads = [as_workload(t.workload) for t in tasks]
            model = _shared_model(db, workloads, hardware, seed) if strategy == "evolutionary" else None
            tunings = [
                Tuning(
                    wl,
                    db,
                    runner,
                    hardware,
                    strategy,
                    seed + i,
                    space,
                    batch_size,
                    _default_trace(wl, hardware),
                    model=model,
                )
                for i, wl in enumerate(workloads)
            ]
            back: list[list[float]] = [[] for _ in tasks]
            exhausted = [False] * len(tasks)
            order: list[int] = []
            spent = 0
            while spent < trials:
                members = [BatchHistory(t.weight, tuple(b), 0, x) for t, b, x in zip(tasks, back, exhausted)]
                batches = next_batches(
                    scheduler, members, left=trials - spent, batch_trials=batch_size, in_flight=1
                )
                if not batches:
                    break
                for i, n in batches:
                    results = tunings[i].step(n)
                    if not results:
                        exhausted[i] = True
                        continue
                    spent += len(results)
                    back[i].append(tunings[i].best_secs)
                    order.append(i)
                    if progress:
                        best = tuple(t.best_secs for t in tunings)
                        progress(BatchProgress(spent, trials, i, best, tuple(t.weight for t in tasks)))
            return TasksResult(tasks, [t.finish() for t in tunings], order, time.perf_counter() - start)
    finally:
        if own_runner:
            runner.close()


def _default_trace(wl: Workload, hardware: Hardware) -> Trace:
    """Each task's search starts from its default schedule (see SearchDriver's start_from)."""
    return default_schedule(wl.func, hardware.target).trace


def _shared_model(db: Database, workloads: list[Workload], hardware: Hardware, seed: int) -> CostModel:
    hardware_id = db.add_hardware(hardware)
    ids = [
        db.add_workload(hash=wl.func.structural_hash(), name=wl.name, spec=wl.spec, flops=wl.flops)
        for wl in workloads
    ]
    return warm_started_model(db, hardware_id, ids, hardware.target, seed)
