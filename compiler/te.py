"""Tensor expressions: describe *what* to compute (TVM's `te`), then turn it into a PrimFunc.

A `Tensor` is a placeholder, a `compute` or one output of a `scan`. `create_prim_func` walks from the
given arguments to every tensor they need, and emits one block per computed tensor, in dependency
order, each in its own loop nest.
"""

from __future__ import annotations

import builtins
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from compiler.arith import bound, simplify
from compiler.dtypes import DTYPES, FLOAT_DTYPES, INDEX_DTYPE, INT_DTYPES, int_range
from compiler.ir import (
    Binary,
    Block,
    Buffer,
    BufferStore,
    Cast,
    Const,
    Expr,
    ExprLike,
    For,
    IRError,
    IterVar,
    Load,
    PrimFunc,
    Select,
    SizeVar,
    Stmt,
    Unary,
    Var,
    as_expr,
    binary,
    check_params,
    const,
    expr_node,
)
from compiler.names import unique_name
from compiler.ops import Op
from compiler.visit import free_vars, loads, map_expr, seq, substitute

# The block annotation naming a schedule rule of the tuner's space for the block (MetaSchedule's
# `schedule_rule`): a compute definition that knows how it wants to be tiled says so.
SCHEDULE_RULE = "schedule_rule"


class TensorError(ValueError):
    """A compute definition that cannot be turned into a program."""


@expr_node
class ReduceAxis(Var):
    """A reduction variable over [start, start + extent); usable in index expressions like any Var."""

    start: int = 0
    extent: int | Expr = 1

    @property
    def var(self) -> Var:
        return self


@expr_node
class Reduce(Expr):
    """A reduction of `source` over `axes`, combining with ADD, MAX or MIN; only valid at the top of
    a compute body."""

    combiner: Op
    source: Expr
    axes: tuple[ReduceAxis, ...]

    @property
    def dtype(self) -> str:
        return self.source.dtype

    def children(self) -> tuple[Expr, ...]:
        return (self.source,)

    def with_children(self, kids: Sequence[Expr]) -> Expr:
        return Reduce(self.combiner, kids[0], self.axes)


@dataclass(eq=False)
class Tensor:
    """A named tensor; indexing it gives a Load. `op` says how it is produced."""

    buffer: Buffer
    op: str  # "placeholder" | "compute" | "scan"
    axes: tuple[Var, ...] = ()
    body: Expr | None = None
    scan: _Scan | None = None
    annotations: tuple[tuple[str, object], ...] = ()  # of the block that computes it

    @property
    def shape(self) -> tuple[int, ...]:
        """Its shape; a symbolic dimension is its size var (an Expr) in place of an int. The annotation
        names the static case, which all but te itself compute with (the graph level and topi build
        static tensors only); te's own code reads `buffer.shape`, typed for both."""
        return self.buffer.shape  # type: ignore[return-value]

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def name(self) -> str:
        return self.buffer.name

    def __getitem__(self, indices: object) -> Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise TensorError(f"{self.name} has rank {len(self.shape)}, indexed with {len(indices)} indices")
        return TensorLoad(self.buffer, tuple(as_expr(i, INDEX_DTYPE) for i in indices), self)

    def __call__(self, *indices: ExprLike) -> Load:
        """`A(i, j)` is `A[i, j]`, as TVM's tensors are called (`lambda *i: A(*i)`)."""
        return self[indices]


@expr_node
class TensorLoad(Load):
    """A load that remembers its tensor, so create_prim_func can find producers; never in a PrimFunc."""

    tensor: Tensor = field(compare=False, repr=False)

    def with_children(self, kids: Sequence[Expr]) -> Expr:
        return TensorLoad(self.buffer, tuple(kids), self.tensor)


@dataclass(eq=False)
class _Scan:
    inits: tuple[Tensor, ...]
    updates: tuple[Tensor, ...]
    states: tuple[Tensor, ...]
    outputs: list[Tensor] = field(default_factory=list)


def var(name: str = "v", dtype: str = INDEX_DTYPE, range: tuple[int, int] | None = None) -> Var:
    """A variable; with `range=(lo, hi)` (inclusive) a symbolic dimension usable in shapes, whose value
    a kernel takes from its arguments' shapes at the call."""
    if range is None:
        return Var(name, dtype)
    lo, hi = range
    if dtype != INDEX_DTYPE:
        raise TensorError(f"var {name}: a symbolic dimension is {INDEX_DTYPE}, got {dtype}")
    return SizeVar(name, INDEX_DTYPE, int(lo), int(hi))


