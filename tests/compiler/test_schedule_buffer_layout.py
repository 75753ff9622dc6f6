"""transform_layout, storage_align and set_scope: a staged buffer laid out by an index map, padded
to aligned strides or kept on the stack computes what numpy computes, on odd shapes, after tiling
and compute_at; the program reads back from its TVMScript; what would change a parameter's layout
or lose elements is refused by name."""

import numpy as np
import pytest
from helpers import ProgramCase, assert_computes, schedule_error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import Schedule, ScheduleError, Trace, build, te
from compiler.codegen import emit_llvm
from compiler.ir import Allocate, structural_equal
from compiler.lower import lower
from compiler.schedule.index_map import IndexMap
from compiler.script import from_source
from compiler.serialize import from_json, to_json
from compiler.target import Target
from compiler.visit import walk_stmt


def tiled_matmul(m: int = 37, n: int = 45, k: int = 29, tile: int = 8):
    """A matmul whose B panel of one column tile is staged under that tile (a packed panel)."""
    wl = matmul_of(m, n, k)
    sch = Schedule(wl.func, seed=0)
    c = sch.get_block("C")
    i, j, r = sch.get_loops(c)
    jo, ji = sch.split(j, [None, tile])
    sch.reorder(jo, i, r, ji)
    panel = sch.cache_read(c, 1)
    sch.compute_at(panel, jo)
    return wl, sch, c, panel, ji


def matmul_of(m: int, n: int, k: int) -> ProgramCase:
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return ProgramCase(te.create_prim_func([A, B, C]), lambda a, b: (a @ b,), 2)


def allocations(func) -> dict[str, tuple]:
    return {s.buffer.name: s.buffer.shape for s in walk_stmt(lower(func).body) if isinstance(s, Allocate)}


def reads_back(sch: Schedule) -> None:
    again = from_source(sch.func.script())
    assert structural_equal(again, sch.func), sch.func.script()
    replayed = Trace.from_json(sch.trace.to_json()).apply(sch.original).func
    assert structural_equal(replayed, sch.func)


