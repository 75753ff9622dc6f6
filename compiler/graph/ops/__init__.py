"""The graph operators: importing this package registers every operator in `compiler.graph.op.OPS`."""

from compiler.graph.ops import elementwise, linalg, nn, reduce, transform

__all__ = ["elementwise", "linalg", "nn", "reduce", "transform"]