def _check_dim(s: object) -> bool:
    if isinstance(s, int) and not isinstance(s, bool):
        return s > 0
    if isinstance(s, Expr) and s.dtype == INDEX_DTYPE:
        if not builtins.all(isinstance(v, SizeVar) for v in free_vars(s)):
            return False
        b = bound(s, {})
        return b is not None and b[0] >= 1
    return False


def _check_shape(shape: Sequence[int | Expr], what: str) -> tuple[int | Expr, ...]:
    out = tuple(simplify(s) if isinstance(s, Expr) else s for s in shape)
    out = tuple(int(s.value) if isinstance(s, Const) else s for s in out)
    if not out or not builtins.all(_check_dim(s) for s in out):
        unranged = [s for s in out if isinstance(s, Var) and not isinstance(s, SizeVar)]
        hint = (
            f" ({unranged[0].name} needs a range: te.var({unranged[0].name!r}, range=(1, 512)))"
            if unranged
            else ""
        )
        raise TensorError(
            f"{what}: shape must be a non-empty tuple of positive ints or ranged te.var dims, "
            f"got {shape!r}{hint}"
        )
    return out


def _check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise TensorError(f"unsupported dtype {dtype!r}; expected one of {DTYPES}")
    return dtype


def placeholder(shape: Sequence[int | Expr], dtype: str = "float32", name: str = "placeholder") -> Tensor:
    return Tensor(Buffer(name, _check_shape(shape, name), _check_dtype(dtype)), "placeholder")


def reduce_axis(dom: tuple[int, int | Expr], name: str = "k") -> ReduceAxis:
    start, stop = dom
    if isinstance(stop, Expr):  # a symbolic end: (0, n)
        return ReduceAxis(name, INDEX_DTYPE, start, _check_shape([stop - start], f"reduce_axis {name}")[0])
    if stop <= start:
        raise TensorError(f"reduce_axis {name}: empty domain {dom}")
    return ReduceAxis(name, INDEX_DTYPE, start, stop - start)


def compute(
    shape: Sequence[int | Expr],
    fcompute: Callable[..., ExprLike],
    name: str = "compute",
    dtype: str | None = None,
    axis_names: Sequence[str] | None = None,
    annotations: Mapping[str, object] | None = None,
) -> Tensor:
    """A tensor whose element at `(i, j, ...)` is `fcompute(i, j, ...)`.

    Axes are named after fcompute's parameters; `lambda *i` (any rank) names them i0, i1, ...,
    and `axis_names` overrides both (for code that builds computations from data). `annotations`
    go on the block that computes it (a schedule rule's name, as MetaSchedule's `schedule_rule`)."""
    shape = _check_shape(shape, name)
    names = list(axis_names) if axis_names is not None else _axis_names(fcompute, len(shape))
    if len(names) != len(shape):
        raise TensorError(f"{name}: fcompute takes {len(names)} indices for a rank-{len(shape)} shape")
    axes = tuple(Var(p) for p in names)
    body = fcompute(*axes)
    body = as_expr(body, dtype)
    if dtype is not None and body.dtype != dtype:
        body = cast(dtype, body)
    ann = tuple(sorted((annotations or {}).items()))
    return Tensor(Buffer(name, shape, body.dtype), "compute", axes, body, annotations=ann)


def _axis_names(fcompute: Callable[..., ExprLike], rank: int) -> list[str]:
    params = inspect.signature(fcompute).parameters.values()
    if builtins.any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return [f"i{d}" for d in range(rank)]
    return [p.name for p in params]


ReduceAxes = ReduceAxis | Sequence[ReduceAxis]  # one reduction axis or several


def _reduce(combiner: Op, expr: ExprLike, axis: ReduceAxes) -> Reduce:
    axes = (axis,) if isinstance(axis, ReduceAxis) else tuple(axis)
    return Reduce(combiner, as_expr(expr), axes)


def sum(expr: ExprLike, axis: ReduceAxes) -> Reduce:
    return _reduce(Op.ADD, expr, axis)


def prod(expr: ExprLike, axis: ReduceAxes) -> Reduce:
    return _reduce(Op.MUL, expr, axis)


