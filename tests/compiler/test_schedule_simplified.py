"""Trace.simplified: pure instructions (queries, sampling) whose outputs nothing uses are dropped, whole
chains of them at once; what is left replays into the identical program with the same decisions, and
is the trace its own replay records."""

import json

import pytest
from helpers import matmul

from compiler import Schedule, Trace
from compiler.schedule.instruction import Instruction, is_ref, lookup
from compiler.schedule_rules import DEFAULT_RULES, BlockRule, RuleConfig
from compiler.workloads import workload_from_spec
from tests.machines import AVX512
from tuner.search.space import rule_space

SPECS = {
    "matmul": {"op": "matmul", "params": {"M": 97, "N": 60, "K": 31}},
    "conv2d": {
        "op": "conv2d_nchw",
        "params": {"N": 1, "C": 3, "H": 9, "W": 10, "K": 8, "R": 3, "S": 3, "padding": 1},
    },
}


def without_names(inst: Instruction) -> tuple:
    """An instruction with its random variables' names blanked: what simplifying must not change."""

    def blank(value):
        if is_ref(value):
            return "rv"
        return [blank(v) for v in value] if isinstance(value, list) else value

    return inst.kind, json.dumps({k: blank(v) for k, v in inst.args.items()}), json.dumps(inst.decision)


def is_subsequence(short: list, long: list) -> bool:
    rest = iter(long)
    return all(item in rest for item in short)


def root_queries(trace: Trace) -> list[str]:
    return [
        inst.kind
        for inst in trace.instructions
        if inst.kind == "get_child_blocks" or (inst.kind == "get_block" and inst.args["name"] == "root")
    ]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_default_space_loses_its_unused_root_queries_and_replays_identically(name, seed):
    workload = workload_from_spec(SPECS[name])
    sch = Schedule(workload.func, seed=seed)
    rule_space(RuleConfig.for_target(AVX512))(sch)
    trace = sch.trace
    simple = trace.simplified()

    walks = sum(isinstance(rule, BlockRule) for rule in DEFAULT_RULES)
    assert root_queries(trace).count("get_child_blocks") == walks  # one pair per walk over the blocks
    assert root_queries(simple) == ["get_block"]  # the root the unroll budget annotates
    assert len(simple.instructions) <= len(trace.instructions) - 2 * walks
    assert is_subsequence(
        [without_names(i) for i in simple.instructions], [without_names(i) for i in trace.instructions]
    )

    replayed = Trace.from_json(json.loads(json.dumps(simple.to_json()))).apply(workload.func)
    assert replayed.func == sch.func
    assert replayed.func.structural_hash() == sch.func.structural_hash()
    assert replayed.trace == simple
    assert simple.simplified() == simple


def test_every_pure_instruction_left_has_a_used_output():
    workload = workload_from_spec(SPECS["conv2d"])
    for seed in range(8):
        sch = Schedule(workload.func, seed=seed)
        rule_space(RuleConfig.for_target(AVX512))(sch)
        simple = sch.trace.simplified()
        used = set().union(*(inst.uses() for inst in simple.instructions))
        for inst in simple.instructions:
            assert not lookup(inst.kind).pure or used & set(inst.outputs), inst


def test_a_used_sampling_output_is_kept_with_its_decision_and_an_unused_one_is_dropped():
    wl = matmul()
    sch = wl.schedule()
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.sample_perfect_tile(j, n=2, decision=[127, 1])  # nothing uses it
    sch.split(i, sch.sample_perfect_tile(i, n=2, decision=[97, 1]))
    sch.get_child_blocks(sch.get_loops(c)[0])  # a chain that nothing uses
    sch.decompose_reduction(c, k)  # not pure: kept, though nothing uses its output
    simple = sch.trace.simplified()
    assert str(simple) == "\n".join(
        [
            "b0 = sch.get_block(name='C')",
            "l1, l2, l3 = sch.get_loops(block=b0)",
            "v4, v5 = sch.sample_perfect_tile(loop=l1, n=2, max_innermost_factor=16, decision=[97, 1])",
            "l6, l7 = sch.split(loop=l1, factors=[v4, v5])",
            "b8 = sch.decompose_reduction(block=b0, loop=l3)",
        ]
    )
    replayed = simple.apply(wl.func)
    assert replayed.func == sch.func
    assert replayed.trace == simple


def test_a_trace_with_nothing_to_drop_is_unchanged():
    sch = matmul().schedule()
    c = sch.get_block("C")
    i, _, _ = sch.get_loops(c)
    sch.parallel(i)
    assert sch.trace.simplified() == sch.trace
