"""One fused module for every size of a shape family, found by comparing the family's static modules.

A frontend imports a model at given sizes (`ShapeFamily`); the graph passes and fusion take static
modules. Rather than teach every type rule, pass and frontend's folding to carry symbolic sizes, the
family is imported and optimized at a few sizes of its ranged dimensions and the fused modules are
compared: they must be the same graph of the same kernels, and every number that differs between
them must be one function of the sizes at every binding compared: affine in one size (a * n + b),
and with two, a * n + b * m + c * n * m + d, the product where a batch of sequences is flattened to
rows. Those numbers become expressions of size vars (`compiler.ir.SizeVar`): tensor types with
symbolic dimensions and symbolic kernels, which the compiler schedules per bucket of the first size
a kernel takes (`compiler.buckets`).

A weight the frontend folded that depends on the size (position embeddings sliced to the length, a
causal mask, a mask's fill) must be, at every size, the leading corner of its value at the largest
size: that value is kept, and each kernel reading it declares the parameter at its full shape, so
its indices (all below the size's own extents) read the same elements. Anything else (a float that
changes with the size, as a mean over the sequence has; a graph whose structure changes) is refused
with a SymbolicError naming the node, and `graph.build` compiles each size as it comes instead.

The sizes compared are the three largest primes inside each range, so that no size coincides with
one of the model's own dimensions (in a range with fewer, every size from 2), and the range's
largest value (`sample_points`: for two ranges,
a grid's corners and each range's other sizes); the fit takes the corners and is checked at the
others. Large sizes, because what the passes decide by size must be decided as at
the largest: constant folding keeps a result far larger than its inputs a computation (a mask, a
broadcast), and the module must keep it one at every size (computed at run time, it is right at
every size; folded, it would not exist at the largest). The fit is also checked at the smallest
sizes and at the one below the largest (`check_sizes`) where their graph is the same: a number that
is min(n, 8) is 8 at every large size, but not at 3. The matmul padding pass is left out: it pads
to multiples that are not affine in the size, and the symbolic kernels compute their last partial
tiles themselves (`compiler.overcompute`).

A size checked whose graph is another one (a pass decided otherwise there) is left out of the fit
and kept as a static module of its own (`RangeModules.apart`), which `graph.build` runs at that size.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.arith import Linear, bound, extent_range
from compiler.dtypes import INT_DTYPES
from compiler.graph.ir import CallDPSPacked, CallTIR, Constant, Input, Module, Node, TensorType
from compiler.graph.memory_plan import views
from compiler.graph.op import OPS, Pattern
from compiler.graph.passes import PASSES, optimize
from compiler.graph.passes.pad_matmul import pad_matmul
from compiler.graph.shape_family import Binding, DimRange, ShapeFamily, binding
from compiler.ir import Binary, Block, Buffer, Expr, IRError, Load, PrimFunc, Select, SizeVar
from compiler.ops import Op
from compiler.serialize import SerializeError, from_json, to_json
from compiler.visit import blocks, guarded_loads, walk_expr

RANGE_PASSES = tuple(p for p in PASSES if p is not pad_matmul)
SMALL_SIZES = (2, 3, 5, 7)  # besides the range's ends, where a module is checked

Json = Any


class SymbolicError(ValueError):
    """A family that one symbolic module cannot describe; says where the sizes' modules differ."""


@dataclass(frozen=True)
class RangeModules:
    """The fused module for a family's ranges, and the static modules (optimized as the range's, by
    `RANGE_PASSES`) at the compared sizes whose convs or matmuls are other operators: where a pass
    decides by size, as `winograd_convs` does by the count of output tiles (ResNet-18's 7x7 layers
    direct at batch 1, by Winograd from 2), the size's own graph is what a static build runs. The
    range's module computes every size right; these only run theirs faster."""

    family: ShapeFamily
    module: Module
    apart: dict[Binding, Module]


