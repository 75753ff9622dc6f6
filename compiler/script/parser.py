"""TVMScript text to PrimFuncs: `@T.prim_func` functions and `@I.ir_module` classes, read from Python's
syntax tree and never executed, so the same text is safe to take from the network.

What it reads is the TensorIR the printer writes (`PrimFunc.script()`) and TVM's scripts use:
`T.Buffer((m, n), "float32")` parameters (or `T.Buffer[...]`, or `T.handle` with `T.match_buffer`),
`T.func_attr`, `T.alloc_buffer`, an optional `with T.block("root")`, loops (`range`, `T.serial`,
`T.parallel`, `T.vectorized`, `T.unroll`, `T.grid`, with `annotations=`), `if`/`else`, and leaf
blocks: `T.axis.spatial/reduce/scan` (or `S`/`R`) and `T.axis.remap`, `T.reads`/`T.writes`
(checked, then inferred again from the body as the IR does), `T.where`, `T.block_attr`, `with T.init()`
and one store. The IR's own rules hold: loops start at 0, a block holds one store (and its init),
blocks do not nest. TVM's `global_symbol` and `tir.noalias` attributes say nothing here (every
function is exported by its name; buffers never alias) and are dropped.

Variables are identified by name in the IR and a schedule finds loops by name, so a loop that
reuses an earlier loop's name (`for i, j in T.grid(...)` twice) is renamed with te's style (`i1`);
block variables may repeat from block to block, as te writes them. Any refusal is a ScriptError
giving the line and column.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from compiler.ir import (
    SCOPES,
    TRUE,
    Block,
    Buffer,
    BufferStore,
    Const,
    Expr,
    For,
    IfThenElse,
    IRModule,
    IterVar,
    PrimFunc,
    SeqStmt,
    SizeVar,
    Stmt,
    Var,
    check_params,
)
from compiler.names import unique_name
from compiler.script.errors import ScriptError, check, error_at
from compiler.script.expr import ExprReader, dtype_arg, is_t_attr, t_call

MAX_SCRIPT_CHARS = 1 << 20
MAX_DIM = 2**31 - 1  # a loop extent or buffer dimension
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DROPPED_ATTRS = ("global_symbol", "tir.noalias")
_LOOP_KINDS = {"serial": "serial", "parallel": "parallel", "vectorized": "vectorized", "unroll": "unrolled"}
_AXIS_KINDS = {"spatial": "S", "S": "S", "reduce": "R", "R": "R", "scan": "O"}


def from_source(text: str) -> PrimFunc | IRModule:
    """The program in TVMScript `text`: its one function, or the module of its functions."""
    tree = parse_text(text)
    funcs: list[PrimFunc] = []
    module = False
    for node in tree.body:
        if _skippable(node):
            continue
        if isinstance(node, ast.FunctionDef):
            funcs.append(read_function(node))
        elif isinstance(node, ast.ClassDef):
            check(not module, node, "a script holds one module")
            module = True
            funcs += read_module(node).functions
        else:
            raise error_at(node, "a script holds imports, @T.prim_func functions and an @I.ir_module class")
    if not funcs:
        raise ScriptError("no @T.prim_func function or @I.ir_module class", 1, 1)
    if len(funcs) == 1 and not module:
        return funcs[0]
    names = [f.name for f in funcs]
    for k, name in enumerate(names):
        if name in names[:k]:
            raise ScriptError(f"two functions are named {name}", 1, 1)
    return IRModule(tuple(funcs))


def parse_text(text: str) -> ast.Module:
    """Python's syntax tree of `text`, with its syntax errors (and its limits) as ScriptErrors."""
    if not isinstance(text, str):
        raise ScriptError(f"a script is text, got {type(text).__name__}", 1, 1)
    if len(text) > MAX_SCRIPT_CHARS:
        raise ScriptError(f"the script exceeds the limit of {MAX_SCRIPT_CHARS} characters", 1, 1)
    try:
        with warnings.catch_warnings():  # "invalid escape sequence" and the like: not the user's concern
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except SyntaxError as e:
        raise ScriptError(e.msg, e.lineno or 1, e.offset or 1) from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise ScriptError(f"the text is not a script Python can read: {type(e).__name__}", 1, 1) from None


