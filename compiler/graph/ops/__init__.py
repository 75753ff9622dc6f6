"""The graph operators: importing this package registers every operator in `compiler.graph.op.OPS`."""

from compiler.graph.ops import (
    conv_kblock,
    conv_nchwc,
    conv_winograd,
    elementwise,
    linalg,
    logic,
    matmul_integer_vnni,
    matmul_nblock,
    nn,
    reduce,
    transform,
)

__all__ = [
    "conv_kblock",
    "conv_nchwc",
    "conv_winograd",
    "elementwise",
    "linalg",
    "logic",
    "matmul_integer_vnni",
    "matmul_nblock",
    "nn",
    "reduce",
    "transform",
]
