"""`tune_model`: tune every layer of a model under one trial budget, then build it from the best records.

The model's fused kernels are the tasks (`graph.extract_tasks`: one per distinct program, weighted by
its calls per forward pass); the task scheduler spends the budget where the estimated latency drops
most, all tasks sharing one cost model. Records are keyed by each kernel's structural hash, so a layer
that two models share is tuned once, and running again continues from the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from compiler import graph
from compiler.graph import CompiledModel, DynamicModel, Module, ShapeFamily, ValueFamily
from compiler.graph.passes import PASSES, ExtractedTask
from compiler.graph.symbolic import RANGE_PASSES, SymbolicError, symbolic_module
from compiler.target import Hardware, host_hardware
from runner import MODEL_TIMING, LocalRunner, LocalRunnerConfig, Runner, TimingKind
from tuner.best import TUNED_SIZES, best_record, build_model
from tuner.database import Database
from tuner.task_scheduler import BatchProgress, TasksResult, WeightedWorkload, tune_tasks
from tuner.tune import DEFAULT_DATABASE, opened


@dataclass(frozen=True)
class TaskReport:
    """One task after tuning: its share of the estimated latency is weight x best seconds."""

    task: ExtractedTask
    trials: int  # measured by this run
    best_secs: float | None

    @property
    def best_gflops(self) -> float:
        return self.task.flops / self.best_secs / 1e9 if self.best_secs else 0.0

    @property
    def weighted_secs(self) -> float:
        return self.task.weight * (self.best_secs if self.best_secs is not None else float("inf"))


@dataclass
class ModelTuneResult:
    module: Module | ShapeFamily  # the fused module that was tuned, or the family
    tasks: list[TaskReport]
    model: CompiledModel | DynamicModel  # built from the best records
    curve: list[tuple[int, float]] = field(default_factory=list)  # (trials, estimated latency secs)
    wall_secs: float = 0.0
    scheduled: TasksResult | None = None  # None when the budget was 0
    sizes: list[dict[str, int]] = field(default_factory=list)  # a family's tuned sizes

    @property
    def estimated_secs(self) -> float:
        """The sum over tasks of calls x best time: what a forward pass costs without overhead (for a
        family, the forward passes at all its tuned sizes)."""
        return sum(t.weighted_secs for t in self.tasks)


def tune_model(
    module: Module | ShapeFamily,
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
    sizes: Sequence[Mapping[str, int]] | None = None,
) -> ModelTuneResult:
    """Spend `trials` measurements over the model's tasks on `hardware` (this machine by default),
    then build the model from the database's best records (default schedules where there are none).

    A shape family is tuned at `sizes` (by default TUNED_SIZES spread over its ranges) under the one
    budget: the tasks of all of them together, a kernel shared by several sizes tuned once for all,
    so that the scheduler spends where the sum of their latencies gains most. Its model runs every
    size: one module for the range where one describes the family, its kernels' tuned traces each
    the schedule of the bucket of sizes ending at its size (`build_model`), else a model per size,
    the tuned ones with their records, the others with the default schedules."""
    if isinstance(module, ValueFamily):  # what from_onnx gives may be one
        raise ValueError(
            f"the values of inputs {list(module.value_inputs)} set the model's shapes: tune "
            "module.specialize({...}) at the values it will run with"
        )
    start = time.perf_counter()
    hardware = hardware or host_hardware()
    tuned_sizes: list[dict[str, int]] = []
    if isinstance(module, ShapeFamily):
        tuned_sizes = [dict(s) for s in (sizes if sizes is not None else module.spread(TUNED_SIZES))]
    elif any(isinstance(n, graph.Call) for n in module.nodes()):
        module = graph.optimize(module)
    tasks = tasks_of(module, tuned_sizes)
    own_runner = None
    if runner is None and trials > 0:
        runner = own_runner = LocalRunner(LocalRunnerConfig(timing=MODEL_TIMING, seed=seed), hardware.target)
    try:
        with opened(database) as db:
            scheduled = None
            curve: list[tuple[int, float]] = []
            if trials > 0:

                def on_batch(p: BatchProgress) -> None:
                    curve.append((p.trials, p.latency_secs))
                    if progress:
                        progress(p)

                scheduled = tune_tasks(
                    [WeightedWorkload(t.spec, weight=t.weight) for t in tasks],
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
            reports = _reports(tasks, scheduled, db, hardware)
            compiled: CompiledModel | DynamicModel
            if isinstance(module, ShapeFamily):
                compiled = build_model(module, database=db, hardware=hardware, sizes=tuned_sizes)
            else:
                compiled = build_model(module, database=db, hardware=hardware)
    finally:
        if own_runner is not None:
            own_runner.close()
    wall = time.perf_counter() - start
    return ModelTuneResult(module, reports, compiled, curve, wall, scheduled, tuned_sizes)


def tasks_of(module: Module | ShapeFamily, sizes: Sequence[Mapping[str, int]] = ()) -> list[ExtractedTask]:
    """The tasks `tune_model` tunes: a module's, or those of a family at all of `sizes` together."""
    if isinstance(module, Module):
        fused = any(isinstance(n, graph.Call) for n in module.nodes())
        return graph.extract_tasks(graph.optimize(module) if fused else module)
    try:  # the kernels of the one module for the range, at each size (`build_model`)
        symbolic_module(module)
        passes = RANGE_PASSES
    except SymbolicError:
        passes = PASSES
    return _merged([graph.extract_tasks(graph.optimize(module.specialize(s), passes=passes)) for s in sizes])


def _merged(task_lists: Sequence[list[ExtractedTask]]) -> list[ExtractedTask]:
    """The tasks of several modules, one per workload, its calls summed over them."""
    merged: dict[str, ExtractedTask] = {}
    for task in (t for tasks in task_lists for t in tasks):
        seen = merged.get(task.workload_hash)
        merged[task.workload_hash] = task if seen is None else replace(seen, weight=seen.weight + task.weight)
    return list(merged.values())


def _reports(
    tasks: list[ExtractedTask], scheduled: TasksResult | None, db: Database, hardware: Hardware
) -> list[TaskReport]:
    """Each task's trials and the time of the record `build_model` runs it with."""
    out = []
    for k, task in enumerate(tasks):
        best = best_record(db, task.workload_hash, hardware.key, TimingKind.LAYER)
        trials = scheduled.results[k].trials if scheduled else 0
        out.append(TaskReport(task, trials, best.median_secs if best else None))
    return out


__all__ = ["TUNED_SIZES", "ModelTuneResult", "TaskReport", "tasks_of", "tune_model"]
