"""Every zoo model, imported through both frontends, optimized and built, computes what its framework
computes: PyTorch eager for from_torch, ONNX Runtime for from_onnx (an export of the same model);
untuned (default schedules) and with a tuned record. Every fused kernel is a valid workload spec."""

import io

import numpy as np
import onnxruntime as ort
import pytest
import torch

from bench import zoo
from compiler import frontend, graph
from compiler.workloads import workload_from_spec
from tuner.best import build_model
from tuner.tune import tune

MODELS = {
    "mlp": (zoo.mlp, zoo.mlp_inputs),
    "resnet18": (zoo.resnet18, zoo.image_inputs),
    "mobilenet_v2": (zoo.mobilenet_v2, zoo.image_inputs),
    "bert_layer": (zoo.transformer_encoder_layer, zoo.transformer_inputs),
    "bert_embedding": (zoo.bert_embedding, zoo.token_inputs),
}
TOLERANCE = 1e-3


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.parametrize("name", MODELS)
def test_from_torch_built_matches_pytorch(name: str) -> None:
    make, inputs = MODELS[name]
    model, args = make(), inputs()
    module = graph.optimize(frontend.from_torch(model, args), check=True)
    for task in graph.extract_tasks(module):
        assert workload_from_spec(task.spec).func.structural_hash() == task.workload_hash
    compiled = graph.build(module)
    with torch.no_grad():
        want = model(*args).numpy()
    (got,) = compiled(*[a.numpy() for a in args])
    assert_close(got, want)
    assert compiled.peak_bytes < compiled.plan.total_bytes or len(compiled.steps) <= 2


@pytest.mark.parametrize(
    ("name", "opset"),
    [
        ("mlp", 13),
        ("resnet18", 13),
        ("mobilenet_v2", 13),
        ("bert_layer", 17),
        ("bert_layer", 13),
        ("bert_embedding", 13),
    ],
)
def test_from_onnx_built_matches_onnx_runtime(name: str, opset: int) -> None:
    """Opset 13 has no LayerNormalization: the exporter writes it out, and optimize puts it back."""
    make, inputs = MODELS[name]
    model, args = make(), inputs()
    buffer = io.BytesIO()
    torch.onnx.export(model, args, buffer, dynamo=False, opset_version=opset)
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    feed = [a.numpy() for a in args]
    (want,) = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), feed)})
    module = graph.optimize(frontend.from_onnx(buffer.getvalue()), check=True)
    if name == "bert_layer":
        assert sum(t.ops == ("layer_norm",) for t in graph.extract_tasks(module)) == 1
    compiled = graph.build(module)
    (got,) = compiled(*feed)
    assert_close(got, want)


def test_build_uses_tuned_records_and_stays_correct(tmp_path) -> None:
    model, args = zoo.mlp(), zoo.mlp_inputs()
    module = graph.optimize(frontend.from_torch(model, args))
    database = f"sqlite:///{tmp_path / 'tune.db'}"
    first = graph.extract_tasks(module)[0]
    tune(first.spec, trials=4, database=database)
    compiled = build_model(module, database=database)
    assert {s.func: s.origin for s in compiled.sources} == {
        t.name: "given" if t.name == first.name else "default" for t in graph.extract_tasks(module)
    }
    with torch.no_grad():
        want = model(*args).numpy()
    assert_close(compiled(*[a.numpy() for a in args])[0], want)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "bert_embedding"])
def test_an_exported_zoo_model_loads_back_and_matches_pytorch(name: str, tmp_path) -> None:
    """ResNet-18 embeds 45 MB of weights; MobileNetV2 runs in the NCHWc layout with padded channels;
    the embedding model takes integer token ids."""
    make, inputs = MODELS[name]
    model, args = make(), inputs()
    compiled = graph.build(graph.optimize(frontend.from_torch(model, args)))
    compiled.export(tmp_path / f"{name}.so")
    loaded = graph.load_library(tmp_path / f"{name}.so")
    feed = [a.numpy() for a in args]
    with torch.no_grad():
        want = model(*args).numpy()
    (got,) = loaded(*feed)
    np.testing.assert_array_equal(got, compiled(*feed)[0])
    assert_close(got, want)
