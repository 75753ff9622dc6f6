"""The one error of the TVMScript reader: text it does not take, with the line and column of the culprit."""

from __future__ import annotations

import ast


class ScriptError(ValueError):
    """A script this reader refuses; `line` and `column` are 1-based, as editors count them."""

    def __init__(self, message: str, line: int, column: int, filename: str | None = None) -> None:
        where = f"{filename}, line {line}" if filename else f"line {line}"
        super().__init__(f"{where}, column {column}: {message}")
        self.message, self.line, self.column, self.filename = message, line, column, filename


def error_at(node: ast.AST, message: str) -> ScriptError:
    return ScriptError(message, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1)


def check(cond: bool, node: ast.AST, message: str) -> None:
    if not cond:
        raise error_at(node, message)
