"""TVMScript's `T` for Python files: `@T.prim_func` reads the decorated function's source text and
never runs its body, so a kernel can be written in a .py file as TVM users write it. `T.Buffer` and
`T.handle` exist only so that the parameters' annotations evaluate when Python defines the function."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any, overload

from compiler.ir import PrimFunc
from compiler.script.errors import ScriptError
from compiler.script.parser import read_function


class Buffer:
    """The annotation `T.Buffer((m, n), "float32")` (or `T.Buffer[(m, n), "float32"]`); its arguments
    are read again from the source."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.args, self.kwargs = args, kwargs

    def __class_getitem__(cls, item: object) -> Buffer:
        return cls(item)


class handle:
    """The annotation `T.handle` of a parameter that `T.match_buffer` binds."""


@overload
def prim_func(func: Callable[..., Any]) -> PrimFunc: ...
@overload
def prim_func(func: None = None, **options: object) -> Callable[[Callable[..., Any]], PrimFunc]: ...
def prim_func(
    func: Callable[..., Any] | None = None, **options: object
) -> PrimFunc | Callable[[Callable[..., Any]], PrimFunc]:
    """`@T.prim_func` (or `@T.prim_func(private=True)`): the PrimFunc the decorated function's text
    describes."""
    if func is None:
        return lambda f: read_source(f)
    return read_source(func)


def read_source(func: Callable[..., Any]) -> PrimFunc:
    """The PrimFunc of a Python function's source; errors give the file's line and column."""
    try:
        lines, first = inspect.getsourcelines(func)
        filename = inspect.getsourcefile(func)
    except (OSError, TypeError):
        name = getattr(func, "__name__", repr(func))
        raise ScriptError(
            f"the source of {name} is not available (typed at a prompt?): use from_source(text)",
            1,
            1,
        ) from None
    indent = len(lines[0]) - len(lines[0].lstrip())
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef)
    try:
        return read_function(node)
    except ScriptError as e:
        raise ScriptError(e.message, e.line, e.column + indent, filename) from None
