"""One fused module for every size of a shape family, found by comparing the family's static modules.

A frontend imports a model at given sizes (`ShapeFamily`); the graph passes and fusion take static
modules. Rather than teach every type rule, pass and frontend's folding to carry symbolic sizes, the
family is imported and optimized at a few sizes of its ranged dimension and the fused modules are
compared: they must be the same graph of the same kernels, and every number that differs between
them must be one affine function of the size (a * n + b) at every size compared. Those numbers
become expressions of a size var (`compiler.ir.SizeVar`): tensor types with symbolic dimensions and
symbolic kernels, which the compiler schedules per bucket of sizes (`compiler.buckets`).

A weight the frontend folded that depends on the size (position embeddings sliced to the length, a
causal mask, a mask's fill) must be, at every size, the leading corner of its value at the largest
size: that value is kept, and each kernel reading it declares the parameter at its full shape, so
its indices (all below the size's own extents) read the same elements. Anything else (a float that
changes with the size, as a mean over the sequence has; a graph whose structure changes) is refused
with a SymbolicError naming the node, and `graph.build` compiles each size as it comes instead.

The sizes compared are the three largest primes inside the range, so that no size coincides with
one of the model's own dimensions, and the range's largest value; the fit takes two of them and is
checked at the others. Large sizes, because what the passes decide by size must be decided as at
the largest: constant folding keeps a result far larger than its inputs a computation (a mask, a
broadcast), and the module must keep it one at every size (computed at run time, it is right at
every size; folded, it would not exist at the largest). The fit is also checked at the smallest
sizes and at the one below the largest (`check_sizes`) where their graph is the same: a number that
is min(n, 8) is 8 at every large size, but not at 3. The matmul padding pass is left out: it pads
to multiples that are not affine in the size, and the symbolic kernels compute their last partial
tiles themselves (`compiler.overcompute`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.arith import Linear, bound, extent_range
from compiler.dtypes import INT_DTYPES
from compiler.graph.ir import CallDPSPacked, CallTIR, Constant, Input, Module, Node, TensorType
from compiler.graph.memory_plan import views
from compiler.graph.passes import PASSES, optimize
from compiler.graph.passes.pad_matmul import pad_matmul
from compiler.graph.shape_family import DimRange, ShapeFamily
from compiler.ir import Block, Buffer, Expr, IRError, Load, PrimFunc, Select, SizeVar
from compiler.serialize import SerializeError, from_json, to_json
from compiler.visit import blocks, guarded_loads, walk_expr

RANGE_PASSES = tuple(p for p in PASSES if p is not pad_matmul)
SMALL_SIZES = (2, 3, 5, 7)  # besides the range's ends, where a module is checked

Json = Any


class SymbolicError(ValueError):
    """A family that one symbolic module cannot describe; says where the sizes' modules differ."""


def symbolic_module(family: ShapeFamily) -> Module:
    """The fused module computing `family` at every size of its ranged dimension."""
    if len(family.dims) != 1:
        names = ", ".join(d.name for d in family.dims)
        raise SymbolicError(f"the model has {len(family.dims)} ranged dimensions ({names}): one is supported")
    dim = family.dims[0]
    if dim.min < 1:
        raise SymbolicError(f"{dim} holds 0: a module for a range takes sizes from 1")
    samples = sample_sizes(dim)
    modules = [_optimized(family, dim, s) for s in samples]
    checks = [
        (s, m) for s in check_sizes(dim) if _same_structure(m := _optimized(family, dim, s), modules[0])
    ]
    sizes = samples[:-1] + [s for s, _ in checks] + samples[-1:]  # the largest last: its weights are kept
    var = SizeVar(_unused_name(identifier(dim.name), modules[0]), "int64", dim.min, dim.max)
    return _Unifier(var, sizes).module(modules[:-1] + [m for _, m in checks] + modules[-1:])


def sample_sizes(dim: DimRange) -> list[int]:
    """The three largest primes inside the range, and its largest value."""
    primes = [p for p in range(max(dim.min, 2), dim.max) if _is_prime(p)]
    if len(primes) < 3:
        raise SymbolicError(f"{dim} holds too few sizes to compare: each size is compiled on its own")
    return primes[-3:] + [dim.max]


