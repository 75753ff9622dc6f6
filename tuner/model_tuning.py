"""`tune_model`: tune every layer of a model under one trial budget, then build it from the best records.

The model's fused kernels are the tasks (`graph.extract_tasks`: one per distinct program, weighted by
its calls per forward pass), and so is the other form of each 3x3 conv that Winograd or the direct
conv may run (`compiler.graph.algorithms`), grouped with it; the task scheduler spends the budget
where the estimated latency drops most, all tasks sharing one cost model. The model is then built with
each such conv in the form whose best record is faster. Records are keyed by each kernel's structural
hash, so a layer that two models share is tuned once, and running again continues from the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from compiler import graph
from compiler.graph import CompiledModel, Module
from compiler.graph.algorithms import alternatives, measured_direct
from compiler.graph.passes import Task
from runner import MODEL_TIMING, LocalRunner, LocalRunnerConfig, Runner, TimingKind
from runner.hardware import Hardware, host_hardware
from tuner.database import Database
from tuner.task_scheduler import BatchProgress, TasksResult, tune_tasks
from tuner.task_scheduler import Task as SchedulerTask
from tuner.tune import DEFAULT_DATABASE, best_record, open_database


@dataclass(frozen=True)
class TaskReport:
    """One task after tuning: its share of the estimated latency is weight x best seconds."""

    task: Task
    trials: int  # measured by this run
    best_secs: float | None

    @property
    def best_gflops(self) -> float:
        return self.task.flops / self.best_secs / 1e9 if self.best_secs else 0.0

    @property
    def weighted_secs(self) -> float:
        return self.task.weight * (self.best_secs if self.best_secs is not None else float("inf"))


@dataclass(frozen=True)
class TuningPlan:
    """What `tune_model` tunes: the model's kernels, then the other form of each conv Winograd or
    the direct conv may run; `groups[k]` is shared by a conv's two forms (None elsewhere)."""

    tasks: list[Task]
    groups: list[int | None]


def tuning_plan(module: Module) -> TuningPlan:
    """The tasks of `module`, with the alternatives of its convs if it is not optimized yet."""
    if not any(isinstance(n, graph.Call) for n in module.nodes()):
        tasks = graph.extract_tasks(module)
        return TuningPlan(tasks, [None] * len(tasks))
    both = alternatives(module)
    tasks = graph.extract_tasks(both.by_winograd)
    groups: list[int | None] = [None] * len(tasks)
    index = {t.workload_hash: k for k, t in enumerate(tasks)}
    direct_tasks = {t.workload_hash: t for t in graph.extract_tasks(both.by_direct)}
    for conv in both.convs:
        k, direct = index.get(conv.winograd.structural_hash()), conv.direct.structural_hash()
        if k is None or direct in index or direct not in direct_tasks:
            continue
        index[direct] = len(tasks)
        tasks.append(direct_tasks[direct])
        groups.append(k)
        groups[k] = k
    return TuningPlan(tasks, groups)


@dataclass
class ModelTuneResult:
    module: Module  # the fused module that was built
    tasks: list[TaskReport]
    model: CompiledModel  # built from the best records
    curve: list[tuple[int, float]] = field(default_factory=list)  # (trials, estimated latency secs)
    wall_secs: float = 0.0
    scheduled: TasksResult | None = None  # None when the budget was 0
    direct: frozenset[str] = frozenset()  # the convs built direct: faster so than by Winograd here

    @property
    def estimated_secs(self) -> float:
        """The sum over tasks of calls x best time: what a forward pass costs without overhead."""
        return sum(t.weighted_secs for t in self.tasks)


def tune_model(
    module: Module,
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
) -> ModelTuneResult:
    """Spend `trials` measurements over the model's tasks on `hardware` (this machine by default),
    then build the model from the database's best records (default schedules where there are none).
    A module of operator calls also tunes the other form of its Winograd convs (`tuning_plan`); an
    optimized one is tuned as it is."""
    start = time.perf_counter()
    hardware = hardware or host_hardware()
    plan = tuning_plan(module)
    own_runner = None
    if runner is None and trials > 0:
        runner = own_runner = LocalRunner(LocalRunnerConfig(timing=MODEL_TIMING, seed=seed), hardware.target)
    db = open_database(database)
    try:
        scheduled = None
        curve: list[tuple[int, float]] = []
        if trials > 0:

            def on_batch(p: BatchProgress) -> None:
                curve.append((p.trials, p.latency_secs))
                if progress:
                    progress(p)

            scheduled = tune_tasks(
                [SchedulerTask(t.spec, t.weight, g) for t, g in zip(plan.tasks, plan.groups)],
                trials=trials,
                database=db,
                scheduler=scheduler,
                strategy=strategy,
                seed=seed,
                runner=runner,
                batch_size=batch_size,
                progress=on_batch,
                hardware=hardware,
            )
        direct: frozenset[str] = frozenset()
        if any(isinstance(n, graph.Call) for n in module.nodes()):
            direct = measured_direct(module, db, hardware)
            module = graph.optimize(module, direct=direct)
        reports = _reports(graph.extract_tasks(module), plan, scheduled, db, hardware)
        compiled = graph.build(module, database=db, hardware=hardware)
    finally:
        if own_runner is not None:
            own_runner.close()
        if not isinstance(database, Database):
            db.close()
    wall = time.perf_counter() - start
    return ModelTuneResult(module, reports, compiled, curve, wall, scheduled, direct)


def _reports(
    tasks: list[Task], plan: TuningPlan, scheduled: TasksResult | None, db: Database, hardware: Hardware
) -> list[TaskReport]:
    """Each task the built model runs: its trials and the time of the record `graph.build` runs it
    with."""
    trials = {t.workload_hash: r.trials for t, r in zip(plan.tasks, scheduled.results)} if scheduled else {}
    out = []
    for task in tasks:
        best = best_record(db, task.workload_hash, hardware.key, TimingKind.LAYER)
        out.append(TaskReport(task, trials.get(task.workload_hash, 0), best.median_secs if best else None))
    return out


__all__ = ["ModelTuneResult", "TaskReport", "TuningPlan", "tune_model", "tuning_plan"]
