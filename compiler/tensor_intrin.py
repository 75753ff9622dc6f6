"""Tensor intrinsics: a small computation described as TensorIR and an implementation that computes
it with one machine instruction or a hand-written micro-kernel, as TVM's `TensorIntrin.register`.

`sch.tensorize(loop, name)` says that the loop nest under `loop` computes what the intrinsic's
description computes; the code generator then emits the implementation there instead of the loops
(`compiler.codegen_tensorize`). Which nest matches is decided here, once for both: the nest must
have the description's loops (same extents, in order) around one store whose expression is the
description's (same ops, casts and constants), with each buffer the description names standing for
one region of a program buffer. That region is where the element at the nest's first iteration is
(its base, an expression of the loops outside) and how far apart its elements are along each of
the description's dimensions (its strides, from the program buffer's own layout, so they are known
once compaction has sized every buffer). An implementation gets a pointer to each base and the
strides, and refuses strides it cannot take (`IntrinsicError`): a VNNI dot product needs its
weights packed 16 x 4, which `transform_layout` of a staged panel gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compiler.arith import extent_range, linear, simplify
from compiler.ir import (
    Binary,
    Block,
    Buffer,
    BufferStore,
    Cast,
    Const,
    Expr,
    For,
    Load,
    PrimFunc,
    Unary,
    Var,
    structural_equal,
)
from compiler.printer import expr_str
from compiler.visit import free_vars, loads, map_expr, substitute

if TYPE_CHECKING:
    from compiler.codegen import CodeGen


TENSORIZE = "tensorize"  # the loop annotation naming the intrinsic that computes the nest under it


class IntrinsicError(ValueError):
    """A nest does not compute what an intrinsic describes, or its layout is not one it takes."""


@dataclass(frozen=True)
class Operand:
    """One buffer of the description as the implementation sees it: the address of the region's
    first element and, per dimension of the description's buffer, the distance to the next one in
    elements. `name` is the program's buffer, for messages."""

    name: str
    pointer: Any  # an llvmlite pointer value
    strides: tuple[int, ...]


Implementation = Callable[["CodeGen", Sequence[Operand]], None]


@dataclass(frozen=True)
class TensorIntrin:
    """`desc` is a PrimFunc of one loop nest around one block without an init (the update of a
    reduction: decompose it first); its parameters are what `impl` receives, in order. `features`
    are the LLVM CPU features the implementation needs (a target without one cannot build it)."""

    name: str
    desc: PrimFunc
    impl: Implementation
    features: frozenset[str] = frozenset()

    @staticmethod
    def register(
        name: str, desc: PrimFunc, impl: Implementation, features: Sequence[str] = (), override: bool = False
    ) -> TensorIntrin:
        """Add an intrinsic to the registry under `name` (TVM's spelling); its description is
        checked here, so a bad one fails when registered, not when a schedule uses it."""
        if name in _REGISTRY and not override:
            raise ValueError(f"a tensor intrinsic named {name!r} is registered already")
        intrin = TensorIntrin(name, desc, impl, frozenset(features))
        description(intrin)
        _REGISTRY[name] = intrin
        return intrin

    @staticmethod
    def get(name: str) -> TensorIntrin:
        _load_builtins()
        if name not in _REGISTRY:
            raise IntrinsicError(f"no tensor intrinsic is named {name!r}; registered: {sorted(_REGISTRY)}")
        return _REGISTRY[name]


_REGISTRY: dict[str, TensorIntrin] = {}


def _load_builtins() -> None:
    import compiler.intrinsics_x86  # noqa: F401  (registers the built-in intrinsics)


@dataclass(frozen=True)
class Region:
    """Where a description's buffer lies in a program buffer: the indices of its first element and,
    for each of the description's dimensions, the step it takes along each program dimension."""

    buffer: Buffer
    base: tuple[Expr, ...]
    steps: tuple[tuple[int, ...], ...]

    def strides(self) -> tuple[int, ...]:
        """The steps in elements of the program buffer's row-major layout (static shapes only)."""
        shape = self.buffer.shape
        if not all(isinstance(d, int) for d in shape):
            raise IntrinsicError(
                f"{self.buffer.name} has a symbolic shape; a tensorized region needs a static one"
            )
        dims = [d for d in shape if isinstance(d, int)]
        row_major = [1] * len(dims)
        for d in range(len(dims) - 2, -1, -1):
            row_major[d] = row_major[d + 1] * dims[d + 1]
        return tuple(sum(s * r for s, r in zip(step, row_major)) for step in self.steps)


def description(intrin: TensorIntrin) -> tuple[list[For], BufferStore]:
    """The description's loops and its store in their variables."""
    loops, block = nest_of(intrin.desc.body, f"the description of {intrin.name}")
    if not isinstance(block, Block):
        raise IntrinsicError(f"the description of {intrin.name} must end in one block")
    if block.init is not None:
        raise IntrinsicError(f"the description of {intrin.name} must be an update without an init")
    store = flatten(block)
    for ld in _accesses(store):
        for index in ld.indices:
            if not (isinstance(index, Var) and index in {lp.var for lp in loops}):
                raise IntrinsicError(
                    f"the description of {intrin.name}: {ld.buffer.name} must be indexed by its loops alone"
                )
    return loops, store


def flatten(block: Block) -> BufferStore:
    """A block's store with its iteration variables replaced by their bindings."""
    sub = {iv.var: b for iv, b in zip(block.iter_vars, block.bindings)}
    value = substitute(block.body.value, sub)
    indices = tuple(simplify(substitute(i, sub)) for i in block.body.indices)
    return BufferStore(block.body.buffer, _simplified_loads(value), indices)


