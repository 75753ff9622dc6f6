"""The Winograd rule: a conv whose transformed weights are small computes every stage per block of
tiles under the product's parallel loop; one with large weights stages them over the whole image, the
product parallel over transform points; both forms, by default and as sampled, compute the conv."""

import numpy as np
import pytest

from compiler import Schedule, ScheduleError, Target, build, te
from compiler.auto_unroll import AUTO_UNROLL_MAX_STEP
from compiler.graph import OPS, Attrs
from compiler.ir import For
from compiler.schedule.tree import find_block, loops_above, nodes
from compiler.schedule_rules import RuleConfig, default_schedule, winograd_tiling
from compiler.winograd import PRODUCT_RULE
from tests.compiler.graph.op_check import assert_schedules, random_inputs
from tuner.search.space import rule_space

PRODUCT = "conv_wino_m"
# (x shape, K): 64 channels' weights are 256 KiB transformed; 160 channels', 1.6 MiB
SMALL, LARGE = ((1, 64, 10, 12), 64), ((1, 160, 4, 4), 160)


def conv_bias_relu(x_shape: tuple[int, ...], K: int):
    """A Winograd F(2, 3) conv, pad 1, with a bias and a relu after it, as fusion hands it over; its
    function and the numpy reference."""
    C = x_shape[1]
    attrs = Attrs.of({"padding": (1, 1, 1, 1)})
    x, w = te.placeholder(x_shape, "float32", "x"), te.placeholder((4, 4, C, K), "float32", "w")
    bias = te.placeholder((K, 1, 1), "float32", "bias")
    conv = OPS["conv2d_winograd"].compute([x, w], attrs, "conv")
    add = te.compute(conv.shape, lambda n, k, y, i: conv[n, k, y, i] + bias[k, 0, 0], name="add")
    relu = te.compute(conv.shape, lambda *i: te.max(add[i], 0.0), name="relu")

    def reference(x, w, bias):
        return np.maximum(OPS["conv2d_winograd"].reference([x, w], attrs) + bias, 0)

    shapes = [x_shape, (4, 4, C, K), (K, 1, 1)]
    return te.create_prim_func([x, w, bias, relu]), reference, shapes


def enclosing_kinds(sch: Schedule, block: str) -> list[str]:
    path, _ = find_block(sch.func.body, block)
    return [loop.kind for _, loop in loops_above(sch.func.body, path)]


def product_parallel_loop(sch: Schedule) -> For:
    path, _ = find_block(sch.func.body, PRODUCT)
    return next(loop for _, loop in loops_above(sch.func.body, path) if loop.kind == "parallel")


def assert_default_computes(case: tuple) -> Schedule:
    func, reference, shapes = conv_bias_relu(*case)
    arrays = random_inputs(shapes)
    sch = default_schedule(func, Target.host())
    got = np.full(func.params[-1].shape, np.nan, np.float32)
    build(sch.func, Target.host(), listings=False)(*arrays, got)
    np.testing.assert_allclose(got, reference(*arrays), rtol=1e-4, atol=1e-4)
    return sch


def test_small_weights_compute_every_stage_per_block_of_tiles():
    func, _, _ = conv_bias_relu(*SMALL)
    assert not winograd_tiling.staged(func, PRODUCT)
    sch = assert_default_computes(SMALL)
    parallel = product_parallel_loop(sch)
    for stage in ("conv_wino_pad", "conv_wino_v", "conv_wino", "relu"):
        path, _ = find_block(sch.func.body, stage)
        assert parallel in [loop for _, loop in loops_above(sch.func.body, path)], stage


def test_large_weights_stage_the_transforms_and_read_each_weight_once():
    func, _, _ = conv_bias_relu(*LARGE)
    assert winograd_tiling.staged(func, PRODUCT)
    sch = assert_default_computes(LARGE)
    parallel = product_parallel_loop(sch)
    assert parallel.extent % 16 == 0  # every transform point, times blocks of output channels
    for stage in ("conv_wino_pad", "conv_wino_v", "conv_wino"):
        assert enclosing_kinds(sch, stage)[0] == "parallel", stage
        path, _ = find_block(sch.func.body, stage)
        assert parallel not in [loop for _, loop in loops_above(sch.func.body, path)], stage


