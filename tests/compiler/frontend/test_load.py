"""`frontend.load`: the one loader of model files for the `tuner` command and the coordinator, by
format (ONNX, the graph's JSON form, a torch.export archive), from a path or from bytes."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from compiler import frontend, graph
from compiler.frontend import FrontendError
from compiler.graph.serialize import GraphFormatError, module_to_json
from tests.service.onnx_models import mlp, reference

X = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)


def assert_is_the_mlp(module: graph.Module) -> None:
    (y,) = graph.build(module)(X)
    np.testing.assert_allclose(y, reference(X), rtol=1e-4, atol=1e-4)


def test_each_format_loads_from_a_path_by_its_suffix_and_from_bytes_by_name(tmp_path: Path):
    onnx_path = tmp_path / "mlp.onnx"
    onnx_path.write_bytes(mlp())
    graph_json = json.dumps(module_to_json(frontend.load(onnx_path))).encode()
    (tmp_path / "mlp.json").write_bytes(graph_json)
    for module in (
        frontend.load(onnx_path),
        frontend.load(str(tmp_path / "mlp.json")),
        frontend.load(mlp(), "onnx"),
        frontend.load(graph_json, "graph"),
    ):
        assert_is_the_mlp(module)


def test_a_pt2_archive_loads_from_its_path(tmp_path: Path):
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
    x = torch.from_numpy(X)
    torch.export.save(torch.export.export(model, (x,)), tmp_path / "model.pt2")
    (y,) = graph.build(frontend.load(tmp_path / "model.pt2"))(X)
    with torch.no_grad():
        np.testing.assert_allclose(y, model(x).numpy(), rtol=1e-4, atol=1e-4)


def test_what_cannot_be_loaded_says_why(tmp_path: Path):
    with pytest.raises(FrontendError, match="need their format named"):
        frontend.load(mlp())
    with pytest.raises(FrontendError, match="cannot read a model as 'pt2'"):
        frontend.load(b"PK", "pt2")
    with pytest.raises(FrontendError, match="the graph is not JSON"):
        frontend.load(b"{", "graph")
    with pytest.raises(FrontendError, match="more than max_bytes=10"):
        frontend.load(b"{}" * 10, "graph", max_bytes=10)
    with pytest.raises(GraphFormatError, match=r"graph\.format"):
        frontend.load(b"{}", "graph")
