"""The compiled form of a shape family: one callable for every size in the declared ranges.

Each binding of the ranged dimensions is its own static model, compiled on the first call at those
sizes and kept (the most recently used `capacity` of them; each holds its kernels, its own copy of
the weights, packed for its shapes, and its arena of intermediates). Calls at sizes seen before run
the static model directly, at its full speed; the first call at new sizes pays their compile.
`compile(...)` does that ahead of time for the sizes a server expects. Sizes outside the ranges are
refused before anything runs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from compiler.graph.executor import CompiledModel
from compiler.graph.ir import Module
from compiler.graph.shape_family import ShapeFamily

Binding = tuple[tuple[str, int], ...]


class DynamicModel:
    """Call with numpy arrays in the model's input order, at any sizes the family declares; returns
    the outputs as new numpy arrays. Not reentrant (as CompiledModel): one call at a time."""

    def __init__(
        self, family: ShapeFamily, build: Callable[[Module], CompiledModel], *, capacity: int = 8
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity is {capacity}: at least one compiled model is kept")
        self.family = family
        self.capacity = capacity
        self._build = build
        self._models: OrderedDict[Binding, CompiledModel] = OrderedDict()

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in inputs]
        return self.compile(**self.family.bind([a.shape for a in arrays]))(*arrays)

    def compile(self, **values: int) -> CompiledModel:
        """The static model at these sizes (`sequence=128`), compiled now unless it is kept."""
        key = tuple(sorted(values.items()))
        model = self._models.get(key)
        if model is None:
            model = self._build(self.family.specialize(values))
            self._models[key] = model
            while len(self._models) > self.capacity:
                self._models.popitem(last=False)
        self._models.move_to_end(key)
        return model

    @property
    def compiled(self) -> list[dict[str, int]]:
        """The sizes whose models are kept, least recently used first."""
        return [dict(key) for key in self._models]


__all__ = ["DynamicModel"]
