"""Symbolic dimensions in the core (issue 40, its first step): `te.var(name, range=(lo, hi))` in
shapes, one compiled kernel for every value in the range, the value read from the arguments' shapes
and checked at the call; printed, serialized and hashed; what does not take them yet refuses them
by name."""

import json

import numpy as np
import pytest

from compiler import Schedule, build, te
from compiler.arith import conjuncts
from compiler.build import ShapeError
from compiler.compact import compact_buffers
from compiler.interpret import interpret
from compiler.ir import Binary, Block, IRError, PrimFunc, SizeVar, SymbolicError
from compiler.ops import Op
from compiler.overcompute import overcompute_guarded_tiles
from compiler.schedule import ScheduleError
from compiler.schedule_rules.default import default_schedule
from compiler.script import from_source
from compiler.script.errors import ScriptError
from compiler.serialize import from_json, to_json
from compiler.target import Target
from compiler.te import TensorError
from compiler.visit import block_loads, blocks
from compiler.workloads.primfunc_spec import func_workload
from compiler.workloads.workload import WorkloadError

rng = np.random.default_rng(40)


def rows(high: int = 512) -> SizeVar:
    n = te.var("n", range=(1, high))
    assert isinstance(n, SizeVar)
    return n


def scale_rows(n: SizeVar | int) -> PrimFunc:
    a = te.placeholder((n, 64), name="A")
    b = te.compute((n, 64), lambda i, j: a[i, j] * 2.0 + 1.0, name="B")
    return te.create_prim_func([a, b], name="scale")


@pytest.mark.parametrize("scheduled", [False, True], ids=["as-written", "default-schedule"])
def test_one_kernel_runs_every_length_in_its_range(scheduled: bool) -> None:
    func = scale_rows(rows())
    if scheduled:
        func = default_schedule(func, Target.host()).func
        assert "T.parallel(n)" in func.script() and "T.vectorized(64)" in func.script()
    kernel = build(func)
    for m in (1, 7, 64, 333, 512):
        a = rng.standard_normal((m, 64)).astype("float32")
        b = np.full_like(a, np.nan)
        kernel(a, b)
        np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_a_vectorized_symbolic_loop_has_a_body_and_a_tail_at_every_length() -> None:
    n = te.var("n", range=(1, 300))
    x = te.placeholder((4, n), name="X")
    y = te.compute((4, n), lambda i, j: te.exp(x[i, j]) + x[i, j], name="Y")
    sch = Schedule(te.create_prim_func([x, y]), seed=0)
    i, j = sch.get_loops(sch.get_block("Y"))
    sch.parallel(i)
    sch.vectorize(j)
    kernel = build(sch.func)
    for m in range(1, 300, 7):
        a = rng.standard_normal((4, m)).astype("float32")
        b = np.full_like(a, np.nan)
        kernel(a, b)
        np.testing.assert_allclose(b, np.exp(a) + a, rtol=1e-5, atol=1e-6, err_msg=f"n = {m}")


def test_reductions_matmuls_and_two_dimensions_over_ranges() -> None:
    m, n = te.var("m", range=(1, 64)), te.var("n", range=(1, 200))
    a, w = te.placeholder((m, n), name="A"), te.placeholder((n, 24), name="W")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((m, 24), lambda i, j: te.sum(a[i, k] * w[k, j], axis=k), name="C")
    row = te.reduce_axis((0, n), name="r")
    s = te.compute((m,), lambda i: te.max(a[i, row], axis=row), name="S")
    bias = te.placeholder((n,), name="bias")
    t = te.compute((m, n), lambda i, j: a[i, j] + bias[j], name="T")
    func = te.create_prim_func([a, w, bias, c, s, t])
    assert [v.name for v in func.size_vars] == ["m", "n"]
    for variant in (func, default_schedule(func, Target.host()).func):
        kernel = build(variant)
        for rows_, cols in ((1, 1), (5, 17), (64, 200), (3, 128)):
            av = rng.standard_normal((rows_, cols)).astype("float32")
            wv = rng.standard_normal((cols, 24)).astype("float32")
            bv = rng.standard_normal(cols).astype("float32")
            cv, sv, tv = np.empty((rows_, 24), "float32"), np.empty(rows_, "float32"), np.empty_like(av)
            kernel(av, wv, bv, cv, sv, tv)
            np.testing.assert_allclose(cv, av @ wv, rtol=1e-4, atol=1e-5)
            np.testing.assert_array_equal(sv, av.max(axis=1))
            np.testing.assert_allclose(tv, av + bv, rtol=1e-6)