def symbolic_module(family: ShapeFamily) -> Module:
    """The fused module computing `family` at every size of its ranged dimensions."""
    return range_modules(family).module


def range_modules(family: ShapeFamily, sizes: Sequence[Mapping[str, int]] = ()) -> RangeModules:
    """The module for the range (`symbolic_module`), and the static modules at the sizes it is
    checked at (`check_points`), and at `sizes`, whose graph differs from the range's."""
    for dim in family.dims:
        if dim.min < 1:
            raise SymbolicError(f"{dim} holds 0: a module for a range takes sizes from 1")
    points = sample_points(family.dims)
    modules = [_optimized(family, p) for p in points]
    checked = check_points(family.dims) + [dict(s) for s in sizes]
    checks, apart = [], []
    for p in _unique([p for p in checked if p not in points]):
        m = _optimized(family, p)
        if _same_structure(m, modules[0]):
            checks.append((p, m))
        elif _anchor_ops(m) != _anchor_ops(modules[0]):
            apart.append((p, m))
    # The largest binding last: its weights are kept.
    points = points[:-1] + [p for p, _ in checks] + points[-1:]
    modules = modules[:-1] + [m for _, m in checks] + modules[-1:]
    used: set[str] = set()
    variables = []
    for dim in family.dims:
        name = _unused_name(identifier(dim.name), modules[0], used)
        used.add(name)
        variables.append(SizeVar(name, "int64", dim.min, dim.max))
    module = _Unifier(tuple(variables), [tuple(p[d.name] for d in family.dims) for p in points]).module(
        modules
    )
    return RangeModules(family, module, {binding(p): m for p, m in apart})


def sample_sizes(dim: DimRange) -> list[int]:
    """The three largest primes inside the range, and its largest value; in a range with fewer
    primes (batch 1..4), every size from 2: the comparison then holds at each of them, so no
    coincidence of a size with one of the model's own dimensions goes unchecked."""
    primes = [p for p in range(max(dim.min, 2), dim.max) if _is_prime(p)]
    if len(primes) >= 3:
        return primes[-3:] + [dim.max]
    every = list(range(max(dim.min, 2), dim.max + 1))
    if len(every) < 3:
        raise SymbolicError(f"{dim} holds too few sizes to compare: each size is compiled on its own")
    return every


def sample_points(dims: Sequence[DimRange]) -> list[dict[str, int]]:
    """The bindings the modules are compared at: first the corners of a grid of each dimension's two
    smallest sampled sizes (the fit of a number in a * n + b * m + c * n * m + d takes them), then
    each dimension's other sampled sizes with the rest at those, and last every dimension at its
    largest. One dimension: its `sample_sizes` in order."""
    sampled = {d.name: sample_sizes(d) for d in dims}
    points = [dict(zip(sampled, corner)) for corner in itertools.product(*(s[:2] for s in sampled.values()))]
    base = {name: s[0] for name, s in sampled.items()}
    for name, sizes in sampled.items():
        points += [{**base, name: size} for size in sizes[2:-1]]
    largest = {d.name: d.max for d in dims}
    points += [{**base, name: largest[name]} for name in sampled if len(dims) > 1]
    return _unique(points + [largest])


def check_points(dims: Sequence[DimRange]) -> list[dict[str, int]]:
    """Bindings the module is checked at where their graph is the one compared: each dimension at
    its `check_sizes` with the others at their largest, and every dimension at its smallest."""
    largest = {d.name: d.max for d in dims}
    points = [{**largest, d.name: size} for d in dims for size in check_sizes(d)]
    if len(dims) > 1:
        points.append({d.name: d.min for d in dims})
    sampled = sample_points(dims)
    return [p for p in _unique(points) if p not in sampled]


