"""Models with open dimensions through both frontends: ONNX inputs with named and unnamed unknown
dimensions given sizes or ranges (`dims=`), torch.export's `dynamic_shapes` and programs exported
with it (also saved as .pt2). Each family runs at both ends of its range and at odd sizes, checked
against ONNX Runtime or PyTorch; each refusal names the dimension and says how to give it."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from torch.export import Dim

from compiler import frontend, graph
from compiler.build import ShapeError
from compiler.frontend import FrontendError
from compiler.graph import GraphError, Module, ShapeFamily


def masked_softmax_model() -> onnx.ModelProto:
    """softmax over the sequence of (x @ w) * mask: x (batch, sequence, 8), mask (batch, ?)."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Cast", ["mask"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mf", "axis"], ["mu"]),
        helper.make_node("Mul", ["h", "mu"], ["hm"]),
        helper.make_node("Softmax", ["hm"], ["y"], axis=1),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 8]),
        helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", None]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", 8])]
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 8)).astype("float32"), "w"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "axis"),
    ]
    graph_proto = helper.make_graph(nodes, "masked", inputs, outputs, weights)
    return helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])


def test_an_open_onnx_dimension_is_refused_with_how_to_give_it() -> None:
    with pytest.raises(GraphError, match=r"dimension 0 is 'batch': .*dims=\{'batch': \(1, 512\)\}"):
        frontend.from_onnx(masked_softmax_model())
    with pytest.raises(GraphError, match=r"dimension 1 is unknown \(it has no name\).*--dim mask:1=1..512"):
        frontend.from_onnx(masked_softmax_model(), dims={"batch": 2, "sequence": 5})
    with pytest.raises(FrontendError, match="dims names \\['seq'\\], which no input dimension is"):
        frontend.from_onnx(masked_softmax_model(), dims={"seq": 5})
    with pytest.raises(FrontendError, match=r"dims\['batch'\] is 1.5: neither a size"):
        frontend.from_onnx(masked_softmax_model(), dims={"batch": 1.5, "sequence": 5, "mask:1": 5})
    bad = {"batch": (3, 2), "sequence": 5, "mask:1": 5}
    with pytest.raises(FrontendError, match=r"dims\['batch'\] is \(3, 2\)"):
        frontend.from_onnx(masked_softmax_model(), dims=bad)
    with pytest.raises(FrontendError, match="not a dimension given a size or a range"):
        frontend.from_onnx(
            masked_softmax_model(), dims={"batch": 1, "sequence": "mask:1", "mask:1": "batch2"}
        )


def test_onnx_sizes_give_a_static_module_and_leave_the_proto_as_it_was() -> None:
    proto = masked_softmax_model()
    before = proto.SerializeToString()
    module = frontend.from_onnx(proto, dims={"batch": 2, "sequence": 5, "mask:1": "sequence"})
    assert isinstance(module, Module)
    assert [i.type.shape for i in module.inputs] == [(2, 5, 8), (2, 5)]
    assert proto.SerializeToString() == before


def test_an_onnx_range_runs_at_every_size_as_onnx_runtime_does() -> None:
    proto = masked_softmax_model()
    family = frontend.from_onnx(proto, dims={"batch": (1, 3), "sequence": (1, 200), "mask:1": "sequence"})
    assert isinstance(family, ShapeFamily)
    assert str(family) == (
        "x: (batch, sequence, 8) float32; mask: (batch, sequence) int64 "
        "with batch in [1, 3], sequence in [1, 200]"
    )
    model = graph.build(family)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for batch, sequence in [(1, 1), (3, 200), (2, 7), (1, 1), (2, 131)]:
        x = rng.standard_normal((batch, sequence, 8)).astype("float32")
        mask = rng.integers(0, 2, (batch, sequence))
        (got,) = model(x, mask)
        np.testing.assert_allclose(got, session.run(None, {"x": x, "mask": mask})[0], rtol=1e-5, atol=1e-6)
    assert len(model.compiled) == 4
    with pytest.raises(ShapeError, match=r"input 'x': dimension 1 \(sequence\) is 201, outside the declared"):
        model(np.zeros((1, 201, 8), "float32"), np.zeros((1, 201), "int64"))
    with pytest.raises(ShapeError, match=r"input 'mask': dimension 1 \(sequence\) is 4, but 5 in input 'x'"):
        model(np.zeros((1, 5, 8), "float32"), np.zeros((1, 4), "int64"))


