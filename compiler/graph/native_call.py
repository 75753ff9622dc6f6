"""Calling a native forward pass with numpy arrays: the one calling convention shared by a model built
in this process (`graph.build`) and a model loaded from an exported library (`graph.load_library`).

The native side is `int run(void **inputs, void **outputs, int64_t *sizes)`: arrays in the model's
order, C-contiguous, of the declared shapes and dtypes, and for a model made for a range of sizes the
size vars' values (`SizeRange`, in order), read off the inputs' shapes here; 0 on success, and
EXTERN_FAILED + k when the pass's extern call k (`ExternSite`) failed."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.arith import linear
from compiler.build import ShapeError
from compiler.graph.forward import EXTERN_FAILED, OUT_OF_RANGE, module_size_vars
from compiler.graph.ir import GraphError, Module, Node
from compiler.ir import Expr, SizeVar

PointerArray = Any  # a ctypes array of c_void_p (or of c_int64 for the sizes)
RunFunction = Callable[[PointerArray, PointerArray, PointerArray], int]


class NativeRunError(RuntimeError):
    """The native forward pass returned an error code."""


@dataclass(frozen=True)
class ExternSite:
    """An extern call of a forward pass: the function's registered name and the node calling it."""

    func: str
    node: str

    def to_json(self) -> dict[str, object]:
        return {"func": self.func, "node": self.node}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExternSite:
        return cls(str(data["func"]), str(data["node"]))

    def __str__(self) -> str:
        return f"the extern function {self.func!r} (node {self.node!r})"


class ExternCallError(NativeRunError):
    """An extern function failed: it returned non-zero, or (a Python one) raised."""

    def __init__(self, site: ExternSite, reason: str) -> None:
        super().__init__(f"{site} failed: {reason}")
        self.site = site


@dataclass(frozen=True)
class SizeRange:
    """A size var of a model made for a range of sizes: its name and its values, both ends included."""

    name: str
    min: int
    max: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "min": self.min, "max": self.max}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SizeRange:
        return cls(str(data["name"]), int(data["min"]), int(data["max"]))

    def __str__(self) -> str:
        return f"{self.name} in [{self.min}, {self.max}]"


@dataclass(frozen=True)
class SizeDim:
    """A dimension `scale * var + offset` of a model made for a range of sizes."""

    var: str
    scale: int = 1
    offset: int = 0

    @classmethod
    def of(cls, dim: Expr) -> SizeDim:
        form = linear(dim)
        if len(form.terms) != 1 or not isinstance(atom := next(iter(form.terms)), SizeVar):
            raise GraphError("module", "shape", f"the dimension {dim} is not a * size + b")
        return cls(atom.name, form.terms[atom], form.constant)

    def at(self, sizes: Mapping[str, int]) -> int:
        return self.scale * sizes[self.var] + self.offset

    def to_json(self) -> dict[str, object]:
        return {"var": self.var, "scale": self.scale, "offset": self.offset}

    def __str__(self) -> str:
        text = self.var if self.scale == 1 else f"{self.scale}*{self.var}"
        return text + (f"{self.offset:+d}" if self.offset else "")


Dim = int | SizeDim


