"""`tune`: search a workload's schedules on this machine, measure them, keep every record.

One loop: the strategy proposes a batch of unmeasured traces, the runner builds and times them, the
records go to the database, the cost model learns from them. Running the same call again continues
from the database (its traces are never measured twice, its records train the model).

Noise: a candidate that beats the best so far is measured a second time, and becomes the best only if
both measurements beat it; its record keeps every repeat of both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from compiler import Trace, build
from compiler.build import Kernel
from compiler.workloads import Workload, workload_from_spec
from runner import Candidate, LocalRunner, LocalRunnerConfig, RunResult, merge_remeasurement
from runner.hardware import Hardware, host_hardware
from tuner.database import Database, NewRecord, Record
from tuner.search.driver import STRATEGIES, TaskSearch
from tuner.search.space import ScheduleFn, rule_space
from tuner.search.strategy import Proposal

DEFAULT_DATABASE = "sqlite:///tensor-tuner.db"
# The best measured traces that seed each generation of the evolutionary search.
PARENTS = 16
SHORT_RUN, SHORT_BATCH, LONG_BATCH = 64, 16, 32


@dataclass
class TuneResult:
    workload: Workload
    hardware: Hardware
    best: Record | None
    trials: int  # measured by this call
    curve: list[float] = field(default_factory=list)  # best GFLOPS so far after each trial of this call
    wall_secs: float = 0.0
    search_secs: float = 0.0  # proposing: sampling, mutation, features, cost model

    @property
    def best_gflops(self) -> float:
        return gflops(self.workload, self.best.median_secs) if self.best else 0.0


@dataclass(frozen=True)
class Progress:
    trials: int
    total: int
    best_gflops: float
    batch_ok: int
    batch_size: int


def gflops(workload: Workload, seconds: float | None) -> float:
    return workload.flops / seconds / 1e9 if seconds else 0.0


def as_workload(workload: Workload | dict[str, Any]) -> Workload:
    return workload if isinstance(workload, Workload) else workload_from_spec(workload)


def open_database(database: Database | str) -> Database:
    return database if isinstance(database, Database) else Database.open(database)


def tune(
    workload: Workload | dict[str, Any],
    *,
    trials: int = 64,
    database: Database | str = DEFAULT_DATABASE,
    strategy: str = "evolutionary",
    seed: int = 0,
    space: ScheduleFn | None = None,
    runner: Any = None,
    batch_size: int | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> TuneResult:
    """Measure up to `trials` new candidates of `workload` and return the best record known.

    `batch_size` None is adaptive: 16 for the first 64 trials, so a short run gets several
    model-guided batches, then 32, so the search's own cost (a population evolved per batch) stays a
    small share of long runs."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    wl = as_workload(workload)
    db = open_database(database)
    own_runner = runner is None
    runner = runner or LocalRunner(LocalRunnerConfig(seed=seed))
    try:
        return Tuning(wl, db, runner, strategy, seed, space or rule_space(), batch_size).run(trials, progress)
    finally:
        if own_runner:
            runner.close()
        if not isinstance(database, Database):
            db.close()


