"""TVM's `tvm.nd` as the MLC course uses it: `nd.array(np_array)`, `nd.empty(shape, dtype)`, and
`.numpy()` on the result. An NDArray is a numpy array (a subclass, on the CPU, in this process), so
kernels take either."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class NDArray(np.ndarray):
    """A numpy array that also answers TVM's `numpy()`."""

    def numpy(self) -> np.ndarray:
        """A plain numpy copy, as TVM's `NDArray.numpy()` returns."""
        return np.array(self, copy=True)


def array(data: object, device: object = None) -> NDArray:
    """A C-contiguous copy of `data` (TVM's `tvm.nd.array`; `device` is this CPU either way)."""
    return np.array(data, order="C", copy=True).view(NDArray)


def empty(shape: Sequence[int], dtype: str = "float32", device: object = None) -> NDArray:
    """An uninitialized array (TVM's `tvm.nd.empty`)."""
    return np.empty(tuple(shape), dtype=dtype).view(NDArray)