def check_sizes(dim: DimRange) -> list[int]:
    """Sizes the module is checked at where their graph is the one compared (a graph may differ
    at small sizes, where more folds): the smallest ones, where a number that is min(n, C) or max(n,
    C) differs from its fit, and the one below the largest, of the other parity."""
    checked = {dim.min, dim.min + 1, *SMALL_SIZES, dim.max - 1}
    return sorted({s for s in checked if dim.min <= s < dim.max} - set(sample_sizes(dim)))


def _unique(points: list[dict[str, int]]) -> list[dict[str, int]]:
    out: list[dict[str, int]] = []
    for p in points:
        if p not in out:
            out.append(p)
    return out


def check_bounds(func: PrimFunc, variables: Sequence[SizeVar]) -> None:
    """Refuse a kernel that would read or write outside a buffer at the ranges' ends or their small
    sizes (every combination): a number the comparison took for a constant that is min(n, C) reads
    past a buffer of n."""
    checked = [
        sorted({s for s in (v.lo, v.lo + 1, *SMALL_SIZES, v.hi - 1, v.hi) if v.lo <= s <= v.hi})
        for v in variables
    ]
    for sizes in itertools.product(*checked):
        binding = {v.name: size for v, size in zip(variables, sizes)}
        at = ", ".join(f"{name} = {size}" for name, size in binding.items())
        static = func.specialize(binding)
        for block in blocks(static.body):
            ranges = {iv.var: extent_range(iv.extent) for iv in block.iter_vars}
            for buffer, indices in _accesses(block):
                for axis, (index, dim) in enumerate(zip(indices, buffer.shape)):
                    b = bound(index, ranges)
                    if b is not None and isinstance(dim, int) and not 0 <= b[0] <= b[1] < dim:
                        raise SymbolicError(
                            f"kernel {func.name!r} at {at} indexes {buffer.name} from {b[0]} "
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


def _optimized(family: ShapeFamily, binding: dict[str, int]) -> Module:
    try:
        return optimize(family.specialize(binding), passes=RANGE_PASSES)
    except (ValueError, IndexError) as e:  # GraphError, ShapeError: the family itself says no
        at = ", ".join(f"{name} = {size}" for name, size in binding.items())
        raise SymbolicError(f"at {at}: {e}") from None


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


def _anchor_ops(module: Module) -> Counter[str]:
    """The convs and matmuls a module's kernels compute, by their operator: a size whose graph
    differs from the range's only around them (GPT-2 at one token fuses its masked softmax's max with
    the softmax, BERT's position embeddings need no slice) does the range's work, and one whose
    anchors are other operators (a conv by Winograd or direct) does not."""
    return Counter(
        op
        for n in module.nodes()
        if isinstance(n, CallTIR)
        for op in n.ops
        if op in OPS and OPS[op].pattern >= Pattern.ANCHOR
    )


def _skeleton(data: Json) -> Json:
    """A function's JSON form with every number replaced by 0."""
    if isinstance(data, list):
        return [_skeleton(d) for d in data]
    if isinstance(data, dict):
        return {k: _skeleton(v) for k, v in data.items()}
    return 0 if isinstance(data, (int, float)) and not isinstance(data, bool) else data


def _unused_name(name: str, module: Module, taken: set[str]) -> str:
    """`name`, made unlike every variable of the kernels (a loop `n`, an axis `k`), which the size
    var would otherwise stand for when their JSON forms are read back, and unlike the `taken` names
    of the other size vars."""
    used = set(taken)
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


def dimension_of(var: SizeVar, dims: Sequence[DimRange]) -> str | None:
    """The name of the dimension a size var of `symbolic_module` stands for (its name is the
    dimension's `identifier`, made unique by underscores, and its bounds the range's); None where
    two dimensions could be it."""
    named = [
        d.name
        for d in dims
        if var.name.rstrip("_") == identifier(d.name).rstrip("_") and (d.min, d.max) == (var.lo, var.hi)
    ]
    return named[0] if len(named) == 1 else None


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
    """The modules at `points` (each a tuple of the `variables`' values) made one symbolic module."""

    variables: tuple[SizeVar, ...]
    points: list[tuple[int, ...]]

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
        data["size_vars"] = [[v.name, v.lo, v.hi] for v in self.variables if _mentions(data, v.name)]
        variant = name if not cornered else f"{name}_full_{'_'.join(map(str, cornered))}"
        data["name"] = variant
        try:
            func = from_json(data)
        except (SerializeError, IRError) as e:
            raise SymbolicError(
                f"kernel {name!r}: a number that changes with the size is not a size ({e})"
            ) from None
        if len(func.size_vars) < len(data["size_vars"]):
            raise SymbolicError(f"kernel {name!r} depends on a size only through a weight")
        if not func.size_vars:
            data.pop("size_vars")
            func = from_json(data)
        if func.size_vars:
            check_bounds(func, func.size_vars)
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
        """A number, or the expression of the sizes it is at every binding compared."""
        if all(v == values[0] for v in values):
            return values[0]
        coefs, constant = self._multilinear(values, where)
        return Linear({_product(term): c for term, c in coefs.items()}, constant).to_expr()

    def fit_json(self, values: Sequence[int], where: str) -> Json:
        coefs, constant = self._multilinear(values, where)
        out: Json = None
        for term, c in coefs.items():
            t: Json = ["var", term[0].name, "int64"]
            for v in term[1:]:
                t = ["mul", t, ["var", v.name, "int64"]]
            if abs(c) != 1:
                t = ["mul", t, ["const", abs(c), "int64"]]
            if out is None:
                out = t if c > 0 else ["sub", ["const", 0, "int64"], t]
            else:
                out = ["add" if c > 0 else "sub", out, t]
        if constant:
            out = ["add" if constant > 0 else "sub", out, ["const", abs(constant), "int64"]]
        return out

    def _multilinear(self, values: Sequence[int], where: str) -> tuple[dict[tuple[SizeVar, ...], int], int]:
        """Integer coefficients of each product of distinct size vars (n, m, n * m), in order, and the
        constant, fitted at the first 2^k points (a grid's corners) and checked at all of them."""
        k = len(self.variables)
        terms = [c for r in range(1, k + 1) for c in itertools.combinations(range(k), r)]
        corners = self.points[: 2**k]

        def row(point: tuple[int, ...]) -> list[int]:
            return [1] + [math.prod(point[i] for i in term) for term in terms]

        solved = np.linalg.solve(
            np.array([row(p) for p in corners], dtype=np.float64), np.array(values[: 2**k], np.float64)
        )
        coefs = [round(c) for c in solved]
        if any(sum(c * x for c, x in zip(coefs, row(p))) != v for p, v in zip(self.points, values)):
            names = " + ".join(
                f"a{i} * {'*'.join(self.variables[j].name for j in t)}" for i, t in enumerate(terms)
            )
            raise SymbolicError(f"{where}: {self._at(list(values))}, not {names} + b")
        fitted = {tuple(self.variables[i] for i in term): c for term, c in zip(terms, coefs[1:]) if c}
        return fitted, coefs[0]

    def _check_corners(self, largest: Module, outputs: list[str]) -> None:
        """A weight kept at its largest size is read only by kernels (never viewed, never returned)."""
        aliased = {id(v) for v in views(largest).values()}
        for c in largest.constants():
            if c.name in self.corners and (id(c) in aliased or c.name in outputs):
                raise SymbolicError(f"weight {c.name!r} changes with the size and is viewed or returned")

    def _at(self, values: Sequence[object]) -> str:
        names = [v.name for v in self.variables]
        at = [", ".join(f"{n} = {x}" for n, x in zip(names, p)) for p in self.points]
        return "; ".join(f"{v} at {where}" for v, where in zip(values, at))


def _product(variables: tuple[SizeVar, ...]) -> Expr:
    out: Expr = variables[0]
    for v in variables[1:]:
        out = Binary(Op.MUL, out, v)
    return out