def read_module(node: ast.ClassDef) -> IRModule:
    """An `@I.ir_module` class of `@T.prim_func` functions."""
    check(
        len(node.decorator_list) == 1 and _decorator_name(node.decorator_list[0]) == "ir_module",
        node,
        "a module class is decorated with @I.ir_module",
    )
    check(not node.bases and not node.keywords, node, "a module class has no bases")
    funcs = []
    for item in node.body:
        if _skippable(item):
            continue
        if isinstance(item, ast.FunctionDef) and any(
            _decorator_name(d) == "function" for d in item.decorator_list
        ):
            raise error_at(
                item, "Relax functions (@R.function) are not read: build graphs with compiler.graph"
            )
        check(isinstance(item, ast.FunctionDef), item, "a module class holds @T.prim_func functions")
        assert isinstance(item, ast.FunctionDef)
        funcs.append(read_function(item))
    check(bool(funcs), node, "the module holds no function")
    names = [f.name for f in funcs]
    for k, item in enumerate(i for i in node.body if isinstance(i, ast.FunctionDef)):
        check(names.index(names[k]) == k, item, f"another function is named {names[k]}")
    return IRModule(tuple(funcs))


def read_function(node: ast.FunctionDef) -> PrimFunc:
    """One `@T.prim_func` function."""
    check(
        len(node.decorator_list) == 1 and _decorator_name(node.decorator_list[0]) == "prim_func",
        node,
        "a function is decorated with @T.prim_func",
    )
    decorator = node.decorator_list[0]
    if isinstance(decorator, ast.Call):
        check(not decorator.args, decorator, "T.prim_func takes keyword arguments only")
    _check_name(node, node.name)
    return _FunctionReader(node).read()


@dataclass
class _Scope:
    """What a statement sees: variables by their name in the text, and the extent of each loop."""

    variables: dict[str, Var] = field(default_factory=dict)
    extents: dict[str, int | Expr] = field(default_factory=dict)

    def with_loop(self, name: str, var: Var, extent: int | Expr) -> _Scope:
        return _Scope({**self.variables, name: var}, {**self.extents, name: extent})

    def with_vars(self, new: dict[str, Var]) -> _Scope:
        return _Scope({**self.variables, **new}, self.extents)


