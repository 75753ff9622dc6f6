"""The registered operators; importing this package fills `compiler.workloads.registry.WORKLOADS`."""

from compiler.workloads.ops import conv, linalg, nn

__all__ = ["conv", "linalg", "nn"]
