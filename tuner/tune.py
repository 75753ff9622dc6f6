"""`tune`: search a workload's schedules on this machine, measure them, keep every record.

One loop: the search driver (tuner.search.driver) proposes a batch of unmeasured programs, the runner
builds and times them (a would-be best twice, ranked by the service's rule: runner.confirm), the
records go to the database, and the driver learns from them. Running the same call again continues
from the database (its programs are never measured twice, its records train the model).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from compiler import Trace
from compiler.ir import IRModule, PrimFunc
from compiler.schedule_rules import RuleConfig, default_schedule
from compiler.target import Hardware, host_hardware
from compiler.workloads import Workload, workload_from_spec
from compiler.workloads.primfunc_spec import func_workload
from runner import (
    Candidate,
    Incumbent,
    LocalRunner,
    LocalRunnerConfig,
    Runner,
    RunResult,
    TimingKind,
    cutoff_above,
    measure_confirming,
)
from tuner.database import Database, NewRecord, Record
from tuner.search.cost_model import CostModel
from tuner.search.driver import STRATEGIES, SearchDriver, TaskIds
from tuner.search.space import ScheduleFn, rule_space
from tuner.search.strategy import Proposal

DEFAULT_DATABASE = "sqlite:///tensor-tuner.db"
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


WorkloadLike = Workload | dict[str, Any] | PrimFunc | IRModule


def as_workload(workload: WorkloadLike) -> Workload:
    """A workload, a JSON spec, or a PrimFunc as written (or the one function of a module, as TVM's
    `tune_tir` takes it): its leading parameters no block writes are its inputs."""
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, IRModule):
        if len(workload) != 1:
            raise ValueError(f"tune one function at a time; the module holds {', '.join(workload)}")
        workload = workload.functions[0]
    if isinstance(workload, PrimFunc):
        return func_workload(workload)
    return workload_from_spec(workload)


@contextmanager
def opened(database: Database | str) -> Iterator[Database]:
    """The database as given, or opened from its URL for the block and closed after it."""
    if isinstance(database, Database):
        yield database
        return
    with Database.open(database) as db:
        yield db


def tune(
    workload: WorkloadLike,
    *,
    trials: int = 64,
    database: Database | str = DEFAULT_DATABASE,
    strategy: str = "evolutionary",
    seed: int = 0,
    space: ScheduleFn | None = None,
    runner: Runner | None = None,
    batch_size: int | None = None,
    progress: Callable[[Progress], None] | None = None,
    hardware: Hardware | None = None,
) -> TuneResult:
    """Measure up to `trials` new candidates of `workload` and return the best record known.

    The programs are for `hardware` (this machine by default), measured by `runner` (a local runner
    building for that hardware by default). `batch_size` None is adaptive: 16 for the first 64
    trials, so a short run gets several model-guided batches, then 32, so the search's own cost (a
    population evolved per batch) stays a small share of long runs."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    wl = as_workload(workload)
    hardware = hardware or host_hardware()
    own_runner = runner is None
    runner = runner or LocalRunner(LocalRunnerConfig(seed=seed), hardware.target)
    start_from = default_schedule(wl.func, hardware.target).trace if space is None else None
    space = space or rule_space(RuleConfig.for_target(hardware.target))
    try:
        with opened(database) as db:
            tuning = Tuning(wl, db, runner, hardware, strategy, seed, space, batch_size, start_from)
            return tuning.run(trials, progress)
    finally:
        if own_runner:
            runner.close()


def tune_tir(func: PrimFunc | IRModule, *, trials: int = 64, **options: Any) -> TuneResult:
    """TVM's `meta_schedule.tune_tir`: tune a PrimFunc (or a module's one function) as written, with
    `tune`'s options (`space=` a function that schedules, `database=`, ...); `compile_best(func)`
    then builds the best program found."""
    return tune(func, trials=trials, **options)


