"""The instruction-kind registry: every registered kind has an example call here, which round-trips
through JSON and printed Python and replays into the identical program; a kind is pure exactly when
its call leaves the program alone; every declared argument is checked when a trace is read."""

import copy
import json
from collections.abc import Callable

import pytest
from helpers import ProgramCase, bias_relu, chain, conv2d, fma_tiles, loops_of, matmul, mm_relu

from compiler import Schedule, Trace, TraceError
from compiler.schedule.instruction import lookup, register, registered
from compiler.schedule.kinds import SPLIT


def c_loops(sch: Schedule) -> list:
    return loops_of(sch, "C")


# One call of each kind, as the last call of a short schedule: (workload, schedule).
EXAMPLES: dict[str, tuple[Callable[[], ProgramCase], Callable[[Schedule], object]]] = {
    "get_block": (matmul, lambda sch: sch.get_block("C")),
    "get_loops": (matmul, lambda sch: sch.get_loops(sch.get_block("C"))),
    "get_innermost_loop": (matmul, lambda sch: sch.get_innermost_loop(sch.get_block("C"))),
    "get_child_blocks": (mm_relu, lambda sch: sch.get_child_blocks(loops_of(sch, "Y")[0])),
    "get_producers": (mm_relu, lambda sch: sch.get_producers(sch.get_block("C"))),
    "get_consumers": (mm_relu, lambda sch: sch.get_consumers(sch.get_block("Y"))),
    "split": (matmul, lambda sch: sch.split(c_loops(sch)[1], sch.sample_perfect_tile(c_loops(sch)[1], n=3))),
    "fuse": (matmul, lambda sch: sch.fuse(*c_loops(sch)[:2])),
    "reorder": (matmul, lambda sch: sch.reorder(*reversed(c_loops(sch)))),
    "parallel": (matmul, lambda sch: sch.parallel(c_loops(sch)[0])),
    "vectorize": (matmul, lambda sch: sch.vectorize(c_loops(sch)[1])),
    "unroll": (matmul, lambda sch: sch.unroll(c_loops(sch)[2])),
    "annotate": (
        matmul,
        lambda sch: sch.annotate(
            c_loops(sch)[0], "pragma_unroll", sch.sample_categorical([0, 16], [0.5, 0.5])
        ),
    ),
    "compute_at": (conv2d, lambda sch: sch.compute_at(sch.get_block("pad"), loops_of(sch, "conv")[2])),
    "reverse_compute_at": (
        mm_relu,
        lambda sch: sch.reverse_compute_at(sch.get_block("C"), loops_of(sch, "Y")[0]),
    ),
    "compute_inline": (chain, lambda sch: sch.compute_inline(sch.get_block("B"))),
    "reverse_compute_inline": (bias_relu, lambda sch: sch.reverse_compute_inline(sch.get_block("R"))),
    "cache_read": (matmul, lambda sch: sch.cache_read(sch.get_block("C"), 1)),
    "cache_write": (matmul, lambda sch: sch.cache_write(sch.get_block("C"), 0, "local")),
    "decompose_reduction": (matmul, lambda sch: sch.decompose_reduction(sch.get_block("C"), c_loops(sch)[2])),
    "rfactor": (matmul, lambda sch: sch.rfactor(c_loops(sch)[2], 1)),
    "transform_layout": (
        matmul,
        lambda sch: sch.transform_layout(
            sch.cache_read(sch.get_block("C"), 1), ("write", 0), lambda k, j: (j // 4, k, j % 4)
        ),
    ),
    "storage_align": (
        matmul,
        lambda sch: sch.storage_align(sch.cache_read(sch.get_block("C"), 0), 0, 0, 16, 4),
    ),
    "tensorize": (lambda: matmul(8, 32, 5), fma_tiles),
    "set_scope": (matmul, lambda sch: sch.set_scope(sch.cache_read(sch.get_block("C"), 0), 0, "local")),
    "sample_perfect_tile": (
        matmul,
        lambda sch: sch.sample_perfect_tile(c_loops(sch)[1], n=2, decision=[1, 127]),
    ),
    "sample_covering_tile": (
        matmul,
        lambda sch: sch.sample_covering_tile(c_loops(sch)[0], n=2, max_innermost_factor=8, multiple=8),
    ),
    "sample_categorical": (matmul, lambda sch: sch.sample_categorical([1, 2, 4], [0.2, 0.3, 0.5])),
    "sample_compute_location": (conv2d, lambda sch: sch.sample_compute_location(sch.get_block("pad"))),
}


def example(name: str) -> tuple[ProgramCase, Schedule]:
    make, call = EXAMPLES[name]
    wl = make()
    sch = wl.schedule()
    call(sch)
    assert sch.trace.instructions[-1].kind == name
    return wl, sch


def test_every_registered_kind_has_an_example():
    assert set(EXAMPLES) == {kind.name for kind in registered()}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_kind_round_trips_through_json_and_replays_into_the_identical_program(name):
    wl, sch = example(name)
    text = json.dumps(sch.trace.to_json())
    restored = Trace.from_json(text)
    assert restored == sch.trace
    replayed = restored.apply(wl.func)
    assert replayed.func == sch.func
    assert replayed.func.structural_hash() == sch.func.structural_hash()
    assert json.dumps(replayed.trace.to_json()) == text


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_kind_prints_as_python_that_records_the_same_trace(name):
    wl, sch = example(name)
    namespace = {"sch": wl.schedule()}
    exec(str(sch.trace), namespace)
    assert namespace["sch"].func == sch.func
    assert namespace["sch"].trace == sch.trace


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_kind_is_pure_exactly_when_its_call_leaves_the_program_alone(name):
    wl, sch = example(name)
    before = Trace(sch.trace.instructions[:-1]).apply(wl.func).func
    assert (before == sch.func) == lookup(name).pure


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_argument_of_every_kind_is_checked_when_a_trace_is_read(name):
    _, sch = example(name)
    data = sch.trace.to_json()
    last = len(data["instructions"]) - 1
    where = rf"trace JSON: instruction {last} \({name}\): "
    for arg in data["instructions"][last]["args"]:
        missing = copy.deepcopy(data)
        del missing["instructions"][last]["args"][arg]
        with pytest.raises(TraceError, match=where + f"missing arg '{arg}'"):
            Trace.from_json(missing)
        mistyped = copy.deepcopy(data)
        mistyped["instructions"][last]["args"][arg] = {"value": 1}
        with pytest.raises(TraceError, match=where + f"arg '{arg}' must be"):
            Trace.from_json(mistyped)


def test_a_kind_is_registered_once():
    with pytest.raises(ValueError, match="split"):
        register(SPLIT)
