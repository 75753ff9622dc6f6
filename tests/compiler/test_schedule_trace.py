"""Traces: printed as runnable Python, serialized to JSON and back, replayed into the identical program
(== and structural hash), replayed with new decisions; malformed traces raise TraceError, and stale
handles raise ScheduleError naming the loop or block."""

import copy
import json
from pathlib import Path

import pytest
from helpers import (
    assert_computes,
    chain,
    conv2d,
    loops_of,
    matmul,
    mm_relu,
    schedule_error,
    softmax,
)

from compiler import Schedule, Trace, TraceError
from compiler.schedule import Instruction
from compiler.workloads import workload_from_spec


def mlc(sch: Schedule) -> Schedule:
    """The MLC course's mm_relu schedule with one sampled tile and one sampled unroll."""
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=8, decision=[6, 8]))
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(y, k)
    sch.vectorize(j1)
    sch.annotate(i, "pragma_unroll", sch.sample_categorical([0, 16], [0.5, 0.5], decision=1))
    return sch


MLC_PYTHON = """\
b0 = sch.get_block(name='Y')
l1, l2, l3 = sch.get_loops(block=b0)
v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=8, decision=[6, 8])
l6, l7 = sch.split(loop=l2, factors=[v4, v5])
sch.reorder(l6, l3, l7)
b8 = sch.get_block(name='C')
sch.reverse_compute_at(block=b8, loop=l6)
b9 = sch.decompose_reduction(block=b0, loop=l3)
sch.vectorize(loop=l7)
v10 = sch.sample_categorical(candidates=[0, 16], probs=[0.5, 0.5], decision=1)
sch.annotate(target=l1, key='pragma_unroll', value=v10)"""


def conv_schedule(sch: Schedule) -> Schedule:
    conv = sch.get_block("conv")
    _, f, y, x, rc, ry, rx = sch.get_loops(conv)
    y0, y1 = sch.split(y, [None, 4])
    x0, x1 = sch.split(x, sch.sample_perfect_tile(x, n=2))
    sch.reorder(y0, x0, f, rc, ry, rx, y1, x1)
    pad = sch.get_block("pad")
    sch.compute_at(pad, sch.sample_compute_location(pad, decision=2))
    sch.decompose_reduction(conv, rc)
    return sch


def cache_schedule(sch: Schedule) -> Schedule:
    c = sch.get_block("C")
    a = sch.cache_read(c, 0)
    write_back = sch.cache_write(c, 0)
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2))
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    sch.compute_at(a, k)
    sch.reverse_compute_at(write_back, j0)
    sch.parallel(i0)
    return sch


def softmax_schedule(sch: Schedule) -> Schedule:
    (i, _) = loops_of(sch, "Y")
    for name in ("S", "E", "M"):
        sch.compute_at(sch.get_block(name), i)
    sch.unroll(loops_of(sch, "M")[-1])
    return sch


def chain_schedule(sch: Schedule) -> Schedule:
    (i,) = loops_of(sch, "C")
    outer, inner = sch.split(i, [None, 16])
    sch.compute_inline(sch.get_block("B"))
    sch.vectorize(inner)
    sch.annotate(sch.get_block("root"), "note", "chain")
    sch.annotate(sch.get_block("C"), "level", 2)
    sch.annotate(outer, "ratio", 0.5)
    return sch


CASES = {
    "mlc": (lambda: mm_relu(64, 48, 40), mlc),
    "conv": (conv2d, conv_schedule),
    "cache": (matmul, cache_schedule),
    "softmax": (softmax, softmax_schedule),
    "chain": (lambda: chain((1000,), stages=2), chain_schedule),
}


def through_json(trace: Trace) -> Trace:
    return Trace.from_json(json.loads(json.dumps(trace.to_json())))


def test_trace_prints_one_python_line_per_call():
    sch = mlc(mm_relu(64, 48, 40).schedule())
    assert str(sch.trace) == MLC_PYTHON


def test_single_output_list_calls_print_as_tuple_unpacking():
    sch = chain((1000,)).schedule()
    (i,) = loops_of(sch, "B")
    sch.sample_perfect_tile(i, n=1)
    assert str(sch.trace).splitlines()[1:] == [
        "(l1,) = sch.get_loops(block=b0)",
        "(v2,) = sch.sample_perfect_tile(loop=l1, n=1, max_innermost_factor=16, decision=[1000])",
    ]


