"""Expressions of a TVMScript program, read from Python's syntax tree (never evaluated).

Numbers stay Python numbers until they meet an expression, whose dtype they then take (`A[i] * 2`
is a float32 multiplication when A is float32), as TVMScript types literals; alone they are int64
or float32. A float literal never silently becomes an integer. What the reader takes is what the
printer writes (`compiler.printer`) and what TVM's TensorIR scripts use: Python's arithmetic,
comparison and boolean operators, `a if c else b`, buffer loads `A[i, j]`, and `T.<name>(...)` for
the ops of `compiler.ops`, casts, selects and typed constants.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from compiler.dtypes import DTYPES, FLOAT_DTYPES, INT_DTYPES, is_float, is_int
from compiler.ir import Binary, Buffer, Cast, Const, Expr, IRError, Load, Select, Unary, Var, const
from compiler.ops import BY_NAME, Op
from compiler.script.errors import ScriptError, check, error_at

MAX_DEPTH = 100  # of an expression's syntax tree: every later pass recurses over it
MAX_INT = 2**63 - 1

Value = Expr | int | float | bool  # an expression, or a literal not yet typed

_BINARY = {
    ast.Add: Op.ADD,
    ast.Sub: Op.SUB,
    ast.Mult: Op.MUL,
    ast.Div: Op.DIV,
    ast.FloorDiv: Op.FLOORDIV,
    ast.Mod: Op.FLOORMOD,
    ast.Pow: Op.POW,
}
_COMPARE = {ast.Lt: Op.LT, ast.LtE: Op.LE, ast.Gt: Op.GT, ast.GtE: Op.GE, ast.Eq: Op.EQ, ast.NotEq: Op.NE}
_BOOL = {ast.And: Op.AND, ast.Or: Op.OR}
# TVM's spellings of ops that `compiler.ops` names otherwise.
_ALIASES = {"abs": "fabs", "truncmod": "fmod", "power": "pow", "And": "and", "Or": "or", "Not": "not"}


def is_t_attr(node: ast.AST, *names: str) -> bool:
    """Whether `node` is `T.<one of names>` (any name when none are given)."""
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "T"
        and (not names or node.attr in names)
    )


def t_call(node: ast.AST, *names: str) -> bool:
    """Whether `node` is a call of `T.<one of names>`."""
    return isinstance(node, ast.Call) and is_t_attr(node.func, *names)


class ExprReader:
    """Reads expressions over the variables and buffers in scope."""

    def __init__(self, variables: Mapping[str, Var], buffers: Mapping[str, Buffer]) -> None:
        self.variables, self.buffers = variables, buffers
        self.depth = 0

    def expr(self, node: ast.AST, dtype: str | None = None) -> Expr:
        """The expression at `node`; a bare literal takes `dtype` (else int64 or float32)."""
        return typed(node, self.value(node), dtype)

    def index(self, node: ast.AST) -> Expr:
        e = self.expr(node, "int64")
        check(is_int(e.dtype), node, f"an index must be an integer, got {e.dtype}")
        return e

    def value(self, node: ast.AST) -> Value:
        reader = _READERS.get(type(node))
        if reader is None:
            raise error_at(node, f"{_describe(node)} is not an expression here")
        self.depth += 1
        try:
            check(self.depth <= MAX_DEPTH, node, f"the expression nests deeper than {MAX_DEPTH}")
            return reader(self, node)
        except (IRError, TypeError, ValueError) as e:
            if isinstance(e, ScriptError):
                raise
            raise error_at(node, str(e)) from None
        finally:
            self.depth -= 1

    def constant(self, node: ast.Constant) -> Value:
        v = node.value
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            check(abs(v) <= MAX_INT, node, f"the integer {v} does not fit in int64")
            return v
        if isinstance(v, float):
            check(math.isfinite(v), node, f"{v} is not finite: write T.float32('inf')")
            return v
        raise error_at(node, f"{v!r} is not a number")

    def name(self, node: ast.Name) -> Value:
        var = self.variables.get(node.id)
        if var is not None:
            return var
        if node.id in self.buffers:
            raise error_at(node, f"{node.id} is a buffer: load an element of it, {node.id}[...]")
        raise error_at(node, f"{node.id} is not defined here")

    def unary(self, node: ast.UnaryOp) -> Value:
        a = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            return Unary(Op.NOT, typed(node.operand, a, "bool"))
        if isinstance(node.op, ast.UAdd):
            return a
        if isinstance(node.op, ast.USub):
            if isinstance(a, bool) or not isinstance(a, int | float):
                return binary(node, Op.SUB, 0, a)
            return -a
        raise error_at(node, "~ is not an operator here")

    def binop(self, node: ast.BinOp) -> Value:
        op = _BINARY.get(type(node.op))
        if op is None:
            raise error_at(node, f"{type(node.op).__name__} is not an operator here")
        return binary(node, op, self.value(node.left), self.value(node.right))

    def boolop(self, node: ast.BoolOp) -> Value:
        op = _BOOL[type(node.op)]
        out = typed(node.values[0], self.value(node.values[0]), "bool")
        for v in node.values[1:]:
            out = Binary(op, out, typed(v, self.value(v), "bool"))
        return out

    def compare(self, node: ast.Compare) -> Value:
        """`a < b < c` as Python means it: `a < b and b < c`."""
        left, out = self.value(node.left), None
        for op_node, right_node in zip(node.ops, node.comparators):
            op = _COMPARE.get(type(op_node))
            if op is None:
                raise error_at(node, f"{type(op_node).__name__} is not a comparison here")
            right = self.value(right_node)
            test = binary(node, op, left, right)
            out = test if out is None else Binary(Op.AND, out, test)
            left = right
        assert out is not None
        return out

    def if_exp(self, node: ast.IfExp) -> Value:
        return select(node, self.value(node.test), self.value(node.body), self.value(node.orelse))

    def subscript(self, node: ast.Subscript) -> Load:
        buffer = self.buffer(node.value)
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        check(
            len(indices) == len(buffer.shape),
            node,
            f"{buffer.name} has rank {len(buffer.shape)}, indexed with {len(indices)} indices",
        )
        return Load(buffer, tuple(self.index(i) for i in indices))

    def buffer(self, node: ast.AST) -> Buffer:
        if isinstance(node, ast.Name) and node.id in self.buffers:
            return self.buffers[node.id]
        name = node.id if isinstance(node, ast.Name) else _describe(node)
        raise error_at(node, f"{name} is not a buffer")

    def call(self, node: ast.Call) -> Value:
        if not is_t_attr(node.func):
            raise error_at(node, f"{_describe(node.func)}(...) is not a function here: write T.<name>(...)")
        assert isinstance(node.func, ast.Attribute)
        name = _ALIASES.get(node.func.attr, node.func.attr)
        check(not node.keywords, node, f"T.{node.func.attr} takes positional arguments only")
        if name in DTYPES:
            return self.typed_constant(node, name)
        special = _CALLS.get(name)
        if special is not None:
            return special(self, node)
        op = BY_NAME.get(name)
        if op is None:
            raise error_at(node.func, f"T.{node.func.attr} is not a function this reader knows")
        check(
            len(node.args) == op.arity,
            node,
            f"T.{node.func.attr} takes {op.arity} argument(s), got {len(node.args)}",
        )
        values = [self.value(a) for a in node.args]
        if op.arity == 2:
            return binary(node, op, *values)
        return Unary(op, typed(node.args[0], values[0], None))

    def typed_constant(self, node: ast.Call, dtype: str) -> Value:
        """`T.float32(1.5)`, `T.float32("inf")`, `T.int32(7)`: a constant; `T.float32(i)`: a cast."""
        _arity(node, 1)
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            check(
                is_float(dtype) and arg.value in ("inf", "-inf", "nan"),
                arg,
                f"T.{dtype} takes a number, or 'inf', '-inf' or 'nan' for a float",
            )
            return Const(float(arg.value), dtype)
        value = self.value(arg)
        if isinstance(value, Expr):
            return value if value.dtype == dtype else Cast(dtype, value)
        return typed(arg, value, dtype)


def typed(node: ast.AST, value: Value, dtype: str | None) -> Expr:
    """`value` as an expression: a literal becomes a constant of `dtype` (or its natural type);
    a float literal never becomes an integer, and an integer literal must fit its type."""
    if isinstance(value, Expr):
        return value
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float32"
    if isinstance(value, bool) != (dtype == "bool"):
        raise error_at(node, f"{value!r} is not a {dtype}")
    if isinstance(value, float) and not is_float(dtype):
        raise error_at(node, f"the float {value!r} where a {dtype} is expected: write an integer or a cast")
    if dtype in INT_DTYPES:
        info = np.iinfo(dtype)
        check(info.min <= int(value) <= info.max, node, f"{value} does not fit in {dtype}")
    return const(value, dtype)


def binary(node: ast.AST, op: Op, a: Value, b: Value) -> Expr:
    """`op` on two values; a literal takes the dtype of the other side."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        float_literal = isinstance(a, float) or isinstance(b, float)
        dtype = "float32" if float_literal else None
        a_e, b_e = typed(node, a, dtype), typed(node, b, dtype)
    else:
        other = a if isinstance(a, Expr) else b
        assert isinstance(other, Expr)
        dtype = other.dtype if other.dtype != "bool" or op in (Op.AND, Op.OR) else None
        a_e, b_e = typed(node, a, dtype), typed(node, b, dtype)
    try:
        return Binary(op, a_e, b_e)
    except IRError as e:
        raise error_at(node, str(e)) from None


