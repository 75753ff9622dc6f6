"""Search strategies: which traces to measure next.

Both strategies draw programs from a space (a ScheduleFn run on a fresh, seeded Schedule) and never
propose a program that was measured before, in this run or any earlier one (the caller passes every
program hash the database holds for this workload, hardware and timing kind).

`EvolutionarySearch` follows MetaSchedule's phases: the best measured traces and fresh samples form
a population; a few generations of mutation select children by the cost model's predicted score;
most of the batch is the best predicted unmeasured programs, a few (epsilon-greedy) are fresh random
samples so the model keeps learning about regions it rates poorly.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from compiler import PrimFunc, Schedule, ScheduleError, Trace, TraceError
from tuner.search.mutators import Decisions, mutate
from tuner.search.space import ScheduleFn


@dataclass(frozen=True)
class Proposal:
    """A program the search may measure: its trace (simplified JSON), the program itself, and the
    program's structural hash, its identity: two traces that make the same program are one proposal."""

    trace: dict
    func: PrimFunc
    key: str


class Sampler:
    """Makes proposals from a space: fresh samples, and replays of traces with changed decisions.

    A draw that a primitive refuses (ScheduleError), or a trace that does not fit the workload
    (TraceError), is dropped: it returns None. Anything else is a bug, in a primitive or in a user's
    space, and propagates: swallowed, it would look like a space with nothing left to propose."""

    def __init__(self, func: PrimFunc, space: ScheduleFn) -> None:
        self.func = func
        self.space = space

    def sample(self, seed: int) -> Proposal | None:
        sch = Schedule(self.func, seed=seed)
        try:
            self.space(sch)
        except ScheduleError:
            return None
        return _proposal(sch)

    def replay(self, trace: Trace, decisions: Decisions | None = None) -> Proposal | None:
        try:
            sch = trace.apply(self.func, decisions=decisions)
        except (ScheduleError, TraceError):
            return None
        return _proposal(sch)


def _proposal(sch: Schedule) -> Proposal:
    """Stored traces are simplified: lookups nothing uses are dropped."""
    return Proposal(sch.trace.simplified().to_json(), sch.func, sch.func.structural_hash())


class RandomSearch:
    """Fresh samples from the space (the MLC course's random_search), unmeasured ones only."""

    def __init__(self, sampler: Sampler, measured: set[str], seed: int = 0, max_failures: int = 256) -> None:
        self.sampler = sampler
        self.measured = measured
        self.rng = random.Random(seed)
        self.max_failures = max_failures

    def propose(self, n: int, best: Iterable[Trace] = ()) -> list[Proposal]:
        return self.fresh(n, exclude=set())

    def fresh(self, n: int, exclude: set[str]) -> list[Proposal]:
        """Up to n new unmeasured samples; fewer when the space seems exhausted."""
        out: dict[str, Proposal] = {}
        failures = 0
        while len(out) < n and failures < self.max_failures:
            p = self.sampler.sample(self.rng.getrandbits(31))
            if p is None or p.key in self.measured or p.key in exclude or p.key in out:
                failures += 1
                continue
            out[p.key] = p
        return list(out.values())

    def notify(self, proposals: list[Proposal]) -> None:
        """Proposals that were measured (whatever their result) are never proposed again."""
        self.measured.update(p.key for p in proposals)


@dataclass(frozen=True)
class EvolutionConfig:
    population: int = 64
    generations: int = 3
    mutate_prob: float = 0.85
    eps_greedy: float = 0.05
    init_measured_ratio: float = 0.2


class EvolutionarySearch(RandomSearch):
    """Population → generations of mutation scored by the cost model → epsilon-greedy pick."""

    def __init__(
        self,
        sampler: Sampler,
        measured: set[str],
        score: Callable[[list[Proposal]], np.ndarray],
        config: EvolutionConfig | None = None,
        seed: int = 0,
        trained: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__(sampler, measured, seed)
        self.score = score
        self.config = config or EvolutionConfig()
        self.trained = trained

    def propose(self, n: int, best: Iterable[Trace] = ()) -> list[Proposal]:
        if not self.trained():
            return self.fresh(n, exclude=set())  # the model knows nothing yet: sample uniformly
        cfg = self.config
        parents = [
            p
            for t in list(best)[: int(cfg.population * cfg.init_measured_ratio)]
            if (p := self.sampler.replay(t))
        ]
        fresh = self.fresh(cfg.population - len(parents), exclude=set())
        population = parents + fresh
        if not population:
            return []
        candidates = self._evolve(population)
        n_random = min(len(fresh), int(n * cfg.eps_greedy))
        picked: dict[str, Proposal] = {p.key: p for p in self.rng.sample(fresh, n_random)}
        for p in candidates:
            if len(picked) >= n:
                break
            picked.setdefault(p.key, p)
        if len(picked) < n:
            for p in self.fresh(n - len(picked), exclude=set(picked)):
                picked[p.key] = p
        return list(picked.values())[:n]

    def _evolve(self, population: list[Proposal]) -> list[Proposal]:
        """Every unmeasured program seen over the generations, best predicted first."""
        best: dict[str, tuple[float, Proposal]] = {}
        for generation in range(self.config.generations):
            scores = np.maximum(np.asarray(self.score(population), dtype=float), 0.0)
            for p, s in zip(population, scores):
                if p.key not in self.measured:
                    best[p.key] = (float(s), p)
            if generation + 1 < self.config.generations:
                population = self._next_generation(population, scores)
        ranked = heapq.nlargest(len(best), best.values(), key=lambda sp: sp[0])
        return [p for _, p in ranked]

    def _next_generation(self, population: list[Proposal], scores: np.ndarray) -> list[Proposal]:
        weights = scores + 1e-9 if scores.sum() > 0 else np.ones(len(scores))
        children: list[Proposal] = []
        for parent in self.rng.choices(population, weights=list(weights), k=len(population)):
            child = None
            if self.rng.random() < self.config.mutate_prob:
                trace = Trace.from_json(parent.trace)
                for _ in range(4):
                    decisions = mutate(trace, self.rng)
                    child = self.sampler.replay(trace, decisions) if decisions else None
                    if child is not None:
                        break
            children.append(child or parent)
        return children
