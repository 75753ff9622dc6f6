"""The default rule-based space: every sample of every workload computes what numpy computes, replays
into the identical program (from its trace, and from its TVMScript), and has the structure the rules
promise (tiles, parallel, vector, unroll)."""

import json

import numpy as np
import pytest

from compiler import Schedule, Trace, build
from compiler.auto_unroll import AUTO_UNROLL_MAX_STEP
from compiler.ir import For
from compiler.schedule.tree import find_block, loops_above
from compiler.schedule_rules import UNROLL_STEPS, RuleConfig, block_names
from compiler.schedule_rules.analysis import contiguous_rows, is_tiling_target, packable_reads
from compiler.script import from_source
from compiler.visit import block_reads, walk_stmt
from compiler.workloads import workload_from_spec
from tests import machines
from tuner.search.space import rule_space

SPECS = {
    "matmul": {"op": "matmul", "params": {"M": 97, "N": 60, "K": 31}},
    "matmul_relu": {"op": "matmul_relu", "params": {"M": 33, "N": 40, "K": 17}},
    "dense_bias_relu": {
        "op": "dense_bias_relu",
        "params": {"batch": 4, "in_features": 50, "out_features": 24},
    },
    "batch_matmul": {"op": "batch_matmul", "params": {"B": 2, "M": 16, "N": 12, "K": 8}},
    "conv2d_nchw": {
        "op": "conv2d_nchw",
        "params": {"N": 1, "C": 3, "H": 9, "W": 10, "K": 8, "R": 3, "S": 3, "padding": 1},
    },
    "conv2d_nhwc": {
        "op": "conv2d_nhwc",
        "params": {"N": 1, "C": 4, "H": 7, "W": 7, "K": 6, "R": 3, "S": 3, "padding": 1, "stride": 2},
    },
    "conv2d_1x1": {
        "op": "conv2d_nchw",
        "params": {"N": 1, "C": 5, "H": 7, "W": 9, "K": 6, "R": 1, "S": 1},
    },
    "softmax": {"op": "softmax", "params": {"M": 6, "N": 40}},
    "cumsum": {"op": "cumsum", "params": {"M": 9, "N": 20}},
    "add": {"op": "add", "params": {"shape": [13, 64]}},
}


def sample(spec: dict, seed: int) -> tuple:
    workload = workload_from_spec(spec)
    sch = Schedule(workload.func, seed=seed)
    rule_space(RuleConfig.for_target(machines.AVX512))(sch)
    return workload, sch


def loop_kinds(func) -> list[str]:
    return [s.kind for s in walk_stmt(func.body) if isinstance(s, For)]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", sorted(SPECS))