def select(node: ast.AST, cond: Value, true_value: Value, false_value: Value) -> Expr:
    c = typed(node, cond, "bool")
    if isinstance(true_value, Expr) or isinstance(false_value, Expr):
        other = true_value if isinstance(true_value, Expr) else false_value
        assert isinstance(other, Expr)
        dtype: str | None = other.dtype
    else:
        dtype = "float32" if isinstance(true_value, float) or isinstance(false_value, float) else None
    try:
        return Select(c, typed(node, true_value, dtype), typed(node, false_value, dtype))
    except IRError as e:
        raise error_at(node, str(e)) from None


def _arity(node: ast.Call, n: int) -> None:
    assert isinstance(node.func, ast.Attribute)
    check(len(node.args) == n, node, f"T.{node.func.attr} takes {n} argument(s), got {len(node.args)}")


def dtype_arg(node: ast.AST) -> str:
    """A dtype written as a string: 'float32'."""
    check(
        isinstance(node, ast.Constant) and node.value in DTYPES,
        node,
        f"a dtype is one of {', '.join(map(repr, DTYPES))}",
    )
    assert isinstance(node, ast.Constant)
    return str(node.value)


def _cast(reader: ExprReader, node: ast.Call) -> Value:
    """`T.Cast('float32', x)` as the printer writes it, and TVM's `T.cast(x, 'float32')`."""
    _arity(node, 2)
    assert isinstance(node.func, ast.Attribute)
    dtype_node, value_node = node.args if node.func.attr == "Cast" else node.args[::-1]
    dtype = dtype_arg(dtype_node)
    value = reader.value(value_node)
    if not isinstance(value, Expr):
        return typed(value_node, value, dtype)
    return Cast(dtype, value)


