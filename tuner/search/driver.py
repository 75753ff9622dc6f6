"""The search side of one tuning task: a strategy and its cost model, warm-started from the database.

It proposes traces to measure and learns from measured ones; who measures them is not its concern.
The embedded `tune` measures them with a runner in the same process; the coordinator queues them for
worker daemons and feeds their results back as they arrive. Either way, built again from the database
(after a restart), it resumes: the model retrains on every stored record, and the search never
proposes a trace the database holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import numpy as np

from compiler import Trace
from compiler.workloads import Workload
from tuner.database import Database
from tuner.search.cost_model import CostModel
from tuner.search.features import extract_features
from tuner.search.space import ScheduleFn
from tuner.search.strategy import EvolutionarySearch, Proposal, RandomSearch, Sampler
from tuner.search.training_data import groups_from_records

STRATEGIES = ("evolutionary", "random")
# The model guides the search once it has seen two batches: short runs (64 trials) benefit too.
MIN_TRAIN_SAMPLES = 32
FEATURE_CACHE_SIZE = 8192
WARM_START_RECORDS = 512


class TaskSearch:
    """Proposes unmeasured traces of one workload on one hardware, and learns from their timings.

    `exclude` names trace hashes not to propose besides those the database has measured (the
    coordinator passes what is queued but not yet measured). `vector_bits` and `cores` describe the
    machine the programs run on, for the cost model's features (default: this one; the coordinator's
    tasks run on workers). `search_secs` adds up the time spent proposing and learning: the search's
    own overhead."""

    def __init__(
        self,
        wl: Workload,
        db: Database,
        *,
        workload_id: int,
        hardware_id: int,
        strategy: str,
        seed: int,
        space: ScheduleFn,
        exclude: Iterable[str] = (),
        vector_bits: int | None = None,
        cores: int | None = None,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        self.key = wl.func.structural_hash()
        measured = db.measured_trace_hashes(workload_id, hardware_id) | set(exclude)
        self.sampler = Sampler(wl.func, space)
        self.vector_bits, self.cores = vector_bits, cores
        # Random search consults no model: it neither trains one nor extracts features.
        self.model: CostModel | None = None
        if strategy == "random":
            self.search: RandomSearch = RandomSearch(self.sampler, measured, seed)
        else:
            model = self.model = CostModel(seed=seed, min_train_samples=MIN_TRAIN_SAMPLES)
            self._train_on_database(db, workload_id, hardware_id)
            self.search = EvolutionarySearch(
                self.sampler, measured, self._score, seed=seed, trained=lambda: model.is_trained
            )
        self.feature_cache: dict[str, np.ndarray] = {}
        self.search_secs = 0.0

    def propose(self, n: int, best: Sequence[dict] = ()) -> list[Proposal]:
        """Up to n traces never proposed before; `best` are the best measured traces (JSON), the
        parents of the evolutionary search. Fewer (or none) when the space is exhausted."""
        start = time.perf_counter()
        proposals = self.search.propose(n, best=[Trace.from_json(t) for t in best])
        self.search.notify(proposals)
        self.search_secs += time.perf_counter() - start
        return proposals

    def learn(self, proposals: Sequence[Proposal], secs: Sequence[float | None]) -> None:
        """Measured results: median seconds, or None for a failure."""
        if self.model is None:
            return
        start = time.perf_counter()
        self.model.update([(self.key, self._features(proposals), list(secs))])
        self.search_secs += time.perf_counter() - start

    def replay(self, trace: dict) -> Proposal | None:
        """The proposal of a stored trace (one this object did not propose, e.g. before a restart)."""
        return self.sampler.replay(Trace.from_json(trace))

    def _score(self, proposals: list[Proposal]) -> np.ndarray:
        assert self.model is not None  # only the evolutionary search scores
        return self.model.predict(self._features(proposals))

    def _features(self, proposals: Sequence[Proposal]) -> list[np.ndarray]:
        """Features by trace: evolution scores the same program in several generations, and
        extraction (lowering included) is most of the search's own time."""
        if len(self.feature_cache) > FEATURE_CACHE_SIZE:
            self.feature_cache.clear()
        for p in proposals:
            if p.key not in self.feature_cache:
                self.feature_cache[p.key] = extract_features(p.func, self.vector_bits, num_cores=self.cores)
        return [self.feature_cache[p.key] for p in proposals]

    def _train_on_database(self, db: Database, workload_id: int, hardware_id: int) -> None:
        """Warm start: this workload's earlier records, and other workloads' on the same hardware."""
        own = db.records(workload_id=workload_id, hardware_id=hardware_id)
        others = db.records_of_other_workloads(hardware_id, workload_id, WARM_START_RECORDS)
        groups = groups_from_records(own + others, self.vector_bits, self.cores)
        if groups and self.model is not None:
            self.model.update(groups)