def test_samples_compute_what_numpy_computes_and_replay(name, seed):
    workload, sch = sample(SPECS[name], seed)
    inputs = workload.random_inputs(np.random.default_rng(seed))
    outputs = workload.empty_outputs()
    build(sch.func, listings=False)(*inputs, *outputs)
    for got, want in zip(outputs, workload.reference(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    replayed = Trace.from_json(json.loads(json.dumps(sch.trace.to_json()))).apply(workload.func)
    assert replayed.func == sch.func
    assert from_source(sch.func.script()) == sch.func  # and its TVMScript reads back as itself


@pytest.mark.parametrize("seed", range(6))
def test_matmul_is_tiled_ssrsrs_parallel_vectorized_and_unroll_annotated(seed):
    _, sch = sample(SPECS["matmul"], seed)
    kinds = [inst.kind for inst in sch.trace.instructions]
    tiles = [inst.args["n"] for inst in sch.trace.instructions if inst.kind.endswith("_tile")]
    assert tiles[:3] == [2, 4, 4]  # innermost first: k in two levels, j and i in four
    assert "decompose_reduction" in kinds
    assert {"parallel", "vectorized"} <= set(loop_kinds(sch.func))
    assert dict(sch.func.attrs)[AUTO_UNROLL_MAX_STEP] in UNROLL_STEPS


def shares_loops(func, a: str, b: str) -> bool:
    """Whether blocks `a` and `b` sit under a common loop."""
    paths = [{path for path, _ in loops_above(func.body, find_block(func.body, name)[0])} for name in (a, b)]
    return bool(paths[0] & paths[1])


def test_the_relu_consumer_is_fused_under_the_matmul_tiles_in_some_samples():
    fused = sum(shares_loops(sample(SPECS["matmul_relu"], seed)[1].func, "C", "Y") for seed in range(12))
    assert 0 < fused < 12  # three variants: in place, fused at tile level 1, at level 2


def test_bias_add_is_inlined():
    _, sch = sample(SPECS["dense_bias_relu"], 0)
    assert "Z" not in {b.name for b in sch.get_child_blocks(sch.get_block("root"))}


def test_padding_samples_its_compute_location():
    _, sch = sample(SPECS["conv2d_nchw"], 0)
    assert any(inst.kind == "sample_compute_location" for inst in sch.trace.instructions)


AVX2 = RuleConfig.for_target(machines.AVX2)
AVX512 = RuleConfig.for_target(machines.AVX512)


@pytest.mark.parametrize("config", [AVX2, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize("name", ["matmul", "batch_matmul", "conv2d_nchw", "conv2d_nhwc"])
def test_the_register_tile_fits_the_vector_registers(name, config):
    """The innermost spatial tiles, the vectorized one first, hold at most 4 vectors per row and at most
    the accumulator registers in all, for every sample."""
    workload = workload_from_spec({**SPECS[name], "params": {**SPECS[name]["params"], **BIG.get(name, {})}})
    for seed in range(20):
        sch = Schedule(workload.func, seed=seed)
        rule_space(config)(sch)
        tiles = [i for i in sch.trace.instructions if i.kind == "sample_perfect_tile" and i.args["n"] == 4]
        vector, *others = [int(t.decision[-1]) for t in tiles]
        assert vector <= 4 * config.vector_lanes
        registers = -(-vector // config.vector_lanes) * np.prod(others, dtype=int)
        assert registers <= config.accumulator_registers


# Extents with many factors, so an unbounded sample would often exceed the registers.
BIG = {
    "matmul": {"M": 96, "N": 128},
    "batch_matmul": {"M": 48, "N": 64},
    "conv2d_nchw": {"K": 32, "H": 16, "W": 32},
    "conv2d_nhwc": {"K": 64, "H": 16, "W": 16, "stride": 1},
}


def test_the_space_fits_the_machine_it_is_built_for():
    assert (AVX2.vector_lanes, AVX2.vector_registers) == (8, 16)
    assert (AVX512.vector_lanes, AVX512.vector_registers) == (16, 32)
    assert AVX2.accumulator_registers == 12


@pytest.mark.parametrize(
    ("config", "extent", "limit"),
    [
        (AVX512, 112, 64),
        (AVX512, 113, 113),
        (AVX512, 97, 97),
        (AVX512, 257, 64),
        (AVX512, 7, 64),
        (AVX2, 113, 113),
        (AVX2, 127, 127),
        (AVX2, 131, 32),
        (AVX2, 112, 32),
    ],
)
def test_a_prime_row_may_be_one_vector_tile_up_to_128_lanes(config, extent, limit):
    """A prime extent's only tiles are 1 and itself: without the whole row, one lane at a time."""
    assert config.vector_tile_limit(extent) == limit


def test_a_matmul_of_prime_extents_samples_vectorized_rows():
    workload = workload_from_spec({"op": "matmul", "params": {"M": 97, "N": 113, "K": 127}})
    widths = set()
    for seed in range(12):
        sch = Schedule(workload.func, seed=seed)
        rule_space(AVX512)(sch)
        tiles = [i for i in sch.trace.instructions if i.kind == "sample_perfect_tile" and i.args["n"] == 4]
        widths.add(int(tiles[0].decision[-1]))
    assert widths == {1, 113}


@pytest.mark.parametrize(
    ("name", "packable"),
    [("matmul", ["B"]), ("batch_matmul", ["B"]), ("conv2d_nhwc", ["weight"]), ("dense_bias_relu", [])],
)
def test_inputs_read_along_the_vector_loop_and_reused_across_another_are_packable(name, packable):
    """matmul's B[k, j] is read along j, the vectorized loop, and reused across i; an NHWC conv's
    weights along the output channels, reused across pixels. A dense layer's W[j, k] runs along the
    reduction, and no tile of it is a contiguous run of the vector loop."""
    func = workload_from_spec(SPECS[name]).func
    tiled = [n for n in block_names(Schedule(func)) if is_tiling_target(func, n)]
    block = find_block(func.body, tiled[0])[1]
    reads = [b for b in block_reads(block) if b != block.body.buffer]
    assert [reads[k].name for k in packable_reads(func, tiled[0])] == packable


def test_the_sampled_space_copies_no_panel():
    """Sampled panels lost to not packing in the search, paired by seed (bench/results/2026-11-25-a.md)."""
    for seed in range(6):
        _, sch = sample(SPECS["matmul"], seed)
        assert "cache_read" not in {i.kind for i in sch.trace.instructions}


def _conv(R: int, stride: int = 1, padding: int = 0, op: str = "conv2d_nchw", size: int = 7) -> dict:
    params = {"N": 1, "C": 8, "H": size, "W": size, "K": 16, "R": R, "S": R, "stride": stride}
    params["padding"] = padding
    return {"op": op, "params": params}


@pytest.mark.parametrize(
    ("spec", "rows"),
    [
        (_conv(1), 2),  # n, f, [y, x]: every operand reads the image as one run of 49
        (_conv(1, size=14), None),  # rows of 14 fill 14 of 16 lanes already
        (_conv(3), None),  # the input's rows are 9 apart, the output's 7
        (_conv(3, padding=1), None),  # the padded input's rows are 9 wide
        (_conv(1, stride=2), None),  # every other element of every other row
        (_conv(1, op="conv2d_nhwc"), None),  # channels innermost: x is not contiguous with them
        (_conv(1, op="conv2d_nchw_kblock"), None),  # the input does not read the channel block
        (SPECS["matmul"], None),  # A reads rows, not columns: no run over both
        (SPECS["batch_matmul"], None),
    ],
    ids=["1x1", "1x1 14x14", "3x3", "3x3 padded", "1x1 stride 2", "nhwc", "kblock", "matmul", "batch_matmul"],
)
def test_loops_every_operand_reads_as_one_run_are_found(spec, rows):
    func = workload_from_spec(spec).func
    (name,) = [n for n in block_names(Schedule(func)) if is_tiling_target(func, n)]
    assert contiguous_rows(func, name, 16) == rows


@pytest.mark.parametrize("seed", range(4))
def test_a_1x1_convs_image_is_tiled_as_one_fused_loop(seed):
    """Its register tile vectorizes runs of the fused H x W loop (up to 4 vectors), not of a row."""
    _, sch = sample(_conv(1), seed)
    instructions = sch.trace.instructions
    kinds = [i.kind for i in instructions]
    assert kinds.index("fuse") < kinds.index("sample_perfect_tile")
    tiles = [i.decision for i in instructions if i.kind == "sample_perfect_tile" and i.args["n"] == 4]
    assert [np.prod(t) for t in tiles] == [49, 16, 1]  # the fused image, the filters, the batch
    assert tiles[0][-1] in (1, 7, 49)
