"""A uint8 x int8 matmul or dense layer with int32 sums (a quantized model's GEMM, ONNX's
MatMulInteger) computed by AVX-512 VNNI where the CPU has it: MetaSchedule's tiling with a tensor
intrinsic, for `dot_16x4_vnni` (`compiler.intrinsics_x86`).

The weights of each column tile are staged and packed 16 x 4 (`transform_layout`): four consecutive
reduction steps of sixteen output columns side by side, one 64-byte load per vpdpbusd. A register
tile of `rows` x `tiles` x 16 int32 sums stays in zmm registers across the reduction (a local
accumulator written back per row tile), each step broadcasting four bytes of the row. The column
tiles run in parallel, each packing its own panel. On a 512^3 GEMM the untuned program so ran at
5.9x the one MultiLevelTiling gives (`python -m bench tensorize`, bench/RESULTS.md).

It takes a block of the form C[i, j] += int32(A[i, k]) * int32(B[k, j]) (or B[j, k]: a dense layer's
weights; or weights packed at compile time, `matmul_integer_vnni`, which need no panel) with the
columns a multiple of 16 and the reduction of 4; anything else is left to MultiLevelTiling."""

from __future__ import annotations

from compiler.ir import Binary, Cast, Const, Expr, Load, PrimFunc, Var, structural_equal
from compiler.ops import Op
from compiler.schedule import BlockRV, LoopRV, Schedule
from compiler.schedule_rules.analysis import block_of, loop_kinds
from compiler.schedule_rules.rule import BlockRule, RuleContext

INTRINSIC = "dot_16x4_vnni"
FEATURE = "avx512vnni"
LANES, STEPS = 16, 4  # the intrinsic's output columns and reduction steps
MAX_ROWS = 8
ROWS_K, COLUMNS_K, PACKED = "[k, j]", "[j, k]", "packed"  # how a GEMM reads its weights
ACCUMULATORS = 24  # of AVX-512's 32 registers: the rest hold the broadcast row and the loaded weights


class TensorizeVNNI(BlockRule):
    def apply_to(self, sch: Schedule, name: str, ctx: RuleContext) -> None:
        if FEATURE not in ctx.cfg.features:
            return
        form = vnni_form(sch.func, name)
        if form is not None:
            ctx.placed |= _tile(sch, name, form, ctx)


def vnni_form(func: PrimFunc, name: str) -> str | None:
    """How the block, if it is the intrinsic's GEMM, reads its weights: [k, j] (ROWS_K), [j, k]
    (COLUMNS_K) or packed already (PACKED, `matmul_integer_vnni`); None when it is not that GEMM
    or its extents do not fit the intrinsic. Leading batch
    dimensions of one (a model's [1, tokens, width] activations) are taken."""
    kinds = loop_kinds(func, name)
    if kinds[-3:] != ["S", "S", "R"] or set(kinds[:-3]) - {"S"}:
        return None
    block = block_of(func, name)
    *unit, i, j, k = (iv.var for iv in block.iter_vars)
    extents = [iv.extent for iv in block.iter_vars]
    if not all(isinstance(e, int) for e in extents) or any(e != 1 for e in extents[:-3]):
        return None
    if extents[-2] % LANES or extents[-1] % STEPS:
        return None
    out = block.body
    value = out.value
    if block.init is None or out.buffer.dtype != "int32" or _rows(out.indices, unit) != (i, j):
        return None
    if not (isinstance(value, Binary) and value.op == Op.ADD and isinstance(value.a, Load)):
        return None
    if value.a.buffer != out.buffer or _rows(value.a.indices, unit) != (i, j):
        return None
    product = value.b
    if not (isinstance(product, Binary) and product.op == Op.MUL):
        return None
    a, b = _int32_of(product.a, "uint8"), _int32_of(product.b, "int8")
    if a is None or b is None or _rows(a.indices, unit) != (i, k):
        return None
    if len(b.indices) == 4:
        return PACKED if _packed(b.indices, j, k) else None
    weights = _rows(b.indices, unit)
    if weights == (k, j):
        return ROWS_K
    return COLUMNS_K if weights == (j, k) else None


def _packed(indices: tuple[Expr, ...], j: Var, k: Var) -> bool:
    """Whether weights are read as matmul_integer_vnni packs them: [j // 16, k // 4, j % 16, k % 4]."""
    want = (
        Binary(Op.FLOORDIV, j, Const(LANES, "int64")),
        Binary(Op.FLOORDIV, k, Const(STEPS, "int64")),
        Binary(Op.FLOORMOD, j, Const(LANES, "int64")),
        Binary(Op.FLOORMOD, k, Const(STEPS, "int64")),
    )
    return all(structural_equal(a, b) for a, b in zip(indices, want))


def _rows(indices: tuple[Expr, ...], unit: list[Var]) -> tuple[Expr, ...] | None:
    """The last two indices, where the ones before are the unit batch variables or 0."""
    *batch, row, column = indices
    if not all((isinstance(b, Var) and b in unit) or (isinstance(b, Const) and b.value == 0) for b in batch):
        return None
    return (row, column)


def _int32_of(e: object, dtype: str) -> Load | None:
    if isinstance(e, Cast) and e.dtype == "int32" and isinstance(e.value, Load) and e.value.dtype == dtype:
        return e.value
    return None


def _tile(sch: Schedule, name: str, form: str, ctx: RuleContext) -> set[str]:
    """Schedule the GEMM; returns the blocks placed (it, its init, its panel and accumulator)."""
    block = sch.get_block(name)
    *_, i, j, k = sch.get_loops(block)
    rows, tiles = ctx.decide.intrinsic_tiles(sch.func, name)
    row_tiles = sch.sample_perfect_tile(i, n=2, max_innermost_factor=MAX_ROWS, decision=rows)
    io, ii = sch.split(i, row_tiles)
    jt, ji = sch.split(j, [None, LANES])
    most = ACCUMULATORS // int(row_tiles[1])
    jo, jj = sch.split(jt, sch.sample_perfect_tile(jt, n=2, max_innermost_factor=most, decision=tiles))
    ko, ki = sch.split(k, [None, STEPS])
    sch.reorder(jo, io, ko, ii, jj, ji, ki)
    placed = {name}
    if form != PACKED:
        placed.add(_packed_panel(sch, block, jo, form == ROWS_K).name)
    accumulator = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(accumulator, io)
    init = sch.decompose_reduction(block, ko)
    sch.tensorize(ji, INTRINSIC)
    sch.unroll(ii)
    sch.unroll(jj)
    sch.parallel(jo)
    return placed | {init.name, accumulator.name}


def _packed_panel(sch: Schedule, block: BlockRV, jo: LoopRV, weights_kj: bool) -> BlockRV:
    """The weights of one column tile, staged under it and packed 16 x 4, copied in the packed
    order (sequential stores, no division per element)."""
    panel = sch.cache_read(block, 1)
    sch.compute_at(panel, jo)
    kj = "k, j" if weights_kj else "j, k"
    sch.transform_layout(panel, ("write", 0), f"lambda {kj}: (j // 16, k // 4, j % 16, k % 4)")
    first, second = sch.get_loops(panel)[-2:]
    steps, lanes = (first, second) if weights_kj else (second, first)
    so, si = sch.split(steps, [None, STEPS])
    lo, li = sch.split(lanes, [None, LANES])
    sch.reorder(lo, so, li, si)
    return panel
