"""The compiled form of a family of models: one callable for every binding the family declares.

A binding (the sizes of a shape family's ranged dimensions, or the values of a value family's inputs
that set shapes) is its own static model, compiled on the first call at it and kept (the most
recently used `capacity` of them; each holds its kernels, its own copy of the weights, packed for its
shapes, and its arena of intermediates). Calls at a binding seen before run the static model
directly, at its full speed; the first call at a new one pays its compile. `DynamicModel.compile(...)`
does that ahead of time for the sizes a server expects. Sizes outside the ranges, and arrays whose
shapes or dtypes the family does not take, are refused before anything runs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import numpy as np

from compiler.graph.executor import CompiledModel
from compiler.graph.ir import Module
from compiler.graph.shape_family import Binding, ShapeFamily, binding
from compiler.graph.value_family import InputValuesNeeded, ValueFamily

Key = TypeVar("Key", bound=Hashable)


class _Kept(Generic[Key]):
    """The compiled models of the most recently used `capacity` bindings."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity is {capacity}: at least one compiled model is kept")
        self.capacity = capacity
        self.models: OrderedDict[Key, CompiledModel] = OrderedDict()

    def get(self, key: Key, make: Callable[[], CompiledModel]) -> CompiledModel:
        model = self.models.get(key)
        if model is None:
            model = make()
            self.models[key] = model
            while len(self.models) > self.capacity:
                self.models.popitem(last=False)
        self.models.move_to_end(key)
        return model


class DynamicModel:
    """Call with numpy arrays in the model's input order, at any sizes the family declares; returns
    the outputs as new numpy arrays. Not reentrant (as CompiledModel): one call at a time."""

    def __init__(
        self, family: ShapeFamily, build: Callable[[Module], CompiledModel], *, capacity: int = 8
    ) -> None:
        self.family = family
        self._build = build
        self._kept: _Kept[Binding] = _Kept(capacity)

    @property
    def capacity(self) -> int:
        return self._kept.capacity

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in inputs]
        return self.compile(**self.family.bind([a.shape for a in arrays]))(*arrays)

    def compile(self, **values: int) -> CompiledModel:
        """The static model at these sizes (`sequence=128`), compiled now unless it is kept."""
        return self._kept.get(binding(values), lambda: self._build(self.family.specialize(values)))

    @property
    def compiled(self) -> list[dict[str, int]]:
        """The sizes whose models are kept, least recently used first."""
        return [dict(key) for key in self._kept.models]


class ValueKeyedModel:
    """Call with numpy arrays in the model's input order (each of its input's shape and dtype);
    returns the outputs as new numpy arrays. The inputs that set shapes select the compiled model
    by their values; the others are its inputs. Not reentrant: one call at a time."""

    def __init__(
        self, family: ValueFamily, build: Callable[[Module], CompiledModel], *, capacity: int = 8
    ) -> None:
        self.family = family
        self._build = build
        self._kept: _Kept[tuple[tuple[str, bytes], ...]] = _Kept(capacity)
        # The inputs found to set shapes: the family's, and any a specialization found since.
        self.value_inputs = family.value_inputs

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        arrays = dict(zip([i.name for i in self.family.inputs], self.family.checked(inputs)))
        while True:
            bound = self.value_inputs
            try:
                model = self._model({n: arrays[n] for n in bound})
                break
            except InputValuesNeeded as e:
                more = tuple(n for n in e.inputs if n not in bound and n in arrays)
                if not more:
                    raise
                self.value_inputs = bound + more
        return model(*[a for n, a in arrays.items() if n not in bound])

    def _model(self, values: dict[str, np.ndarray]) -> CompiledModel:
        key = tuple((n, a.tobytes()) for n, a in values.items())
        return self._kept.get(key, lambda: self._build(self.family.specialize(values)))


__all__ = ["DynamicModel", "ValueKeyedModel"]
