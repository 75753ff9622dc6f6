"""An index map: a function from a buffer's indices to new ones, as TVM's `IndexMap`, written and
recorded as the text of a Python lambda (`lambda i, j: (i // 16, j, i % 16)`).

A trace must serialize what a primitive was given, so a map is kept as data: its parameters and
result expressions, read from the lambda's syntax tree (never evaluated) or built by calling a Python
callable on variables, and printed back as the canonical text that reads to the same map.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.ir import Binary, Const, Expr, Unary, Var, as_expr
from compiler.printer import expr_str
from compiler.schedule.errors import ScheduleError, check
from compiler.script.errors import ScriptError
from compiler.script.expr import ExprReader
from compiler.visit import free_vars, substitute

MAX_TEXT = 2_000  # characters of a map's text: it arrives in traces from outside


@dataclass(frozen=True)
class IndexMap:
    """`results` are expressions of `params` only (integer arithmetic, min and max)."""

    params: tuple[Var, ...]
    results: tuple[Expr, ...]

    @staticmethod
    def parse(text: str) -> IndexMap:
        """The map a lambda's text spells; ScheduleError naming what is wrong with it."""
        check(
            isinstance(text, str) and len(text) <= MAX_TEXT,
            f"an index map must be a lambda's text, got {text!r}",
        )
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as e:
            raise ScheduleError(f"index map {text!r}: {e.msg}") from None
        node = tree.body
        check(isinstance(node, ast.Lambda), f"index map {text!r} is not a lambda")
        assert isinstance(node, ast.Lambda)
        args = node.args
        check(
            not (args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults),
            f"index map {text!r}: the lambda must take plain positional parameters",
        )
        params = tuple(Var(a.arg) for a in args.args)
        check(len({p.name for p in params}) == len(params), f"index map {text!r} repeats a parameter")
        outs = node.body.elts if isinstance(node.body, ast.Tuple) else [node.body]
        reader = ExprReader({p.name: p for p in params}, {})
        try:
            results = tuple(reader.index(o) for o in outs)
        except ScriptError as e:
            raise ScheduleError(f"index map {text!r}: {e}") from None
        return IndexMap.of(params, results)

    @staticmethod
    def from_callable(fn: Callable[..., object], names: Sequence[str]) -> IndexMap:
        """The map a Python callable computes on variables named `names` (TVM's lambda form)."""
        params = tuple(Var(n) for n in names)
        try:
            out = fn(*params)
        except TypeError as e:
            raise ScheduleError(f"index map: calling it with {len(params)} indices failed: {e}") from None
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return IndexMap.of(params, tuple(as_expr(o, "int64") for o in outs))

    @staticmethod
    def of(params: tuple[Var, ...], results: tuple[Expr, ...]) -> IndexMap:
        check(bool(results), "an index map must give at least one index")
        for r in results:
            check(_is_index_expr(r), f"index map: {expr_str(r)} is not integer arithmetic of its indices")
            stray = free_vars(r) - set(params)
            check(
                not stray, f"index map: {expr_str(r)} uses {sorted(v.name for v in stray)}, not a parameter"
            )
        return IndexMap(params, results)

    def text(self) -> str:
        """The lambda's canonical text: `IndexMap.parse(m.text()) == m`."""
        names = ", ".join(p.name for p in self.params)
        outs = ", ".join(expr_str(r) for r in self.results)
        return f"lambda {names}: ({outs},)" if len(self.results) == 1 else f"lambda {names}: ({outs})"

    def apply(self, indices: Sequence[Expr]) -> tuple[Expr, ...]:
        """The new indices of the element at `indices`."""
        mapping = dict(zip(self.params, indices))
        return tuple(substitute(r, mapping) for r in self.results)

    def evaluate(self, grids: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The results over arrays of index values, one per parameter (to check a map on a whole shape)."""
        env = dict(zip(self.params, grids))
        return [
            np.broadcast_to(_eval(r, env), np.broadcast_shapes(*(g.shape for g in grids)))
            for r in self.results
        ]


def index_map_of(value: str | Callable[..., object] | IndexMap, names: Sequence[str]) -> IndexMap:
    """The map a primitive was handed: a lambda's text, a Python callable, or a map."""
    if isinstance(value, IndexMap):
        return value
    if isinstance(value, str):
        return IndexMap.parse(value)
    check(callable(value), f"an index map must be a lambda or its text, got {value!r}")
    return IndexMap.from_callable(value, _parameter_names(value, names))


def _parameter_names(fn: Callable[..., object], fallback: Sequence[str]) -> list[str]:
    """The callable's own parameter names where it has them (they print in the trace), else `fallback`."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return list(fallback)
    plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
    return [p.name for p in params] if plain and len(params) == len(fallback) else list(fallback)


def _is_index_expr(e: Expr) -> bool:
    if isinstance(e, Var):
        return e.dtype == "int64"
    if isinstance(e, Const):
        return isinstance(e.value, int) and not isinstance(e.value, bool)
    if isinstance(e, (Binary, Unary)):
        return e.dtype == "int64" and all(_is_index_expr(k) for k in e.children())
    return False


def _eval(e: Expr, env: dict[Var, np.ndarray]) -> np.ndarray:
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Const):
        return np.asarray(e.value, dtype=np.int64)
    assert isinstance(e, (Binary, Unary))
    fn = e.op.spec.numpy
    assert fn is not None
    return np.asarray(fn(*(_eval(k, env) for k in e.children())), dtype=np.int64)