def max(a: ExprLike, b: ExprLike | ReduceAxes | None = None, axis: ReduceAxes | None = None) -> Expr:
    """Elementwise `max(a, b)`, or a reduction `max(expr, axis=k)` (also `max(expr, k)`)."""
    return _min_max(Op.MAX, a, b, axis)


def min(a: ExprLike, b: ExprLike | ReduceAxes | None = None, axis: ReduceAxes | None = None) -> Expr:
    """Elementwise `min(a, b)`, or a reduction `min(expr, axis=k)` (also `min(expr, k)`)."""
    return _min_max(Op.MIN, a, b, axis)


def _min_max(op: Op, a: ExprLike, b: ExprLike | ReduceAxes | None, axis: ReduceAxes | None) -> Expr:
    if axis is None and (isinstance(b, ReduceAxis) or (isinstance(b, (list, tuple)) and b)):
        axis, b = b, None
    if axis is not None:
        return _reduce(op, a, axis)
    if b is None or isinstance(b, Sequence):
        raise TensorError(f"{op.spec.name} needs a second operand or axis=")
    return binary(op, a, b)


def _math(op: Op, x: ExprLike) -> Expr:
    x = as_expr(x)
    if x.dtype not in FLOAT_DTYPES:
        raise TensorError(f"{op.spec.name} needs a float operand, got {x.dtype}")
    return Unary(op, x)


def exp(x: ExprLike) -> Expr:
    return _math(Op.EXP, x)


def expm1(x: ExprLike) -> Expr:
    """e^x - 1, accurate near 0 too."""
    return _math(Op.EXPM1, x)


def log1p(x: ExprLike) -> Expr:
    """log(1 + x), accurate near 0 too."""
    return _math(Op.LOG1P, x)


def sqrt(x: ExprLike) -> Expr:
    return _math(Op.SQRT, x)


def log(x: ExprLike) -> Expr:
    return _math(Op.LOG, x)


def tanh(x: ExprLike) -> Expr:
    return _math(Op.TANH, x)


def fabs(x: ExprLike) -> Expr:
    return _math(Op.FABS, x)


def floor(x: ExprLike) -> Expr:
    return _math(Op.FLOOR, x)


def ceil(x: ExprLike) -> Expr:
    return _math(Op.CEIL, x)


def trunc(x: ExprLike) -> Expr:
    """Toward zero."""
    return _math(Op.TRUNC, x)


def round(x: ExprLike) -> Expr:
    """To the nearest integer, halves to even (numpy's round, ONNX's Round, torch.round)."""
    return _math(Op.ROUND, x)


def erf(x: ExprLike) -> Expr:
    return _math(Op.ERF, x)


def fmod(x: ExprLike, y: ExprLike) -> Expr:
    """C's fmod: the remainder with x's sign (for ints too; a zero divisor is the caller's to avoid)."""
    return binary(Op.FMOD, x, y)


def power(x: ExprLike, y: ExprLike) -> Expr:
    """`x ** y` (a Python number takes the other operand's dtype); on integers exactly, wrapping
    (`compiler.ops`: a negative exponent gives the power truncated toward zero)."""
    return binary(Op.POW, x, y)


def sigmoid(x: ExprLike) -> Expr:
    """1 / (1 + exp(-x)), which saturates to 0 and 1 (exp overflows to inf, 1/inf is 0)."""
    e = exp(-as_expr(x))
    return 1.0 / (1.0 + e)


def select(cond: ExprLike, true_value: ExprLike, false_value: ExprLike) -> Expr:
    """`true_value` where `cond` holds, else `false_value`: `select(i == 0, A[i], B[i])`."""
    c = as_expr(cond)
    if c.dtype != "bool":
        raise TensorError(f"select: the condition must be a comparison (bool), got {c.dtype}")
    t = as_expr(true_value, false_value.dtype if isinstance(false_value, Expr) else None)
    f = as_expr(false_value, t.dtype)
    if t.dtype != f.dtype:
        raise TensorError(f"select: branch dtypes differ ({t.dtype} vs {f.dtype})")
    return Select(c, t, f)


def cast(dtype: str, x: ExprLike) -> Expr:
    return Cast(_check_dtype(dtype), as_expr(x))


def all(*conds: ExprLike) -> Expr:
    """Every condition holds."""
    return _fold_logic(Op.AND, conds)


def any(*conds: ExprLike) -> Expr:
    """Some condition holds."""
    return _fold_logic(Op.OR, conds)


