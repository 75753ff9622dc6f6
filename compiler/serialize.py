"""A PrimFunc as data: a versioned JSON form that round-trips, and the structural hash computed from
its canonical form, which is a workload's identity in the tuning database.

The hash is computed from data, not from the printer's text, so the printer can change freely; it
changes only when `VERSION` does, which is a decision (and a database migration). Two functions
hash alike when they compute the same thing with the same loop structure, whatever their loop and
block variables are called: variables are renamed in order of definition first (loops l0, l1, ...;
each block's iteration variables v0, v1, ...). Buffer and block names are kept, because traces
refer to blocks by name and callers pass buffers by position and name.

Expressions are arrays tagged with their kind or op name (`["add", a, b]`, `["var", "i", "int64"]`),
statements arrays tagged with their kind; buffers are declared once (parameters, intermediates,
allocations) and referred to by name. `from_json` validates as it reads: data that does not describe
a well-formed tree of nodes raises SerializeError naming where, so a PrimFunc can travel as data
(never as code) between processes and machines.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from compiler.dtypes import DTYPES, FLOAT_DTYPES, INT_DTYPES
from compiler.ir import (
    ITER_KINDS,
    LOOP_KINDS,
    SCOPES,
    Allocate,
    Binary,
    Block,
    Buffer,
    BufferStore,
    Cast,
    Const,
    Expr,
    For,
    IfThenElse,
    IRError,
    IterVar,
    Load,
    PrimFunc,
    Select,
    SeqStmt,
    SizeVar,
    Stmt,
    Unary,
    Var,
    check_params,
)
from compiler.ops import BY_NAME, Op

FORMAT = "tensor-tuner.primfunc"
VERSION = 1
MAX_DEPTH = 200  # nesting of statements and expressions that from_json accepts
Json = Any


class SerializeError(ValueError):
    """Data that is not a PrimFunc of this format; the message names the path of the culprit."""


# Writing.


def to_json(func: PrimFunc) -> dict[str, Json]:
    """The JSON-compatible form of `func`."""
    return _Writer(canonical=False).func(func)


def canonical_text(func: PrimFunc) -> str:
    """The canonical JSON text: keys sorted, no spaces, non-ASCII kept, NaN refused."""
    return _text(to_json(func))


def structural_hash(func: PrimFunc) -> str:
    """Hex sha256 of the canonical text of `func` with variables renamed in order of definition
    (loops l0, l1, ...; each block's iteration variables v0, v1, ...) and its name excluded."""
    text = _text(_Writer(canonical=True).func(replace(func, name="main")))
    return hashlib.sha256(text.encode()).hexdigest()


def _text(data: Json) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class _Writer:
    """Writes nodes as JSON; `canonical` renames variables as it goes (in the data, never in a tree:
    the search hashes every program it proposes, and rebuilding each to rename it cost more than
    writing it)."""

    def __init__(self, canonical: bool) -> None:
        self.canonical = canonical
        self.names: dict[str, str] = {}  # variable -> its name in the output (canonical only)
        self.loops = 0

    def func(self, func: PrimFunc) -> dict[str, Json]:
        if self.canonical:  # a kernel binds its size vars by position: their names are not its identity
            self.names.update({v.name: f"s{k}" for k, v in enumerate(func.size_vars)})
        out = {
            "format": FORMAT,
            "version": VERSION,
            "name": func.name,
            "params": [self.buffer(b) for b in func.params],
            "allocs": [self.buffer(b) for b in func.allocs],
            "attrs": _annotations(func.attrs),
            "body": self.stmt(func.body),
        }
        if func.size_vars:  # only then: a static function's data (and hash) is what it always was
            out["size_vars"] = [[self.names.get(v.name, v.name), v.lo, v.hi] for v in func.size_vars]
        return out

    def extent(self, e: int | Expr) -> Json:
        return e if isinstance(e, int) else self.expr(e)

    def buffer(self, b: Buffer) -> Json:
        out: dict[str, Json] = {"name": b.name, "shape": [self.extent(d) for d in b.shape], "dtype": b.dtype}
        if b.scope != "global":  # only then: what every function serialized before keeps its data and hash
            out["scope"] = b.scope
        return out

    def name(self, var: Var) -> str:
        return self.names.get(var.name, var.name)

    def expr(self, e: Expr) -> Json:
        if isinstance(e, Var):
            return ["var", self.name(e), e.dtype]
        if isinstance(e, Const):
            return ["const", _value(e.value, e.dtype), e.dtype]
        if isinstance(e, Binary | Unary):
            return [e.op.spec.name, *(self.expr(k) for k in e.children())]
        if isinstance(e, Load):
            return ["load", e.buffer.name, [self.expr(i) for i in e.indices]]
        if isinstance(e, Select):
            return ["select", self.expr(e.cond), self.expr(e.true_value), self.expr(e.false_value)]
        if isinstance(e, Cast):
            return ["cast", e.dtype, self.expr(e.value)]
        raise SerializeError(f"{type(e).__name__} cannot be serialized (it never appears in a PrimFunc)")

    def store(self, s: BufferStore) -> Json:
        return ["store", s.buffer.name, self.expr(s.value), [self.expr(i) for i in s.indices]]

    def stmt(self, s: Stmt) -> Json:
        if isinstance(s, BufferStore):
            return self.store(s)
        if isinstance(s, SeqStmt):
            return ["seq", [self.stmt(k) for k in s.stmts]]
        if isinstance(s, For):
            return self.loop(s)
        if isinstance(s, IfThenElse):
            other = None if s.else_case is None else self.stmt(s.else_case)
            return ["if", self.expr(s.cond), self.stmt(s.then_case), other]
        if isinstance(s, Allocate):
            return ["allocate", self.buffer(s.buffer), self.stmt(s.body)]
        if isinstance(s, Block):
            return self.block(s)
        raise SerializeError(f"{type(s).__name__} cannot be serialized")

    def loop(self, s: For) -> Json:
        if self.canonical:
            self.names[s.var.name] = f"l{self.loops}"
            self.loops += 1
        return [
            "for",
            self.name(s.var),
            self.extent(s.extent),
            s.kind,
            _annotations(s.annotations),
            self.stmt(s.body),
        ]

    def block(self, s: Block) -> Json:
        bindings = [self.expr(b) for b in s.bindings]  # in the loops' names
        predicate = self.expr(s.predicate)
        outer = dict(self.names)
        if self.canonical:  # iteration variables are the block's own: renamed inside it only
            self.names.update((iv.var.name, f"v{k}") for k, iv in enumerate(s.iter_vars))
        out = [
            "block",
            s.name,
            [[self.name(iv.var), self.extent(iv.extent), iv.kind] for iv in s.iter_vars],
            bindings,
            self.store(s.body),
            None if s.init is None else self.store(s.init),
            predicate,
            _annotations(s.annotations),
        ]
        self.names = outer
        return out


def _annotations(ann: tuple[tuple[str, object], ...]) -> Json:
    return [[k, v] for k, v in ann]


def _value(value: int | float | bool, dtype: str) -> Json:
    if dtype in FLOAT_DTYPES:
        value = float(value)
        return value if math.isfinite(value) else repr(value)  # "inf", "-inf", "nan": JSON has none
    return int(value) if dtype in INT_DTYPES else bool(value)


# Reading.


def from_json(data: Json) -> PrimFunc:
    """The PrimFunc `data` describes; SerializeError names the first thing wrong with it."""
    return _Reader().func(data)


class _Reader:
    """Reads nodes depth first, keeping the path for error messages and the buffers in scope."""

    def __init__(self) -> None:
        self.path: list[str] = []
        self.buffers: dict[str, Buffer] = {}
        self.size_vars: dict[str, SizeVar] = {}

    def fail(self, message: str) -> SerializeError:
        return SerializeError(f"{''.join(self.path).lstrip('.') or 'function'}: {message}")

    def at(self, step: str, read: Callable[[Json], Any], data: Json) -> Any:
        if len(self.path) > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH}")
        self.path.append(step)
        try:
            return read(data)
        except IRError as e:  # a node that cannot exist: say where
            raise self.fail(str(e)) from None
        finally:
            self.path.pop()

    def func(self, data: Json) -> PrimFunc:
        self.expect(isinstance(data, dict), "must be an object")
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise self.fail(f"must have format {FORMAT!r} and version {VERSION}")
        fields = {"format", "version", "name", "params", "allocs", "attrs", "body"}
        self.expect(set(data) - {"size_vars"} == fields, f"must have exactly the keys {sorted(fields)}")
        for v in self.at(".size_vars", lambda d: self.list_of(d, self.size_var), data.get("size_vars", [])):
            self.size_vars[v.name] = v
        name = self.at(".name", self.string, data["name"])
        params = self.at(".params", lambda d: self.list_of(d, self.declare), data["params"])
        allocs = self.at(".allocs", lambda d: self.list_of(d, self.declare), data["allocs"])
        attrs = self.at(".attrs", self.annotations, data["attrs"])
        body = self.at(".body", self.stmt, data["body"])
        check_params(name, params)
        return PrimFunc(name, tuple(params), body, tuple(allocs), attrs)

    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            raise self.fail(message)

    def string(self, data: Json) -> str:
        self.expect(isinstance(data, str) and bool(data), "must be a non-empty string")
        return data

    def integer(self, data: Json, minimum: int) -> int:
        self.expect(isinstance(data, int) and not isinstance(data, bool), "must be an integer")
        self.expect(data >= minimum, f"must be >= {minimum}")
        return data

    def choice(self, data: Json, options: tuple[str, ...]) -> str:
        self.expect(data in options, f"must be one of {', '.join(options)}, got {str(data)[:40]!r}")
        return data

    def list_of(self, data: Json, read: Callable[[Json], Any]) -> list[Any]:
        self.expect(isinstance(data, list), "must be a list")
        return [self.at(f"[{k}]", read, item) for k, item in enumerate(data)]

    def tagged(self, data: Json, tag: str, size: int) -> list[Json]:
        self.expect(
            isinstance(data, list) and len(data) == size and data[0] == tag,
            f"must be [{tag!r}, ...] of {size}",
        )
        return data

    def size_var(self, data: Json) -> SizeVar:
        self.expect(isinstance(data, list) and len(data) == 3, "a size var is [name, lo, hi]")
        name = self.at("[0]", self.string, data[0])
        lo, hi = (
            self.at("[1]", lambda d: self.integer(d, 1), data[1]),
            self.at("[2]", lambda d: self.integer(d, 1), data[2]),
        )
        self.expect(
            lo <= hi and name not in self.size_vars, f"size var {name}: needs lo <= hi, declared once"
        )
        return SizeVar(name, "int64", lo, hi)

    def extent(self, data: Json) -> int | Expr:
        if isinstance(data, int) and not isinstance(data, bool):
            return self.integer(data, 1)
        e = self.expr(data)
        self.expect(e.dtype == "int64", "a symbolic extent is an int64 expression")
        return e

    def declare(self, data: Json) -> Buffer:
        self.expect(
            isinstance(data, dict)
            and {"name", "shape", "dtype"} <= set(data) <= {"name", "shape", "dtype", "scope"},
            "a buffer must be {name, shape, dtype} and may have a scope",
        )
        name = self.at(".name", self.string, data["name"])
        self.expect(name not in self.buffers, f"buffer {name!r} is declared twice")
        shape = self.at(".shape", lambda d: self.list_of(d, self.extent), data["shape"])
        dtype = self.at(".dtype", lambda d: self.choice(d, DTYPES), data["dtype"])
        scope = self.at(".scope", lambda d: self.choice(d, SCOPES), data.get("scope", "global"))
        buffer = self.buffers[name] = Buffer(name, tuple(shape), dtype, scope)
        return buffer

    def buffer(self, data: Json) -> Buffer:
        self.expect(isinstance(data, str) and data in self.buffers, f"unknown buffer {str(data)[:40]!r}")
        return self.buffers[data]

    def annotations(self, data: Json) -> tuple[tuple[str, object], ...]:
        def pair(item: Json) -> tuple[str, object]:
            ok = isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
            self.expect(
                ok and isinstance(item[1], int | float | str | bool), "an annotation is [key, JSON scalar]"
            )
            return item[0], item[1]

        return tuple(self.list_of(data, pair))

    def expr(self, data: Json) -> Expr:
        self.expect(
            isinstance(data, list) and len(data) >= 2 and isinstance(data[0], str),
            "an expression is [kind, ...]",
        )
        tag = data[0]
        if tag in BY_NAME:
            return self.op(BY_NAME[tag], data)
        reader = _EXPR_READERS.get(tag)
        if reader is None:
            raise self.fail(f"unknown expression kind {tag[:40]!r}")
        return reader(self, data)

    def op(self, op: Op, data: Json) -> Expr:
        self.expect(len(data) == 1 + op.spec.arity, f"{op.spec.name} takes {op.spec.arity} operand(s)")
        operands = [self.at(f"[{k}]", self.expr, d) for k, d in enumerate(data[1:], 1)]
        return Binary(op, *operands) if op.spec.arity == 2 else Unary(op, *operands)

    def var(self, data: Json) -> Expr:
        self.tagged(data, "var", 3)
        if data[1] in self.size_vars:  # a symbolic dimension: the one variable of that name
            return self.size_vars[data[1]]
        return Var(
            self.at("[1]", self.string, data[1]), self.at("[2]", lambda d: self.choice(d, DTYPES), data[2])
        )

    def const(self, data: Json) -> Expr:
        self.tagged(data, "const", 3)
        dtype = self.at("[2]", lambda d: self.choice(d, DTYPES), data[2])
        value = data[1]
        if dtype in FLOAT_DTYPES and value in ("inf", "-inf", "nan"):
            value = float(value)
        kinds = (int, float) if dtype in FLOAT_DTYPES else (int,) if dtype in INT_DTYPES else (bool,)
        ok = isinstance(value, kinds) and (dtype == "bool" or not isinstance(value, bool))
        self.expect(ok, f"the value of a {dtype} constant must be a number of that kind")
        return Const(float(value) if dtype in FLOAT_DTYPES else value, dtype)

    def load(self, data: Json) -> Expr:
        self.tagged(data, "load", 3)
        buffer = self.at("[1]", self.buffer, data[1])
        indices = self.at("[2]", lambda d: self.list_of(d, self.expr), data[2])
        self.expect(len(indices) == len(buffer.shape), f"{buffer.name} has rank {len(buffer.shape)}")
        return Load(buffer, tuple(indices))

    def select(self, data: Json) -> Expr:
        self.tagged(data, "select", 4)
        return Select(*(self.at(f"[{k}]", self.expr, data[k]) for k in (1, 2, 3)))

    def cast(self, data: Json) -> Expr:
        self.tagged(data, "cast", 3)
        return Cast(
            self.at("[1]", lambda d: self.choice(d, DTYPES), data[1]), self.at("[2]", self.expr, data[2])
        )

    def store(self, data: Json) -> BufferStore:
        self.tagged(data, "store", 4)
        buffer = self.at("[1]", self.buffer, data[1])
        value = self.at("[2]", self.expr, data[2])
        indices = self.at("[3]", lambda d: self.list_of(d, self.expr), data[3])
        self.expect(len(indices) == len(buffer.shape), f"{buffer.name} has rank {len(buffer.shape)}")
        self.expect(
            value.dtype == buffer.dtype, f"a {value.dtype} value stored into {buffer.dtype} {buffer.name}"
        )
        return BufferStore(buffer, value, tuple(indices))

    def stmt(self, data: Json) -> Stmt:
        self.expect(
            isinstance(data, list) and len(data) >= 2 and isinstance(data[0], str),
            "a statement is [kind, ...]",
        )
        reader = _STMT_READERS.get(data[0])
        if reader is None:
            raise self.fail(f"unknown statement kind {data[0][:40]!r}")
        return reader(self, data)

    def seq(self, data: Json) -> Stmt:
        self.tagged(data, "seq", 2)
        return SeqStmt(tuple(self.at("[1]", lambda d: self.list_of(d, self.stmt), data[1])))

    def loop(self, data: Json) -> Stmt:
        self.tagged(data, "for", 6)
        var = Var(self.at("[1]", self.string, data[1]))
        extent = self.at("[2]", self.extent, data[2])
        kind = self.at("[3]", lambda d: self.choice(d, LOOP_KINDS), data[3])
        annotations = self.at("[4]", self.annotations, data[4])
        return For(var, extent, self.at("[5]", self.stmt, data[5]), kind, annotations)

    def branch(self, data: Json) -> Stmt:
        self.tagged(data, "if", 4)
        cond = self.at("[1]", self.expr, data[1])
        self.expect(cond.dtype == "bool", "the condition must be bool")
        other = None if data[3] is None else self.at("[3]", self.stmt, data[3])
        return IfThenElse(cond, self.at("[2]", self.stmt, data[2]), other)

    def allocate(self, data: Json) -> Stmt:
        self.tagged(data, "allocate", 3)
        buffer = self.at("[1]", self.declare, data[1])
        try:
            return Allocate(buffer, self.at("[2]", self.stmt, data[2]))
        finally:
            del self.buffers[buffer.name]  # in scope only inside the allocation

    def block(self, data: Json) -> Stmt:
        self.tagged(data, "block", 8)
        name = self.at("[1]", self.string, data[1])

        def iter_var(d: Json) -> IterVar:
            self.expect(isinstance(d, list) and len(d) == 3, "an iteration variable is [name, extent, kind]")
            var = Var(self.at("[0]", self.string, d[0]))
            return IterVar(
                var,
                self.at("[1]", self.extent, d[1]),
                self.at("[2]", lambda k: self.choice(k, ITER_KINDS), d[2]),
            )

        iter_vars = self.at("[2]", lambda d: self.list_of(d, iter_var), data[2])
        bindings = self.at("[3]", lambda d: self.list_of(d, self.expr), data[3])
        self.expect(len(bindings) == len(iter_vars), "one binding per iteration variable")
        body = self.at("[4]", self.store, data[4])
        init = None if data[5] is None else self.at("[5]", self.store, data[5])
        predicate = self.at("[6]", self.expr, data[6])
        self.expect(predicate.dtype == "bool", "the predicate must be bool")
        annotations = self.at("[7]", self.annotations, data[7])
        return Block(name, tuple(iter_vars), tuple(bindings), body, init, predicate, annotations)


_EXPR_READERS: dict[str, Callable[[_Reader, Json], Expr]] = {
    "var": _Reader.var,
    "const": _Reader.const,
    "load": _Reader.load,
    "select": _Reader.select,
    "cast": _Reader.cast,
}
_STMT_READERS: dict[str, Callable[[_Reader, Json], Stmt]] = {
    "store": _Reader.store,
    "seq": _Reader.seq,
    "for": _Reader.loop,
    "if": _Reader.branch,
    "allocate": _Reader.allocate,
    "block": _Reader.block,
}
