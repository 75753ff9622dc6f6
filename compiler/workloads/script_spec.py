"""Workloads that arrive as TVMScript: `{"tvmscript": "<text>", "num_inputs": n}` (n optional).

The text is read by `compiler.script` (parsed, never run), then checked as a PrimFunc spec is
(`primfunc_spec`: an unscheduled program, every load proven inside its buffer, the spec limits), so
the same function hashes to the same workload whichever form it came in, and travels to workers as
its PrimFunc spec. Every refusal names a line of the script.
"""

from __future__ import annotations

import ast
import re

from compiler.ir import IRModule, PrimFunc
from compiler.script import ScriptError, from_source
from compiler.script.parser import parse_text
from compiler.serialize import to_json
from compiler.visit import blocks
from compiler.workloads.primfunc_spec import leading_inputs, primfunc_workload
from compiler.workloads.workload import MAX_PRIMFUNC_BYTES, Workload, WorkloadError, check_int, show

FIELD = "tvmscript"


def script_workload(text: object, num_inputs: object = None) -> Workload:
    """The workload of the one function in `text`; without `num_inputs`, the inputs are the leading
    parameters no block writes."""
    func = script_function(text)
    assert isinstance(text, str)
    n = leading_inputs(func) if num_inputs is None else check_int(num_inputs, "num_inputs", minimum=0)
    try:
        return primfunc_workload(to_json(func), n)
    except WorkloadError as e:
        if e.field == "num_inputs":
            raise
        raise WorkloadError(FIELD, f"{_where(text, func, e.field)}: {e.message}") from None


def script_function(text: object) -> PrimFunc:
    """The one function in `text`, read (never run); a WorkloadError on the `tvmscript` field
    naming the line where it cannot be read."""
    if not isinstance(text, str):
        raise WorkloadError(FIELD, f"must be TVMScript text, got {show(text)}")
    if len(text.encode(errors="replace")) > MAX_PRIMFUNC_BYTES:
        raise WorkloadError(FIELD, f"the script exceeds the limit of {MAX_PRIMFUNC_BYTES} bytes")
    try:
        parsed = from_source(text)
    except ScriptError as e:
        raise WorkloadError(FIELD, str(e)) from None
    return _one_function(parsed)


def _one_function(parsed: PrimFunc | IRModule) -> PrimFunc:
    if isinstance(parsed, PrimFunc):
        return parsed
    if len(parsed) != 1:
        raise WorkloadError(FIELD, f"a workload is one function; the module holds {', '.join(parsed)}")
    return parsed.functions[0]


def _where(text: str, func: PrimFunc, field: str) -> str:
    """The script's line that the spec path `field` points into: a parameter, an intermediate buffer,
    or a loop nest (by the block it holds)."""
    tree = parse_text(text)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func.name)
    found = re.match(r"primfunc\.(params|allocs)\[(\d+)\]|primfunc\.body(?:\[1\]\[(\d+)\])?", field)
    line = node.lineno
    if found and found.group(1) == "params":
        line = node.args.args[int(found.group(2))].lineno
    elif found and found.group(1) == "allocs":
        name = func.allocs[int(found.group(2))].name
        line = next(
            (a.lineno for a in ast.walk(node) if isinstance(a, ast.Assign) and _assigns(a, name)), line
        )
    elif found:
        names = [b.name for b in blocks(func.body)]
        block = names[int(found.group(3) or 0)] if names else None
        line = next((w.lineno for w in ast.walk(node) if isinstance(w, ast.With) and _opens(w, block)), line)
    return f"line {line} ({field})"


def _assigns(node: ast.Assign, name: str) -> bool:
    return len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name


def _opens(node: ast.With, block: str | None) -> bool:
    if len(node.items) != 1:
        return False
    call = node.items[0].context_expr
    return (
        isinstance(call, ast.Call)
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Constant)
        and call.args[0].value == block
    )
