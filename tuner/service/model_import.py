"""A submitted model, imported by the coordinator: ONNX bytes parsed with the onnx library (never run:
no ONNX Runtime here) and converted by our frontend (which knows its operators and refuses others by
node and op), or our graph's JSON form (`compiler.graph.serialize`); then optimized and cut into
tasks, all in a child process (`isolated`) with a memory limit and a deadline. What comes back is
plain data: each layer's workload spec and calls per forward pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler import frontend, graph
from compiler.build import ShapeError
from compiler.graph import ExtractedTask
from compiler.graph.serialize import GraphFormatError
from compiler.graph.shape_family import DimSpec
from tuner.model_tuning import TUNED_SIZES, tasks_of
from tuner.service.isolated import IsolatedError, run_isolated
from tuner.service.settings import Settings

# How a model may be submitted: an ONNX file's bytes, or the graph's JSON form (as UTF-8 bytes); never
# a .pt2 archive, whose sample inputs torch would unpickle.
SOURCE_FORMATS = ("onnx", "graph")


class ModelRefused(ValueError):
    """The model cannot be tuned: not ONNX, malformed, too large, or an operator our frontend does not
    support; the message names the problem (the node and its op, where there is one), `field` the
    request's field at fault when it is not the model itself (its `dims`)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, field)  # both in args: the error crosses from the import's process
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Layer:
    """One task of the model: a distinct fused kernel, as a workload spec, run `weight` times a pass."""

    name: str
    spec: dict[str, Any]
    weight: int
    ops: tuple[str, ...]


@dataclass(frozen=True)
class ImportedModel:
    layers: tuple[Layer, ...]
    nodes: int  # graph nodes after optimization (at the largest tuned sizes), for messages
    sized: bytes | None  # the model with its open dimensions sized as `dims` said, to keep instead


# What `dims` gives a dimension: a size, a [min, max] range (JSON's list), or another's name.
DimsJson = Mapping[str, int | list[int] | str]


def ranged(dims: DimsJson | None) -> bool:
    """Whether `dims` gives some dimension a range of more than one size: the model is then tuned
    for the range."""
    return any(isinstance(spec, list) and spec[0] < spec[1] for spec in (dims or {}).values())


def dim_specs(dims: DimsJson) -> dict[str, DimSpec]:
    """`dims` as the frontend takes them: a range as a (min, max) tuple, one of a single size as
    that size."""
    out: dict[str, DimSpec] = {}
    for name, spec in dims.items():
        out[name] = (
            spec if not isinstance(spec, list) else spec[0] if spec[0] == spec[1] else (spec[0], spec[1])
        )
    return out


def import_model(
    source_format: str, source: bytes, settings: Settings, dims: DimsJson | None = None
) -> ImportedModel:
    """The model's layers, with `dims` sizing an ONNX model's open input dimensions or giving them
    ranges (then the layers are the kernels at sizes spread over the ranges, as `tune_model` tunes a
    shape family); ModelRefused for a model that cannot be imported, whatever the reason."""
    try:
        return run_isolated(
            _import,
            source_format,
            source,
            settings.max_model_bytes,
            settings.max_model_nodes,
            dict(dims or {}),
            seconds=settings.model_import_seconds,
            memory_bytes=settings.model_memory_bytes,
        )
    except IsolatedError as e:
        raise ModelRefused(f"the model could not be imported: {e}") from None


def _import(
    source_format: str, source: bytes, max_bytes: int, max_nodes: int, dims: DimsJson
) -> ImportedModel:
    if ranged(dims):
        return _import_family(source_format, source, max_bytes, max_nodes, dims)
    sized = None
    try:
        if dims:
            from compiler.frontend.onnx_dims import DimsError, sized_onnx  # onnx only to read one

            sizes = {k: v for k, v in dim_specs(dims).items() if not isinstance(v, tuple)}
            try:
                source = sized = sized_onnx(source, sizes, max_bytes=max_bytes, max_nodes=max_nodes)
            except DimsError as e:
                raise ModelRefused(str(e), field="dims") from None
        loaded = frontend.load(source, source_format, max_bytes=max_bytes, max_nodes=max_nodes)
        module = graph.optimize(frontend.require_static(loaded, "the service"))
        tasks = graph.extract_tasks(module)
    except ModelRefused:
        raise
    except (frontend.FrontendError, graph.GraphError, GraphFormatError) as e:
        raise ModelRefused(str(e)) from None
    except Exception as e:  # bytes from anyone may reach a corner of the importer: still their model's fault
        raise ModelRefused(f"the model could not be imported ({type(e).__name__}: {e})") from None
    return _imported(tasks, len(module.nodes()), sized)


def _import_family(
    source_format: str, source: bytes, max_bytes: int, max_nodes: int, dims: DimsJson
) -> ImportedModel:
    """A model given ranges: its kernels at the sizes `tune_model` tunes a shape family at."""
    from compiler.frontend.onnx_dims import DimsError  # onnx only to read one

    try:
        specs = dim_specs(dims)
        family = frontend.load(source, source_format, max_bytes=max_bytes, max_nodes=max_nodes, dims=specs)
        if not isinstance(family, graph.ShapeFamily):  # a value family: refused by its inputs
            frontend.require_static(family, "the service")
            raise ModelRefused("dims give no dimension of the model a range", field="dims")
        sizes = family.spread(TUNED_SIZES)
        tasks = tasks_of(family, sizes)
        nodes = len(graph.optimize(family.specialize(sizes[-1])).nodes())
    except ModelRefused:
        raise
    except DimsError as e:
        raise ModelRefused(str(e), field="dims") from None
    except (frontend.FrontendError, graph.GraphError, ShapeError) as e:
        raise ModelRefused(str(e)) from None
    except Exception as e:  # bytes from anyone may reach a corner of the importer: still their model's fault
        raise ModelRefused(f"the model could not be imported ({type(e).__name__}: {e})") from None
    return _imported(tasks, nodes, None)


def _imported(tasks: Sequence[ExtractedTask], nodes: int, sized: bytes | None) -> ImportedModel:
    if not tasks:
        raise ModelRefused("the model computes nothing to tune: it has no kernel after optimization")
    layers = tuple(Layer(t.name, t.spec, t.weight, t.ops) for t in tasks)
    return ImportedModel(layers, nodes, sized)