class Tuning:
    """The tuning of one workload: tune() runs it to the end, the task scheduler a batch at a time.
    The search driver proposes and learns; this measures (re-measuring a would-be best) and stores."""

    def __init__(
        self,
        wl: Workload,
        db: Database,
        runner: Runner,
        hardware: Hardware,
        strategy: str,
        seed: int,
        space: ScheduleFn,
        batch: int | None,
        start_from: Trace | None = None,
        *,
        model: CostModel | None = None,
    ) -> None:
        self.wl, self.db, self.runner, self.hardware, self.batch = wl, db, runner, hardware, batch
        self.start = time.perf_counter()
        self.key = wl.func.structural_hash()
        self.timing_kind = runner.timing.kind if runner.timing else TimingKind.WARM
        workload_id = db.add_workload(hash=self.key, name=wl.name, spec=wl.spec, flops=wl.flops)
        hardware_id = db.add_hardware(hardware)
        task_id = db.add_task(
            workload_id=workload_id,
            hardware_id=hardware_id,
            strategy=strategy,
            trials=0,
            seed=seed,
            timing_kind=self.timing_kind,
        )
        self.ids = TaskIds(workload_id, hardware_id, task_id, self.timing_kind)
        self.driver = SearchDriver(
            wl,
            db,
            self.ids,
            hardware.target,
            hardware_key=hardware.key,
            strategy=strategy,
            seed=seed,
            space=space,
            start_from=start_from,
            model=model,
        )
        best = db.best(self.key, hardware.key, timing_kind=self.timing_kind)
        self.best: dict[int, Incumbent] = {}
        if best and best.median_secs:
            self.best[task_id] = Incumbent(best.median_secs, Candidate(wl.spec, best.trace))
        self.curve: list[float] = []
        self.trials = 0

    @property
    def best_secs(self) -> float:
        best = self.best.get(self.ids.task_id)
        return float("inf") if best is None else best.secs

    def run(self, trials: int, progress: Callable[[Progress], None] | None) -> TuneResult:
        self.db.update_task(self.ids.task_id, status="running", trials_done=0)
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
        proposals = self.driver.propose(n)
        if not proposals:
            return []
        results = self._measure(proposals)
        self.driver.learn()
        self.trials += len(results)
        self.db.update_task(self.ids.task_id, trials_done=self.trials)
        return results

    def finish(self) -> TuneResult:
        self.db.update_task(self.ids.task_id, status="done", trials_done=self.trials)
        best = self.db.best(self.key, self.hardware.key, timing_kind=self.timing_kind)
        wall = time.perf_counter() - self.start
        return TuneResult(
            self.wl, self.hardware, best, self.trials, self.curve, wall, self.driver.search_secs
        )

    def _measure(self, proposals: list[Proposal]) -> list[RunResult]:
        best = self.best.get(self.ids.task_id)
        cutoff = cutoff_above(None if best is None else best.secs)
        candidates = [Candidate(self.wl.spec, p.trace, cutoff_secs=cutoff) for p in proposals]
        tasks = [self.ids.task_id] * len(candidates)
        out = []
        for proposal, measured in zip(
            proposals, measure_confirming(self.runner, candidates, tasks, self.best)
        ):
            result = measured.result
            self.db.add_record(
                NewRecord(
                    workload_id=self.ids.workload_id,
                    hardware_id=self.ids.hardware_id,
                    task_id=self.ids.task_id,
                    trace=proposal.trace,
                    program_hash=proposal.key,
                    status=result.status.value,
                    run_secs=result.run_secs,
                    build_secs=result.build_secs,
                    message=result.message,
                    timing=asdict(self.runner.timing) if self.runner.timing else {},
                    timing_kind=self.timing_kind,
                    worker="local",
                    remeasured=measured.remeasured,
                    ranked_secs=measured.ranked_secs,
                )
            )
            out.append(result)
            secs = self.best_secs
            self.curve.append(gflops(self.wl, secs if secs < float("inf") else None))
        return out