def check_sizes(dim: DimRange) -> list[int]:
    """Sizes the module is checked at where their graph is the one compared (a graph may differ
    at small sizes, where more folds): the smallest ones, where a number that is min(n, C) or max(n,
    C) differs from its fit, and the one below the largest, of the other parity."""
    checked = {dim.min, dim.min + 1, *SMALL_SIZES, dim.max - 1}
    return sorted({s for s in checked if dim.min <= s < dim.max} - set(sample_sizes(dim)))


def check_bounds(func: PrimFunc, var: SizeVar) -> None:
    """Refuse a kernel that would read or write outside a buffer at the range's ends or its small
    sizes: a number the comparison took for a constant that is min(n, C) reads past a buffer of n."""
    for size in sorted(
        {s for s in (var.lo, var.lo + 1, *SMALL_SIZES, var.hi - 1, var.hi) if var.lo <= s <= var.hi}
    ):
        static = func.specialize({var.name: size})
        for block in blocks(static.body):
            ranges = {iv.var: extent_range(iv.extent) for iv in block.iter_vars}
            for buffer, indices in _accesses(block):
                for axis, (index, dim) in enumerate(zip(indices, buffer.shape)):
                    b = bound(index, ranges)
                    if b is not None and isinstance(dim, int) and not 0 <= b[0] <= b[1] < dim:
                        raise SymbolicError(
                            f"kernel {func.name!r} at {var.name} = {size} indexes {buffer.name} from {b[0]} "
                            f"to {b[1]} along axis {axis} of {dim}: a number the sizes compared agree on "
                            "changes at this size"
                        )


def _accesses(block: Block) -> list[tuple[Buffer, tuple[Expr, ...]]]:
    """The buffers a block stores to and loads from, with the indices, but the loads that only a
    select's condition guards (padding's `data[y - 1]` where y >= 1)."""
    stores = [block.body] + ([block.init] if block.init is not None else [])
    values = [e for store in stores for e in walk_expr(store.value)]
    guarded = {id(ld) for e in values if isinstance(e, Select) for ld in guarded_loads(e)}
    out = [(store.buffer, tuple(store.indices)) for store in stores]
    return out + [
        (e.buffer, tuple(e.indices)) for e in values if isinstance(e, Load) and id(e) not in guarded
    ]


def _optimized(family: ShapeFamily, dim: DimRange, size: int) -> Module:
    try:
        return optimize(family.specialize({dim.name: size}), passes=RANGE_PASSES)
    except (ValueError, IndexError) as e:  # GraphError, ShapeError: the family itself says no
        raise SymbolicError(f"at {dim.name} = {size}: {e}") from None


def _same_structure(a: Module, b: Module) -> bool:
    """Whether two sizes' modules are the same graph of the same kernels, numbers aside."""
    na, nb = a.nodes(), b.nodes()
    if len(na) != len(nb) or [o.name for o in a.outputs] != [o.name for o in b.outputs]:
        return False
    for x, y in zip(na, nb):
        if type(x) is not type(y) or x.name != y.name or [p.name for p in x.args] != [p.name for p in y.args]:
            return False
        if isinstance(x, CallTIR) and isinstance(y, CallTIR):
            if (x.func, x.ops) != (y.func, y.ops):
                return False
            if _skeleton(to_json(a.funcs[x.func])) != _skeleton(to_json(b.funcs[y.func])):
                return False
    return True


def _skeleton(data: Json) -> Json:
    """A function's JSON form with every number replaced by 0."""
    if isinstance(data, list):
        return [_skeleton(d) for d in data]
    if isinstance(data, dict):
        return {k: _skeleton(v) for k, v in data.items()}
    return 0 if isinstance(data, (int, float)) and not isinstance(data, bool) else data


def _unused_name(name: str, module: Module) -> str:
    """`name`, made unlike every variable of the kernels (a loop `n`, an axis `k`), which the size
    var would otherwise stand for when their JSON forms are read back."""
    used: set[str] = set()
    for func in module.funcs.values():
        _variables(to_json(func)["body"], used)
    while name in used:
        name += "_"
    return name


def _variables(data: Json, out: set[str]) -> None:
    """The names of the variables in a JSON form: read, looped over, or a block's axes."""
    if isinstance(data, dict):
        for value in data.values():
            _variables(value, out)
    if not isinstance(data, list) or not data:
        return
    if data[0] in ("var", "for") and len(data) > 1 and isinstance(data[1], str):
        out.add(data[1])
    if data[0] == "block" and len(data) > 2:
        out.update(axis[0] for axis in data[2])
    for item in data:
        _variables(item, out)


