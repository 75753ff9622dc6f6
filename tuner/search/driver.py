"""The search driver of one tuning task: propose -> (someone measures) -> learn, with the cost model,
warm-started from the database, in one place for the embedded tuner, the task scheduler and the
coordinator.

Who measures is not its concern. The embedded tuner measures a batch with a runner and stores the
records; the coordinator queues the batch for worker daemons, whose results arrive as records later.
Either way the driver learns from the task's records that arrived since it last looked, so the two
paths learn alike. Built again from the database (after a restart), it resumes: the model retrains on
every stored record, and the search never proposes a program the database holds or has queued.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from compiler import ScheduleError, Target, Trace, TraceError
from compiler.workloads import Workload
from runner import Status
from tuner.database import Database, Record
from tuner.search.cost_model import CostModel
from tuner.search.features import extract_features
from tuner.search.space import ScheduleFn
from tuner.search.strategy import EvolutionarySearch, Proposal, RandomSearch, Sampler
from tuner.search.training_data import group_key, groups_from_records

Strategy = Literal["evolutionary", "random"]
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
# The model guides the search once it has seen two batches: short runs (64 trials) benefit too.
MIN_TRAIN_SAMPLES = 32
FEATURE_CACHE_SIZE = 8192
WARM_START_RECORDS = 512
# The best measured traces that seed each generation of the evolutionary search.
PARENTS = 16


@dataclass(frozen=True)
class TaskIds:
    """Where a task's records live: its workload, hardware and task rows, and the kind of timing
    (a runner.TimingKind value) its records have and its search ranks and skips by."""

    workload_id: int
    hardware_id: int
    task_id: int
    timing_kind: str


class SearchDriver:
    """Proposes unmeasured programs of one workload for one machine, and learns from their records.

    `exclude` names program hashes not to propose besides those the database has measured (the
    coordinator passes what is queued but not yet measured). `start_from` is a trace of the space to
    propose first (the default schedule's, whose heuristic choices often beat a first random batch):
    the search then never ends worse than the untuned default, and breeds from it once measured.
    `search_secs` adds up the time spent proposing and learning: the search's own overhead. `model` is
    a cost model shared with other drivers (the tasks of one model learn from each other's records,
    as MetaSchedule's task scheduler does); by default the driver warm-starts its own."""

    def __init__(
        self,
        wl: Workload,
        db: Database,
        ids: TaskIds,
        target: Target,
        *,
        hardware_key: str,
        strategy: str,
        seed: int,
        space: ScheduleFn,
        exclude: Iterable[str] = (),
        start_from: Trace | None = None,
        model: CostModel | None = None,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        self.wl, self.db, self.ids, self.target = wl, db, ids, target
        self.key = wl.func.structural_hash()
        self.hardware_key = hardware_key
        measured = db.measured_program_hashes(ids.workload_id, ids.hardware_id, timing_kind=ids.timing_kind)
        measured |= set(exclude)
        self.sampler = Sampler(wl.func, space)
        self.start_from = start_from
        self.feature_cache: dict[str, np.ndarray] = {}
        self.search_secs = 0.0
        # Proposals handed out and not yet learned from, by program hash: their programs are built.
        self.in_flight: dict[str, Proposal] = {}
        seen = db.task_records(ids.task_id)
        self.last_record_id = seen[-1].id if seen else 0
        # Random search consults no model: it neither trains one nor extracts features.
        self.model: CostModel | None = None
        if strategy == "random":
            self.search: RandomSearch = RandomSearch(self.sampler, measured, seed)
        else:
            model = self.model = model or warm_started_model(
                db, ids.hardware_id, [ids.workload_id], target, seed
            )
            self.search = EvolutionarySearch(
                self.sampler, measured, self._score, seed=seed, trained=lambda: model.is_trained
            )

    def propose(self, n: int) -> list[Proposal]:
        """Up to n programs never proposed before, bred from the best measured ones. Fewer (or none)
        when the space is exhausted."""
        start = time.perf_counter()
        best = self.db.top_k(self.key, self.hardware_key, PARENTS, timing_kind=self.ids.timing_kind)
        parents = [Trace.from_json(r.trace) for r in best]
        first = self._start() if n else []
        self.search.notify(first)
        proposals = first + self.search.propose(n - len(first), best=parents)
        self.search.notify(proposals)
        self.in_flight.update((p.key, p) for p in proposals)
        self.search_secs += time.perf_counter() - start
        return proposals

    def _start(self) -> list[Proposal]:
        """The `start_from` program, once, unless the database has it already."""
        trace, self.start_from = self.start_from, None
        proposal = self.sampler.replay(trace) if trace is not None else None
        return [proposal] if proposal is not None and proposal.key not in self.search.measured else []

    def forget(self, proposals: Iterable[Proposal]) -> None:
        """Proposals that will not be measured for this task (another task queued them first)."""
        for p in proposals:
            self.in_flight.pop(p.key, None)

    def learn(self) -> list[Record]:
        """Learn from the task's records that arrived since the last call; returns them."""
        records = self.db.task_records(self.ids.task_id, after_id=self.last_record_id)
        if not records:
            return records
        self.last_record_id = records[-1].id
        start = time.perf_counter()
        proposals, secs = [], []
        for r in records:
            proposal = self.in_flight.pop(r.program_hash, None) or self._replay(r.trace)
            if proposal is not None:
                proposals.append(proposal)
                secs.append(r.median_secs if r.status == Status.OK.value else None)
        if proposals and self.model is not None:
            self.model.update([(group_key(self.key, self.ids.timing_kind), self._features(proposals), secs)])
        self.search_secs += time.perf_counter() - start
        return records

    def _replay(self, trace: dict) -> Proposal | None:
        """A stored trace's proposal (one this driver did not propose, e.g. before a restart)."""
        try:
            return self.sampler.replay(Trace.from_json(trace))
        except (ScheduleError, TraceError):
            return None

    def _score(self, proposals: list[Proposal]) -> np.ndarray:
        assert self.model is not None  # only the evolutionary search scores
        return self.model.predict(self._features(proposals))

    def _features(self, proposals: Sequence[Proposal]) -> list[np.ndarray]:
        """Features by program: evolution scores the same program in several generations, and
        extraction (lowering included) is most of the search's own time."""
        if len(self.feature_cache) > FEATURE_CACHE_SIZE:
            self.feature_cache.clear()
        for p in proposals:
            if p.key not in self.feature_cache:
                self.feature_cache[p.key] = extract_features(p.func, self.target)
        return [self.feature_cache[p.key] for p in proposals]


def warm_started_model(
    db: Database, hardware_id: int, workload_ids: Sequence[int], target: Target, seed: int
) -> CostModel:
    """A cost model trained on these workloads' earlier records and on other workloads' on the same
    hardware (the warm start)."""
    model = CostModel(seed=seed, min_train_samples=MIN_TRAIN_SAMPLES)
    own = [r for w in workload_ids for r in db.records(workload_id=w, hardware_id=hardware_id)]
    ids = set(workload_ids)
    others = [
        r
        for r in db.records_of_other_workloads(hardware_id, workload_ids[0], WARM_START_RECORDS)
        if r.workload_id not in ids
    ]
    groups = groups_from_records(own + others, target)
    if groups:
        model.update(groups)
    return model