@pytest.mark.parametrize("high", [64, 1 << 20], ids=["on-the-stack", "on-the-heap"])
def test_an_intermediate_of_symbolic_shape_is_sized_for_the_call(high: int) -> None:
    """Allocated for the range's largest value on the stack when that fits, else by the value at run time."""
    n = rows(high)
    a = te.placeholder((n, 16), name="A")
    mid = te.compute((n, 16), lambda i, j: a[i, j] * a[i, j], name="mid")
    out = te.compute((n,), lambda i: mid[i, 0] + mid[i, 15], name="out")
    kernel = build(te.create_prim_func([a, out]))
    for m in (1, 9, 64):
        av = rng.standard_normal((m, 16)).astype("float32")
        ov = np.empty(m, "float32")
        kernel(av, ov)
        np.testing.assert_allclose(ov, av[:, 0] ** 2 + av[:, 15] ** 2, rtol=1e-6)


def test_the_scan_of_the_te_tutorial_with_symbolic_extents() -> None:
    """TVM's te.scan example as written: a cumulative sum over m steps of n columns, both symbolic."""
    m, n = te.var("m", range=(2, 100)), te.var("n", range=(1, 64))
    x = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n), name="s_state")
    s_init = te.compute((1, n), lambda _, i: x[0, i], name="s_init")
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + x[t, i], name="s_update")
    s_scan = te.scan(s_init, s_update, s_state, inputs=[x])
    kernel = build(te.create_prim_func([x, s_scan]))
    for steps, cols in ((2, 1), (17, 5), (100, 64)):
        xv = rng.standard_normal((steps, cols)).astype("float32")
        out = np.empty_like(xv)
        kernel(xv, out)
        np.testing.assert_allclose(out, np.cumsum(xv, axis=0), rtol=1e-5, atol=1e-5)


def test_a_length_outside_the_range_or_disagreeing_is_refused_before_anything_runs() -> None:
    kernel = build(scale_rows(rows()))
    for bad in (600, 0):
        a, b = np.ones((bad, 64), "float32"), np.full((bad, 64), 7.0, "float32")
        with pytest.raises(ShapeError, match=rf"A: dimension 0 \(n\) is {bad}, outside the declared range"):
            kernel(a, b)
        assert (b == 7).all()
    a, b = np.ones((5, 64), "float32"), np.full((6, 64), 7.0, "float32")
    with pytest.raises(ValueError, match=r"B: dimension 0 is n = 5 \(from an earlier argument\), got 6"):
        kernel(a, b)
    assert (b == 7).all()
    with pytest.raises(ValueError, match="expected shape"):
        kernel(np.ones((5, 63), "float32"), np.ones((5, 63), "float32"))


def test_printed_read_back_serialized_and_hashed_with_their_ranges() -> None:
    func = scale_rows(rows())
    text = func.script()
    assert "A: T.Buffer((n, 64), 'float32')" in text and "n = T.size_var(1, 512)" in text
    data = to_json(func)
    assert data["size_vars"] == [["n", 1, 512]]
    again = from_json(json.loads(json.dumps(data)))
    assert again == func and again.structural_hash() == func.structural_hash()
    assert scale_rows(rows(256)).structural_hash() != func.structural_hash()  # the range is part of it
    renamed = te.var("m", range=(1, 512))
    assert isinstance(renamed, SizeVar)
    assert scale_rows(renamed).structural_hash() == func.structural_hash()  # bound by position, not name
    for variant in (func, default_schedule(func, Target.host()).func):  # TVMScript both ways
        back = from_source(variant.script())
        assert back == variant and back.structural_hash() == variant.structural_hash()
    undeclared = text.replace("    n = T.size_var(1, 512)\n", "")
    with pytest.raises(ScriptError, match=r"line 2, column \d+: n is no size var: declare .* T.size_var"):
        from_source(undeclared)
    unranged = text.replace("T.size_var(1, 512)", "T.int64()")
    with pytest.raises(ScriptError, match="a symbolic dimension needs its range"):
        from_source(unranged)
    static = te.placeholder((8, 64), name="A")
    static_func = te.create_prim_func(
        [static, te.compute((8, 64), lambda i, j: static[i, j] * 2.0, name="B")]
    )
    assert "size_vars" not in to_json(static_func)


