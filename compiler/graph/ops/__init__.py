"""The graph operators: importing this package registers every operator in `compiler.graph.op.OPS`."""

from compiler.graph.ops import conv_kblock, elementwise, linalg, matmul_nblock, nn, reduce, transform

__all__ = ["conv_kblock", "elementwise", "linalg", "matmul_nblock", "nn", "reduce", "transform"]
