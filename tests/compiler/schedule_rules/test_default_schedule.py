"""The default schedule: for every kind of function te produces for a model, it builds, computes what
the unscheduled function computes, is deterministic, and its trace stores and replays like any other;
and it makes the choices its heuristic promises."""

import json
import math
import random

import numpy as np
import pytest

from compiler import PrimFunc, Schedule, ScheduleError, Target, Trace, build, te, topi
from compiler.auto_unroll import AUTO_UNROLL_MAX_STEP
from compiler.ir import For
from compiler.schedule.tree import find_block, loops_above
from compiler.schedule_rules import RuleConfig, analysis, default, default_schedule
from compiler.schedule_rules import heuristic as ds
from compiler.visit import blocks, walk_stmt
from compiler.workloads import workload_from_spec
from tests import machines
from tuner.search.mutators import mutate_tile_size

F32 = "float32"


def matmul(m: int, k: int, n: int) -> PrimFunc:
    a, b = te.placeholder((m, k), F32, "A"), te.placeholder((k, n), F32, "B")
    r = te.reduce_axis((0, k), "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def batch_matmul_broadcast() -> PrimFunc:
    """(1, 5, 8) @ (3, 8, 12): A's batch dimension broadcasts."""
    a, b = te.placeholder((1, 5, 8), F32, "A"), te.placeholder((3, 8, 12), F32, "B")
    r = te.reduce_axis((0, 8), "k")
    c = te.compute((3, 5, 12), lambda n, i, j: te.sum(a[0, i, r] * b[n, r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def dense_bias_relu(rows: int = 4) -> PrimFunc:
    x, w, bias = (
        te.placeholder((rows, 19), F32, "X"),
        te.placeholder((19, 24), F32, "W"),
        te.placeholder((24,), F32, "b"),
    )
    r = te.reduce_axis((0, 19), "k")
    y = te.compute((rows, 24), lambda i, j: te.sum(x[i, r] * w[r, j], axis=r), name="Y")
    z = te.compute((rows, 24), lambda i, j: y[i, j] + bias[j], name="Z")
    out = te.compute((rows, 24), lambda i, j: te.max(z[i, j], 0.0), name="R")
    return te.create_prim_func([x, w, bias, out])


def pad(data: te.Tensor, p: int, value: float = 0.0) -> te.Tensor:
    n, c, h, w = data.shape
    return te.compute(
        (n, c, h + 2 * p, w + 2 * p),
        lambda i, j, y, x: te.select(
            te.all(y >= p, y < h + p, x >= p, x < w + p), data[i, j, y - p, x - p], value
        ),
        name="pad",
    )


def conv(data: te.Tensor, weight: te.Tensor, stride: int, padding: int, depthwise: bool = False) -> te.Tensor:
    n, c, h, w = data.shape
    k, _, kh, kw = weight.shape
    padded = pad(data, padding)
    oh, ow = (h + 2 * padding - kh) // stride + 1, (w + 2 * padding - kw) // stride + 1
    ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
    if depthwise:
        return te.compute(
            (n, c, oh, ow),
            lambda i, f, y, x: te.sum(
                padded[i, f, y * stride + ry, x * stride + rx] * weight[f, 0, ry, rx], axis=[ry, rx]
            ),
            name="conv",
        )
    rc = te.reduce_axis((0, c), "rc")
    return te.compute(
        (n, k, oh, ow),
        lambda i, f, y, x: te.sum(
            padded[i, rc, y * stride + ry, x * stride + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]
        ),
        name="conv",
    )


def conv2d() -> PrimFunc:
    data, weight = te.placeholder((1, 3, 9, 10), F32, "data"), te.placeholder((8, 3, 3, 3), F32, "weight")
    return te.create_prim_func([data, weight, conv(data, weight, 1, 1)])


def depthwise_conv2d() -> PrimFunc:
    data, weight = te.placeholder((1, 6, 9, 9), F32, "data"), te.placeholder((6, 1, 3, 3), F32, "weight")
    return te.create_prim_func([data, weight, conv(data, weight, 2, 1, depthwise=True)])


def conv2d_bias_residual_relu() -> PrimFunc:
    """A fused ResNet block tail: conv, + bias (K, 1, 1), + residual, relu."""
    data, weight = te.placeholder((1, 4, 7, 7), F32, "data"), te.placeholder((6, 4, 3, 3), F32, "weight")
    bias, residual = te.placeholder((6, 1, 1), F32, "bias"), te.placeholder((1, 6, 7, 7), F32, "residual")
    c = conv(data, weight, 1, 1)
    b = te.compute(c.shape, lambda n, f, y, x: c[n, f, y, x] + bias[f, 0, 0], name="bias_add")
    s = te.compute(c.shape, lambda n, f, y, x: b[n, f, y, x] + residual[n, f, y, x], name="residual_add")
    out = te.compute(c.shape, lambda n, f, y, x: te.max(s[n, f, y, x], 0.0), name="relu")
    return te.create_prim_func([data, weight, bias, residual, out])


def max_pool() -> PrimFunc:
    data = te.placeholder((1, 3, 13, 13), F32, "data")
    padded = pad(data, 1, float("-inf"))
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    out = te.compute(
        (1, 3, 7, 7),
        lambda n, c, y, x: te.max(padded[n, c, 2 * y + ry, 2 * x + rx], axis=[ry, rx]),
        name="pool",
    )
    return te.create_prim_func([data, out])


def global_avg_pool() -> PrimFunc:
    data = te.placeholder((2, 5, 7, 7), F32, "data")
    ry, rx = te.reduce_axis((0, 7), "ry"), te.reduce_axis((0, 7), "rx")
    total = te.compute(
        (2, 5, 1, 1), lambda n, c, y, x: te.sum(data[n, c, ry, rx], axis=[ry, rx]), name="total"
    )
    out = te.compute((2, 5, 1, 1), lambda n, c, y, x: total[n, c, y, x] / 49.0, name="mean")
    return te.create_prim_func([data, out])


def column_sum() -> PrimFunc:
    a = te.placeholder((37, 45), F32, "A")
    k = te.reduce_axis((0, 37), "k")
    out = te.compute((45,), lambda j: te.sum(a[k, j], axis=k), name="colsum")
    return te.create_prim_func([a, out])


def softmax() -> PrimFunc:
    a = te.placeholder((2, 3, 13), F32, "A")
    k1, k2 = te.reduce_axis((0, 13), "k"), te.reduce_axis((0, 13), "k")
    mx = te.compute((2, 3), lambda i, j: te.max(a[i, j, k1], axis=k1), name="max")
    e = te.compute((2, 3, 13), lambda i, j, k: te.exp(a[i, j, k] - mx[i, j]), name="exp")
    s = te.compute((2, 3), lambda i, j: te.sum(e[i, j, k2], axis=k2), name="sum")
    out = te.compute((2, 3, 13), lambda i, j, k: e[i, j, k] / s[i, j], name="softmax")
    return te.create_prim_func([a, out])


def layer_norm() -> PrimFunc:
    x, gamma, beta = (
        te.placeholder((6, 20), F32, "x"),
        te.placeholder((20,), F32, "gamma"),
        te.placeholder((20,), F32, "beta"),
    )
    k1, k2 = te.reduce_axis((0, 20), "k"), te.reduce_axis((0, 20), "k")
    mean = te.compute((6,), lambda i: te.sum(x[i, k1] / 20.0, axis=k1), name="mean")
    var = te.compute(
        (6,), lambda i: te.sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i]) / 20.0, axis=k2), name="var"
    )
    out = te.compute(
        (6, 20), lambda i, j: (x[i, j] - mean[i]) / te.sqrt(var[i] + 1e-5) * gamma[j] + beta[j], name="norm"
    )
    return te.create_prim_func([x, gamma, beta, out])


def elementwise_broadcast() -> PrimFunc:
    a, b = te.placeholder((3, 7, 13), F32, "A"), te.placeholder((7, 1), F32, "B")
    s = te.compute((3, 7, 13), lambda i, j, k: a[i, j, k] * b[j, 0], name="mul")
    out = te.compute((3, 7, 13), lambda i, j, k: te.tanh(te.exp(s[i, j, k] * 0.1)), name="out")
    return te.create_prim_func([a, b, out])


def transpose() -> PrimFunc:
    a = te.placeholder((2, 3, 5, 7), F32, "A")
    out = te.compute((2, 5, 3, 7), lambda i, j, k, m: a[i, k, j, m], name="T")
    return te.create_prim_func([a, out])


def concat() -> PrimFunc:
    a, b = te.placeholder((3, 4, 5), F32, "A"), te.placeholder((3, 7, 5), F32, "B")
    out = te.compute((3, 11, 5), lambda i, j, k: te.select(j < 4, a[i, j, k], b[i, j - 4, k]), name="cat")
    return te.create_prim_func([a, b, out])


def reshape() -> PrimFunc:
    a = te.placeholder((4, 6, 5), F32, "A")

    def index(i, j):
        flat = i * 15 + j
        return a[flat // 30, flat // 5 % 6, flat % 5]

    out = te.compute((8, 15), index, name="reshape")
    return te.create_prim_func([a, out])


FUNCS = {
    "matmul": lambda: matmul(13, 17, 40),
    "matmul_prime": lambda: matmul(7, 13, 1000),
    "dense_batch1": lambda: matmul(1, 37, 96),
    "dense_batch1_nblock": lambda: dense_nblock(768, 768),
    "batch_matmul_broadcast": batch_matmul_broadcast,
    "dense_bias_relu": dense_bias_relu,
    "dense_bias_relu_awkward_rows": lambda: dense_bias_relu(197),
    "matmul_awkward_rows": lambda: matmul(37, 17, 40),
    "conv2d": conv2d,
    "depthwise_conv2d": depthwise_conv2d,
    "conv2d_bias_residual_relu": conv2d_bias_residual_relu,
    "max_pool": max_pool,
    "global_avg_pool": global_avg_pool,
    "column_sum": column_sum,
    "softmax": softmax,
    "layer_norm": layer_norm,
    "elementwise_broadcast": elementwise_broadcast,
    "transpose": transpose,
    "concat": concat,
    "reshape": reshape,
}


def dense_nblock(k: int, n: int) -> PrimFunc:
    """A batch-1 dense layer on weights packed in 16-lane blocks of columns (`matmul_nblock`)."""
    a, w = te.placeholder((1, k), F32, "A"), te.placeholder((n // 16, k, 16), F32, "W")
    return te.create_prim_func([a, w, topi.matmul_nblock(a, w, "C")])


def run(func: PrimFunc, inputs: list[np.ndarray]) -> list[np.ndarray]:
    outputs = [np.zeros(p.shape, F32) for p in func.params[len(inputs) :]]
    build(func, Target.host())(*inputs, *outputs)
    return outputs


def inputs_of(func: PrimFunc, outputs: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(p.shape).astype(F32) for p in func.params[:-outputs]]


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_the_default_schedule_computes_what_the_function_computes_and_replays(name):
    func = FUNCS[name]()
    sch = default_schedule(func, Target.host())
    xs = inputs_of(func)
    for got, want in zip(run(sch.func, xs), run(func, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert default_schedule(func, Target.host()).trace == sch.trace
    stored = json.dumps(sch.trace.to_json())
    assert Trace.from_json(json.loads(stored)).apply(func).func == sch.func


def loop_kinds(func: PrimFunc) -> set[str]:
    return {s.kind for s in walk_stmt(func.body) if isinstance(s, For)}


def decisions(sch: Schedule) -> list:
    return [
        i.decision
        for i in sch.trace.instructions
        if i.kind in ("sample_perfect_tile", "sample_covering_tile")
    ]


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_every_function_runs_in_parallel_and_unrolls_moderately(name):
    sch = default_schedule(FUNCS[name](), machines.AVX512)
    assert "parallel" in loop_kinds(sch.func)
    assert dict(sch.func.attrs)[AUTO_UNROLL_MAX_STEP] == 64


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
@pytest.mark.parametrize(
    ("name", "func"),
    [
        ("relu", conv2d_bias_residual_relu()),
        ("C_local", matmul(13, 17, 40)),
        ("C_local", matmul(96, 40, 256)),
        ("C_local", matmul(197, 40, 64)),
    ],
)
def test_every_tile_mutation_of_the_default_trace_replays(name, func, isa):
    """The search starts from this trace: a mutation that fails to replay is a candidate lost (16% of
    them while the write-back's loop count depended on the tiles). The last matmul packs on AVX2."""
    trace = default_schedule(func, machines.target(isa, cores=2)).trace
    rng = random.Random(0)
    for _ in range(40):
        decisions = mutate_tile_size(trace, rng)
        assert decisions is not None
        replayed = trace.apply(func, decisions).func
        path, _ = find_block(replayed.body, name)
        assert loops_above(replayed.body, path)[-1][1].kind == "vectorized"


def test_a_matmul_gets_a_register_tile_of_rows_sharing_each_vector_and_an_accumulator():
    sch = default_schedule(matmul(128, 768, 768), machines.AVX512)
    k, j, i = decisions(sch)  # innermost loop first
    assert k == [12, 64]  # the largest inner reduction tile the space allows
    assert (i[3], j[3]) == (8, 48)  # 3 vectors x 8 rows = 24 accumulators: 11 loads per 24 FMAs
    assert i[1:3] == j[1:3] == [1, 1]  # the accumulator is exactly the register tile
    assert i[0] * j[0] == 16 * 16  # every other tile runs in parallel
    assert "cache_write" in {inst.kind for inst in sch.trace.instructions}


@pytest.mark.parametrize(("rows", "multiple"), [(197, 6), (97, 7), (37, 8)])
def test_awkward_rows_are_tiled_several_at_a_time_the_last_tile_guarded(rows, multiple):
    """A prime count of rows (a ViT's 197 tokens) is covered by the multiple from 4 to 8 that adds
    the fewest rows, so the register tile takes several rows, not one."""
    sch = default_schedule(matmul(rows, 768, 768), machines.AVX512)
    (cover,) = [inst for inst in sch.trace.instructions if inst.kind == "sample_covering_tile"]
    assert cover.args["multiple"] == multiple
    assert math.prod(cover.decision) == -(-rows // multiple) * multiple
    assert cover.decision[-1] > 1


def test_the_register_tile_fits_an_avx2_machine():
    _, j, i = decisions(default_schedule(matmul(128, 768, 768), machines.AVX2))
    assert math.ceil(j[3] / 8) * i[3] <= 12


def test_a_conv2d_tiles_filters_and_rows_and_fuses_its_relu_consumer():
    func = conv2d_bias_residual_relu()
    sch = default_schedule(func, machines.AVX512)
    rx, ry, rc, x, y, f, _ = decisions(sch)[:7]
    # A 7-wide row is one vector register (`vector_pieces`): 3 filters x 7 rows make 21 accumulators,
    # 10 loads per 21 FMAs. (Counted as 3 registers, it kept 6 x 1: 18 FMAs.)
    assert (f[3], y[3], x[3]) == (3, 7, 7)
    assert [rc[1], ry[1], rx[1]] == [4, 3, 3]  # the whole reduction inside the register tile
    names = {b.name for b in blocks(sch.func.body)}
    assert "bias_add" not in names and "residual_add" not in names  # inlined into the relu
    assert "cache_write" not in {inst.kind for inst in sch.trace.instructions}  # the relu is fused
    path, _ = find_block(sch.func.body, "relu")
    assert [lp.kind for _, lp in loops_above(sch.func.body, path)][-1] == "vectorized"


def conv2d_clip_reading_batch_0() -> PrimFunc:
    """A batch-1 conv whose relu6 reads it at batch index 0, as a model's fused kernels do."""
    data, weight = te.placeholder((1, 4, 7, 7), F32, "data"), te.placeholder((6, 4, 3, 3), F32, "weight")
    bias = te.placeholder((6,), F32, "bias")
    c = conv(data, weight, 1, 1)
    out = te.compute(
        c.shape, lambda n, f, y, x: te.min(te.max(c[0, f, y, x] + bias[f], 0.0), 6.0), name="clip"
    )
    return te.create_prim_func([data, weight, bias, out])


def kblock_conv_relu_nchw() -> PrimFunc:
    """A conv computed in blocks of 16 output channels whose bias + relu writes NCHW, as the model
    graph builds ResNet's convs: the epilogue reads the conv at (k // 16, k % 16)."""
    data = te.placeholder((1, 8, 9, 9), F32, "data")
    weight, bias = te.placeholder((2, 8, 3, 3, 16), F32, "weight"), te.placeholder((32,), F32, "bias")
    c = topi.conv2d_nchw_kblock(data, weight, (1, 1), (1, 1, 1, 1), (1, 1), "conv", "pad")
    out = te.compute(
        (1, 32, 9, 9), lambda n, k, y, x: te.max(c[0, k // 16, y, x, k % 16] + bias[k], 0.0), name="relu"
    )
    return te.create_prim_func([data, weight, bias, out])


@pytest.mark.parametrize(
    ("make", "consumer"),
    [(conv2d_clip_reading_batch_0, "clip"), (kblock_conv_relu_nchw, "relu")],
    ids=["batch read as 0", "blocks read back as NCHW"],
)
def test_a_model_kernels_epilogue_is_fused_under_the_convs_tile(make, consumer):
    func = make()
    sch = default_schedule(func, machines.AVX512)
    assert "cache_write" not in {inst.kind for inst in sch.trace.instructions}
    conv_path, _ = find_block(sch.func.body, "conv")
    consumer_path, _ = find_block(sch.func.body, consumer)
    (parallel,) = [lp for _, lp in loops_above(sch.func.body, conv_path) if lp.kind == "parallel"]
    assert parallel in [lp for _, lp in loops_above(sch.func.body, consumer_path)]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(b.shape).astype(F32) for b in func.params[:3]]
    got, want = (np.zeros(func.params[3].shape, F32) for _ in range(2))
    build(sch.func)(*args, got)
    build(func)(*args, want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("isa", "tile"), [("avx512", (8, 2, 14)), ("avx2", (4, 1, 14))])
def test_a_14_wide_conv_counts_its_rows_as_the_code_generator_loads_them(isa, tile):
    """A 14-lane row is one AVX-512 register and one masked load: 8 filters x 2 rows make 16
    accumulators (counted as 3 registers, the tile kept 4 x 2: 8; conv4_x 180 -> 187 GFLOPS). On AVX2
    it is 8 + 6 lanes, the 6 loaded as 4 + 2 and an insert: a second row costs more than the two
    filters it saves (2 x 2 ran 0.82x of 4 x 1 on conv4_x_expand, bench/results/2026-11-25-c.md, eleventh
    stop). Rows of 14 stay rows (rows of 7 are fused: the next test)."""
    data, weight = (
        te.placeholder((1, 64, 14, 14), F32, "data"),
        te.placeholder((256, 64, 1, 1), F32, "weight"),
    )
    sch = default_schedule(
        te.create_prim_func([data, weight, conv(data, weight, 1, 0)]), getattr(machines, isa.upper())
    )
    _, _, _, x, y, f = decisions(sch)[:6]
    assert (f[3], y[3], x[3]) == tile


def test_a_batch_1_dense_layer_streams_contiguous_runs_of_the_weights():
    k, j, _ = decisions(default_schedule(matmul(1, 768, 3072), machines.AVX512))
    assert k == [768, 1]  # the reduction outside the register tile
    assert j[2:] == [6, 64]  # 6 x 4 vectors of one weight row per reduction step
    assert j[0] >= machines.AVX512.cores


def test_a_narrow_batch_1_dense_layer_still_gives_every_core_a_parallel_tile():
    """784 -> 128 (an MLP's first layer) is two 64-lane tiles: side by side in S2 they left the
    parallel loop one iteration, one core of two (4.1 us, against 3.4 with one tile per core)."""
    _, j, i = decisions(default_schedule(matmul(1, 784, 128), machines.target("avx512", cores=2)))
    assert i[0] * j[0] >= 2


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
@pytest.mark.parametrize("k, n", [(768, 768), (768, 3072), (3072, 768)])
def test_a_batch_1_dense_layer_on_packed_weights_reads_few_runs_of_them_per_step(isa, k, n):
    """Each block of columns in the register tile is a run of the weights of its own, 16 x k apart;
    beyond LATENCY_CHAINS of them the prefetchers lose track (24 blocks ran 1.4-2.5x slower)."""
    _, _, jo, _ = decisions(default_schedule(dense_nblock(k, n), machines.target(isa, cores=2)))
    assert jo[3] <= ds.MAX_STREAMS
    assert jo[3] * 16 // machines.target(isa, cores=2).vector_lanes("float32") >= ds.LATENCY_CHAINS // 2
    assert jo[0] >= 2  # every core a parallel tile


def test_a_function_the_rules_refuse_falls_back_to_parallel_and_vector_loops(monkeypatch):
    def refuse(sch, rules, ctx):
        sch.split(sch.get_loops(sch.get_block("Y"))[0], [None, 2])  # some work, then a refusal
        raise ScheduleError("refused")

    monkeypatch.setattr(default, "apply_rules", refuse)
    func = dense_bias_relu()
    sch = default_schedule(func, Target.host())
    assert {"parallel", "vectorized"} <= loop_kinds(sch.func)
    assert all(None not in i.args["factors"] for i in sch.trace.instructions if i.kind == "split")  # afresh
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    xs = inputs_of(func)
    np.testing.assert_allclose(run(sch.func, xs)[0], run(func, xs)[0], rtol=1e-4, atol=1e-5)


def test_a_math_block_that_two_blocks_read_is_computed_once_and_others_are_inlined():
    softmax_blocks = {b.name for b in blocks(default_schedule(softmax(), machines.AVX512).func.body)}
    assert "exp" in softmax_blocks  # read by the sum and the division: inlined, it would run twice
    elementwise_blocks = {
        b.name for b in blocks(default_schedule(elementwise_broadcast(), machines.AVX512).func.body)
    }
    assert "mul" not in elementwise_blocks


def masked_copy() -> PrimFunc:
    """A where of a mask, then a copy to another view (a safe softmax's where, then its reshape)."""
    x, keep = te.placeholder((3, 7, 9), F32, "X"), te.placeholder((3, 7, 1), "bool", "keep")
    where = te.compute((3, 7, 9), lambda i, j, k: te.select(keep[i, j, 0], x[i, j, k], 0.0), name="where")
    out = te.compute((21, 9), lambda r, k: where[r // 7, r % 7, k], name="copy")
    return te.create_prim_func([x, keep, out])


def test_a_select_on_data_is_inlined_and_a_select_on_indices_is_not():
    """The where's condition is a load: nothing it guards moves into the consumer's loop. A
    padding's condition tests the indices: it stays a block, computed before its consumer."""
    func = masked_copy()
    sch = default_schedule(func, machines.AVX512)
    assert {b.name for b in blocks(sch.func.body)} == {"copy"}
    xs = inputs_of(func)
    xs[1] = np.random.default_rng(1).random((3, 7, 1)) < 0.5
    for got, want in zip(run(sch.func, xs), run(func, xs)):
        np.testing.assert_array_equal(got, want)
    assert "pad" in {b.name for b in blocks(default_schedule(conv2d(), machines.AVX512).func.body)}


def test_a_pool_runs_its_window_over_vectors_of_output_columns_and_pads_per_row():
    """Each tap of the window is one vector operation over a row of outputs (stride-2 loads), not a
    scalar window per output; the padded rows each parallel iteration reads are computed there.
    (ResNet-18's max pool: 226 us as it was tuned, 93 us so by default, bench/results/2026-11-25-e.md.)"""
    func = default_schedule(max_pool(), machines.AVX512).func
    path, _ = find_block(func.body, "pool")
    kinds = [lp.kind for _, lp in loops_above(func.body, path)]
    assert kinds == ["parallel", "serial", "serial", "serial", "vectorized"]
    pad_loops = loops_above(func.body, find_block(func.body, "pad")[0])
    assert pad_loops[0][1] is loops_above(func.body, path)[0][1]


@pytest.mark.parametrize(
    ("make", "block", "window"),
    [
        (max_pool, "pool", 3),
        (column_sum, "colsum", 0),
        (softmax, "max", None),
        (global_avg_pool, "total", None),
    ],
)
def test_only_reductions_reading_along_the_output_row_vectorize_it(make, block, window):
    """A softmax's row max reads each output's row 13 elements from the next output's: vectorized
    across outputs, every lane would be a gather, so its reduction stays innermost."""
    assert analysis.window_loop(make(), block) == window


def test_a_prime_row_is_vectorized_whole_not_one_element_per_parallel_iteration():
    """ResNet-18's max pool pads 112x112 images to 113x113: with vector tiles limited to the divisors
    up to 64, each of 817,216 parallel iterations padded one element (6.5 ms; whole rows: 0.39 ms)."""
    data = te.placeholder((4, 113), F32, "data")
    relu = te.compute((4, 113), lambda i, j: te.max(data[i, j], 0.0), name="relu")
    func = te.create_prim_func([data, relu])
    sch = default_schedule(func, machines.AVX512)
    assert decisions(sch) == [[1, 113]]
    path, _ = find_block(sch.func.body, "relu")
    assert [lp.kind for _, lp in loops_above(sch.func.body, path)] == ["parallel", "vectorized"]
    xs = inputs_of(func)
    np.testing.assert_allclose(run(sch.func, xs)[0], np.maximum(xs[0], 0))


def test_the_parallel_tiles_reuse_the_largest_operand_from_cache():
    """B (3072 x 768) is the largest operand and does not depend on the rows: the row tiles run inside
    each column tile. A conv's weights do not depend on the pixels: the pixels run inside."""
    decide = ds.Heuristic(RuleConfig.for_target(machines.AVX512), cores=2)
    assert decide.outer_order(matmul(128, 3072, 768), "C", ["S", "S", "R"]) == [1, 0]
    assert decide.outer_order(matmul(3072, 128, 16), "C", ["S", "S", "R"]) == [0, 1]  # A is largest
    conv = workload_from_spec(
        {"op": "conv2d_nchw_kblock", "params": {"N": 1, "C": 512, "H": 7, "W": 7, "K": 512, "R": 3, "S": 3}}
    ).func
    kinds = ["S"] * 5 + ["R"] * 3
    assert decide.outer_order(conv, "conv2d_nchw_kblock", kinds) == [1, 4, 0, 2, 3]  # fo, fi, n, y, x
    assert default_schedule(conv, machines.AVX512).func.body.var.name == "fo_0_fi_0_n_0_y_0_x_0_fused"


@pytest.mark.parametrize(("make", "per_tile"), [(depthwise_conv2d, True), (conv2d, False)])
def test_a_depthwise_convs_padding_is_computed_per_tile_and_a_dense_convs_once(make, per_tile):
    """No output channel of a depthwise conv reads another's input: its padding is computed inside
    the conv's parallel loop, a tile at a time, and read back from cache. The tiles of a dense conv
    share their padded input: it is computed once, at the root, before the conv."""
    func = default_schedule(make(), machines.AVX512).func

    def outermost(name: str) -> For:
        return loops_above(func.body, find_block(func.body, name)[0])[0][1]

    assert (outermost("pad") is outermost("conv")) == per_tile
    assert outermost("conv").kind == "parallel"


def test_a_matmul_copies_b_into_a_panel_per_column_stripe_that_every_row_tile_reads():
    """In place, B[k, j] is read as rows a matrix row apart; copied per parallel stripe of columns
    with every row tile inside the stripe, it is copied once and read from cache (a Zen 3, matmul
    512^3: 73 -> 160 GFLOPS)."""
    func = matmul(96, 40, 256)
    sch = default_schedule(func, machines.target("avx2", cores=2))
    _, j, i = decisions(sch)
    assert i[0] == 1 and i[1] * i[3] == 96
    assert j[0] >= ds.PANEL_MIN_STRIPES * 2

    def outermost(name: str) -> For:
        return loops_above(sch.func.body, find_block(sch.func.body, name)[0])[0][1]

    assert outermost("B_global") is outermost("C")
    assert outermost("C").kind == "parallel"
    xs = inputs_of(func)
    np.testing.assert_allclose(run(sch.func, xs)[0], xs[0] @ xs[1], rtol=1e-4, atol=1e-4)
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func


@pytest.mark.parametrize(
    ("m", "k", "n", "cores"),
    [(1, 512, 1024, 2), (512, 64, 16, 2), (512, 64, 64, 8)],
    ids=["one row reuses it", "its rows are one tile wide", "too few stripes for the cores"],
)
def test_no_panel_where_it_would_not_pay(m, k, n, cores):
    sch = default_schedule(matmul(m, k, n), machines.target("avx2", cores=cores))
    assert "cache_read" not in {i.kind for i in sch.trace.instructions}


def test_avx512_and_avx2_both_get_panels_and_a_tile_that_streams_less_of_b():
    """512^3: 4x64 and 8x32 tie on throughput and accumulators, but over the whole reduction 4x64 reads
    a 128 KiB stripe of B, 256 bytes a step from L2, and 8x32 64 KiB (a Xeon with two FMA ports: 8x32
    1.3x faster, both with panels; bench/results/2026-11-25-d.md, thirteenth stop). AVX2's 2x32 reads 64 KiB,
    within the bound."""
    for isa, tile in (("avx512", (8, 32)), ("avx2", (2, 32))):
        sch = default_schedule(matmul(512, 512, 512), machines.target(isa, cores=2))
        _, j, i = decisions(sch)
        assert "cache_read" in {inst.kind for inst in sch.trace.instructions}
        assert (i[3], j[3]) == tile


def test_a_batch_matmul_tile_keeps_each_heads_stripe_of_b_within_the_stream_bound():
    """BERT's attention context (12 heads, 128 x 128 by 128 x 64): 3 heads x 2 rows x 64 columns read
    96 KiB of V over the reduction; 3 x 4 x 32 read 48 KiB, the same 24 accumulators."""
    a, b = te.placeholder((12, 128, 128), F32, "A"), te.placeholder((12, 128, 64), F32, "B")
    r = te.reduce_axis((0, 128), "k")
    c = te.compute((12, 128, 64), lambda n, i, j: te.sum(a[n, i, r] * b[n, r, j], axis=r), name="C")
    _, j, i, n = decisions(
        default_schedule(te.create_prim_func([a, b, c]), machines.target("avx512", cores=2))
    )
    assert (n[3], i[3], j[3]) == (3, 4, 32)


def test_a_convs_register_tile_ignores_an_input_that_fits_the_stream_bound():
    """ResNet-18 conv2_x (64 channels, 56 x 56, 3 x 3): 4 filters x 56 columns read 44 KiB of the
    input over the reduction. Counted as streamed (a 16 KiB bound), it lost to 8 filters x 2 rows x
    14 columns, which ran 0.9x as fast."""
    data, weight = te.placeholder((1, 64, 56, 56), F32, "data"), te.placeholder((64, 64, 3, 3), F32, "weight")
    func = te.create_prim_func([data, weight, conv(data, weight, 1, 1)])
    _, _, _, x, y, f = decisions(default_schedule(func, machines.target("avx512", cores=2)))[:6]
    assert (f[3], y[3], x[3]) == (4, 1, 56)


def test_weights_packed_in_blocks_of_columns_get_no_second_panel():
    """A 16-lane block of columns is one contiguous run of K x 16 already: a copy per stripe would
    only take the rows out of the parallel loop."""
    a, w = te.placeholder((128, 768), F32, "A"), te.placeholder((48, 768, 16), F32, "W")
    func = te.create_prim_func([a, w, topi.matmul_nblock(a, w, "C")])
    sch = default_schedule(func, machines.AVX2)
    assert "cache_read" not in {i.kind for i in sch.trace.instructions}


def test_a_row_that_fills_every_register_is_not_taken_whole():
    """122 lanes are 16 AVX2 registers (64 + 32 + 16 + 8 + 2): with the broadcast operand they spill.
    61 lanes fit. (118 lanes are 15, the 6-lane remainder one vector, and run whole: 93-100 GFLOPS
    where 59 lanes ran 67-96, bench/results/2026-11-25-c.md, eleventh stop.)"""
    _, j, i = decisions(default_schedule(matmul(96, 64, 122), machines.AVX2))
    assert (i[3], j[3]) == (1, 61)
    _, j, _ = decisions(default_schedule(matmul(96, 64, 118), machines.AVX2))
    assert j[3] == 118


def test_a_prime_row_that_fills_every_register_is_still_vectorized():
    """127 lanes are 18 AVX2 registers, but the only other tile is 1 lane: scalar code."""
    _, j, _ = decisions(default_schedule(matmul(97, 113, 127), machines.AVX2))
    assert j[3] == 127


def test_a_prime_row_wider_than_the_accumulators_is_still_vectorized_whole():
    """113 lanes are 15 AVX2 registers, more than the 12 accumulators; its only other tile is 1 lane,
    scalar code (97x113x127: 5 GFLOPS)."""
    _, j, i = decisions(default_schedule(matmul(97, 127, 113), machines.AVX2))
    assert (i[3], j[3]) == (1, 113)


@pytest.mark.parametrize(("hw", "run"), [(7, 49), (5, 25)])
def test_a_1x1_convs_register_tile_is_a_run_of_its_fused_image(hw, run):
    """Rows of 7 filled 7 of 16 lanes; the fused image's run of 49 fills 49 of 64, and computes what
    the unscheduled conv computes."""
    data, weight = te.placeholder((1, 24, hw, hw), F32, "data"), te.placeholder((20, 24, 1, 1), F32, "weight")
    func = te.create_prim_func([data, weight, conv(data, weight, 1, 0)])
    sch = default_schedule(func, machines.AVX512)
    assert "fuse" in {i.kind for i in sch.trace.instructions}
    assert decisions(sch)[3][-1] == run  # rx, ry, rc, then the fused image's tiles
    rng = np.random.default_rng(hw)
    args = [rng.standard_normal(b.shape).astype(F32) for b in func.params[:2]]
    got, want = (np.zeros(func.params[2].shape, F32) for _ in range(2))
    build(sch.func)(*args, got)
    build(func)(*args, want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