class Tagger(torch.nn.Module):
    """Token ids and features in, per-token scores out: an embedding, a linear layer, a softmax."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(50, 16)
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, ids: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return (self.linear(self.embed(ids) + features)).softmax(-1)


def tagger_args(batch: int, sequence: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randint(0, 50, (batch, sequence), generator=generator),
        torch.randn(batch, sequence, 16, generator=generator),
    )


BATCH = Dim("batch", min=1, max=4)
SEQUENCE = Dim("seq", min=1, max=256)


def test_torch_dynamic_shapes_run_at_every_size_as_pytorch_does() -> None:
    model = Tagger().eval()
    family = frontend.from_torch(
        model, tagger_args(2, 5), dynamic_shapes=({0: BATCH, 1: SEQUENCE}, {0: BATCH, 1: SEQUENCE})
    )
    assert isinstance(family, ShapeFamily)
    assert str(family) == (
        "ids: (batch, seq) int64; features: (batch, seq, 16) float32 with batch in [1, 4], seq in [1, 256]"
    )
    compiled = graph.build(family)
    for batch, sequence in [(1, 1), (4, 256), (3, 17)]:
        args = tagger_args(batch, sequence, seed=sequence)
        (got,) = compiled(*[a.numpy() for a in args])
        with torch.no_grad():
            np.testing.assert_allclose(got, model(*args).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match=r"\(seq\) is 257, outside the declared range seq in \[1, 256\]"):
        compiled(*[a.numpy() for a in tagger_args(1, 257)])


def test_torch_dims_without_a_largest_size_or_derived_are_refused() -> None:
    model = Tagger().eval()
    open_ended = Dim("seq")
    with pytest.raises(GraphError, match=r"'seq' has no largest size: give it one, as torch.export.Dim"):
        frontend.from_torch(model, tagger_args(1, 5), dynamic_shapes=({1: open_ended}, {1: open_ended}))
    with pytest.raises(TypeError, match=r"dynamic_shapes goes with a torch\.nn\.Module"):
        program = torch.export.export(model, tagger_args(1, 5))
        frontend.from_torch(program, dynamic_shapes=({1: SEQUENCE}, {1: SEQUENCE}))


def test_a_program_saved_with_dynamic_shapes_loads_as_a_family_and_narrows(tmp_path) -> None:
    model = Tagger().eval()
    program = torch.export.export(model, tagger_args(2, 5), dynamic_shapes=({1: SEQUENCE}, {1: SEQUENCE}))
    path = tmp_path / "tagger.pt2"
    torch.export.save(program, path)
    family = frontend.load(path)
    assert isinstance(family, ShapeFamily)
    assert [str(d) for d in family.dims] == ["ids:1 in [1, 256]"]  # torch keeps no Dim names in a program
    narrowed = frontend.load(path, dims={"ids:1": (2, 9)})
    assert isinstance(narrowed, ShapeFamily) and [str(d) for d in narrowed.dims] == ["ids:1 in [2, 9]"]
    fixed = frontend.load(path, dims={"ids:1": 9})
    assert isinstance(fixed, Module) and fixed.inputs[1].type.shape == (2, 9, 16)
    args = tagger_args(2, 9)
    (got,) = graph.build(fixed)(*[a.numpy() for a in args])
    with torch.no_grad():
        np.testing.assert_allclose(got, model(*args).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match="not inside the declared range"):
        frontend.load(path, dims={"ids:1": 300})
    with pytest.raises(FrontendError, match="no aliases"):
        frontend.load(path, dims={"ids:1": "other"})
    with pytest.raises(FrontendError, match=r"takes a model of static shapes; .*ids:1 in \[1, 256\]"):
        frontend.require_static(family, "the service")


def decode_step_model() -> onnx.ModelProto:
    """One attention step over a key cache: keys = concat(past, new), out = softmax(q k^T) k, the
    grown cache a second output. A first step's past is empty (length 0)."""
    nodes = [
        helper.make_node("Concat", ["past", "new"], ["keys"], axis=1),
        helper.make_node("Transpose", ["keys"], ["keys_t"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["new", "keys_t"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["weights"], axis=-1),
        helper.make_node("MatMul", ["weights", "keys"], ["out"]),
    ]
    inputs = [
        helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, "past", 4]),
        helper.make_tensor_value_info("new", TensorProto.FLOAT, [1, 1, 4]),
    ]
    outputs = [
        helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, 4]),
        helper.make_tensor_value_info("keys", TensorProto.FLOAT, [1, "total", 4]),
    ]
    graph_proto = helper.make_graph(nodes, "decode", inputs, outputs)
    return helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])


