"""Tokenizer, syntax tree and recursive-descent parser for custom workload expressions.

The text comes from users (JSON specs sent to a service), so it is read by this small grammar and is
never handed to Python's eval; anything outside it is a WorkloadError naming the token and its position
(a 0-based character offset).

    program   := statement (';' statement)* [';']
    statement := NAME '[' NAME (',' NAME)* ']' '=' expr
    expr      := term (('+' | '-') term)*
    term      := unary (('*' | '/') unary)*
    unary     := '-' unary | atom
    atom      := NUMBER | NAME | NAME '[' expr (',' expr)* ']' | NAME '(' expr (',' expr)* ')' | '(' expr ')'
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from compiler.ops import BY_SYNTAX
from compiler.workloads.workload import MAX_EXPR_CHARS, MAX_STATEMENTS, WorkloadError

MAX_DEPTH = 64  # syntax-tree depth; every later pass (and te, codegen) recurses over the tree
MAX_INT_LITERAL = 2**31 - 1  # index arithmetic must stay far from int64 overflow

_TOKEN = re.compile(
    r"(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<op>[-+*/()\[\],;=])|(?P<space>\s+)",
    re.ASCII,
)


class Token(NamedTuple):
    kind: str  # "num" | "name" | "op" | "end"
    text: str
    pos: int


def error(message: str, pos: int) -> WorkloadError:
    return WorkloadError("expr", f"{message} at position {pos}")


@dataclass(frozen=True)
class Num:
    value: int | float  # ints stay ints: they may be indices
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Name:
    name: str
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Access:
    tensor: str
    indices: tuple[Node, ...]
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class FuncCall:
    func: str
    args: tuple[Node, ...]
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * /
    a: Node
    b: Node
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Neg:
    a: Node
    pos: int = field(default=0, compare=False)


Node = Num | Name | Access | FuncCall | BinOp | Neg


@dataclass(frozen=True)
class Statement:
    target: Name
    axes: tuple[Name, ...]
    value: Node


def tokenize(text: str) -> list[Token]:
    if len(text) > MAX_EXPR_CHARS:
        raise WorkloadError(
            "expr", f"expression has {len(text)} characters, over the limit of {MAX_EXPR_CHARS}"
        )
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise error(f"unexpected character {text[pos]!r}", pos)
        if m.lastgroup != "space":
            tokens.append(Token(m.lastgroup or "", m.group(), pos))
        pos = m.end()
    tokens.append(Token("end", "end of expression", len(text)))
    return tokens


def _number(tok: Token) -> Num:
    if re.fullmatch(r"\d+", tok.text):
        value: int | float = int(tok.text)
        if value > MAX_INT_LITERAL:
            raise error(f"integer {tok.text} is larger than {MAX_INT_LITERAL}", tok.pos)
    else:
        value = float(tok.text)
        if not math.isfinite(value):
            raise error(f"number {tok.text} is out of range", tok.pos)
    return Num(value, tok.pos)


def _depth(node: Node) -> int:
    if isinstance(node, (Num, Name)):
        return 1
    if isinstance(node, BinOp):
        return 1 + max(_depth(node.a), _depth(node.b))
    if isinstance(node, Neg):
        return 1 + _depth(node.a)
    children = node.indices if isinstance(node, Access) else node.args
    return 1 + max(_depth(c) for c in children)


_WANTED = {"name": "a name", "num": "a number", "end": "';' or the end of the expression"}


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.k = 0
        self.nesting = 0  # bounds recursion on '(' and unary '-' chains before any node exists

    @property
    def tok(self) -> Token:
        return self.tokens[self.k]

    def take(self, kind: str, text: str | None = None) -> Token:
        tok = self.tok
        if tok.kind != kind or (text is not None and tok.text != text):
            want = repr(text) if text is not None else _WANTED.get(kind, kind)
            raise error(f"expected {want} but found {tok.text!r}", tok.pos)
        self.k += 1
        return tok

    def at(self, text: str) -> bool:
        return self.tok.kind == "op" and self.tok.text == text

    def name(self) -> Name:
        tok = self.take("name")
        if keyword.iskeyword(tok.text):
            raise error(f"{tok.text!r} is a reserved word", tok.pos)
        return Name(tok.text, tok.pos)

    def program(self) -> list[Statement]:
        stmts = [self.statement()]
        while self.at(";"):
            self.k += 1
            if self.tok.kind == "end":
                break
            if len(stmts) == MAX_STATEMENTS:
                raise error(f"more than {MAX_STATEMENTS} statements", self.tok.pos)
            stmts.append(self.statement())
        self.take("end")
        return stmts

    def statement(self) -> Statement:
        target = self.name()
        self.take("op", "[")
        axes = [self.name()]
        while self.at(","):
            self.k += 1
            axes.append(self.name())
        self.take("op", "]")
        self.take("op", "=")
        return Statement(target, tuple(axes), self.expr())

    def deeper(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise error("expression nested too deeply", pos)

    def expr(self) -> Node:
        self.deeper(self.tok.pos)
        node = self.binary(self.term, "+-")
        self.nesting -= 1
        return node

    def term(self) -> Node:
        return self.binary(self.unary, "*/")

    def binary(self, operand: Callable[[], Node], ops: str) -> Node:
        node = operand()
        while self.tok.kind == "op" and self.tok.text in ops:
            op = self.take("op")
            node = self.checked(BinOp(op.text, node, operand(), op.pos))
        return node

    def unary(self) -> Node:
        if not self.at("-"):
            return self.atom()
        pos = self.take("op").pos
        self.deeper(pos)
        node = self.checked(Neg(self.unary(), pos))
        self.nesting -= 1
        return node

    def atom(self) -> Node:
        tok = self.tok
        if tok.kind == "num":
            self.k += 1
            return _number(tok)
        if self.at("("):
            self.k += 1
            node = self.expr()
            self.take("op", ")")
            return node
        if tok.kind != "name":
            raise error(f"expected a number, name or '(' but found {tok.text!r}", tok.pos)
        name = self.name()
        if self.at("["):
            return self.checked(Access(name.name, self.args("[", "]"), name.pos))
        if self.at("("):
            return self.checked(FuncCall(name.name, self.args("(", ")"), name.pos))
        return name

    def args(self, open_: str, close: str) -> tuple[Node, ...]:
        self.take("op", open_)
        out = [self.expr()]
        while self.at(","):
            self.k += 1
            out.append(self.expr())
        self.take("op", close)
        return tuple(out)

    def checked(self, node: Node) -> Node:
        if _depth(node) > MAX_DEPTH:
            raise error("expression nested too deeply", node.pos)
        return node


def parse(text: str) -> list[Statement]:
    """The statements of `text`; syntax errors are WorkloadErrors on field "expr"."""
    return _Parser(text).program()


NEG_PRECEDENCE = 1 + max(op.spec.precedence for op in BY_SYNTAX.values())  # -x binds tightest


def node_text(node: Node, context: int = 0) -> str:
    """Canonical text of `node`, with only the parentheses the grammar needs."""
    if isinstance(node, Num):
        return repr(node.value)
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Access):
        return f"{node.tensor}[{', '.join(node_text(i) for i in node.indices)}]"
    if isinstance(node, FuncCall):
        return f"{node.func}({', '.join(node_text(a) for a in node.args)})"
    if isinstance(node, Neg):
        text, prec = "-" + node_text(node.a, NEG_PRECEDENCE), NEG_PRECEDENCE
    else:
        prec = BY_SYNTAX[node.op].spec.precedence
        text = f"{node_text(node.a, prec)} {node.op} {node_text(node.b, prec + 1)}"
    return f"({text})" if prec < context else text


def program_text(stmts: list[Statement]) -> str:
    """Canonical text of a program: parsing it gives back the same statements."""
    return "; ".join(
        f"{s.target.name}[{', '.join(a.name for a in s.axes)}] = {node_text(s.value)}" for s in stmts
    )