def not_(cond: ExprLike) -> Expr:
    return Unary(Op.NOT, as_expr(cond))


def _fold_logic(op: Op, conds: Sequence[ExprLike]) -> Expr:
    if not conds:
        raise TensorError(f"{op.spec.name} needs at least one condition")
    out = as_expr(conds[0])
    for c in conds[1:]:
        out = binary(op, out, c)
    return out


def scan(
    init: Tensor | Sequence[Tensor],
    update: Tensor | Sequence[Tensor],
    state_placeholder: Tensor | Sequence[Tensor],
    inputs: Sequence[Tensor] | None = None,
    name: str = "scan",
) -> Tensor | list[Tensor]:
    """A recurrence over the first axis: rows [0, len(init)) from `init`, later rows from `update`,
    which may read earlier rows of the state. Several states advance together, as in TVM's te.scan.
    `inputs` is accepted for TVM compatibility; inputs are found from the update expressions."""
    inits = (init,) if isinstance(init, Tensor) else tuple(init)
    updates = (update,) if isinstance(update, Tensor) else tuple(update)
    states = (state_placeholder,) if isinstance(state_placeholder, Tensor) else tuple(state_placeholder)
    if not (len(inits) == len(updates) == len(states)):
        raise TensorError("scan: init, update and state lists must have the same length")
    steps = {u.shape[0] for u in updates}
    if len(steps) != 1:
        raise TensorError("scan: every update must have the same first dimension")
    for i, u, s in zip(inits, updates, states):
        more_rows = bound(simplify(as_expr(s.shape[0]) - i.shape[0]), {})  # for every value of a size var
        if u.shape != s.shape or i.shape[1:] != s.shape[1:] or more_rows is None or more_rows[0] < 1:
            raise TensorError(f"scan: shapes of init {i.shape}, update {u.shape}, state {s.shape} do not fit")
    sc = _Scan(inits, updates, states)
    names = [name] if len(states) == 1 else [f"{name}_{k}" for k in range(len(states))]
    for n, s in zip(names, states):
        sc.outputs.append(Tensor(Buffer(n, s.shape, s.dtype), "scan", scan=sc))
    return sc.outputs[0] if len(states) == 1 else list(sc.outputs)


