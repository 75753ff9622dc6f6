"""A model some of whose inputs set shapes by their values: one static module per value of them.

An ONNX graph may take as inputs what its operators need at compile time: Resize's scales or sizes,
a Reduce's axes, Reshape's target shape, Range's bounds, Slice's starts, Pad's pads. The output's
shape (or which axes a kernel reduces) then depends on the values, not only on the shapes, of those
inputs. ONNX Runtime computes such shapes at run time; a compiler of static shapes specializes, as
torch.compile does on the values it guards: the model is imported again with those inputs' values as
constants, and compiled, for each value a call brings (`graph.build` of a `ValueFamily` gives a
`compiler.graph.dynamic_model.ValueKeyedModel`, which keeps the models of the values seen).

Only small inputs can set shapes this way (at most MAX_VALUE_ELEMENTS values: a shape, scales, axes):
a data tensor reaching such a slot is a data-dependent shape, refused by the frontend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.build import ShapeError
from compiler.graph.ir import GraphError, Module
from compiler.graph.shape_family import InputSignature

# The most values an input that sets a shape may hold (a shape, scales or axes of a rank-8 tensor
# hold 16 at most): larger inputs are data, and a shape that depends on data is refused.
MAX_VALUE_ELEMENTS = 64


class InputValuesNeeded(GraphError):
    """The import needs the values of these model inputs (not only their shapes): they set a shape
    or an attribute. A caller that has the values imports again with them as constants
    (`ValueFamily`); any other caller sees an ordinary refusal naming the node."""

    def __init__(self, node: str, op: str, reason: str, inputs: tuple[str, ...]) -> None:
        super().__init__(node, op, reason)
        self.inputs = inputs

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.node, self.op, self.reason, self.inputs)


@dataclass(frozen=True)
class ValueFamily:
    """The modules of one source at every value of `value_inputs` (the inputs found to set shapes
    so far: importing at their values may find more, which the compiled model then adds to its key).
    `importer(values)` imports the static module with the named inputs' values as constants; that
    module takes the other inputs, in order."""

    inputs: tuple[InputSignature, ...]
    value_inputs: tuple[str, ...]
    importer: Callable[[Mapping[str, np.ndarray]], Module] = field(compare=False, repr=False)

    def __post_init__(self) -> None:
        names = [i.name for i in self.inputs]
        unknown = sorted(set(self.value_inputs) - set(names))
        if unknown or not self.value_inputs:
            raise ValueError(f"value inputs {list(self.value_inputs)} must be some of the inputs {names}")

    def checked(self, arrays: Sequence[object]) -> list[np.ndarray]:
        """The call's arrays, each of its input's shape and dtype; a ShapeError naming the input for
        a count, shape or dtype that does not fit."""
        if len(arrays) != len(self.inputs):
            raise ShapeError(f"the model takes {len(self.inputs)} inputs, {len(arrays)} given")
        return [_fitting(sig, np.asarray(a)) for sig, a in zip(self.inputs, arrays)]

    def specialize(self, values: Mapping[str, object]) -> Module:
        """The static module with these inputs' values as constants (at least every value input; an
        InputValuesNeeded naming further inputs if their values set shapes too)."""
        by_name = {i.name: i for i in self.inputs}
        missing = [n for n in self.value_inputs if n not in values]
        unknown = sorted(set(values) - set(by_name))
        if missing or unknown:
            raise ShapeError(
                f"values for {sorted(values)}: the inputs that set shapes are {list(self.value_inputs)}"
                + (f" (not inputs: {unknown})" if unknown else "")
            )
        # Copies: a module's constants must not change when the caller's arrays do.
        return self.importer({n: _fitting(by_name[n], np.array(v)) for n, v in values.items()})

    def __str__(self) -> str:
        return "; ".join(map(str, self.inputs)) + " with the values of " + ", ".join(self.value_inputs)


def _fitting(sig: InputSignature, array: np.ndarray) -> np.ndarray:
    if array.shape != sig.shape or str(array.dtype) != sig.dtype:
        raise ShapeError(f"input {sig.name!r}: got {array.shape} {array.dtype}, the model takes {sig}")
    return array


__all__ = ["MAX_VALUE_ELEMENTS", "InputValuesNeeded", "ValueFamily"]