def identifier(name: str) -> str:
    """A dimension's name as a size var's (a C identifier: "ids:1" becomes "ids_1")."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "n_" + out


def _mentions(data: Json, var: str) -> bool:
    """Whether the JSON form of a statement or expression reads the variable `var`."""
    if isinstance(data, list):
        return data[:2] == ["var", var] or any(_mentions(d, var) for d in data)
    return isinstance(data, dict) and any(_mentions(d, var) for d in data.values())


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))


@dataclass
class _Unifier:
    var: SizeVar
    sizes: list[int]

    def __post_init__(self) -> None:
        self.corners: dict[str, Constant] = {}  # weights kept at their largest size
        self.funcs: dict[str, PrimFunc] = {}
        self.variants: dict[tuple[str, tuple[int, ...]], str] = {}

    def module(self, modules: Sequence[Module]) -> Module:
        listed = [m.nodes() for m in modules]
        counts = {len(nodes) for nodes in listed}
        if len(counts) > 1:
            raise SymbolicError(f"the graph has {self._at([len(n) for n in listed])} nodes")
        for attr in ("scalar_inputs", "scalar_outputs"):
            if len({getattr(m, attr) for m in modules}) > 1:
                raise SymbolicError(f"the model's {attr.replace('_', ' ')} change with the size")
        memo: dict[str, Node] = {}
        for group in zip(*listed):
            memo[group[0].name] = self.node(group, memo, modules)
        outputs = [[o.name for o in m.outputs] for m in modules]
        if any(names != outputs[0] for names in outputs):
            raise SymbolicError("the model's outputs change with the size")
        self._check_corners(modules[-1], outputs[0])
        first = modules[0]
        return Module(
            tuple(memo[i.name] for i in first.inputs),  # type: ignore[misc]
            tuple(memo[name] for name in outputs[0]),
            dict(self.funcs),
            first.scalar_inputs,
            first.scalar_outputs,
        )

    def node(self, group: Sequence[Node], memo: dict[str, Node], modules: Sequence[Module]) -> Node:
        first = group[0]
        if any(type(n) is not type(first) or n.name != first.name for n in group):
            raise SymbolicError(f"the graph differs: {self._at([f'{n.name!r}' for n in group])}")
        if isinstance(first, Input):
            return Input(first.name, self.tensor_type(group))
        if isinstance(first, Constant):
            return self.constant(group)  # type: ignore[arg-type]
        if not isinstance(first, CallTIR):
            if isinstance(first, CallDPSPacked):
                raise SymbolicError(f"node {first.name!r} calls the extern {first.func!r} at static shapes")
            raise SymbolicError(f"node {first.name!r} is not fused")
        calls: list[CallTIR] = list(group)  # type: ignore[arg-type]
        args = [[a.name for a in c.args] for c in calls]
        if any(a != args[0] for a in args) or len({(c.func, c.ops) for c in calls}) > 1:
            raise SymbolicError(
                f"node {first.name!r} calls another kernel or other arguments as the size changes"
            )
        func = self.func(calls, modules)
        return CallTIR(
            first.name,
            tuple(memo[name] for name in args[0]),
            self.tensor_type(group),
            func=func,
            ops=first.ops,
            flops=calls[-1].flops,
        )

    def tensor_type(self, group: Sequence[Node]) -> TensorType:
        types = [n.type for n in group]
        ranks = {len(t.shape) for t in types}
        if len(ranks) > 1 or len({t.dtype for t in types}) > 1:
            raise SymbolicError(f"node {group[0].name!r}: {self._at([str(t) for t in types])}")
        dims = [
            self.fit([int(t.shape[k]) for t in types], f"node {group[0].name!r}") for k in range(ranks.pop())
        ]
        return TensorType(tuple(dims), types[0].dtype)

    def constant(self, group: Sequence[Constant]) -> Constant:
        largest = group[-1]
        if all(c.data.shape == largest.data.shape and np.array_equal(c.data, largest.data) for c in group):
            return group[0]
        for c in group[:-1]:
            same_rank = c.data.ndim == largest.data.ndim
            if not same_rank or not np.array_equal(
                c.data, largest.data[tuple(slice(0, d) for d in c.data.shape)]
            ):
                raise SymbolicError(
                    f"weight {c.name!r} changes with the size and is not, at every size, the leading "
                    f"corner of its value at the largest size"
                )
        self.tensor_type(group)  # its shape is affine in the size
        self.corners[largest.name] = largest
        return largest

    def func(self, calls: Sequence[CallTIR], modules: Sequence[Module]) -> str:
        name = calls[0].func
        cornered = tuple(k for k, a in enumerate(calls[-1].args) if a.name in self.corners)
        key = (name, cornered)
        if key in self.variants:
            return self.variants[key]
        data = self.json([to_json(m.funcs[name]) for m in modules], f"kernel {name!r}")
        largest = to_json(modules[-1].funcs[name])
        for k in cornered:  # the weight's parameter at its full shape
            data["params"][k]["shape"] = largest["params"][k]["shape"]
        data["size_vars"] = [[self.var.name, self.var.lo, self.var.hi]]
        variant = name if not cornered else f"{name}_full_{'_'.join(map(str, cornered))}"
        data["name"] = variant
        try:
            func = from_json(data)
        except (SerializeError, IRError) as e:
            raise SymbolicError(
                f"kernel {name!r}: a number that changes with the size is not a size ({e})"
            ) from None
        if not func.size_vars:
            if _mentions(data["body"], self.var.name):
                raise SymbolicError(f"kernel {name!r} depends on the size only through a weight")
            data.pop("size_vars")
            func = from_json(data)
        if func.size_vars:
            check_bounds(func, self.var)
        self.variants[key] = variant
        self.funcs[variant] = func
        return variant

    def json(self, values: Sequence[Json], where: str) -> Json:
        first = values[0]
        if all(v == first for v in values[1:]):
            return first
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return self.fit_json(values, where)  # an extent
        if not all(type(v) is type(first) for v in values):
            raise SymbolicError(f"{where} differs: {self._at([str(v)[:40] for v in values])}")
        if isinstance(first, dict):
            if any(set(v) != set(first) for v in values):
                raise SymbolicError(f"{where} differs in its fields")
            return {k: self.json([v[k] for v in values], where) for k in first}
        if not isinstance(first, list) or any(len(v) != len(first) for v in values):
            raise SymbolicError(f"{where} differs: {self._at([str(v)[:40] for v in values])}")
        if first and first[0] == "const" and all(v[2] == first[2] for v in values):
            if first[2] not in INT_DTYPES:
                raise SymbolicError(f"{where}: the {first[2]} constant {self._at([v[1] for v in values])}")
            expr = self.fit_json([v[1] for v in values], where)
            return expr if first[2] == "int64" else ["cast", first[2], expr]
        return [self.json([v[k] for v in values], where) for k in range(len(first))]

    def fit(self, values: Sequence[int], where: str) -> int | Expr:
        """A number, or the expression of the size it is at every size compared."""
        if all(v == values[0] for v in values):
            return values[0]
        a, b = self._affine(values, where)
        return Linear({self.var: a}, b).to_expr()

    def fit_json(self, values: Sequence[int], where: str) -> Json:
        a, b = self._affine(values, where)
        out: Json = ["var", self.var.name, "int64"]
        if a != 1:
            out = ["mul", out, ["const", a, "int64"]]
        if b:
            out = ["add" if b > 0 else "sub", out, ["const", abs(b), "int64"]]
        return out

    def _affine(self, values: Sequence[int], where: str) -> tuple[int, int]:
        s = self.sizes
        a, rest = divmod(values[1] - values[0], s[1] - s[0])
        b = values[0] - a * s[0]
        if rest or any(v != a * x + b for v, x in zip(values, s)):
            raise SymbolicError(f"{where}: {self._at(list(values))}, not a * {self.var.name} + b")
        return a, b

    def _check_corners(self, largest: Module, outputs: list[str]) -> None:
        """A weight kept at its largest size is read only by kernels (never viewed, never returned)."""
        aliased = {id(v) for v in views(largest).values()}
        for c in largest.constants():
            if c.name in self.corners and (id(c) in aliased or c.name in outputs):
                raise SymbolicError(f"weight {c.name!r} changes with the size and is viewed or returned")

    def _at(self, values: Sequence[object]) -> str:
        return ", ".join(f"{v} at {self.var.name} = {s}" for v, s in zip(values, self.sizes))
