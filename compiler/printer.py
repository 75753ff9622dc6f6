"""Readable, TVMScript-like text for PrimFuncs and expressions."""

from __future__ import annotations

from compiler.ir import (
    Allocate,
    Binary,
    Block,
    BufferStore,
    Cast,
    Const,
    Expr,
    For,
    IfThenElse,
    IRModule,
    Load,
    PrimFunc,
    Select,
    SeqStmt,
    Stmt,
    Unary,
    Var,
)

_LOOP_FN = {"serial": "range", "parallel": "T.parallel", "vectorized": "T.vectorized", "unrolled": "T.unroll"}
_AXIS = {"S": "spatial", "R": "reduce", "O": "scan"}


def expr_str(e: Expr, parent_prec: int = 0) -> str:
    """Python-like text of an expression, with only the parentheses it needs."""
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        if e.dtype == "int64" or e.dtype == "bool":
            return repr(e.value)
        text = repr(e.value)
        return f'T.{e.dtype}("{text}")' if text in ("inf", "-inf", "nan") else f"T.{e.dtype}({text})"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, (Binary, Unary)):
        return _op_str(e, parent_prec)
    if isinstance(e, Select):
        return f"T.Select({expr_str(e.cond)}, {expr_str(e.true_value)}, {expr_str(e.false_value)})"
    if isinstance(e, Cast):
        return f"T.Cast({e.dtype!r}, {expr_str(e.value)})"
    raise TypeError(f"cannot print {type(e).__name__}")


def _op_str(e: Binary | Unary, parent_prec: int) -> str:
    """Infix or prefix with the op's symbol where it has one, else `T.name(operands)`."""
    spec = e.op.spec
    if spec.symbol is None:
        return f"T.{spec.name}({', '.join(expr_str(k) for k in e.children())})"
    prec = spec.precedence
    if isinstance(e, Unary):
        text = f"{spec.symbol} {expr_str(e.a, prec)}"
    else:
        text = f"{expr_str(e.a, prec)} {spec.symbol} {expr_str(e.b, prec + 1)}"
    return f"({text})" if prec < parent_prec else text


def _dim_str(d: int | Expr) -> str:
    return str(d) if isinstance(d, int) else expr_str(d)


def _shape_str(shape: tuple[int | Expr, ...]) -> str:
    """`(n, 64)`, as a Python tuple prints (a rank-1 shape keeps its comma)."""
    dims = ", ".join(_dim_str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


def _store_str(s: BufferStore) -> str:
    return f"{s.buffer.name}[{', '.join(expr_str(i) for i in s.indices)}] = {expr_str(s.value)}"


def _annotations(ann: tuple[tuple[str, object], ...]) -> str:
    return ", ".join(f"{k!r}: {v!r}" for k, v in ann)


def _stmt_lines(s: Stmt, indent: int) -> list[str]:
    pad = "    " * indent
    if isinstance(s, SeqStmt):
        return [line for c in s.stmts for line in _stmt_lines(c, indent)]
    if isinstance(s, For):
        ann = f", annotations={{{_annotations(s.annotations)}}}" if s.annotations else ""
        head = f"{pad}for {s.var.name} in {_LOOP_FN[s.kind]}({_dim_str(s.extent)}{ann}):"
        return [head] + _stmt_lines(s.body, indent + 1)
    if isinstance(s, Block):
        return _block_lines(s, indent)
    if isinstance(s, BufferStore):
        return [pad + _store_str(s)]
    if isinstance(s, IfThenElse):
        lines = [f"{pad}if {expr_str(s.cond)}:"] + _stmt_lines(s.then_case, indent + 1)
        if s.else_case is not None:
            lines += [f"{pad}else:"] + _stmt_lines(s.else_case, indent + 1)
        return lines
    if isinstance(s, Allocate):
        b = s.buffer
        return [
            f"{pad}{b.name} = T.allocate([{', '.join(_dim_str(d) for d in b.shape)}], {b.dtype!r})"
        ] + _stmt_lines(s.body, indent)
    raise TypeError(f"cannot print {type(s).__name__}")


def _block_lines(b: Block, indent: int) -> list[str]:
    pad, inner = "    " * indent, "    " * (indent + 1)
    lines = [f'{pad}with T.block("{b.name}"):']
    for iv, bind in zip(b.iter_vars, b.bindings):
        lines.append(
            f"{inner}{iv.var.name} = T.axis.{_AXIS[iv.kind]}({_dim_str(iv.extent)}, {expr_str(bind)})"
        )
    if not (isinstance(b.predicate, Const) and b.predicate.value is True):
        lines.append(f"{inner}T.where({expr_str(b.predicate)})")
    if b.annotations:
        lines.append(f"{inner}T.block_attr({{{_annotations(b.annotations)}}})")
    if b.init is not None:
        lines += [f"{inner}with T.init():", f"{inner}    {_store_str(b.init)}"]
    lines.append(inner + _store_str(b.body))
    return lines


def script(func: PrimFunc) -> str:
    """The whole function as TVMScript-flavoured Python text."""
    params = ", ".join(f"{b.name}: T.Buffer({_shape_str(b.shape)}, {b.dtype!r})" for b in func.params)
    lines = ["@T.prim_func", f"def {func.name}({params}):"]
    for v in func.size_vars:
        lines.append(f"    {v.name} = T.size_var({v.lo}, {v.hi})")
    if func.attrs:
        lines.append(f"    T.func_attr({{{_annotations(func.attrs)}}})")
    for b in func.allocs:
        scope = "" if b.scope == "global" else f", scope={b.scope!r}"
        lines.append(f"    {b.name} = T.alloc_buffer({_shape_str(b.shape)}, {b.dtype!r}{scope})")
    lines += _stmt_lines(func.body, 1)
    return "\n".join(lines) + "\n"


def module_script(module: IRModule) -> str:
    """A module as TVMScript's `@I.ir_module` class of its functions."""
    lines = ["@I.ir_module", "class Module:"]
    for k, func in enumerate(module.functions):
        if k:
            lines.append("")
        lines += ["    " + line for line in script(func).splitlines()]
    return "\n".join(lines) + "\n"