@dataclass(frozen=True)
class TensorSpec:
    """A model input's or output's name, shape and dtype, as the library's header states them."""

    name: str
    shape: tuple[Dim, ...]
    dtype: str

    @classmethod
    def of(cls, node: Node, *, scalar: bool = False) -> TensorSpec:
        """`node`'s spec; a `scalar` (held as shape (1,) inside) is rank 0 to the caller."""
        shape = () if scalar else tuple(d if isinstance(d, int) else SizeDim.of(d) for d in node.type.dims)
        return cls(node.name, shape, node.type.dtype)

    def at(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(d if isinstance(d, int) else d.at(sizes) for d in self.shape)

    def to_json(self) -> dict[str, object]:
        shape = [d if isinstance(d, int) else d.to_json() for d in self.shape]
        return {"name": self.name, "shape": shape, "dtype": self.dtype}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorSpec:
        shape = tuple(int(d) if isinstance(d, int) else SizeDim(**d) for d in data["shape"])
        return cls(str(data["name"]), shape, str(data["dtype"]))

    def __str__(self) -> str:
        return f"{self.name}: {shape_text(self.shape)} {self.dtype}"


def shape_text(shape: Sequence[Dim]) -> str:
    """A shape as Python writes a tuple: (8,), (1, sequence, 768)."""
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def model_specs(module: Module) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """The specs of `module`'s inputs and outputs as its caller sees them."""
    inputs = [TensorSpec.of(n, scalar=k in module.scalar_inputs) for k, n in enumerate(module.inputs)]
    outputs = [TensorSpec.of(n, scalar=k in module.scalar_outputs) for k, n in enumerate(module.outputs)]
    return inputs, outputs


def model_sizes(module: Module) -> list[SizeRange]:
    """The ranges of a module's size vars, in the order its forward pass takes their values."""
    return [SizeRange(v.name, v.lo, v.hi) for v in module_size_vars(module)]


class NativeForward:
    """Call with numpy arrays in the model's input order; returns the outputs as new arrays. Inputs of
    another dtype are converted when numpy's "same_kind" casting allows it (float64 to float32)."""

    def __init__(
        self,
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
        run: RunFunction,
        sizes: Sequence[SizeRange] = (),
        externs: Sequence[ExternSite] = (),
        cause: Callable[[int], BaseException | None] = lambda k: None,
        numpy_entry: Callable[..., int] | None = None,
    ) -> None:
        """`externs` are the pass's extern calls, in the order of their status codes; `cause(k)`
        gives what made extern call k fail when Python knows it (a Python function's exception).
        `numpy_entry`, given the addresses of the input and output arrays, checks them natively and
        runs the pass: it returns the pass's status, or a negative number for an array that does
        not pass, which the checks here then convert or refuse (`executor._emit_numpy_forward`)."""
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.sizes = tuple(sizes)
        self.externs = tuple(externs)
        self._cause = cause
        self._run = run
        self._numpy = numpy_entry
        self._input_pointers = (ctypes.c_void_p * max(1, len(self.inputs)))()
        self._output_pointers = (ctypes.c_void_p * max(1, len(self.outputs)))()
        self._size_values = (ctypes.c_int64 * max(1, len(self.sizes)))()
        # A model's call costs microseconds (an MLP at batch 1 runs in about 4): what each call
        # would recompute from the specs is worked out once.
        self._input_dtypes = tuple(np.dtype(s.dtype) for s in self.inputs)
        self._input_shapes = tuple(_fixed(s) for s in self.inputs)
        self._output_dtypes = tuple(np.dtype(s.dtype) for s in self.outputs)
        self._fixed_outputs = tuple(shape for s in self.outputs if (shape := _fixed(s)) is not None)
        if numpy_entry is not None and len(self._fixed_outputs) != len(self.outputs):
            raise ValueError("a numpy entry is for a model whose shapes depend on no size")

    def __call__(self, *values: np.ndarray) -> list[np.ndarray]:
        if self._numpy is not None and len(values) == len(self.inputs):
            fresh = [np.empty(s, d) for s, d in zip(self._fixed_outputs, self._output_dtypes)]
            # CPython's id() is the object's address, which the entry reads (`values` keeps them).
            status = self._numpy(*map(id, values), *map(id, fresh))
            if status >= 0:
                self._raise_for(status)
                return fresh
        arrays = self.check_inputs(values)
        sizes = self.bind(arrays)
        outputs = [np.empty(o.at(sizes), dtype) for o, dtype in zip(self.outputs, self._output_dtypes)]
        self.run_into(arrays, outputs, sizes)
        return outputs

    def check_inputs(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The inputs as C-contiguous arrays of the declared dtypes (converted only where needed)."""
        if len(values) != len(self.inputs):
            raise TypeError(f"the model takes {len(self.inputs)} inputs, got {len(values)}")
        return [
            value
            if type(value) is np.ndarray
            and value.shape == shape
            and value.dtype == dtype
            and value.flags.c_contiguous
            else _checked(spec, value)
            for spec, shape, dtype, value in zip(self.inputs, self._input_shapes, self._input_dtypes, values)
        ]

    def bind(self, arrays: Sequence[np.ndarray]) -> dict[str, int]:
        """The size vars' values in checked inputs: a ShapeError naming the input, the dimension and
        the range for a shape that does not fit (as `ShapeFamily.bind` words it)."""
        sizes: dict[str, int] = {}
        if not self.sizes:
            return sizes
        seen: dict[str, str] = {}
        ranges = {r.name: r for r in self.sizes}
        for spec, array in zip(self.inputs, arrays):
            for axis, dim in enumerate(spec.shape):
                if isinstance(dim, int):
                    continue  # checked (`check_inputs`)
                got, where = array.shape[axis], f"input {spec.name!r}: dimension {axis}"
                if dim.var in sizes:
                    if got != dim.at(sizes):
                        raise ShapeError(
                            f"{where} ({dim}) is {got}, but {dim.var} is {sizes[dim.var]} in {seen[dim.var]}"
                        )
                    continue
                value, rest = divmod(got - dim.offset, dim.scale)
                r = ranges[dim.var]
                if rest or not r.min <= value <= r.max:
                    raise ShapeError(f"{where} ({dim}) is {got}, outside the declared range {r}")
                sizes[dim.var], seen[dim.var] = value, f"input {spec.name!r}"
        return sizes

    def run_into(
        self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], sizes: Mapping[str, int]
    ) -> None:
        """One forward pass over checked inputs into `outputs` (arrays of the outputs' shapes at
        `sizes`, the inputs' `bind`)."""
        for k, array in enumerate(inputs):
            self._input_pointers[k] = _data_address(array)
        for k, array in enumerate(outputs):
            self._output_pointers[k] = _data_address(array)
        for k, r in enumerate(self.sizes):
            self._size_values[k] = sizes[r.name]
        self._raise_for(self._run(self._input_pointers, self._output_pointers, self._size_values))

    def _raise_for(self, status: int) -> None:
        """The error a forward pass's status stands for, raised (nothing for 0)."""
        if status == OUT_OF_RANGE:
            raise ShapeError(f"a size is outside its declared range: {', '.join(map(str, self.sizes))}")
        k = status - EXTERN_FAILED
        if 0 <= k < len(self.externs):
            cause = self._cause(k)
            reason = f"it raised {cause!r}" if cause is not None else "it returned a non-zero status"
            raise ExternCallError(self.externs[k], reason) from cause
        if status != 0:
            raise NativeRunError(f"the forward pass failed with status {status}")


def _fixed(spec: TensorSpec) -> tuple[int, ...] | None:
    """`spec`'s shape when no dimension depends on a size var."""
    dims = tuple(d for d in spec.shape if isinstance(d, int))
    return dims if len(dims) == len(spec.shape) else None


def _data_address(array: np.ndarray) -> int:
    """The address of a C-contiguous array's first element. A writable array's comes through the
    buffer protocol, four times faster than `array.ctypes.data` (0.2 against 0.8 us), which builds a
    ctypes helper object per call; a read-only or empty one's through that helper."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))  # type: ignore[arg-type]  # numpy's stubs
    except (TypeError, ValueError):
        return int(array.ctypes.data)


def _checked(spec: TensorSpec, value: np.ndarray) -> np.ndarray:
    array = np.asarray(value)
    if len(array.shape) != len(spec.shape) or any(
        isinstance(want, int) and want != got for want, got in zip(spec.shape, array.shape)
    ):
        raise ShapeError(f"input {spec.name}: expected shape {shape_text(spec.shape)}, got {array.shape}")
    if not np.can_cast(array.dtype, spec.dtype, casting="same_kind"):
        raise TypeError(f"input {spec.name}: expected {spec.dtype}, got {array.dtype}")
    return np.ascontiguousarray(array, dtype=spec.dtype)
