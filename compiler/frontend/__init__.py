"""Model import: an ONNX file or a PyTorch module becomes a graph module (`compiler.graph.Module`).

The frontends need optional packages (onnx, torch: the `models` extra), so each is imported only when
called: `import compiler.frontend` works without them, and a call without its package says which one
to install.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx
    import torch
    from torch.export import ExportedProgram

    from compiler.graph import Module

# Refuse a model before reading it into memory, whoever supplied it (the service accepts uploads).
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MAX_NODES = 100_000


class FrontendError(ValueError):
    """A model that cannot be read at all: not a model, malformed, too big, an unsupported opset.
    What the graph level cannot represent (an operator, a dynamic shape) is a GraphError instead."""


def from_onnx(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> Module:
    """The graph module of an ONNX model (a path, its bytes, or a ModelProto); see
    `compiler.frontend.onnx.from_onnx`."""
    from compiler.frontend.onnx import from_onnx as convert

    return convert(model, max_bytes=max_bytes, max_nodes=max_nodes)


def from_torch(
    model: torch.nn.Module | ExportedProgram, example_args: tuple[torch.Tensor, ...] | None = None
) -> Module:
    """The graph module of a PyTorch module (with example inputs) or of an exported program; see
    `compiler.frontend.torch.from_torch`."""
    from compiler.frontend.torch import from_torch as convert

    return convert(model, example_args)


__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_NODES", "FrontendError", "from_onnx", "from_torch"]
