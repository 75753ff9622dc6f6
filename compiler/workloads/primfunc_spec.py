"""Workloads that arrive as a PrimFunc: `{"primfunc": compiler.serialize.to_json(func), "num_inputs": n}`,
how a fused graph kernel travels to workers like any other workload.

The function is data, never code: `compiler.serialize.from_json` checks that it is a well-formed tree,
and this module that it is an unscheduled program a worker can be trusted to compile and check, as
te.create_prim_func makes them: each block alone in a nest of plain serial loops that bind its
spatial, then reduce iteration variables one to one; a block writes every element of one buffer
(an output, i.e. a parameter after the first `num_inputs`, or an intermediate) once, and no other
block writes it; nothing is read before a block writes it; every load is proven inside its buffer
(`compiler.workloads.bounds`); and the limits of every spec hold (rank, extents, bytes, blocks, size
of the JSON). Each refusal is a WorkloadError naming the dotted path of the culprit in the spec
("primfunc.body[1][0][5]...").

The workload's identity is the function's structural hash, like any workload's, so the same fused
layer from two models is one workload; its reference is the numpy interpreter (`compiler.interpret`)
run on the function itself, and its flops are counted from the IR (`count_flops`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import partial
from typing import Any

from compiler import te, winograd
from compiler.dtypes import DTYPES, FLOAT_DTYPES
from compiler.interpret import COMBINERS, interpret, reduction_parts
from compiler.ir import (
    TRUE,
    Binary,
    Block,
    Buffer,
    Expr,
    For,
    IterVar,
    PrimFunc,
    SeqStmt,
    Stmt,
    Unary,
    static_dim,
)
from compiler.serialize import SerializeError, from_json, to_json
from compiler.visit import blocks, loads, walk_expr
from compiler.workloads.bounds import Range, check_expr
from compiler.workloads.workload import (
    MAX_BLOCKS,
    MAX_PRIMFUNC_BYTES,
    Workload,
    WorkloadError,
    check_bytes,
    check_int,
    check_shape,
    show,
)

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")  # functions, buffers, blocks, variables
# The annotations an unscheduled block may carry: the schedule rules the tuner's space knows.
SCHEDULE_RULES = ((te.SCHEDULE_RULE, winograd.PRODUCT_RULE),)


def primfunc_spec(func: PrimFunc, num_inputs: int) -> dict[str, Any]:
    """The spec of `func`, whose first `num_inputs` parameters are inputs (e.g. a fused kernel)."""
    return {"primfunc": to_json(func), "num_inputs": num_inputs}


def primfunc_workload(data: object, num_inputs: object) -> Workload:
    """The workload of the serialized PrimFunc `data` whose first `num_inputs` parameters are inputs."""
    n = check_int(num_inputs, "num_inputs", minimum=0)
    _check_size(data)
    func = _read(data)
    if n >= len(func.params):
        raise WorkloadError(
            "num_inputs", f"must leave at least one output: {func.name} has {len(func.params)} parameters"
        )
    _check_function(func, n)
    nests = _nests(func.body)
    for nest in nests:
        nest.check()
    _check_dataflow(func, n, nests)
    for nest in nests:
        nest.check_expressions()
    return Workload(func.name, primfunc_spec(func, n), func, n, partial(interpret, func), count_flops(func))


def func_workload(func: PrimFunc, num_inputs: int | None = None) -> Workload:
    """The workload of `func` as written (a user's kernel): `num_inputs`, or its leading parameters
    that no block writes."""
    n = leading_inputs(func) if num_inputs is None else num_inputs
    return primfunc_workload(to_json(func), n)


def leading_inputs(func: PrimFunc) -> int:
    """How many leading parameters are inputs: those no block writes, which must come first."""
    written = {b.body.buffer.name for b in blocks(func.body)}
    roles = [p.name in written for p in func.params]
    n = roles.index(True) if True in roles else len(roles)
    late = [p.name for p, out in zip(func.params[n:], roles[n:]) if not out]
    if late:
        raise WorkloadError(
            "num_inputs",
            f"the inputs (parameters no block writes) come before the outputs: {', '.join(late)} "
            "follow an output; or give num_inputs",
        )
    return n


def count_flops(func: PrimFunc) -> int:
    """Floating-point operations: each block's ops on float operands (arithmetic, math functions,
    min/max, comparisons; a reduction's combine included) per iteration, times its iteration domain.
    Index arithmetic, selects, casts and loads are not counted: for te's operators this is the
    registry's count (2 per multiply-add, 5 per softmax element)."""
    total = 0
    for block in blocks(func.body):
        per_iteration = sum(
            isinstance(e, (Binary, Unary)) and e.a.dtype in FLOAT_DTYPES for e in walk_expr(block.body.value)
        )
        total += per_iteration * math.prod(static_dim(iv.extent, "a workload") for iv in block.iter_vars)
    return total


def _check_size(data: object) -> None:
    """`data` is JSON of at most MAX_PRIMFUNC_BYTES, measured as it is written: a huge spec costs only
    the limit."""
    size = 0
    chunks = json.JSONEncoder(ensure_ascii=False, allow_nan=False).iterencode(data)
    while size <= MAX_PRIMFUNC_BYTES:
        try:
            chunk = next(chunks, None)
        except (TypeError, ValueError, RecursionError) as e:
            raise WorkloadError("primfunc", f"must be JSON data: {e}") from None
        if chunk is None:
            return
        size += len(chunk.encode())
    raise WorkloadError("primfunc", f"its JSON exceeds the limit of {MAX_PRIMFUNC_BYTES} bytes")


def _read(data: object) -> PrimFunc:
    try:
        return from_json(data)
    except SerializeError as e:
        path, _, message = str(e).partition(": ")
        raise WorkloadError("primfunc" if path == "function" else f"primfunc.{path}", message) from None
    except (ArithmeticError, ValueError, TypeError) as e:  # a number no node can hold: 1e400, 10**400
        raise WorkloadError("primfunc", f"is not a PrimFunc: {type(e).__name__}: {e}") from None


def _check_name(name: str, field: str) -> None:
    if not NAME.fullmatch(name):
        raise WorkloadError(field, f"{show(name)} is not a name: [A-Za-z_][A-Za-z0-9_]*, at most 64 long")


def _check_function(func: PrimFunc, num_inputs: int) -> None:
    _check_name(func.name, "primfunc.name")
    if func.size_vars:
        names = ", ".join(v.name for v in func.size_vars)
        raise WorkloadError(
            "primfunc.params", f"its dimensions {names} are symbolic: a tuned workload is static"
        )
    if func.attrs:
        raise WorkloadError("primfunc.attrs", "must be empty: an unscheduled function has no annotations")
    for group, buffers in (("params", func.params), ("allocs", func.allocs)):
        for k, b in enumerate(buffers):
            field = f"primfunc.{group}[{k}]"
            _check_name(b.name, f"{field}.name")
            check_shape(list(b.shape), f"{field}.shape")
            if b.dtype not in DTYPES:
                raise WorkloadError(f"{field}.dtype", f"must be one of {', '.join(DTYPES)}, got {b.dtype}")
    check_bytes(func.params + func.allocs, "primfunc")


def _nests(body: Stmt) -> list[_SpecBlock]:
    """The loop nests of the body, each around one block: the body is one nest or a seq of them."""
    if isinstance(body, SeqStmt):
        if len(body.stmts) < 2:
            raise WorkloadError("primfunc.body", "a seq holds two or more loop nests")
        stmts = [(s, f"primfunc.body[1][{k}]") for k, s in enumerate(body.stmts)]
    else:
        stmts = [(body, "primfunc.body")]
    if len(stmts) > MAX_BLOCKS:
        raise WorkloadError("primfunc.body", f"{len(stmts)} blocks exceed the limit of {MAX_BLOCKS}")
    nests = []
    loop_names: set[str] = set()
    for stmt, path in stmts:
        loops = []
        while isinstance(stmt, For):
            _check_loop(stmt, path, loop_names)
            loops.append(stmt)
            stmt, path = stmt.body, f"{path}[5]"
        if not isinstance(stmt, Block):
            raise WorkloadError(path, f"a loop nest holds one block, found {type(stmt).__name__}")
        nests.append(_SpecBlock(loops, stmt, path))
    return nests


def _check_loop(loop: For, path: str, names: set[str]) -> None:
    _check_name(loop.var.name, f"{path}[1]")
    if loop.var.name in names:
        raise WorkloadError(f"{path}[1]", f"the loop variable {loop.var.name} is defined twice")
    names.add(loop.var.name)
    check_int(loop.extent, f"{path}[2]", what="a loop extent")
    if loop.kind != "serial":
        raise WorkloadError(f"{path}[3]", f"loops of an unscheduled function are serial, got {loop.kind}")
    if loop.annotations:
        raise WorkloadError(f"{path}[4]", "loops of an unscheduled function have no annotations")


@dataclass(frozen=True)
class _SpecBlock:
    """A block with the loops around it; `path` is the block's in the spec."""

    loops: list[For]
    block: Block
    path: str

    @property
    def spatial(self) -> list[IterVar]:
        return [iv for iv in self.block.iter_vars if iv.kind == "S"]

    def check(self) -> None:
        """The block's structure: as te.create_prim_func makes blocks."""
        block, path = self.block, self.path
        _check_name(block.name, f"{path}[1]")
        self.check_iter_vars()
        if not bool(block.predicate == TRUE):
            raise WorkloadError(f"{path}[6]", "an unscheduled block has no predicate")
        if block.annotations and (len(block.annotations) > 1 or block.annotations[0] not in SCHEDULE_RULES):
            raise WorkloadError(
                f"{path}[7]",
                f"an unscheduled block's only annotation names a schedule rule: {SCHEDULE_RULES}",
            )
        out = block.body.buffer
        extents = tuple(iv.extent for iv in self.spatial)
        if out.shape != extents:
            raise WorkloadError(
                f"{path}[4][1]", f"{out.name} has shape {out.shape}; the spatial variables span {extents}"
            )
        spatial = tuple(iv.var for iv in self.spatial)
        if not _same(block.body.indices, spatial):
            raise WorkloadError(f"{path}[4][3]", "a block stores at its spatial variables, in order")
        self.check_reduction()

    def check_iter_vars(self) -> None:
        block, path = self.block, self.path
        if len(block.iter_vars) != len(self.loops):
            raise WorkloadError(
                f"{path}[2]",
                f"{len(self.loops)} loops around the block bind {len(block.iter_vars)} iteration variables",
            )
        loop_names = {loop.var.name for loop in self.loops}
        seen: set[str] = set()
        for k, (iv, binding, loop) in enumerate(zip(block.iter_vars, block.bindings, self.loops)):
            field = f"{path}[2][{k}]"
            _check_name(iv.var.name, f"{field}[0]")
            if iv.var.name in seen or iv.var.name in loop_names:
                raise WorkloadError(f"{field}[0]", f"{iv.var.name} names another variable of the nest")
            seen.add(iv.var.name)
            if iv.kind not in ("S", "R"):
                raise WorkloadError(f"{field}[2]", f"must be S or R (spatial, reduce), got {iv.kind}")
            if iv.kind == "S" and k and block.iter_vars[k - 1].kind == "R":
                raise WorkloadError(f"{field}[2]", "spatial variables come before reduce variables")
            if iv.extent != loop.extent:
                raise WorkloadError(
                    f"{field}[1]", f"must be the extent of loop {loop.var.name}, {loop.extent}"
                )
            if not bool(binding == loop.var):
                raise WorkloadError(f"{path}[3][{k}]", f"must be the loop variable {loop.var.name}")

    def check_reduction(self) -> None:
        block, path = self.block, self.path
        reduces = any(iv.kind == "R" for iv in block.iter_vars)
        if not reduces:
            if block.init is not None:
                raise WorkloadError(f"{path}[5]", "only a reduction has an init")
            return
        if block.init is None:
            raise WorkloadError(f"{path}[5]", "a reduction needs an init")
        init, body = block.init, block.body
        if init.buffer != body.buffer or not _same(init.indices, body.indices):
            raise WorkloadError(f"{path}[5]", "the init stores where the block does")
        if reduction_parts(block) is None:
            names = ", ".join(op.spec.name for op in COMBINERS)
            raise WorkloadError(
                f"{path}[4][2]", f"a reduction stores op({body.buffer.name}[...], value), op: {names}"
            )

    def reads(self) -> list[tuple[Buffer, str]]:
        """The buffers the block reads, with where: its own output only as a reduction's accumulator."""
        block = self.block
        parts = reduction_parts(block)
        value, where = (
            (parts[1], f"{self.path}[4][2][2]") if parts else (block.body.value, f"{self.path}[4][2]")
        )
        out = [(ld.buffer, where) for ld in loads(value)]
        if block.init is not None:
            out += [(ld.buffer, f"{self.path}[5][2]") for ld in loads(block.init.value)]
        return out

    def check_expressions(self) -> None:
        """Every variable in scope, every load inside its buffer, no overflow, no division by zero."""
        block, path = self.block, self.path
        spatial: dict[Expr, Range] = {
            iv.var: (0, static_dim(iv.extent, "a workload") - 1) for iv in self.spatial
        }
        every: dict[Expr, Range] = {
            iv.var: (0, static_dim(iv.extent, "a workload") - 1) for iv in block.iter_vars
        }
        check_expr(block.body.value, every, f"{path}[4][2]", "an iteration variable of this block")
        if block.init is not None:
            check_expr(block.init.value, spatial, f"{path}[5][2]", "a spatial variable of this block")


def _same(a: tuple[Expr, ...], b: tuple[Expr, ...]) -> bool:
    return len(a) == len(b) and all(bool(x == y) for x, y in zip(a, b))


def _check_dataflow(func: PrimFunc, num_inputs: int, nests: list[_SpecBlock]) -> None:
    """Each block writes an output or an intermediate no other block writes, and reads only inputs and
    buffers earlier blocks wrote; in the end every output and intermediate is written."""
    inputs = set(func.params[:num_inputs])
    written: dict[Buffer, str] = {}
    for nest in nests:
        if nest.block.name in written.values():
            raise WorkloadError(f"{nest.path}[1]", f"another block is named {nest.block.name}")
        for buffer, where in nest.reads():
            if buffer not in inputs and buffer not in written:
                raise WorkloadError(where, f"reads {buffer.name} before any block writes it")
        out, field = nest.block.body.buffer, f"{nest.path}[4][1]"
        if out in inputs:
            raise WorkloadError(field, f"{out.name} is an input: blocks write outputs and intermediates")
        if out in written:
            raise WorkloadError(field, f"block {written[out]} writes {out.name} already")
        written[out] = nest.block.name
    for group, buffers, first in (("params", func.params, num_inputs), ("allocs", func.allocs, 0)):
        for k, b in enumerate(buffers[first:], first):
            if b not in written:
                raise WorkloadError(f"primfunc.{group}[{k}]", f"no block writes {b.name}")
