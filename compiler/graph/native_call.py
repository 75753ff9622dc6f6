"""Calling a native forward pass with numpy arrays: the one calling convention shared by a model built
in this process (`graph.build`) and a model loaded from an exported library (`graph.load_library`).

The native side is `int run(void **inputs, void **outputs)`: arrays in the model's order,
C-contiguous, of the declared shapes and dtypes; 0 on success."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.graph.ir import Module, Node

PointerArray = Any  # a ctypes array of c_void_p
RunFunction = Callable[[PointerArray, PointerArray], int]


class NativeRunError(RuntimeError):
    """The native forward pass returned an error code."""


@dataclass(frozen=True)
class TensorSpec:
    """A model input's or output's name, shape and dtype, as the library's header states them."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @classmethod
    def of(cls, node: Node, *, scalar: bool = False) -> TensorSpec:
        """`node`'s spec; a `scalar` (held as shape (1,) inside) is rank 0 to the caller."""
        return cls(node.name, () if scalar else node.type.shape, node.type.dtype)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorSpec:
        return cls(str(data["name"]), tuple(int(d) for d in data["shape"]), str(data["dtype"]))


def model_specs(module: Module) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """The specs of `module`'s inputs and outputs as its caller sees them."""
    inputs = [TensorSpec.of(n, scalar=k in module.scalar_inputs) for k, n in enumerate(module.inputs)]
    outputs = [TensorSpec.of(n, scalar=k in module.scalar_outputs) for k, n in enumerate(module.outputs)]
    return inputs, outputs


class NativeForward:
    """Call with numpy arrays in the model's input order; returns the outputs as new arrays. Inputs of
    another dtype are converted when numpy's "same_kind" casting allows it (float64 to float32)."""

    def __init__(self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], run: RunFunction) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self._run = run
        self._input_pointers = (ctypes.c_void_p * max(1, len(self.inputs)))()
        self._output_pointers = (ctypes.c_void_p * max(1, len(self.outputs)))()

    def __call__(self, *values: np.ndarray) -> list[np.ndarray]:
        arrays = self.check_inputs(values)
        outputs = [np.empty(o.shape, o.dtype) for o in self.outputs]
        self.run_into(arrays, outputs)
        return outputs

    def check_inputs(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The inputs as C-contiguous arrays of the declared dtypes (converted only where needed)."""
        if len(values) != len(self.inputs):
            raise TypeError(f"the model takes {len(self.inputs)} inputs, got {len(values)}")
        return [_checked(spec, value) for spec, value in zip(self.inputs, values)]

    def run_into(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        """One forward pass over checked inputs into `outputs` (arrays of the declared outputs)."""
        for k, array in enumerate(inputs):
            self._input_pointers[k] = array.ctypes.data
        for k, array in enumerate(outputs):
            self._output_pointers[k] = array.ctypes.data
        status = self._run(self._input_pointers, self._output_pointers)
        if status != 0:
            raise NativeRunError(f"the forward pass failed with status {status}")


def _checked(spec: TensorSpec, value: np.ndarray) -> np.ndarray:
    array = np.asarray(value)
    if array.shape != spec.shape:
        raise ValueError(f"input {spec.name}: expected shape {spec.shape}, got {array.shape}")
    if not np.can_cast(array.dtype, spec.dtype, casting="same_kind"):
        raise TypeError(f"input {spec.name}: expected {spec.dtype}, got {array.dtype}")
    return np.ascontiguousarray(array, dtype=spec.dtype)