@pytest.mark.parametrize("case", CASES)
def test_printed_trace_runs_as_python_into_the_same_program(case):
    make, schedule = CASES[case]
    wl = make()
    sch = schedule(wl.schedule())
    namespace = {"sch": wl.schedule()}
    exec(str(sch.trace), namespace)
    assert namespace["sch"].func == sch.func


@pytest.mark.parametrize("case", CASES)
def test_json_round_trip_and_replay_give_the_identical_program(case):
    make, schedule = CASES[case]
    wl = make()
    sch = schedule(wl.schedule())
    text = json.dumps(sch.trace.to_json())
    restored = Trace.from_json(json.loads(text))
    assert restored == sch.trace
    assert Trace.from_json(text) == sch.trace
    replayed = restored.apply(wl.func)
    assert replayed.func == sch.func
    assert replayed.func.structural_hash() == sch.func.structural_hash()
    assert replayed.trace == sch.trace
    assert json.dumps(replayed.trace.to_json()) == text
    assert_computes(wl, replayed)


# Written before instruction kinds had a registry (commit 86a724b): the default space's first sample of
# five workloads, and a hand-written schedule; between them every kind of that time. Databases hold
# such traces, so they must keep replaying, and record the same JSON again.
V1_TRACES = json.loads((Path(__file__).parent / "data" / "traces_v1.json").read_text())


@pytest.mark.parametrize("record", V1_TRACES, ids=[f"{r['spec']['op']}-{i}" for i, r in enumerate(V1_TRACES)])
def test_stored_version_1_traces_replay_and_record_the_same_json(record):
    func = workload_from_spec(record["spec"]).func
    trace = Trace.from_json(json.dumps(record["trace"]))
    sch = trace.apply(func)
    assert json.dumps(sch.trace.to_json()) == json.dumps(record["trace"])
    assert trace.simplified().apply(func).func == sch.func


def test_replay_with_new_decisions_changes_only_what_they_decide():
    wl = mm_relu(64, 48, 40)
    trace = mlc(wl.schedule()).trace
    assert set(trace.decisions) == {2, 9}
    sch = trace.apply(wl.func, decisions={2: [12, 4], 9: 0})
    assert sch.trace.decisions == {2: [12, 4], 9: 0}
    assert sch.func != trace.apply(wl.func).func
    assert [inst.kind for inst in sch.trace.instructions] == [inst.kind for inst in trace.instructions]
    assert_computes(wl, sch)


def test_replay_with_a_decision_of_none_samples_from_the_seed():
    wl = mm_relu(64, 48, 40)
    trace = mlc(wl.schedule()).trace
    draws = {tuple(trace.apply(wl.func, {2: None}, seed=s).trace.decisions[2]) for s in range(12)}
    assert len(draws) > 1
    first = trace.apply(wl.func, {2: None}, seed=5)
    assert first.func == trace.apply(wl.func, {2: None}, seed=5).func


def test_with_decision_makes_a_new_trace():
    wl = mm_relu(64, 48, 40)
    trace = mlc(wl.schedule()).trace
    mutated = trace.with_decision(2, [3, 16])
    assert trace.decisions[2] == [6, 8]
    assert mutated.decisions[2] == [3, 16]


@pytest.mark.parametrize("index", [0, 3, 99])
def test_decisions_for_instructions_that_sample_nothing_are_refused(index):
    wl = mm_relu(64, 48, 40)
    trace = mlc(wl.schedule()).trace
    with pytest.raises(TraceError, match="sample nothing"):
        trace.apply(wl.func, decisions={index: [1, 48]})
    if index < len(trace.instructions):
        with pytest.raises(TraceError, match="no decision"):
            trace.with_decision(index, [1, 48])


def malformed(edit):
    data = copy.deepcopy(mlc(mm_relu(64, 48, 40).schedule()).trace.to_json())
    edit(data)
    return data


