"""The graph operators: importing this package registers every operator in `compiler.graph.op.OPS`."""

from compiler.graph.ops import linalg, nn, reduce

__all__ = ["linalg", "nn", "reduce"]
