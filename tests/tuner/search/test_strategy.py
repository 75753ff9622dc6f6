"""Search strategies: never propose a measured program, exhaust small spaces gracefully, and let the
cost model's score decide what evolution proposes."""

import numpy as np

from compiler import Schedule, Trace
from compiler.schedule_rules import RuleConfig
from compiler.workloads import workload_from_spec
from tests.machines import AVX512
from tuner.search.space import rule_space
from tuner.search.strategy import EvolutionarySearch, RandomSearch, Sampler

MATMUL = {"op": "matmul", "params": {"M": 64, "N": 64, "K": 32}}


def sampler(spec=MATMUL, space=None) -> Sampler:
    return Sampler(workload_from_spec(spec).func, space or rule_space(RuleConfig.for_target(AVX512)))


def test_random_search_skips_measured_programs():
    first = RandomSearch(sampler(), set(), seed=0).propose(8)
    assert len({p.key for p in first}) == 8
    measured = {p.key for p in first[:4]}
    again = RandomSearch(sampler(), set(measured), seed=0).propose(8)
    assert not measured & {p.key for p in again}


def test_a_small_space_is_exhausted_without_repeats():
    def two_choices(sch: Schedule) -> None:
        (i, _) = sch.get_loops(sch.get_block("C"))[:2]
        sch.split(i, [sch.sample_categorical([2, 4], [0.5, 0.5]), None])

    search = RandomSearch(sampler(space=two_choices), set(), seed=0, max_failures=50)
    first = search.propose(5)
    assert len(first) == 2
    search.notify(first)
    assert search.propose(5) == []


def test_evolution_proposes_what_the_model_scores_best():
    def score(proposals):  # prefers wide innermost vectors: the model's opinion, not a timing
        return np.array([innermost_j(p.trace) for p in proposals], dtype=float)

    search = EvolutionarySearch(sampler(), set(), score, seed=1)
    picked = search.propose(8)
    assert len(picked) == 8
    random_pick = RandomSearch(sampler(), set(), seed=1).propose(8)
    assert np.mean([innermost_j(p.trace) for p in picked]) > np.mean(
        [innermost_j(p.trace) for p in random_pick]
    )


def test_evolution_before_the_model_is_trained_samples_uniformly():
    calls = []
    search = EvolutionarySearch(
        sampler(), set(), lambda ps: calls.append(ps) or np.zeros(len(ps)), trained=lambda: False
    )
    assert len(search.propose(4)) == 4
    assert calls == []


def test_evolution_uses_measured_traces_as_parents():
    s = sampler()
    best = [Trace.from_json(p.trace) for p in RandomSearch(s, set(), seed=5).propose(4)]
    measured = {Sampler.replay(s, t).key for t in best}
    scored: set[str] = set()

    def score(proposals):
        scored.update(p.key for p in proposals)
        return np.ones(len(proposals))

    search = EvolutionarySearch(s, set(measured), score, seed=2)
    picked = search.propose(8, best=best)
    # The parents are in the population (fresh samples skip measured programs, so only the parents
    # put them there), and what is proposed is new.
    assert measured <= scored
    assert picked and not measured & {p.key for p in picked}


def innermost_j(trace: dict) -> int:
    tiles = [i for i in trace["instructions"] if i["kind"] == "sample_perfect_tile"]
    return tiles[1]["decision"][-1]
