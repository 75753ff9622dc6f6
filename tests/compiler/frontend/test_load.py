"""`frontend.load`: the one loader of model files for the `tuner` command and the coordinator, by
format (ONNX, the graph's JSON form, a torch.export archive), from a path or from bytes."""

import json
import pickle
import re
import zipfile
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


class Planted:
    """What a hostile archive pickles: unpickled, it writes a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "ran"))


def rewritten(source: Path, target: Path, replace: dict[str, bytes]) -> Path:
    """The archive `source` with some of its files' bytes replaced."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as out:
        for info in src.infolist():
            short = info.filename.split("/", 1)[1]
            out.writestr(info, replace.get(short, src.read(info)))
    return target


def test_a_pt2_archive_runs_no_code_it_holds(tmp_path: Path):
    """issue 42: `tuner import/run/tune-model/export` on a .pt2 ran torch.export.load, which unpickles
    the sample inputs (falling back to the unrestricted unpickler) and pickled weights. The sample
    inputs are never read now; a pickled weight is refused, naming it."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
    torch.export.save(torch.export.export(model, (torch.from_numpy(X),)), tmp_path / "good.pt2")
    marker = tmp_path / "pwned"
    payload = pickle.dumps(Planted(marker))
    hostile_inputs = rewritten(
        tmp_path / "good.pt2", tmp_path / "inputs.pt2", {"data/sample_inputs/model.pt": payload}
    )
    (y,) = graph.build(frontend.load(hostile_inputs))(X)
    assert not marker.exists()
    with torch.no_grad():
        np.testing.assert_allclose(y, model(torch.from_numpy(X)).numpy(), rtol=1e-4, atol=1e-4)
    with zipfile.ZipFile(tmp_path / "good.pt2") as z:
        config = json.loads(z.read("good/data/weights/model_weights_config.json"))
    config["config"]["0.weight"]["use_pickle"] = True
    hostile_weight = rewritten(
        tmp_path / "good.pt2",
        tmp_path / "weight.pt2",
        {
            "data/weights/weight_0": payload,
            "data/weights/model_weights_config.json": json.dumps(config).encode(),
        },
    )
    with pytest.raises(FrontendError, match=re.escape("weight '0.weight' is saved as a pickle")):
        frontend.load(hostile_weight)
    assert not marker.exists()
