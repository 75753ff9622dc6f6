"""The compiled module for a range of sizes that runs a few sizes on static models of their own.

The module for a range (`compiler.graph.symbolic`) computes every size right, but where a graph pass
decides by size, a size's own graph can be faster than the range's: ResNet-18's three 512-channel 7x7
convs run by Winograd from batch 2, where it pays, and direct at batch 1, where Winograd took 1.43-1.49
ms each against 1.05 (the range's model ran batch 1 at 0.89x the static build,
bench/results/2026-12-02-d.md). Those sizes (`RangeModules.apart`) are compiled as static models
beside the range's, and a call at one of them runs it.

The exported library (`export`) is the range's module alone: it runs those sizes too, as the range's
graph does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from compiler.build import Kernel
from compiler.graph.executor import CompiledModel, KernelSource, Step
from compiler.graph.ir import Module
from compiler.graph.shape_family import Binding, ShapeFamily, binding
from compiler.target import Target


class RangeModel(CompiledModel):
    """A CompiledModel of the module for `family`'s ranges whose calls at the sizes of `exact` run
    those static models instead."""

    def __init__(
        self,
        module: Module,
        kernels: Mapping[str, Kernel],
        sources: Sequence[KernelSource],
        target: Target,
        family: ShapeFamily,
        exact: Mapping[Binding, CompiledModel],
    ) -> None:
        super().__init__(module, kernels, sources, target)
        self.family = family
        self.exact = dict(exact)

    def model_at(self, **sizes: int) -> CompiledModel:
        """The model a call at these sizes (`batch=1`) runs: a static one, or this one."""
        return self.exact.get(binding(sizes), self)

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        arrays, model = self._dispatched(inputs)
        return model(*arrays) if model is not self else super().__call__(*arrays)

    def run_range(self, *inputs: np.ndarray) -> list[np.ndarray]:
        """The range's module at any size, those with a static model included (as the exported
        library runs them)."""
        return super().__call__(*inputs)

    def profile(
        self, *inputs: np.ndarray, repeat: int = 5, min_secs: float = 0.02, in_pass: bool = False
    ) -> list[tuple[Step, float]]:
        arrays, model = self._dispatched(inputs)
        profile = super().profile if model is self else model.profile
        return profile(*arrays, repeat=repeat, min_secs=min_secs, in_pass=in_pass)

    def _dispatched(self, inputs: Sequence[np.ndarray]) -> tuple[list[np.ndarray], CompiledModel]:
        """The inputs checked (by the range's entry, whose errors name the input and the size) and
        the model that runs them."""
        arrays = self._forward.check_inputs(inputs)
        self._forward.bind(arrays)
        return arrays, self.model_at(**self.family.bind([a.shape for a in arrays]))


__all__ = ["RangeModel"]