class _FunctionReader:
    def __init__(self, node: ast.FunctionDef) -> None:
        self.node = node
        self.buffers: dict[str, Buffer] = {}
        self.params: list[Buffer | str] = []  # a handle's name until T.match_buffer binds it
        self.allocs: list[Buffer] = []
        self.attrs: list[tuple[str, object]] = []
        self.block_names: set[str] = set()
        # Every loop name in the text, so that renaming a repeated one never takes a later one's name.
        self.loop_names = {
            t.id
            for f in ast.walk(node)
            if isinstance(f, ast.For)
            for t in _targets(f.target)
            if isinstance(t, ast.Name)
        }
        self.used_loops: set[str] = set()
        # Symbolic dimensions, `n = T.size_var(lo, hi)` in the body, which the signature may use first.
        self.sizes = _size_vars(node.body)

    def read(self) -> PrimFunc:
        self.read_params()
        body = [s for s in self.node.body if not _skippable(s) and not _declares_size_var(s)]
        check(bool(body), self.node, "the function has no body")
        stmts = self.top_statements(body, _Scope(dict(self.sizes)))
        for name, param in zip(self.node.args.args, self.params):
            check(
                isinstance(param, Buffer), name, f"the handle {name.arg} is never bound with T.match_buffer"
            )
        check(bool(stmts), self.node, "the function computes nothing")
        params = tuple(p for p in self.params if isinstance(p, Buffer))
        check_params(self.node.name, params)
        return PrimFunc(self.node.name, params, _seq(stmts), tuple(self.allocs), tuple(self.attrs))

    # --- the signature and the function's header statements ---------------------------------------
    def read_params(self) -> None:
        args = self.node.args
        extra = args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults
        check(not extra, self.node, "parameters are plain names, each with a T.Buffer or T.handle annotation")
        for arg in args.args:
            _check_name(arg, arg.arg)
            check(arg.annotation is not None, arg, f"the parameter {arg.arg} needs a T.Buffer annotation")
            assert arg.annotation is not None
            if is_t_attr(arg.annotation, "handle"):
                self.params.append(arg.arg)
            else:
                self.params.append(self.declare(arg, arg.arg, *_buffer_type(arg.annotation, self.sizes)))

    def declare(
        self, node: ast.AST, name: str, shape: tuple[int | Expr, ...], dtype: str, scope: str = "global"
    ) -> Buffer:
        _check_name(node, name)
        check(name not in self.buffers, node, f"another buffer is named {name}")
        check(name not in self.loop_names, node, f"{name} names a loop variable too")
        buffer = Buffer(name, shape, dtype, scope)
        self.buffers[name] = buffer
        return buffer

    def top_statements(self, nodes: list[ast.stmt], scope: _Scope) -> list[Stmt]:
        """The function body (or the root block's): header statements, then the program."""
        out: list[Stmt] = []
        root = False
        for node in nodes:
            if _is_expr_call(node, "func_attr"):
                self.read_attrs(node, self.attrs)
            elif isinstance(node, ast.Assign) and t_call(node.value, "match_buffer", "alloc_buffer"):
                self.read_buffer_statement(node)
            elif isinstance(node, ast.With) and _is_root_block(node):
                check(not out and not root, node, "the root block holds the whole program")
                out, root = self.root_block(node, scope), True
            else:
                check(not root, node, "the root block holds the whole program")
                out += self.statement(node, scope)
        return out

    def root_block(self, node: ast.With, scope: _Scope) -> list[Stmt]:
        inner = []
        for item in node.body:
            if _is_expr_call(item, "reads", "writes") or _skippable(item):
                continue
            if _is_expr_call(item, "block_attr"):
                self.read_attrs(item, self.attrs)
            else:
                inner.append(item)
        return self.top_statements(inner, scope)

    def read_attrs(self, node: ast.stmt, into: list[tuple[str, object]]) -> None:
        assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
        call = node.value
        check(len(call.args) == 1 and not call.keywords, call, "takes one dict of attributes")
        for key, value in _literal_dict(call.args[0]):
            if call.func.attr == "func_attr" and key in DROPPED_ATTRS:  # type: ignore[attr-defined]
                continue
            check(all(k != key for k, _ in into), call, f"the attribute {key!r} is given twice")
            into.append((key, value))

    def read_buffer_statement(self, node: ast.Assign) -> None:
        check(
            len(node.targets) == 1 and isinstance(node.targets[0], ast.Name),
            node,
            "a buffer is assigned to one name",
        )
        target = node.targets[0]
        assert isinstance(target, ast.Name) and isinstance(node.value, ast.Call)
        call = node.value
        if call.func.attr == "alloc_buffer":  # type: ignore[attr-defined]
            scope = _scope_keyword(call)
            keywords = [kw for kw in call.keywords if kw.arg != "scope"]
            shape, dtype = _shape_and_dtype(call, call.args, keywords, self.sizes)
            self.allocs.append(self.declare(node, target.id, shape, dtype, scope))
            return
        check(
            len(call.args) >= 1 and isinstance(call.args[0], ast.Name),
            call,
            "T.match_buffer(handle, shape, dtype)",
        )
        handle = call.args[0].id  # type: ignore[attr-defined]
        check(handle in self.params, call.args[0], f"{handle} is not a T.handle parameter still unbound")
        shape, dtype = _shape_and_dtype(call, call.args[1:], call.keywords, self.sizes)
        self.params[self.params.index(handle)] = self.declare(node, target.id, shape, dtype)

    # --- statements ------------------------------------------------------------------------------
    def statements(self, nodes: list[ast.stmt], scope: _Scope, parent: ast.AST) -> Stmt:
        out = [s for node in nodes for s in self.statement(node, scope)]
        check(bool(out), parent, "the body computes nothing")
        return _seq(out)

    def statement(self, node: ast.stmt, scope: _Scope) -> list[Stmt]:
        if isinstance(node, ast.Pass) or _skippable(node):
            return []
        if isinstance(node, ast.For):
            return [self.loop(node, scope)]
        if isinstance(node, ast.With) and _is_block(node):
            return [self.block(node, scope)]
        if isinstance(node, ast.If):
            cond = self.reader(scope).expr(node.test, "bool")
            check(cond.dtype == "bool", node.test, f"a condition is bool, got {cond.dtype}")
            then = self.statements(node.body, scope, node)
            orelse = self.statements(node.orelse, scope, node) if node.orelse else None
            return [IfThenElse(cond, then, orelse)]
        if isinstance(node, ast.Assign | ast.AugAssign) and _stores(node):
            raise error_at(node, 'a store belongs in a block: with T.block("name"): ...')
        if isinstance(node, ast.Assign) and t_call(node.value, "alloc_buffer", "match_buffer"):
            raise error_at(node, "buffers are declared at the top of the function (or of the root block)")
        if isinstance(node, ast.Assign) and t_call(node.value, "allocate"):
            raise error_at(
                node, "T.allocate is lowered IR, which this reader does not take: use T.alloc_buffer"
            )
        raise error_at(node, f"{_first_line(node)} is not a statement this reader takes")

    def loop(self, node: ast.For, scope: _Scope) -> Stmt:
        check(not node.orelse, node, "a loop has no else")
        call = node.iter
        check(
            isinstance(call, ast.Call),
            call,
            "a loop runs over range(n), T.serial(n), T.grid(...) and the like",
        )
        assert isinstance(call, ast.Call)
        kind, grid = self.loop_kind(call.func)
        names = _targets(node.target)
        check(
            bool(names) and all(isinstance(t, ast.Name) for t in names),
            node.target,
            "loop variables are names",
        )
        annotations: tuple[tuple[str, object], ...] = ()
        for kw in call.keywords:
            check(kw.arg == "annotations" and not grid, kw, f"unknown keyword {kw.arg}")
            annotations = tuple(_literal_dict(kw.value))
        if grid:
            check(
                len(names) == len(call.args),
                call,
                f"{len(names)} loop variables over {len(call.args)} extents",
            )
            extents = [_extent(a, self.sizes) for a in call.args]
        else:
            check(len(names) == 1, node.target, "one loop variable (T.grid binds several)")
            check(1 <= len(call.args) <= 2, call, "a loop takes an extent, or a start 0 and an end")
            if len(call.args) == 2:
                check(_int_literal(call.args[0]) == 0, call.args[0], "loops start at 0")
            extents = [_extent(call.args[-1], self.sizes)]
        inner = scope
        loop_vars = []
        for target, extent in zip(names, extents):
            assert isinstance(target, ast.Name)
            var = self.loop_var(target, inner)
            loop_vars.append((var, extent))
            inner = inner.with_loop(target.id, var, extent)
        body = self.statements(node.body, inner, node)
        for var, extent in reversed(loop_vars):
            body = For(var, extent, body, kind, annotations)
            annotations = ()  # a grid's loops are plain
        return body

    def loop_kind(self, func: ast.AST) -> tuple[str, bool]:
        """The loop kind a loop's iterator names, and whether it is a grid."""
        if isinstance(func, ast.Name) and func.id == "range":
            return "serial", False
        if is_t_attr(func, "grid"):
            return "serial", True
        if is_t_attr(func, *_LOOP_KINDS):
            assert isinstance(func, ast.Attribute)
            return _LOOP_KINDS[func.attr], False
        if is_t_attr(func, "thread_binding"):
            raise error_at(func, "GPU thread bindings do not run here: this compiler targets CPUs")
        raise error_at(func, "a loop runs over range, T.serial, T.parallel, T.vectorized, T.unroll or T.grid")

    def loop_var(self, target: ast.Name, scope: _Scope) -> Var:
        name = target.id
        _check_name(target, name)
        check(name not in scope.variables, target, f"{name} is already a variable here")
        check(name not in self.buffers, target, f"{name} names a buffer")
        if name in self.used_loops:
            name = unique_name(name, self.loop_names | self.used_loops, sep="")
        self.used_loops.add(name)
        return Var(name)

    def block(self, node: ast.With, scope: _Scope) -> Block:
        name = _block_name(node)
        check(name != "root", node, "the root block is the function's first statement")
        check(name not in self.block_names, node, f"another block is named {name}")
        self.block_names.add(name)
        return _BlockReader(self, name, node, scope).read()

    def reader(self, scope: _Scope) -> ExprReader:
        return ExprReader(scope.variables, self.buffers)

    def store(self, node: ast.Assign | ast.AugAssign, scope: _Scope) -> BufferStore:
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        check(
            isinstance(node, ast.AugAssign) or len(node.targets) == 1,
            node,
            "one store at a time",
        )
        assert isinstance(target, ast.Subscript)
        reader = self.reader(scope)
        load = reader.subscript(target)
        buffer, indices = load.buffer, load.indices
        if isinstance(node, ast.AugAssign):
            value = reader.expr(ast.BinOp(target, node.op, node.value, **_position(node)), buffer.dtype)
        else:
            value = reader.expr(node.value, buffer.dtype)
        check(
            value.dtype == buffer.dtype,
            node.value,
            f"stores a {value.dtype} into {buffer.name}, a {buffer.dtype} buffer: cast it",
        )
        return BufferStore(buffer, value, indices)