MALFORMED = {
    "wrong_version": (lambda d: d.update(version=2), "version 1"),
    "no_version": (lambda d: d.pop("version"), "version 1"),
    "no_instructions": (lambda d: d.pop("instructions"), "'instructions' must be a list"),
    "instructions_not_a_list": (lambda d: d.update(instructions={"0": 1}), "'instructions' must be a list"),
    "instruction_not_an_object": (lambda d: d["instructions"].insert(0, ["get_block"]), "instruction 0 must"),
    "missing_key": (lambda d: d["instructions"][0].pop("decision"), "instruction 0 must"),
    "extra_key": (lambda d: d["instructions"][0].update(note="x"), "instruction 0 must"),
    "unknown_kind": (
        lambda d: d["instructions"][0].update(kind="tile"),
        "instruction 0: unknown kind 'tile'",
    ),
    "private_method_as_kind": (
        lambda d: d["instructions"][0].update(kind="_record"),
        "unknown kind '_record'",
    ),
    "kind_not_a_string": (lambda d: d["instructions"][0].update(kind=["split"]), "unknown kind"),
    "args_not_an_object": (lambda d: d["instructions"][0].update(args=["Y"]), "instruction 0: args must"),
    "outputs_not_names": (lambda d: d["instructions"][0].update(outputs=[1]), "instruction 0: outputs must"),
    "decision_on_non_sampling": (
        lambda d: d["instructions"][3].update(decision=[6, 8]),
        r"instruction 3 \(split\): split samples nothing, yet has decision \[6, 8\]",
    ),
    "unknown_arg": (
        lambda d: d["instructions"][0]["args"].update(block_name="Y"),
        r"instruction 0 \(get_block\): unknown arg 'block_name'",
    ),
    "renamed_arg": (
        lambda d: d["instructions"][1].update(args={"blk": {"rv": "b0"}}),
        r"instruction 1 \(get_loops\): unknown arg 'blk'",
    ),
    "missing_arg": (
        lambda d: d["instructions"][3]["args"].pop("factors"),
        r"instruction 3 \(split\): missing arg 'factors'",
    ),
    "name_not_a_string": (
        lambda d: d["instructions"][0]["args"].update(name=7),
        r"instruction 0 \(get_block\): arg 'name' must be a string, got 7",
    ),
    "handle_not_a_reference": (
        lambda d: d["instructions"][1]["args"].update(block="b0"),
        r"instruction 1 \(get_loops\): arg 'block' must be a block, got 'b0'",
    ),
    "factor_not_an_int": (
        lambda d: d["instructions"][3]["args"].update(factors=[6, "8"]),
        r"instruction 3 \(split\): arg 'factors' must be a list of ints and nulls",
    ),
    "bool_as_int": (
        lambda d: d["instructions"][2]["args"].update(n=True),
        r"instruction 2 \(sample_perfect_tile\): arg 'n' must be an int, got True",
    ),
    "loops_not_a_list": (
        lambda d: d["instructions"][4]["args"].update(loops={"rv": "l6"}),
        r"instruction 4 \(reorder\): arg 'loops' must be a list of loops",
    ),
    "tile_decision_of_wrong_length": (
        lambda d: d["instructions"][2].update(decision=[2, 3, 8]),
        r"instruction 2 \(sample_perfect_tile\): decision \[2, 3, 8\] is not a list of n positive ints",
    ),
    "categorical_decision_not_an_index": (
        lambda d: d["instructions"][9].update(decision="1"),
        r"instruction 9 \(sample_categorical\): decision '1' is not an index",
    ),
    "output_of_a_kind_that_returns_nothing": (
        lambda d: d["instructions"][4].update(outputs=["l11"]),
        r"instruction 4 \(reorder\): 1 outputs \['l11'\], where reorder returns nothing",
    ),
    "two_outputs_of_a_kind_that_returns_one": (
        lambda d: d["instructions"][0].update(outputs=["b0", "b1"]),
        r"instruction 0 \(get_block\): 2 outputs .* returns one BlockRV",
    ),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_trace_json_is_refused_naming_the_instruction_and_problem(case):
    edit, message = MALFORMED[case]
    with pytest.raises(TraceError, match=message):
        Trace.from_json(malformed(edit))


@pytest.mark.parametrize("kind", ["copy", "_record", "compute_location_candidates"])
def test_trace_built_in_code_may_only_call_primitives(kind):
    trace = Trace((Instruction(kind, {}, ()),))
    with pytest.raises(TraceError, match="unknown kind"):
        trace.apply(matmul().func)


def test_trace_built_in_code_is_checked_like_json_before_replay():
    trace = Trace((Instruction("get_block", {"name": "C", "scope": "x"}, ("b0",)),))
    with pytest.raises(TraceError, match=r"instruction 0 \(get_block\): unknown arg 'scope'"):
        trace.apply(matmul().func)
    with pytest.raises(TraceError, match=r"instruction 0 \(get_block\): unknown arg 'scope'"):
        str(trace)


@pytest.mark.parametrize("text", ["", "{", "[]", "null", '"trace"', '{"version": 1}'])
def test_trace_text_that_is_not_a_trace_is_refused(text):
    with pytest.raises(TraceError):
        Trace.from_json(text)


REPLAY_ERRORS = {
    "undefined_rv": (lambda d: d["instructions"][1]["args"].update(block={"rv": "b42"}), "b42"),
    "rv_used_before_definition": (lambda d: d["instructions"].pop(0), "b0"),
    "loop_where_a_block_goes": (
        lambda d: d["instructions"][6]["args"].update(block={"rv": "l1"}),
        r"instruction 6 \(reverse_compute_at\): arg 'block': l1 is a LoopRV, expected a block",
    ),
    "block_where_an_int_goes": (
        lambda d: d["instructions"][3]["args"].update(factors=[{"rv": "b0"}, 8]),
        r"instruction 3 \(split\): arg 'factors': b0 is a BlockRV, expected a list of ints",
    ),
    "wrong_output_count": (lambda d: d["instructions"][1].update(outputs=["l1", "l2"]), "get_loops"),
}


@pytest.mark.parametrize("case", REPLAY_ERRORS)
def test_trace_that_does_not_fit_its_calls_fails_replay_with_trace_error(case):
    edit, named = REPLAY_ERRORS[case]
    trace = Trace.from_json(malformed(edit))
    with pytest.raises(TraceError, match=named):
        trace.apply(mm_relu(64, 48, 40).func)


def test_trace_replayed_on_a_function_without_its_block_fails_naming_the_block():
    trace = mlc(mm_relu(64, 48, 40).schedule()).trace
    with schedule_error("Y", match="no block"):
        trace.apply(matmul().func)


def test_loop_handle_used_after_its_loop_was_split():
    sch = matmul().schedule()
    _, j, _ = loops_of(sch, "C")
    sch.split(j, [None, 4])
    for use in (lambda: sch.split(j, [2, None]), lambda: sch.reorder(j), lambda: sch.vectorize(j)):
        with schedule_error("j", match="does not exist"):
            use()


def test_loop_handle_used_after_its_loop_was_fused():
    sch = matmul().schedule()
    i, j, _ = loops_of(sch, "C")
    sch.fuse(i, j)
    with schedule_error("i", match="does not exist"):
        sch.parallel(i)


def test_stale_loop_handle_in_a_trace_fails_replay_naming_the_loop():
    sch = matmul().schedule()
    _, j, _ = loops_of(sch, "C")
    sch.split(j, [None, 4])
    data = sch.trace.to_json()
    data["instructions"].append(copy.deepcopy(data["instructions"][-1]))  # split the split loop again
    data["instructions"][-1]["outputs"] = ["l9", "l10"]
    with schedule_error("j", match="does not exist"):
        Trace.from_json(data).apply(matmul().func)


def test_block_handle_used_after_its_block_was_inlined():
    sch = chain((1000,)).schedule()
    b = sch.get_block("B")
    sch.compute_inline(b)
    with schedule_error("B", match="no block"):
        sch.get_loops(b)


def test_random_variables_are_named_in_definition_order():
    sch = mlc(mm_relu(64, 48, 40).schedule())
    defined = [name for inst in sch.trace.instructions for name in inst.outputs]
    assert [int(name[1:]) for name in defined] == list(range(len(defined)))
    assert [name[0] for name in defined] == list("blllvvllbbv")