def _select(reader: ExprReader, node: ast.Call) -> Value:
    _arity(node, 3)
    return select(node, *(reader.value(a) for a in node.args))


def _limit(which: str) -> Callable[[ExprReader, ast.Call], Value]:
    """`T.min_value(dtype)` / `T.max_value(dtype)`: the lowest or highest finite value of the type."""

    def read(reader: ExprReader, node: ast.Call) -> Value:
        _arity(node, 1)
        dtype = dtype_arg(node.args[0])
        check(dtype != "bool", node, "bool has no min_value or max_value")
        info: np.finfo | np.iinfo = np.finfo(dtype) if dtype in FLOAT_DTYPES else np.iinfo(dtype)
        v = getattr(info, which)
        return const(float(v) if dtype in FLOAT_DTYPES else int(v), dtype)

    return read


def _sigmoid(reader: ExprReader, node: ast.Call) -> Value:
    """TVM's `T.sigmoid(x)`, written out as 1 / (1 + exp(-x)) (te.sigmoid's form)."""
    _arity(node, 1)
    x = typed(node.args[0], reader.value(node.args[0]), None)
    check(is_float(x.dtype), node, f"T.sigmoid takes a float, got {x.dtype}")
    one = const(1.0, x.dtype)
    return Binary(Op.DIV, one, Binary(Op.ADD, one, Unary(Op.EXP, Binary(Op.SUB, const(0.0, x.dtype), x))))


_CALLS: dict[str, Callable[[ExprReader, ast.Call], Value]] = {
    "Cast": _cast,
    "cast": _cast,
    "Select": _select,
    "if_then_else": _select,
    "min_value": _limit("min"),
    "max_value": _limit("max"),
    "sigmoid": _sigmoid,
}

_READERS: dict[type, Callable[[ExprReader, Any], Value]] = {
    ast.Constant: ExprReader.constant,
    ast.Name: ExprReader.name,
    ast.UnaryOp: ExprReader.unary,
    ast.BinOp: ExprReader.binop,
    ast.BoolOp: ExprReader.boolop,
    ast.Compare: ExprReader.compare,
    ast.IfExp: ExprReader.if_exp,
    ast.Subscript: ExprReader.subscript,
    ast.Call: ExprReader.call,
}


def _describe(node: ast.AST) -> str:
    """A short name for what a node is, for messages."""
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):
        text = type(node).__name__
    return text if len(text) <= 40 else text[:37] + "..."