class _BlockReader:
    """The statements of one leaf block, in the order TVMScript writes them."""

    def __init__(self, func: _FunctionReader, name: str, node: ast.With, scope: _Scope) -> None:
        self.func, self.name, self.node, self.outer = func, name, node, scope
        self.iter_vars: list[IterVar] = []
        self.bindings: list[Expr] = []
        self.names: dict[str, Var] = {}
        self.predicate: Expr = TRUE
        self.annotations: list[tuple[str, object]] = []
        self.init: BufferStore | None = None
        self.body: BufferStore | None = None

    def read(self) -> Block:
        for item in self.node.body:
            check(self.body is None, item, "a block holds one store, its last statement")
            self.item(item)
        check(self.body is not None, self.node, "a block holds one store")
        assert self.body is not None
        return Block(
            self.name,
            tuple(self.iter_vars),
            tuple(self.bindings),
            self.body,
            self.init,
            self.predicate,
            tuple(self.annotations),
        )

    @property
    def inner(self) -> _Scope:
        return self.outer.with_vars(self.names)

    def item(self, node: ast.stmt) -> None:
        if _skippable(node):
            return
        call = node.value if isinstance(node, ast.Assign) else None
        if isinstance(node, ast.Assign) and isinstance(call, ast.Call) and _is_axis(call.func):
            assert isinstance(call.func, ast.Attribute)
            if _is_axis(call.func, "remap"):
                self.remap(node, call)
                return
            if _is_axis(call.func):
                self.axis(node, call)
                return
        if _is_expr_call(node, "reads", "writes"):
            self.regions(node)
        elif _is_expr_call(node, "where"):
            call = node.value  # type: ignore[attr-defined]
            check(len(call.args) == 1, call, "T.where takes one condition")
            check(self.predicate is TRUE, node, "one T.where per block")
            self.predicate = self.func.reader(self.outer).expr(call.args[0], "bool")
            check(self.predicate.dtype == "bool", call.args[0], "T.where takes a bool condition")
        elif _is_expr_call(node, "block_attr"):
            self.func.read_attrs(node, self.annotations)
        elif (
            isinstance(node, ast.With) and len(node.items) == 1 and t_call(node.items[0].context_expr, "init")
        ):
            self.read_init(node)
        elif isinstance(node, ast.Assign | ast.AugAssign) and _stores(node):
            self.body = self.func.store(node, self.inner)
        elif isinstance(node, ast.With) and _is_block(node):
            raise error_at(node, "blocks do not nest here: split the computation into sibling blocks")
        else:
            raise error_at(node, f"{_first_line(node)} is not a statement of a block")

    def add_var(self, target: ast.AST, kind: str, extent: int | Expr, binding: Expr) -> None:
        check(isinstance(target, ast.Name), target, "an axis is bound to a name")
        assert isinstance(target, ast.Name)
        name = target.id
        _check_name(target, name)
        check(name not in self.names, target, f"the block binds {name} twice")
        check(name not in self.outer.variables, target, f"{name} is a loop variable here")
        check(name not in self.func.buffers, target, f"{name} names a buffer")
        check(self.body is None and self.init is None, target, "axes come before the block's statements")
        var = Var(name)
        self.names[name] = var
        self.iter_vars.append(IterVar(var, extent, kind))
        self.bindings.append(binding)

    def axis(self, node: ast.Assign, call: ast.Call) -> None:
        """`v = T.axis.spatial(extent, binding)` (also reduce, scan, and TVM's S and R)."""
        assert isinstance(call.func, ast.Attribute)
        kind = _AXIS_KINDS.get(call.func.attr)
        check(kind is not None, call.func, f"T.axis.{call.func.attr} is not an axis kind here")
        check(
            len(node.targets) == 1 and len(call.args) == 2 and not call.keywords,
            call,
            "T.axis.kind(extent, binding)",
        )
        dom = call.args[0]
        if isinstance(dom, ast.Tuple):
            check(len(dom.elts) == 2 and _int_literal(dom.elts[0]) == 0, dom, "an axis ranges over (0, n)")
            dom = dom.elts[1]
        binding = self.func.reader(self.outer).index(call.args[1])
        assert kind is not None
        self.add_var(node.targets[0], kind, _extent(dom, self.func.sizes), binding)

    def remap(self, node: ast.Assign, call: ast.Call) -> None:
        """`vi, vj, vk = T.axis.remap("SSR", [i, j, k])`: each axis over its loop's extent."""
        check(len(call.args) == 2 and not call.keywords, call, 'T.axis.remap("SSR", [i, j, k])')
        kinds, loops = call.args
        check(
            isinstance(kinds, ast.Constant) and isinstance(kinds.value, str), kinds, "the kinds are a string"
        )
        check(isinstance(loops, ast.List | ast.Tuple), loops, "the loops are a list")
        assert isinstance(kinds, ast.Constant) and isinstance(loops, ast.List | ast.Tuple)
        letters = str(kinds.value)
        targets = _targets(node.targets[0]) if len(node.targets) == 1 else []
        check(len(letters) == len(loops.elts) == len(targets), call, "as many names, kinds and loops")
        for target, kind, loop in zip(targets, letters, loops.elts):
            check(kind in "SR", kinds, f"remap's kinds are S and R, got {kind!r}")
            check(
                isinstance(loop, ast.Name) and loop.id in self.outer.extents,
                loop,
                "remap binds loop variables",
            )
            assert isinstance(loop, ast.Name)
            self.add_var(target, kind, self.outer.extents[loop.id], self.outer.variables[loop.id])

    def regions(self, node: ast.stmt) -> None:
        """`T.reads(A[vi, 0:4], B[...])`: each names a buffer, with indices or slices over what is in
        scope. The IR infers reads and writes from the body, so they are checked, not kept."""
        call = node.value  # type: ignore[attr-defined]
        reader = self.func.reader(self.inner)
        args = call.args[0].elts if len(call.args) == 1 and isinstance(call.args[0], ast.List) else call.args
        for region in args:
            target = region.value if isinstance(region, ast.Subscript) else region
            buffer = reader.buffer(target)
            if not isinstance(region, ast.Subscript):
                continue
            dims = region.slice.elts if isinstance(region.slice, ast.Tuple) else [region.slice]
            check(len(dims) == len(buffer.shape), region, f"{buffer.name} has rank {len(buffer.shape)}")
            for d in dims:
                for part in (d.lower, d.upper) if isinstance(d, ast.Slice) else (d,):
                    if part is not None:
                        reader.index(part)

    def read_init(self, node: ast.With) -> None:
        check(self.init is None, node, "one T.init per block")
        body = [s for s in node.body if not _skippable(s)]
        check(
            len(body) == 1 and isinstance(body[0], ast.Assign) and _stores(body[0]),
            node,
            "T.init holds one store",
        )
        assert isinstance(body[0], ast.Assign)
        self.init = self.func.store(body[0], self.inner)