class Tuning:
    """The tuning of one workload: tune() runs it to the end, the task scheduler a batch at a time."""

    def __init__(
        self,
        wl: Workload,
        db: Database,
        runner: Any,
        strategy: str,
        seed: int,
        space: ScheduleFn,
        batch: int | None,
    ) -> None:
        self.wl, self.db, self.runner, self.batch = wl, db, runner, batch
        self.start = time.perf_counter()
        self.hardware = host_hardware()
        self.key = wl.func.structural_hash()
        self.workload_id = db.add_workload(hash=self.key, name=wl.name, spec=wl.spec, flops=wl.flops)
        hw = self.hardware
        self.hardware_id = db.add_hardware(key=hw.key, cpu=hw.cpu, features=hw.features, cores=hw.cores)
        self.task_id = db.add_task(
            workload_id=self.workload_id, hardware_id=self.hardware_id, strategy=strategy, trials=0, seed=seed
        )
        self.search = TaskSearch(
            wl,
            db,
            workload_id=self.workload_id,
            hardware_id=self.hardware_id,
            strategy=strategy,
            seed=seed,
            space=space,
        )
        best = db.best(self.key, hw.key)
        self.best_secs = best.median_secs if best else float("inf")
        self.curve: list[float] = []
        self.trials = 0

    def run(self, trials: int, progress: Callable[[Progress], None] | None) -> TuneResult:
        self.db.update_task(self.task_id, status="running", trials_done=0)
        while self.trials < trials:
            results = self.step(min(self._batch_size(), trials - self.trials))
            if not results:
                break  # the space has no unmeasured program left
            if progress:
                ok = sum(r.ok for r in results)
                progress(Progress(self.trials, trials, self.curve[-1], ok, len(results)))
        return self.finish()

    def _batch_size(self) -> int:
        if self.batch is not None:
            return self.batch
        return SHORT_BATCH if self.trials < SHORT_RUN else LONG_BATCH

    def step(self, n: int) -> list[RunResult]:
        """Propose, measure and learn from one batch of up to n candidates."""
        top = [r.trace for r in self.db.top_k(self.key, self.hardware.key, PARENTS)]
        proposals = self.search.propose(n, best=top)
        if not proposals:
            return []
        results = self._measure(proposals)
        self.search.learn(proposals, [r.median_secs if r.ok else None for r in results])
        self.trials += len(results)
        self.db.update_task(self.task_id, trials_done=self.trials)
        return results

    def finish(self) -> TuneResult:
        self.db.update_task(self.task_id, status="done", trials_done=self.trials)
        best = self.db.best(self.key, self.hardware.key)
        wall = time.perf_counter() - self.start
        return TuneResult(
            self.wl, self.hardware, best, self.trials, self.curve, wall, self.search.search_secs
        )

    def _measure(self, proposals: list[Proposal]) -> list[RunResult]:
        candidates = [Candidate(self.wl.spec, p.trace) for p in proposals]
        results = self.runner.run(candidates)
        out = []
        for proposal, candidate, result in zip(proposals, candidates, results):
            remeasured = result.ok and result.median_secs < self.best_secs
            if remeasured:
                result = self._confirm(candidate, result)
            self.db.add_record(
                NewRecord(
                    workload_id=self.workload_id,
                    hardware_id=self.hardware_id,
                    task_id=self.task_id,
                    trace=proposal.trace,
                    status=result.status.value,
                    run_secs=result.run_secs,
                    build_secs=result.build_secs,
                    message=result.message,
                    timing=timing_settings(self.runner),
                    worker="local",
                    remeasured=remeasured,
                )
            )
            out.append(result)
            self.curve.append(gflops(self.wl, self.best_secs if self.best_secs < float("inf") else None))
        return out

    def _confirm(self, candidate: Candidate, first: RunResult) -> RunResult:
        """Measure a would-be best again; it is the best only if both measurements beat the old one."""
        again = self.runner.run([candidate])[0]
        both = merge_remeasurement(first, again)
        if both.ok and max(first.median_secs, again.median_secs) < self.best_secs:
            self.best_secs = both.median_secs
        return both


def timing_settings(runner: Any) -> dict[str, Any]:
    timing = getattr(getattr(runner, "config", None), "timing", None)
    return asdict(timing) if timing is not None else {}


def compile_best(
    workload: Workload | dict[str, Any], *, database: Database | str = DEFAULT_DATABASE
) -> Kernel:
    """The fastest known schedule of `workload` on this hardware, built into a callable kernel."""
    wl = as_workload(workload)
    db = open_database(database)
    try:
        best = db.best(wl.func.structural_hash(), host_hardware().key)
    finally:
        if not isinstance(database, Database):
            db.close()
    if best is None:
        raise LookupError(f"no measured schedule of {wl.name} on this hardware; tune it first")
    return build(Trace.from_json(best.trace).apply(wl.func).func, listings=False)