def test_an_empty_past_runs_its_first_step_and_is_never_computed_on() -> None:
    proto = decode_step_model()
    family = frontend.from_onnx(proto, dims={"past": (0, 16)})
    assert isinstance(family, ShapeFamily) and family.spread(3) == [{"past": 0}, {"past": 4}, {"past": 16}]
    model = graph.build(family)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(2)
    for past in (0, 1, 9, 16):
        feed = {
            "past": rng.standard_normal((1, past, 4)).astype("float32"),
            "new": rng.standard_normal((1, 1, 4)).astype("float32"),
        }
        for got, want in zip(model(*feed.values()), session.run(None, feed)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    empty_used = helper.make_graph(
        [helper.make_node("Relu", ["past"], ["out"])],
        "relu",
        [helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, "past", 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "past", 4])],
    )
    relu = helper.make_model(empty_used, opset_imports=[helper.make_opsetid("", 17)])
    (out,) = graph.build(frontend.from_onnx(relu, dims={"past": 0}))(np.zeros((1, 0, 4), np.float32))
    assert out.shape == (1, 0, 4)  # an empty output is returned, computed by nothing
    # A binding whose import fails leaves the model as it was for the next one.
    reshaped = helper.make_graph(
        [helper.make_node("Reshape", ["past", "shape"], ["out"])],
        "reshape",
        [helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, "past", 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3, 4])],
        [numpy_helper.from_array(np.array([1, 3, 4], np.int64), "shape")],
    )
    family = frontend.from_onnx(
        helper.make_model(reshaped, opset_imports=[helper.make_opsetid("", 17)]), dims={"past": (0, 4)}
    )
    assert isinstance(family, ShapeFamily)
    with pytest.raises(GraphError, match="Reshape"):
        family.specialize({"past": 2})
    assert family.specialize({"past": 3}).inputs[0].type.shape == (1, 3, 4)


def test_a_negative_size_is_an_open_dimension_and_sizes_are_bounded() -> None:
    proto = masked_softmax_model()
    proto.graph.input[1].type.tensor_type.shape.dim[1].dim_value = -1  # as some exporters write it
    with pytest.raises(GraphError, match=r"dimension 1 is unknown \(it has no name\)"):
        frontend.from_onnx(proto, dims={"batch": 1, "sequence": 5})
    module = frontend.from_onnx(proto, dims={"batch": 1, "sequence": 5, "mask:1": 5})
    assert isinstance(module, Module) and module.inputs[1].type.shape == (1, 5)
    with pytest.raises(FrontendError, match=r"sizes are 0 to 2147483648"):
        frontend.from_onnx(proto, dims={"batch": 1, "sequence": (1, 2**70), "mask:1": "sequence"})