def _seq(stmts: list[Stmt]) -> Stmt:
    return stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))


def _targets(node: ast.AST) -> list[ast.AST]:
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _stores(node: ast.Assign | ast.AugAssign) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return len(targets) == 1 and isinstance(targets[0], ast.Subscript)


def _skippable(node: ast.stmt) -> bool:
    """Imports, docstrings and comments-as-strings say nothing to the program."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _is_expr_call(node: ast.stmt, *names: str) -> bool:
    return isinstance(node, ast.Expr) and t_call(node.value, *names)


def _is_block(node: ast.With) -> bool:
    return len(node.items) == 1 and t_call(node.items[0].context_expr, "block")


def _is_root_block(node: ast.With) -> bool:
    return _is_block(node) and _block_name(node) == "root"


def _is_axis(func: ast.AST, *names: str) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Attribute)
        and func.value.attr == "axis"
        and is_t_attr(func.value)
        and (not names or func.attr in names)
    )


def _block_name(node: ast.With) -> str:
    item = node.items[0]
    call = item.context_expr
    assert isinstance(call, ast.Call)
    check(item.optional_vars is None, node, "a block binds no name with `as`")
    check(len(call.args) == 1 and not call.keywords, call, 'T.block("name")')
    arg = call.args[0]
    check(isinstance(arg, ast.Constant) and isinstance(arg.value, str), arg, "a block's name is a string")
    assert isinstance(arg, ast.Constant)
    _check_name(arg, arg.value)
    return str(arg.value)


def _decorator_name(node: ast.AST) -> str:
    """`prim_func` of `@T.prim_func`, `@T.prim_func(private=True)`, `@tvm.script.ir_module` ..."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _check_name(node: ast.AST, name: object) -> None:
    check(isinstance(name, str) and NAME.fullmatch(name) is not None, node, f"{name!r} is not a name")