class _Builder:
    """Turns a tensor graph into a PrimFunc: one block (and loop nest) per computed tensor."""

    def __init__(self) -> None:
        self.by_buffer: dict[Buffer, Tensor] = {}
        self.order: list[Tensor] = []
        self.done_scans: set[int] = set()
        self.in_scans: set[Buffer] = set()  # the stages of scans' bodies
        self.used_names: set[str] = set()
        self.stmts: list[Stmt] = []

    def fresh(self, name: str) -> Var:
        name = unique_name(name, self.used_names, sep="")
        self.used_names.add(name)
        return Var(name)

    def visit(self, t: Tensor) -> None:
        if t.buffer in self.by_buffer:
            return
        self.by_buffer[t.buffer] = t
        for dep in self.dependencies(t):
            self.visit(dep)
        if t.op == "scan":
            assert t.scan is not None
            for stage in self.scan_body(t.scan):
                self.in_scans.add(stage.buffer)
                if stage.buffer not in self.by_buffer:
                    self.by_buffer[stage.buffer] = stage
                    self.order.append(stage)
        self.order.append(t)

    def dependencies(self, t: Tensor) -> list[Tensor]:
        if t.op == "compute":
            assert t.body is not None
            return self.tensors_in(t.body)
        if t.op == "scan":
            assert t.scan is not None
            body = self.scan_body(t.scan)
            states = {s.buffer for s in t.scan.states}
            sources = [*t.scan.inits, *t.scan.updates, *body]
            deps = [d for u in sources for d in self.tensors_in(u.body)]
            return [d for d in deps if d.buffer not in states and d not in body]
        return []

    def scan_body(self, sc: _Scan) -> list[Tensor]:
        """The stages between a scan's states and its updates (TVM's multi-stage scan: `s1` from the
        previous row of the state, the update from `s1`), in dependency order: each is computed row
        by row inside the time loop, as the updates are."""
        states = {s.buffer for s in sc.states}
        memo: dict[Buffer, bool] = {}

        def on_state(t: Tensor) -> bool:
            if t.buffer in states:
                return True
            if t.op != "compute":
                return False
            if t.buffer not in memo:
                memo[t.buffer] = False  # a cycle cannot happen: tensors are built from earlier ones
                memo[t.buffer] = builtins.any(on_state(d) for d in self.tensors_in(t.body))
            return memo[t.buffer]

        order: list[Tensor] = []
        seen: set[Buffer] = set()

        def visit(t: Tensor) -> None:
            for d in self.tensors_in(t.body):
                if d.buffer not in seen and d.buffer not in states and on_state(d):
                    seen.add(d.buffer)
                    visit(d)
                    order.append(d)

        for u in sc.updates:
            visit(u)
        rows = sc.states[0].shape[0]
        for t in order:
            if t.shape[0] != rows:
                raise TensorError(f"scan: stage {t.name} must have the states' {rows} rows, got {t.shape}")
        return order

    def tensors_in(self, body: Expr | None) -> list[Tensor]:
        assert body is not None
        source = body.source if isinstance(body, Reduce) else body
        return [ld.tensor for ld in loads(source) if isinstance(ld, TensorLoad)]

    def emit(self, t: Tensor) -> None:
        if t.op == "compute" and t.buffer in self.in_scans:
            return  # computed inside its scan's time loop
        if t.op == "compute":
            assert t.body is not None
            self.stmts.append(self.compute_nest(t.name, t.buffer, t.axes, t.body, {}, 0, "S", t.annotations))
        elif t.op == "scan" and id(t.scan) not in self.done_scans:
            assert t.scan is not None
            self.done_scans.add(id(t.scan))
            self.stmts.extend(self.scan_nests(t.scan))

    def compute_nest(
        self,
        name: str,
        out: Buffer,
        axes: tuple[Var, ...],
        body: Expr,
        remap: dict[Buffer, Buffer],
        row_offset: int,
        first_kind: str,
        annotations: tuple[tuple[str, object], ...] = (),
    ) -> Stmt:
        """A loop nest around one block writing `out[axes]` (shifted by `row_offset` on axis 0)."""
        reduce_axes = body.axes if isinstance(body, Reduce) else ()
        extents = list(out.shape)
        if row_offset:
            extents[0] = (
                simplify(as_expr(extents[0]) - row_offset)
                if isinstance(extents[0], Expr)
                else extents[0] - row_offset
            )
        loops = [self.fresh(a.name) for a in axes] + [self.fresh(r.var.name) for r in reduce_axes]
        names = _unique([f"v_{a.name}" for a in axes] + [f"v_{r.var.name}" for r in reduce_axes])
        iter_vars = [
            IterVar(Var(n), e, first_kind if k == 0 else "S") for k, (n, e) in enumerate(zip(names, extents))
        ]
        iter_vars += [IterVar(Var(n), r.extent, "R") for n, r in zip(names[len(axes) :], reduce_axes)]
        sub: dict[Var, Expr] = {a: iv.var for a, iv in zip(axes, iter_vars)}
        if row_offset:
            sub[axes[0]] = iter_vars[0].var + row_offset
        for r, iv in zip(reduce_axes, iter_vars[len(axes) :]):
            sub[r.var] = iv.var + r.start if r.start else iv.var

        def rewrite(e: Expr) -> Expr:
            e = substitute(e, sub)
            e = map_expr(
                e, lambda n: Load(remap.get(n.buffer, n.buffer), n.indices) if isinstance(n, Load) else None
            )
            return simplify(e)

        index = tuple(simplify(sub[a]) for a in axes)
        init = None
        value: Expr
        if isinstance(body, Reduce):
            value = Binary(body.combiner, Load(out, index), rewrite(body.source))
            init = BufferStore(out, reduction_identity(body.combiner, body.dtype), index)
        else:
            value = rewrite(body)
        block = Block(
            name,
            tuple(iter_vars),
            tuple(loops),
            BufferStore(out, value, index),
            init,
            annotations=annotations,
        )
        stmt: Stmt = block
        for v, iv in reversed(list(zip(loops, iter_vars))):
            stmt = For(v, iv.extent, stmt)
        return stmt

    def scan_nests(self, sc: _Scan) -> list[Stmt]:
        remap = {s.buffer: o.buffer for s, o in zip(sc.states, sc.outputs)}
        out: list[Stmt] = []
        for init, o in zip(sc.inits, sc.outputs):
            assert init.body is not None
            nest = self.compute_nest(f"{o.name}_init", o.buffer, init.axes, init.body, remap, 0, "S")
            out.append(_shrink_rows(nest, init.shape[0]))
        start = sc.inits[0].shape[0]
        steps = sc.outputs[0].shape[0] - start
        if isinstance(steps, Expr):
            steps = simplify(steps)
        t = self.fresh("t")
        bodies = []
        for stage in self.scan_body(sc):
            assert stage.body is not None
            nest = self.compute_nest(stage.name, stage.buffer, stage.axes, stage.body, remap, start, "O")
            assert isinstance(nest, For)
            bodies.append(_rebind_outer(nest, t))
        for u, o in zip(sc.updates, sc.outputs):
            assert u.body is not None
            nest = self.compute_nest(o.name, o.buffer, u.axes, u.body, remap, start, "O")
            assert isinstance(nest, For)
            bodies.append(_rebind_outer(nest, t))
        out.append(For(t, steps, seq(bodies)))
        return out


