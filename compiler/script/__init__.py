"""TVMScript in: `from_source(text)` reads a `@T.prim_func` function or an `@I.ir_module` class from
text without running it; `tir.prim_func` and `ir.ir_module` are the decorator forms for Python files
(`from compiler.script import tir as T, ir as I`), as TVM's `tvm.script` spells them."""

from compiler.ir import IRModule
from compiler.script import ir, tir
from compiler.script.errors import ScriptError
from compiler.script.parser import from_source

ir_module = ir.ir_module

__all__ = ["IRModule", "ScriptError", "from_source", "ir", "ir_module", "tir"]
