"""Model importers: a PyTorch module or an ONNX file becomes a graph module (`compiler.graph.Module`)
of catalog operators, with the weights as named constants. Each importer loads its framework only
when called: torch and onnx are an optional extra (`models`), and heavy to import."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram

    from compiler.graph.ir import Module


def from_torch(
    model: torch.nn.Module | ExportedProgram, example_args: tuple[torch.Tensor, ...] | None = None
) -> Module:
    """See `compiler.frontend.torch.from_torch`."""
    from compiler.frontend.torch import from_torch as convert

    return convert(model, example_args)
