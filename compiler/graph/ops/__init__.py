"""The graph operators: importing a module registers its operators in compiler.graph.op.OPS."""

from compiler.graph.ops import elementwise, transform

__all__ = ["elementwise", "transform"]
