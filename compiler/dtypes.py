"""The scalar types of the IR, and what each needs in memory: one table shared by the IR, the op
vocabulary, codegen and the cost model's features."""

from __future__ import annotations

import numpy as np

INDEX_DTYPE = "int64"
FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)
ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "bool": 1}


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def convert(values: object, dtype: str) -> np.ndarray:
    """`values` as `dtype`, as the generated code converts: a float becomes an int by truncation,
    saturating at the int's range, NaN as 0 (LLVM's fptosi.sat; numpy's own astype leaves NaN and
    out-of-range values undefined); a number becomes a bool by comparing it with 0 (NaN is true)."""
    array = np.asarray(values)
    if is_int(dtype) and array.dtype.kind == "f":
        info = np.iinfo(dtype)
        bound = -float(info.min)  # 2^(bits-1), exact in either float type
        truncated = np.trunc(np.nan_to_num(array, nan=0.0, posinf=bound, neginf=-bound))
        high, low = truncated >= bound, truncated < -bound
        converted = np.where(high | low, 0, truncated).astype(dtype)
        converted[high], converted[low] = info.max, info.min
        return converted
    return array.astype(dtype)