def test_a_parameter_dimension_is_a_size_or_sizes_added_or_multiplied() -> None:
    """Read from outside data (TVMScript and JSON; not checked in PrimFunc, which schedules rebuild
    while searching), a parameter's dimension may be `n + 1` or `n * m` (a model's batch of sequences
    flattened to rows), never a quotient: no shape gives it back exactly."""
    func = scale_rows(rows())
    text = func.script().replace("T.Buffer((n, 64)", "T.Buffer((n + 1, 64)")
    assert str(from_source(text).params[0].shape[0]) == str(func.params[0].shape[0] + 1)
    with pytest.raises(IRError, match=r"parameter A's dimension .* is not a size"):
        from_source(func.script().replace("T.Buffer((n, 64)", "T.Buffer((n // 2, 64)"))
    data = to_json(func)
    data["params"][0]["shape"][0] = ["floordiv", data["params"][0]["shape"][0], ["const", 2, "int64"]]
    with pytest.raises(IRError, match=r"parameter A's dimension .* is not a size"):
        from_json(data)


def flatten(n: SizeVar, m: SizeVar, given: bool) -> PrimFunc:
    """B (n * m) = A (n, m) flattened, plus 1; without `given`, A is (n * m) too."""
    if given:
        a = te.placeholder((n, m), name="A")
        b = te.compute((n * m,), lambda i: a[i // m, i % m] + 1.0, name="B")
    else:
        a = te.placeholder((n * m,), name="A")
        b = te.compute((n * m,), lambda i: a[i] + 1.0, name="B")
    return te.create_prim_func([a, b], name="flatten")


def test_a_kernel_with_a_product_of_sizes_runs_and_checks_it_at_the_call() -> None:
    n, m = te.var("n", range=(1, 16)), te.var("m", range=(1, 32))
    kernel = build(flatten(n, m, given=True))
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = np.zeros(35, np.float32)
    kernel(a, b)
    np.testing.assert_allclose(b, a.reshape(-1) + 1.0)
    with pytest.raises(ValueError, match=r"B: dimension 0 is n \* m = 35, got 36"):
        kernel(a, np.zeros(36, np.float32))
    alone = build(flatten(n, m, given=False))  # the sizes only inside a product: a model passes them
    with pytest.raises(ValueError, match=r"A: dimension 0 is n \* m, whose sizes no argument's shape gives"):
        alone(np.zeros(35, np.float32), np.zeros(35, np.float32))
    values = np.arange(35, dtype=np.float32)
    out = np.zeros(35, np.float32)
    alone.repeat([values.ctypes.data, out.ctypes.data, 5, 7], 1)  # as the forward pass calls it
    np.testing.assert_allclose(out, values + 1.0)


def test_what_does_not_take_symbolic_dimensions_yet_refuses_them_by_name() -> None:
    func = scale_rows(rows())
    sch = Schedule(func, seed=0)
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="numbers inside one run-time loop"):
        sch.split(i, [8, None])
    with pytest.raises(ScheduleError, match=r"cover 256, less than the largest extent 512"):
        sch.split(i, [2, 16, 8])
    with pytest.raises(WorkloadError, match="dimensions n are symbolic"):
        func_workload(func)
    with pytest.raises(SymbolicError, match="is symbolic; only static extents"):
        func.params[0].size  # noqa: B018
    n = te.var("n")  # no range: not a dimension
    with pytest.raises(TensorError, match=r"n needs a range: te.var\('n', range=\(1, 512\)\)"):
        te.placeholder((n, 4), name="A")
    with pytest.raises(IRError, match="1 <= lo <= hi"):
        te.var("n", range=(0, 4))
    m = rows()
    a = te.placeholder((m, 4), name="A")
    with pytest.raises(
        TensorError, match=r"shape must be a non-empty tuple of positive ints or ranged te.var"
    ):
        te.create_prim_func([a, te.compute((m // 2, 4), lambda i, j: a[i, j], name="B")])


def test_the_schedule_primitives_on_a_symbolic_reduction_work_or_refuse_by_name() -> None:
    n = rows()
    r = te.placeholder((8, n), name="R")
    k = te.reduce_axis((0, n), name="k")
    s = te.compute((8,), lambda i: te.sum(r[i, k], axis=k), name="S")
    t = te.compute((8,), lambda i: s[i] * 2.0, name="T")
    func = te.create_prim_func([r, t])
    works = {
        "rfactor": lambda sch: sch.rfactor(sch.get_loops(sch.get_block("S"))[1], 0),
        "decompose_reduction": lambda sch: sch.decompose_reduction(
            sch.get_block("S"), sch.get_loops(sch.get_block("S"))[1]
        ),
        "cache_read": lambda sch: sch.cache_read(sch.get_block("S"), 0, "global"),
        "cache_write": lambda sch: sch.cache_write(sch.get_block("S"), 0, "global"),
        "reorder": lambda sch: sch.reorder(*reversed(sch.get_loops(sch.get_block("S")))),
        "parallel": lambda sch: sch.parallel(sch.get_loops(sch.get_block("S"))[0]),
    }
    for name, primitive in works.items():
        sch = Schedule(func, seed=0)
        primitive(sch)
        kernel = build(sch.func)
        for m in (1, 5, 300):
            rv = rng.standard_normal((8, m)).astype("float32")
            tv = np.empty(8, "float32")
            kernel(rv, tv)
            np.testing.assert_allclose(tv, 2 * rv.sum(axis=1), rtol=1e-5, atol=1e-5, err_msg=name)
    sch = Schedule(func, seed=0)
    (i,) = sch.get_loops(sch.get_block("T"))
    with pytest.raises(ScheduleError, match="compute_at: loop v_k has a symbolic extent"):
        sch.compute_at(sch.get_block("S"), i)
    with pytest.raises(ScheduleError, match="unroll: loop k has a symbolic extent"):
        sch.unroll(sch.get_loops(sch.get_block("S"))[1])
    loop = sch.get_loops(sch.get_block("S"))[1]
    tiles = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=64, decision=[3, 48])
    assert tiles == [11, 48]  # 11 tiles of 48 cover the largest n, 512


def test_specialized_it_is_the_static_function_and_the_interpreter_runs_it() -> None:
    """TVM's `PrimFunc.specialize`: binding n gives the function te defines with that number, and the
    interpreter (the reference of custom workloads) evaluates a symbolic function at the inputs' n."""
    func = scale_rows(rows())
    assert func.specialize({"n": 7}) == scale_rows(7)
    assert func.specialize({"n": 7}).structural_hash() == scale_rows(7).structural_hash()
    with pytest.raises(IRError, match=r"n = 600 is outside its declared range \[1, 512\]"):
        func.specialize({"n": 600})
    a = rng.standard_normal((5, 64)).astype("float32")
    (b,) = interpret(func, a)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_a_symbolic_loop_splits_by_a_number_with_a_guarded_last_tile() -> None:
    """The outer loop runs ceil(n / 8) times, the blocks guarded by `i < n`: every n in the range is
    computed whole and nothing past it is written; the split program prints, reads back and replays."""
    n = rows(100)
    x = te.placeholder((n, 64), name="X")
    y = te.compute((n, 64), lambda i, j: x[i, j] * 2.0 + 1.0, name="Y")
    func = te.create_prim_func([x, y])
    sch = Schedule(func, seed=0)
    i, j = sch.get_loops(sch.get_block("Y"))
    outer, _ = sch.split(i, [None, 8])
    sch.parallel(outer)
    sch.vectorize(j)
    assert (
        "T.parallel((n + 7) // 8)" in sch.func.script() and "T.where(i_0 * 8 + i_1 < n)" in sch.func.script()
    )
    assert from_source(sch.func.script()) == sch.func
    assert sch.trace.apply(func).func == sch.func
    kernel = build(sch.func)
    for m in range(1, 101, 3):
        a = rng.standard_normal((m, 64)).astype("float32")
        b = np.full((m + 1, 64), 7.0, "float32")  # one row past the output: never written
        kernel(a, b[:m])
        np.testing.assert_allclose(b[:m], a * 2 + 1, rtol=1e-6)
        assert (b[m] == 7).all()


def test_a_guard_on_a_size_var_survives_decompose_reduction_and_rfactor() -> None:
    """`i < n` depends on the loop variable alone (n is in scope everywhere): the init block that
    decompose_reduction or rfactor makes keeps it, so a matmul tiled by a split writes no row past n."""
    n = rows(64)
    x, w = te.placeholder((n, 16), name="X"), te.placeholder((16, 32), name="W")
    k = te.reduce_axis((0, 16), name="k")
    y = te.compute((n, 32), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="Y")
    func = te.create_prim_func([x, w, y])
    for variant in ("decompose", "rfactor"):
        sch = Schedule(func, seed=0)
        block = sch.get_block("Y")
        i, j, kk = sch.get_loops(block)
        outer, inner = sch.split(i, [None, 4])
        sch.reorder(outer, j, kk, inner)
        if variant == "decompose":
            sch.decompose_reduction(block, kk)
        else:
            sch.rfactor(kk, 0)
        kernel = build(sch.func)
        for m in (1, 5, 7, 64):
            xv, wv = (
                rng.standard_normal((m, 16)).astype("float32"),
                rng.standard_normal((16, 32)).astype("float32"),
            )
            out = np.full((m + 3, 32), 7.0, "float32")
            kernel(xv, wv, out[:m])
            np.testing.assert_allclose(out[:m], xv @ wv, rtol=1e-4, atol=1e-5, err_msg=variant)
            assert (out[m:] == 7).all(), f"{variant} wrote past n = {m}"


def matmul_rows(n: SizeVar | int, width: int = 96) -> PrimFunc:
    x, w = te.placeholder((n, 64), name="X"), te.placeholder((64, width), name="W")
    k = te.reduce_axis((0, 64), name="k")
    y = te.compute((n, width), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="Y")
    return te.create_prim_func([x, w, y], name="matmul")


def test_the_default_schedule_tiles_a_symbolic_matmul_as_the_static_one() -> None:
    """The static default schedule (at 32 rows) replayed over n in 1..512: the same register tile and
    panels, the rows' tiles run as many times as n needs; every n is computed whole, nothing past it
    is written, and the register tile computes without a guard (only its write-back has one)."""
    n = rows()
    target = Target.host()
    sch = default_schedule(matmul_rows(n), target)
    static = default_schedule(matmul_rows(32), target)
    assert [str(i.kind) for i in sch.trace.instructions] == [str(i.kind) for i in static.trace.instructions]
    lowered = compact_buffers(sch.func)
    assert "T.where" in lowered.script()
    relaxed = overcompute_guarded_tiles(lowered)
    guarded = {b.name for b in blocks(relaxed.body) if conjuncts(b.predicate)}
    assert guarded == {"Y_local"}, guarded  # the write-back of the register tile
    kernel = build(sch.func, target)
    for m in (*range(1, 40), 333, 512):
        xv, wv = (
            rng.standard_normal((m, 64)).astype("float32"),
            rng.standard_normal((64, 96)).astype("float32"),
        )
        out = np.full((m + 2, 96), 7.0, "float32")
        kernel(xv, wv, out[:m])
        np.testing.assert_allclose(out[:m], xv @ wv, rtol=1e-4, atol=1e-4, err_msg=f"n = {m}")
        assert (out[m:] == 7).all(), f"wrote past n = {m}"


def test_fuse_takes_a_symbolic_loop_inside_or_outside_a_static_one() -> None:
    n = rows(50)
    func = scale_rows(n)
    for order in ("symbolic-outer", "symbolic-inner"):
        sch = Schedule(func, seed=0)
        i, j = sch.get_loops(sch.get_block("B"))
        if order == "symbolic-inner":
            sch.reorder(j, i)
            i, j = j, i
        sch.parallel(sch.fuse(i, j))
        assert from_source(sch.func.script()) == sch.func
        kernel = build(sch.func)
        for m in (1, 7, 50):
            a = rng.standard_normal((m, 64)).astype("float32")
            b = np.empty_like(a)
            kernel(a, b)
            np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6, err_msg=f"{order}, n = {m}")


def test_a_guarded_reduction_step_is_never_overcomputed() -> None:
    """A split of a symbolic reduction guards `k < n`: computing a step past it would add into a valid
    sum, so that block keeps its guard even where it accumulates into a scratch tile."""
    n = rows(100)
    r = te.placeholder((8, n), name="R")
    k = te.reduce_axis((0, n), name="k")
    s = te.compute((8,), lambda i: te.sum(r[i, k], axis=k), name="S")
    sch = Schedule(te.create_prim_func([r, s]), seed=0)
    block = sch.get_block("S")
    i, kk = sch.get_loops(block)
    sch.split(kk, [None, 16])
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, i)
    relaxed = overcompute_guarded_tiles(compact_buffers(sch.func))
    assert conjuncts(next(b for b in blocks(relaxed.body) if b.name == "S").predicate)
    kernel = build(sch.func)
    for m in (1, 15, 16, 17, 100):
        rv = rng.standard_normal((8, m)).astype("float32")
        sv = np.empty(8, "float32")
        kernel(rv, sv)
        np.testing.assert_allclose(sv, rv.sum(axis=1), rtol=1e-5, atol=1e-5, err_msg=f"n = {m}")


def test_a_static_split_that_does_not_divide_overcomputes_its_tile_too() -> None:
    """13 rows in tiles of 4 rows: the last tile's three rows past the end are computed into the
    scratch tile from clamped reads, and not written back."""
    sch = Schedule(matmul_rows(13, width=32), seed=0)
    block = sch.get_block("Y")
    i, j, kk = sch.get_loops(block)
    io, ii = sch.split(i, [None, 4])
    sch.reorder(io, j, kk, ii)
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, j)
    relaxed = overcompute_guarded_tiles(compact_buffers(sch.func))
    assert not conjuncts(next(b for b in blocks(relaxed.body) if b.name == "Y").predicate)
    xv, wv = rng.standard_normal((13, 64)).astype("float32"), rng.standard_normal((64, 32)).astype("float32")
    out = np.full((14, 32), 7.0, "float32")
    build(sch.func)(xv, wv, out[:13])
    np.testing.assert_allclose(out[:13], xv @ wv, rtol=1e-4, atol=1e-4)
    assert (out[13] == 7).all()


def _staged_rows(reduce_by: int | None) -> tuple[PrimFunc, PrimFunc]:
    """10 rows in tiles [4, 1, 4], C = B + 1 with B (2 * A, or a sum over A's columns split by
    `reduce_by`) staged per tile: the tile of rows 12-15 has no valid row, so a clamped read (row 9)
    would fall outside B's 4-row tile. The scheduled function, and it compacted and over-computed."""
    a = te.placeholder((10, 16), name="A")
    if reduce_by is None:
        b = te.compute((10, 16), lambda i, j: a[i, j] * 2.0, name="B")
    else:
        k = te.reduce_axis((0, 16), name="k")
        b = te.compute((10, 16), lambda i, j: te.sum(a[i, k] * 2.0, axis=k), name="B")
    c = te.compute((10, 16), lambda i, j: b[i, j] + 1.0, name="C")
    sch = Schedule(te.create_prim_func([a, c]), seed=0)
    block = sch.get_block("C")
    local = sch.cache_write(block, 0, "local")
    i, _ = sch.get_loops(block)
    i0, i1, _ = sch.split(i, [4, 1, 4])
    sch.compute_at(sch.get_block("B"), i1)
    sch.reverse_compute_at(local, i0)
    if reduce_by is not None:
        sch.split(sch.get_loops(sch.get_block("B"))[-1], [None, reduce_by])
    return sch.func, overcompute_guarded_tiles(compact_buffers(sch.func))


def _block(func: PrimFunc, name: str) -> Block:
    return next(blk for blk in blocks(func.body) if blk.name == name)


def test_a_tile_read_along_the_guard_is_read_unclamped_where_its_writer_filled_it() -> None:
    """B, over-computed, fills its whole tile (rows past 10 hold row 9's values): C reads it where it
    is, unclamped and inside the tile, and is over-computed too; the result holds."""
    func, relaxed = _staged_rows(reduce_by=None)
    c = _block(relaxed, "C")
    assert not conjuncts(_block(relaxed, "B").predicate) and not conjuncts(c.predicate)
    (read,) = [ld for ld in block_loads(c) if ld.buffer.name == "B"]
    assert not any(isinstance(i, Binary) and i.op == Op.MIN for i in read.indices)
    av = rng.standard_normal((10, 16)).astype("float32")
    out = np.empty_like(av)
    build(func)(av, out)
    np.testing.assert_allclose(out, av * 2 + 1, rtol=1e-6)


def test_a_tile_whose_writer_keeps_a_guard_is_not_read_past_it() -> None:
    """B's reduction split 16 by 3 keeps its guard (a step past it would add into valid sums), so
    B's tile is not whole: C keeps its guard. The result holds."""
    func, relaxed = _staged_rows(reduce_by=3)
    assert conjuncts(_block(relaxed, "B").predicate) and conjuncts(_block(relaxed, "C").predicate)
    av = rng.standard_normal((10, 16)).astype("float32")
    out = np.empty_like(av)
    build(func)(av, out)
    want = np.repeat((av * 2).sum(axis=1, keepdims=True), 16, axis=1) + 1
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_a_staged_panel_over_a_range_is_read_unguarded_and_copied_as_rows() -> None:
    """A symbolic matmul whose column panel of B is staged per column tile (as a tuned trace for
    BERT's attention scores does): the copy is over-computed and vectorized (its clamped rows one
    masked load each), the update reads the panel unclamped; right at every length compared."""
    n = te.var("n", range=(1, 100))
    a = te.placeholder((n, 16), name="A")
    b = te.placeholder((16, n), name="B")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = Schedule(te.create_prim_func([a, b, c]), seed=0)
    block = sch.get_block("C")
    local = sch.cache_write(block, 0, "local")
    i, j, kk = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, 16])
    i0, i1 = sch.split(i, [None, 2])
    sch.reorder(j0, i0, kk, i1, j1)
    sch.vectorize(j1)
    sch.compute_at(sch.cache_read(block, 1, "global"), j0)
    sch.reverse_compute_at(local, i0)
    relaxed = overcompute_guarded_tiles(compact_buffers(sch.func))
    assert not conjuncts(
        _block(
            relaxed, "C_update" if any(x.name == "C_update" for x in blocks(relaxed.body)) else "C"
        ).predicate
    )
    kernel = build(sch.func)
    for length in (1, 2, 15, 16, 17, 63, 100):
        av = rng.standard_normal((length, 16)).astype("float32")
        bv = rng.standard_normal((16, length)).astype("float32")
        out = np.empty((length, length), np.float32)
        kernel(av, bv, out)
        np.testing.assert_allclose(out, av @ bv, rtol=1e-5, atol=1e-5)


