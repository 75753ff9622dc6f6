"""TVMScript's `I` for Python files: `@I.ir_module` turns a class of `@T.prim_func` functions into an
IRModule, as TVM's `tvm.script.ir_module` does."""

from __future__ import annotations

from compiler.ir import IRModule, PrimFunc
from compiler.script.errors import ScriptError


def ir_module(cls: type) -> IRModule:
    """The module of the class's functions, in the order the class defines them."""
    funcs = [v for v in vars(cls).values() if isinstance(v, PrimFunc)]
    if not funcs:
        raise ScriptError(f"the module class {cls.__name__} holds no @T.prim_func function", 1, 1)
    return IRModule(tuple(funcs))
