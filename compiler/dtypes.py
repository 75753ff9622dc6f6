"""The scalar types of the IR, and what each needs in memory: one table shared by the IR, the op
vocabulary, codegen and the cost model's features.

Integers come signed and unsigned, 8 to 64 bits wide, as numpy and ONNX have them (pixels are uint8,
quantized weights int8, token ids int64). Index arithmetic is always int64; the narrow types only
hold data, and their arithmetic wraps, as numpy's does.

float16 and bfloat16 are storage types: the IR converts them (loads, stores, casts) but computes
nothing in them; the graph level computes each operator on half-precision tensors in float32 and
rounds its result back (`compiler.graph.builder`), as numpy does per operation and ONNX Runtime's CPU
kernels do. numpy's bfloat16 is ml_dtypes', as ONNX's is.
"""

from __future__ import annotations

import ml_dtypes  # noqa: F401  (registers "bfloat16" with numpy)
import numpy as np

INDEX_DTYPE = "int64"
FLOAT_DTYPES = ("float32", "float64")
SIGNED_DTYPES = ("int8", "int16", "int32", "int64")
UNSIGNED_DTYPES = ("uint8", "uint16", "uint32", "uint64")
INT_DTYPES = SIGNED_DTYPES + UNSIGNED_DTYPES
HALF_DTYPES = ("float16", "bfloat16")  # stored, converted, never computed in
DTYPES = FLOAT_DTYPES + HALF_DTYPES + INT_DTYPES + ("bool",)
ITEMSIZE = {dtype: np.dtype(dtype).itemsize for dtype in DTYPES}


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_floating(dtype: str) -> bool:
    """Any float type, the stored half-precision ones included (`is_float`: the computed ones)."""
    return dtype in FLOAT_DTYPES or dtype in HALF_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_unsigned(dtype: str) -> bool:
    """An unsigned integer type: its division, comparisons and conversions differ from a signed one's."""
    return dtype in UNSIGNED_DTYPES


def int_range(dtype: str) -> tuple[int, int]:
    """The lowest and highest value of an integer type."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def wrapped(value: int, dtype: str) -> int:
    """`value` wrapped into an integer type (two's complement for a signed one), as its arithmetic
    wraps, and so does folding."""
    low, high = int_range(dtype)
    return (value - low) % (high - low + 1) + low


def convert(values: object, dtype: str) -> np.ndarray:
    """`values` as `dtype`, as the generated code converts: a float becomes an int by truncation,
    saturating at the int's range, NaN as 0 (LLVM's fptosi.sat and fptoui.sat; numpy's own astype
    leaves NaN and out-of-range values undefined); a number becomes a bool by comparing it with 0
    (NaN is true); anything but a float32 becomes a half-precision float through float32."""
    array = np.asarray(values)
    source = str(array.dtype)
    if is_int(dtype) and is_floating(source):
        low, high = int_range(dtype)
        wide = array.astype(np.float64)  # exact, and `high + 1` is a power of two, exact in it
        truncated = np.trunc(np.nan_to_num(wide, nan=0.0, posinf=high + 1.0, neginf=low - 1.0))
        over, under = truncated >= float(high + 1), truncated < low
        converted = np.where(over | under, 0, truncated).astype(dtype)
        converted[over], converted[under] = high, low
        return converted
    if dtype in HALF_DTYPES and source not in ("float32", dtype):
        array = convert(array, "float32")
    if dtype == "bool" and source == "bfloat16":
        return array.astype(np.float32) != 0
    with np.errstate(over="ignore"):  # beyond a half's range is infinity, as the code computes it
        return array.astype(dtype)