def vectorized_loops_are_innermost(sch: Schedule) -> bool:
    """LLVM cannot vectorize a loop around other loops (a register tile's K tile of one element left
    the write-back without a loop of its own, and its outer K loop, around the reduction, was
    vectorized instead: a warning per candidate and a scalar kernel)."""
    loops = [s for _, s in nodes(sch.func.body) if isinstance(s, For) and s.kind == "vectorized"]
    return all(not any(isinstance(n, For) for _, n in nodes(loop.body)) for loop in loops)


@pytest.mark.parametrize("case", [SMALL, LARGE], ids=["small weights", "large weights"])
def test_samples_of_the_space_compute_the_conv(case):
    func, reference, shapes = conv_bias_relu(*case)
    samples = assert_schedules(func, reference, shapes, range(3))
    assert all(enclosing_kinds(s, PRODUCT)[0] == "parallel" for s in samples)
    assert all(vectorized_loops_are_innermost(s) for s in samples)


def test_the_space_unrolls_a_winograd_kernel_at_most_64_steps():
    """Unrolled 512 steps, the transforms' loops of terms made a kernel compile for seconds."""
    func, _, _ = conv_bias_relu(*SMALL)
    space = rule_space(RuleConfig.for_target(Target.host()))
    budgets = set()
    for seed in range(12):
        sch = Schedule(func, seed=seed)
        space(sch)
        budgets.add(dict(sch.func.attrs)[AUTO_UNROLL_MAX_STEP])
    assert budgets <= {0, 16, 64} and len(budgets) > 1


def test_a_register_tile_of_one_element_vectorizes_no_loop_around_the_reduction():
    func, _, _ = conv_bias_relu(*SMALL)
    sch = Schedule(func)
    placed = winograd_tiling.tile(sch, PRODUCT, [[10, 1], [1, 12, 1], [64, 1]], lanes=16, registers=32)
    assert PRODUCT in placed
    assert vectorized_loops_are_innermost(sch)


@pytest.mark.parametrize(
    "lanes, registers, want",
    [(16, 32, [[28, 1], [1, 7, 4], [1, 64]]), (8, 16, [[28, 1], [1, 14, 2], [2, 32]])],
    ids=["AVX-512", "AVX2"],
)
def test_the_default_register_tile_fills_half_the_registers(lanes, registers, want):
    """ResNet-18's 56x56 layer: 28 x 28 tiles, 64 output channels; rows alone give every core work."""
    func, _, _ = conv_bias_relu((1, 64, 56, 56), 64)
    assert winograd_tiling.tile_decisions(func, PRODUCT, lanes, registers, cores=2) == want


def test_a_block_that_only_claims_the_rule_is_refused_by_it_not_miscompiled():
    """A PrimFunc spec may name the rule on any block: on a plain matmul the rule refuses with a
    ScheduleError (which the search skips and the default schedule falls back from)."""
    A, B = te.placeholder((8, 12), name="A"), te.placeholder((12, 16), name="B")
    k = te.reduce_axis((0, 12), name="k")
    annotations = {te.SCHEDULE_RULE: PRODUCT_RULE}
    Y = te.compute((8, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y", annotations=annotations)
    func = te.create_prim_func([A, B, Y])
    space = rule_space(RuleConfig.for_target(Target.host()))
    with pytest.raises(ScheduleError):
        space(Schedule(func, seed=0))
    a, b = random_inputs([(8, 12), (12, 16)])
    got = np.full((8, 16), np.nan, np.float32)
    build(default_schedule(func, Target.host()).func, Target.host(), listings=False)(a, b, got)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
