"""Per-store features: a fixed shape whatever the program, and columns that follow the schedule."""

import math

import numpy as np
import pytest

from compiler import PrimFunc, Schedule, Trace
from compiler.auto_unroll import AUTO_UNROLL_MAX_STEP
from compiler.ir import BufferStore
from compiler.lower import lower
from compiler.visit import walk_stmt
from compiler.workloads import workload_from_spec
from tests.machines import AVX2, AVX512, target
from tuner.search.features import FEATURE_NAMES, N_BUFFERS, N_FEATURES, extract_features

SPECS = {
    "matmul": {"op": "matmul", "params": {"M": 64, "N": 48, "K": 32}},
    "conv2d": {
        "op": "conv2d_nchw",
        "params": {"N": 1, "C": 8, "H": 10, "W": 10, "K": 8, "R": 3, "S": 3, "padding": 1},
    },
    "softmax": {"op": "softmax", "params": {"M": 16, "N": 32}},
    "cumsum": {"op": "cumsum", "params": {"M": 16, "N": 32}},
}


def func_of(name: str) -> PrimFunc:
    return workload_from_spec(SPECS[name]).func


def features(func: PrimFunc) -> dict[str, np.ndarray]:
    """Feature columns by name (one entry per store)."""
    x = extract_features(func, target(cores=4))
    return {name: x[:, i] for i, name in enumerate(FEATURE_NAMES)}


def log(x: float) -> float:
    return math.log2(1 + x)


def n_stores(func: PrimFunc) -> int:
    return sum(isinstance(s, BufferStore) for s in walk_stmt(lower(func).body))


def matmul_schedule() -> tuple[Schedule, list]:
    sch = Schedule(func_of("matmul"))
    return sch, sch.get_loops(sch.get_block("C"))


def test_names_are_unique_and_count_the_columns():
    assert len(FEATURE_NAMES) == N_FEATURES == len(set(FEATURE_NAMES))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_one_row_per_store_and_fixed_columns(name):
    func = func_of(name)
    x = extract_features(func, AVX512)
    assert x.dtype == np.float32
    assert x.shape == (n_stores(func), N_FEATURES)
    assert np.isfinite(x).all() and (x >= 0).all()
    assert (x.sum(axis=1) > 0).all()


def test_scheduled_and_lowered_programs_give_the_same_features():
    sch, (i, j, _) = matmul_schedule()
    i0, _ = sch.split(i, [8, 8])
    sch.parallel(i0)
    sch.vectorize(j)
    a = extract_features(sch.func, AVX512)
    assert np.array_equal(a, extract_features(lower(sch.func), AVX512))
    assert np.array_equal(
        a, extract_features(Trace.from_json(sch.trace.to_json()).apply(func_of("matmul")).func, AVX512)
    )


def test_operation_counts_times_executions():
    mm = features(func_of("matmul"))
    # init store (runs once per (i, j): the `k == 0` guard pins k), then the update store
    assert mm["executions"] == pytest.approx([log(64 * 48), log(64 * 48 * 32)])
    assert mm["float_fma"] == pytest.approx([0, log(64 * 48 * 32)])
    assert mm["float_mul"][1] == mm["float_add"][1] == 0
    assert features(func_of("softmax"))["float_math_call"].max() == pytest.approx(log(16 * 32))
    conv = features(func_of("conv2d"))
    assert conv["select"][0] == pytest.approx(log(8 * 12 * 12))  # the padding store
    assert conv["int_cmp"][0] > 0 and conv["bool_op"][0] > 0


def test_vectorize_sets_vector_columns_relative_to_the_lanes():
    sch, (i, j, k) = matmul_schedule()
    sch.reorder(i, k, j)
    _, j1 = sch.split(j, [3, 16])
    before = features(sch.func)
    assert before["vectorized_count"].max() == before["vector_lanes_ratio"].max() == 0
    sch.vectorize(j1)
    f = features(sch.func)
    assert f["vectorized_count"][1] == 1
    assert f["vectorized_innermost_extent"][1] == pytest.approx(log(16))
    assert f["vectorized_pos"][1] == 0  # innermost
    assert f["vector_lanes_ratio"][1] == 1.0  # 16 float32 lanes with AVX-512
    assert f["vector_is_lanes_multiple"][1] == 1.0
    avx2 = extract_features(sch.func, AVX2)[:, FEATURE_NAMES.index("vector_lanes_ratio")]
    assert avx2[1] == 2.0


