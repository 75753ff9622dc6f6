"""Mutators change exactly one decision, keep tile products and innermost limits, and their traces
replay (with repair where needed)."""

import math
import random

from compiler import Schedule
from compiler.schedule_rules import RuleConfig
from compiler.workloads import workload_from_spec
from tests.machines import AVX512
from tuner.search.mutators import mutate, mutate_categorical, mutate_compute_location, mutate_tile_size
from tuner.search.space import rule_space

CONV = {"op": "conv2d_nchw", "params": {"N": 1, "C": 4, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3, "padding": 1}}


def traced(spec: dict, seed: int = 0):
    workload = workload_from_spec(spec)
    sch = Schedule(workload.func, seed=seed)
    rule_space(RuleConfig.for_target(AVX512))(sch)
    return workload, sch.trace


def test_tile_mutation_keeps_the_product_and_the_innermost_limit():
    workload, trace = traced({"op": "matmul", "params": {"M": 96, "N": 128, "K": 64}})
    rng = random.Random(0)
    for _ in range(200):
        decisions = mutate_tile_size(trace, rng)
        assert decisions is not None and len(decisions) == 1
        ((index, factors),) = decisions.items()
        old = trace.decisions[index]
        assert math.prod(factors) == math.prod(old) and factors != old
        assert factors[-1] <= trace.instructions[index].args["max_innermost_factor"]
        trace.apply(workload.func, decisions=decisions)


def test_categorical_mutation_draws_another_candidate():
    _, trace = traced({"op": "matmul", "params": {"M": 16, "N": 16, "K": 16}})
    rng = random.Random(1)
    for _ in range(20):
        ((index, choice),) = mutate_categorical(trace, rng).items()
        assert choice != trace.decisions[index]


def test_compute_location_mutation_replays_with_repair():
    workload, trace = traced(CONV)
    rng = random.Random(2)
    for _ in range(20):
        decisions = mutate_compute_location(trace, rng)
        assert decisions is not None
        trace.apply(workload.func, decisions=decisions)


def test_mutate_finds_an_applicable_mutator():
    _, trace = traced({"op": "softmax", "params": {"M": 4, "N": 1}})  # extent-1 tiles: nothing to move
    rng = random.Random(3)
    for _ in range(10):
        decisions = mutate(trace, rng)
        assert decisions is not None
        assert all(trace.instructions[i].kind != "sample_perfect_tile" for i in decisions)
