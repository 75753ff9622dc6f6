"""A model whose inputs have dimensions known only as ranges: one graph module per binding of them.

A `ShapeFamily` is what a frontend gives for a model imported with ranged dimensions (an ONNX input
dimension named "sequence", a `torch.export.Dim("seq", min=1, max=512)`): the inputs' shapes with
names where a size varies, each name's range, and the frontend's way to import the model at given
sizes. `bind` reads the sizes off a call's arrays and refuses anything outside the declared shapes,
naming the input, the dimension and the range; `specialize` gives the static module at those sizes,
which the rest of the graph level (passes, fusion, memory planning, tuning) takes unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from compiler.build import ShapeError
from compiler.graph.ir import Module

# A dimension of an input: a static size, or the name of one of the family's ranged dimensions.
Size = int | str

# What a user gives for a dimension a model leaves open: a size, a (min, max) range with both ends
# included, or the name of another dimension of the same size.
DimSpec = int | tuple[int, int] | str


@dataclass(frozen=True)
class DimRange:
    """A named dimension and the sizes it may take, both ends included."""

    name: str
    min: int
    max: int

    def __post_init__(self) -> None:
        if not 0 <= self.min <= self.max:
            raise ValueError(f"dimension {self.name!r}: [{self.min}, {self.max}] is not a range of sizes")

    def __str__(self) -> str:
        return f"{self.name} in [{self.min}, {self.max}]"


@dataclass(frozen=True)
class InputSignature:
    name: str
    shape: tuple[Size, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}: ({', '.join(map(str, self.shape))}) {self.dtype}"


@dataclass(frozen=True)
class ShapeFamily:
    """The models of one source at every binding of `dims`; `importer(values)` imports the static
    module at a binding (a frontend's closure over the model it read)."""

    inputs: tuple[InputSignature, ...]
    dims: tuple[DimRange, ...]
    importer: Callable[[Mapping[str, int]], Module] = field(compare=False, repr=False)

    def __post_init__(self) -> None:
        named = {d for i in self.inputs for d in i.shape if isinstance(d, str)}
        declared = {d.name for d in self.dims}
        if named != declared:
            raise ValueError(f"the inputs name dimensions {sorted(named)}, the ranges {sorted(declared)}")

    def range(self, name: str) -> DimRange:
        return next(d for d in self.dims if d.name == name)

    def bind(self, shapes: Sequence[tuple[int, ...]]) -> dict[str, int]:
        """Each ranged dimension's size in arrays of these shapes (in input order); a ShapeError
        naming the input and the dimension for a count, rank, static size or range that does not fit,
        or for one name given two sizes."""
        if len(shapes) != len(self.inputs):
            raise ShapeError(f"the model takes {len(self.inputs)} inputs, {len(shapes)} given")
        values: dict[str, int] = {}
        seen: dict[str, str] = {}
        for sig, shape in zip(self.inputs, shapes):
            if len(shape) != len(sig.shape):
                raise ShapeError(f"input {sig.name!r}: got shape {shape}, the model takes {sig}")
            for axis, (want, got) in enumerate(zip(sig.shape, shape)):
                where = f"input {sig.name!r}: dimension {axis}"
                if isinstance(want, int):
                    if got != want:
                        raise ShapeError(f"{where} is {got}, the model takes {want}")
                elif want in values:
                    if got != values[want]:
                        raise ShapeError(f"{where} ({want}) is {got}, but {values[want]} in {seen[want]}")
                else:
                    self._check(want, got, where)
                    values[want], seen[want] = got, f"input {sig.name!r}"
        return values

    def specialize(self, values: Mapping[str, int]) -> Module:
        """The static module at these sizes (every ranged dimension given, each inside its range)."""
        missing = [d.name for d in self.dims if d.name not in values]
        extra = sorted(set(values) - {d.name for d in self.dims})
        if missing or extra:
            raise ShapeError(
                f"sizes for {sorted(values)}: the model's ranged dimensions are "
                f"{[d.name for d in self.dims]}" + (f" (unknown: {extra})" if extra else "")
            )
        for name, value in values.items():
            self._check(name, value, f"dimension {name}")
        return self.importer({d.name: int(values[d.name]) for d in self.dims})

    def narrowed(self, dims: Mapping[str, int | tuple[int, int]]) -> Module | ShapeFamily:
        """The family with some dimensions fixed to a size or narrowed to a range inside theirs; the
        static module if every dimension is fixed."""
        unknown = sorted(set(dims) - {d.name for d in self.dims})
        if unknown:
            raise ShapeError(f"no ranged dimension is named {unknown}: the model's are {self}")
        sizes: dict[str, int] = {}
        ranges: list[DimRange] = []
        for dim in self.dims:
            spec = dims.get(dim.name, (dim.min, dim.max))
            low, high = dim_bounds(dim.name, spec)
            if not dim.min <= low <= high <= dim.max:
                raise ShapeError(f"{dim.name}: {spec} is not inside the declared range {dim}")
            if low == high:
                sizes[dim.name] = low
            else:
                ranges.append(DimRange(dim.name, low, high))
        if not ranges:
            return self.importer(sizes)
        inputs = tuple(
            InputSignature(i.name, tuple(_sized(d, sizes) for d in i.shape), i.dtype) for i in self.inputs
        )
        return ShapeFamily(inputs, tuple(ranges), lambda values: self.importer({**sizes, **values}))

    def spread(self, count: int) -> list[dict[str, int]]:
        """`count` bindings spread over the ranges, both ends included, evenly in the logarithm
        (sequence lengths and batch sizes are used more at the small end): the sizes a range is
        tuned and checked at when its users' sizes are not known."""
        out: list[dict[str, int]] = []
        for k in range(count):
            t = k / (count - 1) if count > 1 else 1.0
            binding = {d.name: size_between(d.min, d.max, t) for d in self.dims}
            if binding not in out:
                out.append(binding)
        return out

    def _check(self, name: str, value: int, where: str) -> None:
        dim = self.range(name)
        if not dim.min <= value <= dim.max:
            raise ShapeError(f"{where} ({name}) is {value}, outside the declared range {dim}")

    def __str__(self) -> str:
        return "; ".join(map(str, self.inputs)) + " with " + ", ".join(map(str, self.dims))


# The sizes of a family's ranged dimensions, by their names, sorted: how a size's compiled model
# is looked up.
Binding = tuple[tuple[str, int], ...]


def binding(sizes: Mapping[str, int]) -> Binding:
    return tuple(sorted(sizes.items()))


def dim_bounds(name: str, spec: object) -> tuple[int, int]:
    """A size's or a (min, max) range's bounds (a size is a range of one); a ShapeError for
    anything else."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return spec, spec
    if (
        isinstance(spec, (tuple, list))
        and len(spec) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in spec)
    ):
        return spec[0], spec[1]
    raise ShapeError(f"{name} is {spec!r}: neither a size (an int) nor a range (min, max) of ints")


def size_between(low: int, high: int, t: float) -> int:
    """The size at `t` (0 to 1) from `low` to `high`, evenly in the logarithm (sequence lengths and
    batch sizes are used more at the small end); 0 at t=0 if low is 0."""
    if t == 0:
        return low
    start = max(low, 1)
    return round(start * (high / start) ** t)


def _sized(dim: Size, sizes: Mapping[str, int]) -> Size:
    return sizes.get(dim, dim) if isinstance(dim, str) else dim


__all__ = [
    "Binding",
    "DimRange",
    "DimSpec",
    "InputSignature",
    "ShapeFamily",
    "Size",
    "binding",
    "dim_bounds",
    "size_between",
]