def _int_literal(node: ast.AST) -> int:
    value = node.value if isinstance(node, ast.Constant) else None
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    ):
        value = node.operand.value
        value = -value if isinstance(value, int) else None
    if isinstance(node, ast.Name):
        raise error_at(
            node, f"{node.id} is no size var: declare a symbolic dimension as {node.id} = T.size_var(lo, hi)"
        )
    check(isinstance(value, int) and not isinstance(value, bool), node, "an integer literal is needed here")
    assert isinstance(value, int)
    return value


def _size_vars(body: list[ast.stmt]) -> dict[str, SizeVar]:
    """The function's `n = T.size_var(lo, hi)` statements (TVM's `n = T.int64()` has no range: refused)."""
    out: dict[str, SizeVar] = {}
    for node in body:
        if isinstance(node, ast.Assign) and t_call(node.value, "int64", "int32", "var"):
            raise error_at(node, "a symbolic dimension needs its range: n = T.size_var(lo, hi)")
        if not _declares_size_var(node):
            continue
        assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        target, call = node.targets[0], node.value
        check(len(node.targets) == 1 and isinstance(target, ast.Name), node, "a size var is one name")
        check(len(call.args) == 2 and not call.keywords, call, "T.size_var(lo, hi): its range, inclusive")
        assert isinstance(target, ast.Name)
        check(target.id not in out, node, f"the size var {target.id} is declared twice")
        lo, hi = (_int_literal(a) for a in call.args)
        check(1 <= lo <= hi <= MAX_DIM, call, f"a size var's range is 1 <= lo <= hi <= {MAX_DIM}")
        out[target.id] = SizeVar(target.id, "int64", lo, hi)
    return out