def nest_of(stmt: object, what: str) -> tuple[list[For], Block | BufferStore]:
    """The perfect nest of loops from `stmt` down, and the one block (or lowered store) inside."""
    loops: list[For] = []
    while isinstance(stmt, For):
        loops.append(stmt)
        stmt = stmt.body
    if not isinstance(stmt, Block | BufferStore):
        raise IntrinsicError(
            f"{what}: a tensorized nest is loops around one store, found {type(stmt).__name__}"
        )
    return loops, stmt


def match(
    intrin: TensorIntrin, loops: Sequence[For], store: BufferStore, outer: Sequence[For] = ()
) -> dict[Buffer, Region]:
    """Each description buffer's region in the program, for the nest `loops` around `store` (in the
    loops' variables) under the loops `outer`; IntrinsicError naming the first difference."""
    d_loops, d_store = description(intrin)
    where = f"tensorize {intrin.name}"
    if len(loops) != len(d_loops):
        raise IntrinsicError(f"{where}: the nest has {len(loops)} loops, the intrinsic {len(d_loops)}")
    for lp, d in zip(loops, d_loops):
        if lp.extent != d.extent:
            raise IntrinsicError(
                f"{where}: loop {lp.var.name} has extent {lp.extent}, the intrinsic's {d.extent}"
            )
    pairs: list[tuple[Load | BufferStore, Load | BufferStore]] = [(d_store, store)]
    _match_expr(d_store.value, store.value, pairs, where)
    inner = {d.var: lp.var for d, lp in zip(d_loops, loops)}
    ranges: dict[Var, tuple[int, int]] = {}
    for lp in [*outer, *loops]:
        ranges[lp.var] = extent_range(lp.extent, ranges)
    regions: dict[Buffer, Region] = {}
    for d_access, access in pairs:
        region = _region(d_access, access, inner, ranges, where)
        seen = regions.setdefault(d_access.buffer, region)
        if seen != region:
            raise IntrinsicError(
                f"{where}: {d_access.buffer.name} stands for two regions of {seen.buffer.name} (its load "
                "and its store differ)"
            )
    missing = [b.name for b in intrin.desc.params if b not in regions]
    if missing:
        raise IntrinsicError(f"{where}: the description never accesses {missing}")
    shared = len({r.buffer for r in regions.values()}) < len(regions)
    if shared:  # an implementation reads its inputs before it writes: overlapping regions would differ
        names = sorted(f"{d.name}={r.buffer.name}" for d, r in regions.items())
        raise IntrinsicError(f"{where}: two of the intrinsic's buffers are one program buffer ({names})")
    return regions


def _match_expr(d: Expr, p: Expr, pairs: list[Any], where: str) -> None:
    if isinstance(d, Load):
        if not isinstance(p, Load):
            raise IntrinsicError(
                f"{where}: the nest computes {expr_str(p)} where the intrinsic loads {d.buffer.name}"
            )
        pairs.append((d, p))
        return
    if not _same_node(d, p):
        raise IntrinsicError(
            f"{where}: the nest computes {expr_str(p)} where the intrinsic computes {expr_str(d)}"
        )
    for dk, pk in zip(d.children(), p.children(), strict=True):
        _match_expr(dk, pk, pairs, where)


def _same_node(d: Expr, p: Expr) -> bool:
    """The same constant, cast or op (its operands compared apart); variables outside indices and
    selects are never an intrinsic's arithmetic. (`==` on expressions builds a comparison.)"""
    if isinstance(d, Const):
        return structural_equal(d, p)
    if isinstance(d, Cast):
        return isinstance(p, Cast) and d.dtype == p.dtype
    if isinstance(d, Binary | Unary):
        return type(p) is type(d) and d.op == p.op
    return False


def _region(
    d: Load | BufferStore,
    p: Load | BufferStore,
    inner: dict[Var, Var],
    ranges: dict[Var, tuple[int, int]],
    where: str,
) -> Region:
    """Where `d`'s buffer lies in `p`'s: each inner loop the description's index uses moves the
    program's indices by constant steps, and the others must not move them at all."""
    if d.buffer.dtype != p.buffer.dtype:
        raise IntrinsicError(
            f"{where}: {p.buffer.name} is {p.buffer.dtype}, the intrinsic's {d.buffer.name} {d.buffer.dtype}"
        )
    forms = [linear(simplify(i, ranges)) for i in p.indices]
    inner_vars = set(inner.values())
    for form in forms:
        for atom in form.terms:
            if not isinstance(atom, Var) and free_vars(atom) & inner_vars:
                raise IntrinsicError(
                    f"{where}: {p.buffer.name} is indexed by {expr_str(atom)}, not a step of the nest"
                )
    used = {inner[v] for v in d.indices if isinstance(v, Var)}
    for v in inner_vars - used:
        if any(form.terms.get(v, 0) for form in forms):
            raise IntrinsicError(
                f"{where}: {p.buffer.name} moves with loop {v.name}, {d.buffer.name} does not"
            )
    steps = tuple(
        tuple(form.terms.get(inner[v], 0) for form in forms) for v in d.indices if isinstance(v, Var)
    )
    zero = {v: Const(0, "int64") for v in inner_vars}
    base = tuple(simplify(substitute(simplify(i, ranges), zero)) for i in p.indices)
    return Region(p.buffer, base, steps)


def _accesses(store: BufferStore) -> list[Load | BufferStore]:
    return [store, *loads(store.value)]


def _simplified_loads(value: Expr) -> Expr:
    return map_expr(
        value,
        lambda e: Load(e.buffer, tuple(simplify(i) for i in e.indices)) if isinstance(e, Load) else None,
    )