def test_a_panel_packed_by_an_index_map_computes_the_matmul_and_compacts_to_one_tile():
    wl, sch, _, panel, ji = tiled_matmul()
    sch.transform_layout(panel, ("write", 0), lambda k, j: (j // 8, k, j % 8))
    sch.vectorize(ji)
    assert sch.func.allocs[0].shape == (6, 29, 8)  # 45 columns in 6 tiles of 8: the last padded
    assert_computes(wl, sch)
    assert allocations(sch.func)["B_global"] == (1, 29, 8)  # one tile's panel, contiguous
    reads_back(sch)
    assert "index_map='lambda k, j: (j // 8, k, j % 8)'" in str(sch.trace)


def test_the_reader_of_a_transformed_buffer_is_rewritten_too_and_a_name_or_text_names_the_map():
    wl = matmul_of(16, 24, 12)
    sch = Schedule(wl.func, seed=0)
    c = sch.get_block("C")
    staged = sch.cache_write(c, 0)
    sch.transform_layout(c, "C_global", "lambda i, j: (j, i)")  # by name, and as text
    assert sch.func.allocs[0].shape == (24, 16)
    assert "C_global[v_j, v_i]" in sch.func.script()
    assert_computes(wl, sch)
    sch.transform_layout(staged, ("read", 0), "lambda a, b: (b % 4, b // 4, a)")
    assert_computes(wl, sch)
    reads_back(sch)


@pytest.mark.parametrize(
    ("index_map", "match"),
    [
        ("lambda i, j: (i, 0)", "sends two elements"),
        ("lambda i, j: (i - 1, j)", "negative indices"),
        ("lambda i: (i,)", "takes 1 indices"),
        ("lambda i, j: (i, j, __import__('os'))", "is not a function here"),
        ("lambda i, j: (i, q)", "is not defined"),
        ("lambda i, j: (i, j * 0.5)", "integer"),
        ("i + 1", "not a lambda"),
        ("lambda i, j: (i,", "index map"),
        ("lambda i, *j: (i,)", "plain positional"),
    ],
)
def test_a_map_that_loses_elements_or_is_not_index_arithmetic_is_refused(index_map, match):
    _, sch, _, panel, _ = tiled_matmul()
    before = sch.func
    with pytest.raises(ScheduleError, match=match):
        sch.transform_layout(panel, ("write", 0), index_map)
    assert sch.func is before and sch.trace.instructions[-1].kind == "compute_at"


def test_a_parameter_keeps_its_layout_and_unknown_buffers_are_named():
    _, sch, c, _, _ = tiled_matmul()
    with schedule_error("C", match="parameter"):
        sch.transform_layout(c, ("write", 0), lambda i, j: (j, i))
    with schedule_error("C", match="read index 5"):
        sch.transform_layout(c, ("read", 5), lambda i, j: (j, i))
    with schedule_error("C", match="does not use a buffer called 'D'"):
        sch.transform_layout(c, "D", lambda i, j: (j, i))
    with schedule_error("C", match="parameter"):
        sch.storage_align(c, 0, 0, 16, 1)
    with schedule_error("C", match="parameter"):
        sch.set_scope(c, 0, "local")


def test_index_map_text_reads_back_to_the_same_map():
    m = IndexMap.parse("lambda n, c, h, w: (n, c // 16, h, w, c % 16)")
    assert IndexMap.parse(m.text()) == m
    assert m.text() == "lambda n, c, h, w: (n, c // 16, h, w, c % 16)"
    one = IndexMap.parse("lambda i: i * 2")
    assert one.text() == "lambda i: (i * 2,)" and IndexMap.parse(one.text()) == one


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(1, 9),
    n=st.integers(1, 40),
    k=st.integers(1, 21),
    tile=st.sampled_from([4, 8, 16]),
    form=st.sampled_from(
        ["lambda k, j: (j, k)", "lambda k, j: (j // {t}, k, j % {t})", "lambda k, j: (k % 3, j, k // 3)"]
    ),
    align=st.one_of(st.none(), st.tuples(st.sampled_from([8, 16, 64]), st.integers(0, 7))),
)
def test_random_layouts_and_alignments_of_a_packed_panel_compute_the_matmul(m, n, k, tile, form, align):
    wl, sch, _, panel, ji = tiled_matmul(m, n, k, tile)
    sch.transform_layout(panel, ("write", 0), form.format(t=tile))
    if align is not None:
        sch.storage_align(panel, 0, 0, align[0], align[1] % align[0])
    if tile == 8:
        sch.vectorize(ji)
    assert_computes(wl, sch)
    reads_back(sch)


def test_storage_align_pads_the_compacted_rows_to_the_stride_asked_for():
    wl, sch, _, panel, ji = tiled_matmul(37, 45, 64, tile=16)
    sch.transform_layout(panel, ("write", 0), lambda k, j: (j, k))  # rows of 64: one stride of 256 B
    sch.storage_align(panel, 0, 0, 64, 8)
    sch.vectorize(ji)
    assert "T.block_attr({'buffer_dim_align': '0:64:8'})" in sch.func.script()
    assert allocations(sch.func)["B_global"] == (16 * 72,)  # 16 rows, each 64 + 8 elements apart
    assert "ax1_1 * 72" in lower(sch.func).script()
    assert_computes(wl, sch)
    reads_back(sch)


def test_storage_align_of_two_axes_keeps_both_requests_and_the_last_axis_is_refused():
    A = te.placeholder((5, 6, 7), name="A")
    B = te.compute((5, 6, 7), lambda i, j, k: A[i, j, k] * 2.0, name="B")
    C = te.compute((5, 6, 7), lambda i, j, k: B[i, j, k] + 1.0, name="C")
    func = te.create_prim_func([A, C])
    sch = Schedule(func, seed=0)
    b = sch.get_block("B")
    sch.storage_align(b, 0, 1, 8, 1)
    sch.storage_align(b, 0, 0, 16, 3)
    assert "'buffer_dim_align': '0:16:3;1:8:1'" in sch.func.script()
    assert allocations(sch.func)["B"] == (5 * 67,)  # stride 9 (7 -> 1 mod 8), then 54 -> 67 (3 mod 16)
    a = np.random.default_rng(0).standard_normal((5, 6, 7)).astype("float32")
    out = np.zeros_like(a)
    build(sch.func, listings=False)(a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)
    with schedule_error("B", match="the last axis has stride 1"):
        sch.storage_align(b, 0, 2, 8, 1)
    with schedule_error("B", match="offset < factor"):
        sch.storage_align(b, 0, 0, 8, 8)
    reads_back(sch)


def stack_and_heap(func) -> tuple[bool, bool]:
    text = emit_llvm(lower(func), Target.host())
    return " alloca " in text, '@"malloc"' in text


def test_a_local_buffer_stays_on_the_stack_where_a_global_one_of_its_size_goes_to_the_heap():
    A = te.placeholder((128, 256), name="A")  # 128 KiB: more than the 64 KiB a global buffer may take
    B = te.compute((128, 256), lambda i, j: A[i, j] * 3.0, name="B")
    C = te.compute((128, 256), lambda i, j: B[i, j] + 1.0, name="C")
    func = te.create_prim_func([A, C])
    assert stack_and_heap(func) == (False, True)
    sch = Schedule(func, seed=0)
    sch.set_scope(sch.get_block("B"), 0, "local")
    assert "B = T.alloc_buffer((128, 256), 'float32', scope='local')" in sch.func.script()
    assert stack_and_heap(sch.func) == (True, False)
    a = np.random.default_rng(1).standard_normal((128, 256)).astype("float32")
    out = np.zeros_like(a)
    build(sch.func, listings=False)(a, out)
    np.testing.assert_allclose(out, a * 3 + 1, rtol=1e-6)
    reads_back(sch)


def test_only_the_cpu_scopes_are_taken_by_set_scope_cache_read_and_the_reader():
    _, sch, c, panel, _ = tiled_matmul()
    with schedule_error("B_global", match="'shared' is not a CPU storage scope"):
        sch.set_scope(panel, 0, "shared")
    with pytest.raises(ScheduleError, match="'shared' is not a CPU storage scope"):
        sch.cache_read(c, 0, "shared")
    local = sch.cache_write(c, 0, "local")
    assert sch.get(local).body.value.buffer.scope == "local"
    text = sch.func.script().replace("scope='local'", "scope='shared'")
    with pytest.raises(ValueError, match="scope is one of 'global', 'local'"):
        from_source(text)


def test_a_scope_travels_in_the_functions_data_only_where_it_is_not_the_default():
    """So every workload stored before (its data and its structural hash) is what it was."""
    _, sch, _, panel, _ = tiled_matmul()
    data = to_json(sch.func)
    assert all("scope" not in b for b in data["allocs"])
    sch.set_scope(panel, 0, "local")
    local = to_json(sch.func)
    assert local["allocs"][0]["scope"] == "local"
    assert structural_equal(from_json(local), sch.func)
    assert sch.func.structural_hash() != sch.original.structural_hash()