def test_parallel_extent_against_the_cores():
    sch, (i, _, _) = matmul_schedule()
    i0, _ = sch.split(i, [6, None])  # 6 chunks of 11 with a guarded tail
    sch.parallel(i0)
    f = features(sch.func)
    assert f["parallel_count"][1] == 1 and f["parallel_pos"][1] == log(3)
    assert f["outer_parallel_extent"][1] == pytest.approx(log(6))
    assert f["parallel_cores_ratio"][1] == pytest.approx(6 / 4)
    assert f["parallel_balance_ratio"][1] == pytest.approx(6 / 8)  # two rounds of 4 cores, 2 idle
    assert features(func_of("matmul"))["parallel_cores_ratio"].max() == 0


def test_unroll_explicit_and_auto():
    sch, (_, _, k) = matmul_schedule()
    _, k1 = sch.split(k, [8, 4])
    sch.unroll(k1)
    f = features(sch.func)
    assert f["unrolled_count"][1] == 1
    assert f["unrolled_innermost_extent"][1] == pytest.approx(log(4))
    assert f["unrolled_pos"][1] == 0

    sch = Schedule(func_of("matmul"))
    sch.annotate(sch.get_block("root"), AUTO_UNROLL_MAX_STEP, 64)
    f = features(sch.func)
    assert f["auto_unroll_max_step"][1] == pytest.approx(log(64))
    assert f["unrolled_innermost_extent"][1] == pytest.approx(log(32))  # k: 32 steps fit the budget


def buffer_columns(f: dict[str, np.ndarray], slot: int, row: int) -> dict[str, float]:
    prefix = f"buf{slot}_"
    return {n[len(prefix) :]: float(v[row]) for n, v in f.items() if n.startswith(prefix)}


def test_reorder_changes_strides_and_reuse():
    # update store: C (read and written) is buf0; A and B tie on bytes and sort by name
    sch, (i, j, k) = matmul_schedule()
    ijk = features(sch.func)
    c, a, b = (buffer_columns(ijk, s, 1) for s in range(3))
    assert c["is_readwrite"] == a["is_read"] == b["is_read"] == 1
    assert c["stride_zero"] == 1 and c["reuse_loop"] == 1 and c["reuse_count"] == pytest.approx(log(32))
    assert a["stride_one"] == 1
    assert b["stride_other"] == 1 and b["stride_elems"] == pytest.approx(log(48))  # B[k, j] walks rows
    assert b["reuse_level"] == pytest.approx(log(2))  # i is the innermost loop B ignores, 2 loops inside

    sch.reorder(i, k, j)
    ikj = features(sch.func)
    c, a, b = (buffer_columns(ikj, s, 1) for s in range(3))
    assert c["stride_one"] == b["stride_one"] == 1
    assert a["stride_zero"] == 1 and a["reuse_level"] == 0 and a["reuse_count"] == pytest.approx(log(48))
    assert b["footprint_l1"] == pytest.approx(log(48 * 4))  # one row of B under j
    assert ijk["buf2_footprint_l1"][1] == pytest.approx(log(32 * 4))  # one column of B under k
    assert ijk["buf2_lines"][1] > ikj["buf2_lines"][1]  # the column touches a line per element


def test_tiling_shrinks_inner_footprints():
    sch, (i, j, k) = matmul_schedule()
    untiled = features(sch.func)
    i0, i1 = sch.split(i, [16, 4])
    j0, j1 = sch.split(j, [3, 16])
    sch.reorder(i0, j0, k, i1, j1)
    tiled = features(sch.func)
    assert tiled["buf0_footprint_l2"][1] == pytest.approx(log(4 * 16 * 4))  # a 4x16 tile of C
    assert tiled["buf0_footprint_l3"][1] < untiled["buf0_footprint_l3"][1]
    # the same flops over the same bytes in the whole nest; tiling changes where the bytes are reused
    assert tiled["intensity_all"][1] == untiled["intensity_all"][1] > 0 == tiled["intensity_all"][0]


def test_allocations_in_scope():
    sch, (i, j, _) = matmul_schedule()
    block = sch.get_block("C")
    write = sch.cache_write(block, 0)
    i0, i1 = sch.split(i, [8, 8])
    j0, j1 = sch.split(j, [3, 16])
    sch.reorder(i0, j0, i1, j1)
    sch.reverse_compute_at(write, j0)
    f = features(sch.func)
    tile = log(8 * 16 * 4)
    assert list(f["alloc_count"]) == [1, 1, 1]
    assert f["alloc_bytes"] == pytest.approx([tile] * 3)
    assert list(f["target_is_alloc"]) == [1, 1, 0]  # init and update write the tile, the copy-out C
    assert f["target_alloc_bytes"] == pytest.approx([tile, tile, 0])
    assert features(func_of("matmul"))["alloc_count"].max() == 0


def test_unused_buffer_slots_are_zero():
    f = features(func_of("cumsum"))  # every store touches two buffers
    assert (f["buf1_bytes"] > 0).all()
    for name, column in f.items():
        if name.startswith(tuple(f"buf{b}_" for b in range(2, N_BUFFERS))):
            assert not column.any(), name