def _declares_size_var(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and t_call(node.value, "size_var")


def _extent(node: ast.AST, sizes: Mapping[str, SizeVar] | None = None) -> int | Expr:
    """A literal extent, or an expression of size vars (`n`, a split's `(n + 7) // 8`)."""
    if sizes and not isinstance(node, ast.Constant | ast.UnaryOp):
        extent = ExprReader(dict(sizes), {}).index(node)
        check(extent.dtype == "int64", node, f"an extent is int64, got {extent.dtype}")
        return int(extent.value) if isinstance(extent, Const) else extent
    n = _int_literal(node)
    check(1 <= n <= MAX_DIM, node, f"an extent is from 1 to {MAX_DIM}, got {n}")
    return n


def _literal_dict(node: ast.AST) -> Iterator[tuple[str, object]]:
    """A dict of literals (`{"key": 16}`) as its items in order; values are never evaluated as code."""
    check(isinstance(node, ast.Dict), node, "a dict of attributes is needed here")
    assert isinstance(node, ast.Dict)
    for key, value in zip(node.keys, node.values):
        check(isinstance(key, ast.Constant) and isinstance(key.value, str), key or node, "keys are strings")
        try:
            literal = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise error_at(
                value, "attribute values are numbers, strings, or tuples and lists of them"
            ) from None
        assert isinstance(key, ast.Constant)
        yield str(key.value), literal


def _buffer_type(node: ast.AST, sizes: Mapping[str, SizeVar]) -> tuple[tuple[int | Expr, ...], str]:
    """`T.Buffer((m, n), "float32")`, `T.Buffer[(m, n), "float32"]`, `T.Buffer((n,))` (float32)."""
    if isinstance(node, ast.Subscript) and is_t_attr(node.value, "Buffer"):
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return _shape_and_dtype(node, args, [], sizes)
    if t_call(node, "Buffer"):
        assert isinstance(node, ast.Call)
        return _shape_and_dtype(node, node.args, node.keywords, sizes)
    raise error_at(node, "a parameter is a T.Buffer((shape), dtype) or a T.handle")


def _shape_and_dtype(
    node: ast.AST,
    args: list[ast.expr],
    keywords: list[ast.keyword],
    sizes: Mapping[str, SizeVar],
) -> tuple[tuple[int | Expr, ...], str]:
    """The (shape, dtype="float32") arguments of T.Buffer, T.alloc_buffer and T.match_buffer."""
    named = dict.fromkeys(("shape", "dtype"))
    check(len(args) <= 2, node, "takes a shape and a dtype")
    for key, arg in zip(("shape", "dtype"), args):
        named[key] = arg
    for kw in keywords:
        check(kw.arg in named and named[kw.arg] is None, kw, f"unexpected keyword {kw.arg}")
        named[str(kw.arg)] = kw.value
    shape_node = named["shape"]
    check(shape_node is not None, node, "a buffer needs a shape")
    assert shape_node is not None
    dims = shape_node.elts if isinstance(shape_node, ast.Tuple | ast.List) else [shape_node]
    check(bool(dims), shape_node, "a buffer has rank 1 or more")
    shape = tuple(_extent(d, sizes) for d in dims)
    dtype = dtype_arg(named["dtype"]) if named["dtype"] is not None else "float32"
    return shape, dtype


def _scope_keyword(call: ast.Call) -> str:
    """The storage scope T.alloc_buffer names (`scope="local"`), "global" when it names none."""
    for kw in call.keywords:
        if kw.arg == "scope":
            check(
                isinstance(kw.value, ast.Constant) and kw.value.value in SCOPES,
                kw,
                f"scope is one of {', '.join(repr(s) for s in SCOPES)} (a CPU has no other storage)",
            )
            assert isinstance(kw.value, ast.Constant)
            return str(kw.value.value)
    return "global"


def _position(node: ast.AST) -> dict[str, int]:
    return {"lineno": getattr(node, "lineno", 1), "col_offset": getattr(node, "col_offset", 0)}


def _first_line(node: ast.AST) -> str:
    text = ast.unparse(node).splitlines()[0]
    return repr(text if len(text) <= 40 else text[:37] + "...")