def _tiled_by_eight(y: te.Tensor, *inputs: te.Tensor) -> PrimFunc:
    """Rows in tiles of 8 through a scratch tile (over-computed), each tile written back guarded."""
    sch = Schedule(te.create_prim_func([*inputs, y]), seed=0)
    block = sch.get_block(y.name)
    i, _ = sch.get_loops(block)
    outer, _ = sch.split(i, [None, 8])
    sch.reverse_compute_at(sch.cache_write(block, 0, "local"), outer)
    relaxed = overcompute_guarded_tiles(compact_buffers(sch.func))
    assert not conjuncts(next(b for b in blocks(relaxed.body) if b.name == y.name).predicate)
    return sch.func


def test_an_overcomputed_row_computes_what_the_last_valid_row_does() -> None:
    """Past n the row variable is clamped everywhere in the value, not only in the loads: a divisor
    that is 0 only past n divides nothing (it trapped), and a select whose condition holds only past
    n takes no branch the program never takes (it read far outside A)."""
    n = rows()
    x, d = te.placeholder((n, 16), dtype="int64", name="X"), te.placeholder((1,), dtype="int64", name="D")
    divided = _tiled_by_eight(te.compute((n, 16), lambda i, j: x[i, j] // (d[0] - i), name="Y"), x, d)
    a = te.placeholder((n, 16), name="A")
    far = te.compute((n, 16), lambda i, j: te.select(i >= n, a[i - (1 << 32), j], a[i, j] * 2.0), name="Y")
    selected = _tiled_by_eight(far, a)
    divide, select = build(divided), build(selected)
    for m in (1, 5, 8, 13, 39):
        xv = rng.integers(-1000, 1000, (m, 16)).astype("int64")
        yv = np.empty_like(xv)
        divide(xv, np.array([m + 3], "int64"), yv)  # the divisor is 0 at row m + 3, in the last tile
        np.testing.assert_array_equal(yv, xv // (m + 3 - np.arange(m)[:, None]))
        av = rng.standard_normal((m, 16)).astype("float32")
        out = np.empty_like(av)
        select(av, out)
        np.testing.assert_allclose(out, av * 2, rtol=1e-6)


@pytest.mark.parametrize("fused", [False, True])
def test_an_intermediate_written_by_a_guarded_tile_grows_to_the_ranges_largest_tiles(fused: bool) -> None:
    """A matmul accumulating straight into an intermediate of n rows (no scratch tile), in tiles of 3
    rows, then an epilogue: the intermediate is allocated with the rows the last tiles reach over
    the range, the matmul computes its last tile whole, without a guard; every length right, nothing
    written past n. Without a writer it could relax, the intermediate keeps the size of the call.
    `fused`: the column tiles fused with the symbolic count of row tiles into one parallel loop (as
    GPT-2's tuned MLP kernel is), its column index the fused loop divided by that count."""
    n = rows(100)
    x, w = te.placeholder((n, 16), name="X"), te.placeholder((16, 8), name="W")
    k = te.reduce_axis((0, 16), name="k")
    y = te.compute((n, 8), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="Y")
    z = te.compute((n, 8), lambda i, j: y[i, j] * 2.0 + 1.0, name="Z")
    sch = Schedule(te.create_prim_func([x, w, z]), seed=0)
    i, j, kk = sch.get_loops(sch.get_block("Y"))
    io, ii = sch.split(i, [None, 3])
    if fused:
        jo, ji = sch.split(j, [None, 4])
        sch.reorder(jo, io, kk, ii, ji)
        sch.parallel(sch.fuse(jo, io))
        sch.vectorize(ji)
    else:
        sch.reorder(io, kk, ii, j)
        sch.vectorize(j)
    relaxed = overcompute_guarded_tiles(compact_buffers(sch.func))
    assert [b.shape for b in relaxed.allocs] == [(102, 8)]  # 34 tiles of 3 rows at n = 100
    assert not conjuncts(_block(relaxed, "Y").predicate)
    kernel = build(sch.func)
    for m in (1, 2, 3, 4, 7, 99, 100):
        xv, wv = (
            rng.standard_normal((m, 16)).astype("float32"),
            rng.standard_normal((16, 8)).astype("float32"),
        )
        out = np.full((m + 2, 8), 7.0, "float32")
        kernel(xv, wv, out[:m])
        np.testing.assert_allclose(out[:m], (xv @ wv) * 2 + 1, rtol=1e-5, atol=1e-5, err_msg=f"n = {m}")
        assert (out[m:] == 7).all(), f"wrote past n = {m}"
    unsplit = overcompute_guarded_tiles(compact_buffers(te.create_prim_func([x, w, z])))
    assert [b.shape for b in unsplit.allocs] == [(n, 8)]