def _shrink_rows(nest: Stmt, rows: int) -> Stmt:
    """The init of a scan writes only its first `rows` rows."""
    assert isinstance(nest, For) and isinstance(nest.body, For | Block)
    blk = _leaf(nest)
    ivs = (IterVar(blk.iter_vars[0].var, rows, "S"),) + blk.iter_vars[1:]
    return _replace_leaf(
        For(nest.var, rows, nest.body), Block(blk.name, ivs, blk.bindings, blk.body, blk.init)
    )


def _rebind_outer(nest: For, t: Var) -> Stmt:
    """Share one outer time loop between the updates of several scan states."""
    blk = _leaf(nest)
    bindings = (t,) + blk.bindings[1:]
    return _replace_leaf(nest.body, Block(blk.name, blk.iter_vars, bindings, blk.body, blk.init))


def _leaf(stmt: Stmt) -> Block:
    while isinstance(stmt, For):
        stmt = stmt.body
    assert isinstance(stmt, Block)
    return stmt


def _replace_leaf(stmt: Stmt, block: Block) -> Stmt:
    if isinstance(stmt, For):
        return For(stmt.var, stmt.extent, _replace_leaf(stmt.body, block), stmt.kind)
    return block


def _unique(names: list[str]) -> list[str]:
    """Block variable names, made distinct (a reduce axis may share a spatial axis's name)."""
    out: list[str] = []
    for n in names:
        out.append(unique_name(n, out))
    return out


def reduction_identity(combiner: Op, dtype: str) -> Expr:
    """The value a reduction by `combiner` starts from: 0, 1, or the lowest or highest of the type."""
    if combiner == Op.ADD:
        return const(0, dtype)
    if combiner == Op.MUL:
        return const(1, dtype)
    if dtype in INT_DTYPES:
        low, high = int_range(dtype)
        return const(low if combiner == Op.MAX else high, dtype)
    return const(-math.inf if combiner == Op.MAX else math.inf, dtype)


def _size_vars_of(buf: Buffer) -> set[Var]:
    return {v for d in buf.shape if isinstance(d, Expr) for v in free_vars(d)}


def create_prim_func(args: Sequence[Tensor], name: str = "main") -> PrimFunc:
    """The program that computes the non-placeholder `args` from the placeholder ones."""
    builder = _Builder()
    for a in args:
        builder.used_names.update(v.name for v in _size_vars_of(a.buffer))
    for a in args:
        builder.visit(a)
    params = [a.buffer for a in args]
    missing = [t.name for t in builder.order if t.op == "placeholder" and t.buffer not in params]
    if missing:
        raise TensorError(f"create_prim_func: placeholder(s) {missing} are used but not in the argument list")
    names = [t.name for t in builder.order]
    if len(set(names)) != len(names):
        raise TensorError(f"create_prim_func: tensor names must be unique, got {names}")
    for t in builder.order:
        builder.emit(t)
    allocs = tuple(t.buffer for t in builder.order if t.op != "placeholder" and t.buffer not in params)
    bound_vars = {v for b in params for v in _size_vars_of(b)}
    try:
        check_params(name, params)
    except IRError as e:
        raise TensorError(f"create_prim_func: {e}") from None
    for b in allocs:
        unbound = _size_vars_of(b) - bound_vars
        if unbound:
            raise TensorError(
                f"create_prim_func: {sorted(v.name for v in unbound)} of {b.name} is no parameter's dimension"
            )
    return PrimFunc(name, tuple(params), seq(builder.stmts), allocs)
