"""compute_inline (padding into conv, elementwise chains, several consumers) and
reverse_compute_inline (relu into bias-add), and the blocks each must refuse."""

import pytest
from helpers import (
    ProgramCase,
    assert_computes,
    bias_relu,
    chain,
    conv2d,
    loops_of,
    mm_relu,
    scan_pipeline,
    schedule_error,
    softmax,
    stencil,
)

from compiler import Schedule, te
from compiler.visit import blocks


def block_names(sch) -> list[str]:
    return [b.name for b in blocks(sch.func.body)]


def buffer_names(sch) -> set[str]:
    return {b.name for b in sch.func.allocs}


def fan_out(n: int = 1000) -> ProgramCase:
    """B = 2 * A read by two outputs: C = B + 1 and D = 3 * B."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    D = te.compute((n,), lambda i: B[i] * 3.0, name="D")
    return ProgramCase(te.create_prim_func([A, C, D]), lambda a: (2 * a + 1, 6 * a), 1)


# --- compute_inline -------------------------------------------------------------------------------
def test_inline_padding_into_conv():
    wl = conv2d()
    sch = wl.schedule()
    sch.compute_inline(sch.get_block("pad"))
    assert block_names(sch) == ["conv"]
    assert "pad" not in buffer_names(sch)
    assert_computes(wl, sch)


def test_inline_padding_after_it_was_computed_at_a_conv_loop():
    wl = conv2d()
    sch = wl.schedule()
    sch.compute_at(sch.get_block("pad"), loops_of(sch, "conv")[2])
    sch.compute_inline(sch.get_block("pad"))
    assert_computes(wl, sch)


def test_inline_padding_into_a_tiled_conv():
    wl = conv2d()
    sch = wl.schedule()
    _, _, y, x, *_ = loops_of(sch, "conv")
    sch.split(y, [None, 4])
    sch.split(x, [None, 4])
    sch.compute_inline(sch.get_block("pad"))
    assert_computes(wl, sch)


@pytest.mark.parametrize("order", ["BC", "CB"])
def test_inline_a_three_stage_chain_in_either_order(order):
    wl = chain((1000,), stages=3)
    sch = wl.schedule()
    for name in order:
        sch.compute_inline(sch.get_block(name))
    assert block_names(sch) == ["D"]
    assert buffer_names(sch) == set()
    assert_computes(wl, sch)


def test_inline_a_producer_with_a_guarded_split():
    wl = chain((97,))
    sch = wl.schedule()
    (i,) = loops_of(sch, "B")
    sch.split(i, [None, 8])
    sch.compute_inline(sch.get_block("B"))
    assert_computes(wl, sch)


def test_inline_into_every_consumer():
    wl = fan_out()
    sch = wl.schedule()
    sch.compute_inline(sch.get_block("B"))
    assert block_names(sch) == ["C", "D"]
    assert_computes(wl, sch)


def test_inline_into_a_reduction_and_an_elementwise_consumer():
    wl = softmax()
    sch = wl.schedule()
    sch.compute_inline(sch.get_block("E"))  # exp is recomputed by S and by Y
    assert block_names(sch) == ["M", "S", "Y"]
    assert_computes(wl, sch)


def test_inline_a_producer_read_at_neighbouring_elements():
    wl = stencil()
    sch = wl.schedule()
    sch.compute_inline(sch.get_block("P"))
    assert_computes(wl, sch)


@pytest.mark.parametrize(("make", "block"), [(mm_relu, "Y"), (softmax, "M"), (softmax, "S")])
def test_inline_of_a_reduction_is_refused(make, block):
    sch = make().schedule()
    with schedule_error(block, match="reduction"):
        sch.compute_inline(sch.get_block(block))


def test_inline_of_an_output_is_refused():
    sch = chain((1000,)).schedule()
    with schedule_error("C", match="output"):
        sch.compute_inline(sch.get_block("C"))


def test_inline_of_a_scan_step_is_refused():
    sch = scan_pipeline().schedule()
    with schedule_error("scan", match="scan step"):
        sch.compute_inline(sch.get_block("scan"))


def test_inlined_block_handle_is_dead():
    sch = chain((1000,)).schedule()
    b = sch.get_block("B")
    sch.compute_inline(b)
    with schedule_error("B", match="no block"):
        sch.get_loops(b)


# --- reverse_compute_inline -----------------------------------------------------------------------
def test_reverse_inline_relu_into_bias_add():
    wl = bias_relu()
    sch = wl.schedule()
    sch.reverse_compute_inline(sch.get_block("R"))
    assert block_names(sch) == ["Y", "Z"]
    assert "Z" not in buffer_names(sch)
    assert_computes(wl, sch)


def test_reverse_inline_after_tiling_the_producer():
    wl = bias_relu()
    sch = wl.schedule()
    _, j = loops_of(sch, "Z")
    sch.split(j, [None, 16])  # guarded: 127 is prime
    sch.reverse_compute_inline(sch.get_block("R"))
    assert_computes(wl, sch)


def test_reverse_inline_a_chain_from_its_end():
    wl = chain((37, 53), stages=3)
    sch = wl.schedule()
    sch.reverse_compute_inline(sch.get_block("D"))
    sch.reverse_compute_inline(sch.get_block("C"))
    assert block_names(sch) == ["B"]
    assert_computes(wl, sch)


def test_reverse_inline_a_transposing_consumer():
    n, m = 37, 53
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    T = te.compute((m, n), lambda j, i: B[i, j] + 1.0, name="T")
    wl = ProgramCase(te.create_prim_func([A, T]), lambda a: ((2 * a + 1).T,), 1)
    sch = wl.schedule()
    sch.reverse_compute_inline(sch.get_block("T"))
    assert_computes(wl, sch)


def test_reverse_inline_into_a_reduction_is_refused():
    sch = mm_relu().schedule()
    with schedule_error("C", "Y", match="reduction"):
        sch.reverse_compute_inline(sch.get_block("C"))


def test_reverse_inline_of_a_block_with_two_intermediate_inputs_is_refused():
    sch = softmax().schedule()
    with schedule_error("Y", match="exactly one intermediate"):
        sch.reverse_compute_inline(sch.get_block("Y"))


def test_reverse_inline_when_the_producer_has_other_readers_is_refused():
    sch = fan_out().schedule()
    with schedule_error("C", match="other blocks"):
        sch.reverse_compute_inline(sch.get_block("C"))


def test_reverse_inline_of_a_shifted_read_is_refused():
    n = 97
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n - 1,), lambda i: B[i + 1], name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    with schedule_error("C", match="exactly its iteration variables"):
        sch.reverse_compute_inline(sch.get_block("C"))


def test_reverse_inline_over_a_smaller_extent_is_refused():
    n = 97
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n - 1,), lambda i: B[i] + 1.0, name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    with schedule_error("C", "B", match="different extents"):
        sch.reverse_compute_inline(sch.get_block("C"))
