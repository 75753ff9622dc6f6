"""Checking a candidate's outputs against the workload's numpy reference.

Outputs are poisoned before the run (NaN for floats, the most negative value for ints, the byte 0xAA,
neither true nor false, for bools), so an element the kernel never writes is caught; NaN never
passes. Tolerances are per dtype, with an
absolute part scaled by the reference's magnitude: float32 sums of hundreds of products differ
from numpy's (differently ordered) sums by about 1e-6 of their magnitude.
"""

from __future__ import annotations

import numpy as np

# float16 and bfloat16: a few units in their last place (numpy's reference may round at other steps).
TOLERANCES = {"float32": 1e-3, "float64": 1e-9, "float16": 4e-3, "bfloat16": 3e-2}


POISON_BOOL = 0xAA


def poison(arrays: list[np.ndarray]) -> None:
    for a in arrays:
        if _floating(a.dtype):
            a.fill(np.nan)
        elif a.dtype == np.bool_:
            a.view(np.uint8).fill(POISON_BOOL)
        else:
            a.fill(np.iinfo(a.dtype).min)


def compare(outputs: list[np.ndarray], expected: list[np.ndarray], names: list[str]) -> str | None:
    """None when every output matches; otherwise a short description of the first mismatch."""
    for name, got, want in zip(names, outputs, expected):
        if _floating(got.dtype):
            nan = np.isnan(got)
            if nan.any():
                where = tuple(int(i) for i in np.argwhere(nan)[0])
                return f"{name}: {int(nan.sum())} element(s) are NaN or never written, first at {where}"
            rtol = TOLERANCES[str(got.dtype)]
            if got.dtype.itemsize == 2:  # compared in float64: numpy's isclose has no bfloat16
                got, want = got.astype(np.float64), np.asarray(want).astype(np.float64)
            atol = rtol * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
            bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
        elif got.dtype == np.bool_:  # by byte: a poisoned one is neither 0 nor 1
            bad = got.view(np.uint8) != np.asarray(want, np.bool_).view(np.uint8)
        else:
            bad = got != want
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            return (
                f"{name}: {int(bad.sum())} of {got.size} elements differ from the reference, "
                f"first at {where}: got {got[where]!r}, expected {want[where]!r}"
            )
    return None


def _floating(dtype: np.dtype) -> bool:
    """numpy's float types, and bfloat16 (ml_dtypes', which numpy does not count as one)."""
    return bool(np.issubdtype(dtype, np.floating)) or str(dtype) == "bfloat16"
