"""from_onnx against ONNX Runtime: hand-made graphs for every supported operator (odd shapes,
broadcasting, attribute defaults), torch exports, and the models it must refuse with a clear error."""

from __future__ import annotations

import io
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import FrontendError, from_onnx
from compiler.graph import Call, GraphError, Module, run_reference
from compiler.graph.passes import fold_batch_norm, fold_constants

INT64_MAX = np.iinfo(np.int64).max
RNG = np.random.default_rng(0)


def weight(*shape: int, positive: bool = False) -> np.ndarray:
    data = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(data) + 0.5 if positive else data


def ints(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


@dataclass
class OnnxCase:
    """One model: its nodes, float inputs by shape, int64 inputs by (shape, exclusive bound),
    weights (initializers), and its opset."""

    nodes: list[onnx.NodeProto]
    inputs: dict[str, tuple[int, ...]]
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    opset: int = 13
    outputs: tuple[str, ...] = ("y",)
    index_inputs: dict[str, tuple[tuple[int, ...], int]] = field(default_factory=dict)
    positive: bool = False
    declared: dict[str, tuple[int, ...]] = field(default_factory=dict)  # output shapes ONNX cannot infer


def make_model(case: OnnxCase) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in case.inputs.items()]
    inputs += [
        helper.make_tensor_value_info(n, TensorProto.INT64, s) for n, (s, _) in case.index_inputs.items()
    ]
    outputs = [helper.make_empty_tensor_value_info(n) for n in case.outputs]
    weights = [numpy_helper.from_array(a, n) for n, a in case.weights.items()]
    graph = helper.make_graph(case.nodes, "case", inputs, outputs, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)], ir_version=10)
    # Declare the outputs' types, as exporters do (the checker needs them).
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph.output
    for declared, info in zip(model.graph.output, inferred):
        declared.CopyFrom(info)
        if info.name in case.declared:
            declared.CopyFrom(
                helper.make_tensor_value_info(info.name, TensorProto.FLOAT, case.declared[info.name])
            )
    return model


def feeds_of(case: OnnxCase) -> dict[str, np.ndarray]:
    feeds = {n: weight(*s, positive=case.positive) for n, s in case.inputs.items()}
    feeds.update({n: RNG.integers(0, high, s).astype(np.int64) for n, (s, high) in case.index_inputs.items()})
    return feeds


def check_against_ort(model: onnx.ModelProto | bytes, feeds: dict[str, np.ndarray]) -> Module:
    """Import `model`, run it with the numpy reference and with ONNX Runtime, compare."""
    data = model if isinstance(model, bytes) else model.SerializeToString()
    module = from_onnx(data)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    order = [i.name for i in session.get_inputs()]
    got = run_reference(module, [feeds[n] for n in order])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape, (g.shape, e.shape)
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
    return module


def node(op: str, inputs: list[str], outputs: list[str] | None = None, **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs or ["y"], **attrs)


def unary_case(op: str, positive: bool = False, opset: int = 13, **attrs: object) -> OnnxCase:
    return OnnxCase([node(op, ["x"], **attrs)], {"x": (2, 3, 5)}, opset=opset, positive=positive)


def conv_case(x: tuple[int, ...], w: tuple[int, ...], bias: bool = True, **attrs: object) -> OnnxCase:
    weights = {"w": weight(*w)} | ({"b": weight(w[0])} if bias else {})
    return OnnxCase([node("Conv", ["x", *weights], **attrs)], {"x": x}, weights)


def pool_case(op: str, opset: int = 13, **attrs: object) -> OnnxCase:
    return OnnxCase([node(op, ["x"], **attrs)], {"x": (2, 3, 7, 8)}, opset=opset)


def reduce_case(op: str, opset: int = 13, axes_input: list[int] | None = None, **attrs: object) -> OnnxCase:
    weights = {"axes": ints(*axes_input)} if axes_input is not None else {}
    return OnnxCase([node(op, ["x", *weights], **attrs)], {"x": (3, 4, 5)}, weights, opset=opset)


CASES: dict[str, OnnxCase] = {
    **{op: unary_case(op) for op in ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs"]},
    "HardSwish": unary_case("HardSwish", opset=14),
    "Log": unary_case("Log", positive=True),
    "Sqrt": unary_case("Sqrt", positive=True),
    "HardSigmoid": unary_case("HardSigmoid"),
    "HardSigmoid-attrs": unary_case("HardSigmoid", alpha=0.3, beta=0.4),
    "LeakyRelu": unary_case("LeakyRelu"),
    "LeakyRelu-alpha": unary_case("LeakyRelu", alpha=0.25),
    "Gelu": unary_case("Gelu", opset=20),
    "Gelu-tanh": unary_case("Gelu", opset=20, approximate="tanh"),
    **{op: unary_case(op) for op in ["Floor", "Ceil", "Round", "Sign", "Reciprocal", "Softsign"]},
    **{op: unary_case(op) for op in ["Elu", "Selu", "Softplus"]},
    "Mish-18": unary_case("Mish", opset=18),
    "Elu-alpha": unary_case("Elu", alpha=0.4),
    "Selu-attrs": unary_case("Selu", alpha=1.5, gamma=0.9),
    "Celu": unary_case("Celu", alpha=0.7),
    "PRelu-channels": OnnxCase(
        [node("PRelu", ["x", "slope"])], {"x": (2, 3, 4, 5)}, {"slope": weight(3, 1, 1)}
    ),
    "PRelu-scalar": OnnxCase([node("PRelu", ["x", "slope"])], {"x": (3, 4)}, {"slope": weight(1)}),
    "Identity": unary_case("Identity"),
    "ConvTranspose": OnnxCase(
        [node("ConvTranspose", ["x", "w", "b"], strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0])],
        {"x": (1, 4, 5, 6)},
        {"w": weight(4, 3, 3, 3), "b": weight(3)},
    ),
    "ConvTranspose-grouped-dilated": OnnxCase(
        [node("ConvTranspose", ["x", "w"], group=2, dilations=[2, 1], strides=[1, 3])],
        {"x": (2, 4, 3, 4)},
        {"w": weight(4, 2, 2, 3)},
    ),
    "ConvTranspose-1d-bias": OnnxCase(
        [node("ConvTranspose", ["x", "w", "b"], strides=[2], pads=[1, 2])],
        {"x": (2, 4, 7)},
        {"w": weight(4, 3, 5), "b": weight(3)},
    ),
    **{
        f"ConvTranspose-{auto}": OnnxCase(
            [node("ConvTranspose", ["x", "w"], strides=[2, 3], auto_pad=auto)],
            {"x": (1, 2, 4, 5)},
            {"w": weight(2, 3, 4, 4)},
        )
        for auto in ("SAME_UPPER", "SAME_LOWER", "VALID")
    },
    "ConvTranspose-output-shape": OnnxCase(
        [node("ConvTranspose", ["x", "w"], strides=[2, 2], output_shape=[10, 9])],
        {"x": (1, 2, 4, 4)},
        {"w": weight(2, 3, 3, 3)},
    ),
    "Resize-nearest-scales": OnnxCase(
        [node("Resize", ["x", "", "scales"])],
        {"x": (1, 2, 3, 4)},
        {"scales": np.array([1, 1, 2, 1.5], np.float32)},
    ),
    "Resize-nearest-asymmetric-floor": OnnxCase(
        [
            node(
                "Resize",
                ["x", "", "", "sizes"],
                coordinate_transformation_mode="asymmetric",
                nearest_mode="floor",
            )
        ],
        {"x": (1, 2, 5, 4)},
        {"sizes": ints(1, 2, 3, 9)},
    ),
    "Resize-linear-half-pixel": OnnxCase(
        [node("Resize", ["x", "", "", "sizes"], mode="linear")],
        {"x": (2, 3, 4, 5)},
        {"sizes": ints(2, 3, 7, 3)},
    ),
    "Resize-linear-align-corners-axes": OnnxCase(
        [
            node(
                "Resize",
                ["x", "", "scales"],
                mode="linear",
                coordinate_transformation_mode="align_corners",
                axes=[3, 2],
            )
        ],
        {"x": (1, 2, 4, 5)},
        {"scales": np.array([2.0, 1.5], np.float32)},
        opset=18,
    ),
    "Resize-linear-pytorch-half-pixel": OnnxCase(
        [
            node(
                "Resize",
                ["x", "", "scales"],
                mode="linear",
                coordinate_transformation_mode="pytorch_half_pixel",
            )
        ],
        {"x": (1, 2, 4, 5)},
        {"scales": np.array([1, 1, 0.5, 2.4], np.float32)},
    ),
    **{
        f"Resize-{name}": OnnxCase(
            [node("Resize", ["x", "", "scales" if scales else "", "" if scales else "sizes"], **attrs)],
            {"x": shape},
            {"scales": np.array(scales, np.float32)} if scales else {"sizes": ints(*sizes)},
            opset=opset,
        )
        for name, shape, scales, sizes, opset, attrs in [
            ("cubic-up", (1, 2, 4, 5), [1, 1, 2, 1.5], None, 13, {"mode": "cubic"}),
            (
                "cubic-down-align-corners",
                (1, 2, 7, 9),
                [1, 1, 0.6, 0.8],
                None,
                13,
                {"mode": "cubic", "coordinate_transformation_mode": "align_corners"},
            ),
            (
                "cubic-a-exclude-outside",
                (2, 1, 5, 6),
                [1, 1, 0.8, 1.7],
                None,
                13,
                {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1},
            ),
            (
                "cubic-asymmetric-sizes",
                (1, 3, 4, 4),
                None,
                [1, 3, 9, 3],
                13,
                {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"},
            ),
            ("cubic-antialias", (1, 2, 8, 7), None, [1, 2, 3, 2], 18, {"mode": "cubic", "antialias": 1}),
            (
                "linear-antialias",
                (1, 2, 9, 10),
                [1, 1, 0.6, 0.4],
                None,
                18,
                {"mode": "linear", "antialias": 1},
            ),
            (
                "linear-half-pixel-symmetric",
                (1, 2, 5, 9),
                [1, 1, 1.7, 0.45],
                None,
                19,
                {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
            ),
            (
                "nearest-not-larger",
                (1, 2, 4, 5),
                None,
                [7, 8],
                18,
                {"axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"},
            ),
            (
                "linear-not-smaller",
                (1, 2, 4, 5),
                None,
                [7, 8],
                18,
                {"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller"},
            ),
        ]
    },
    **{
        f"Einsum-{equation}": OnnxCase(
            [node("Einsum", [f"x{k}" for k in range(len(shapes))], equation=equation)],
            {f"x{k}": shape for k, shape in enumerate(shapes)},
            opset=13,
        )
        for equation, shapes in [
            ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
            ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
            ("ij,jk", [(3, 4), (4, 5)]),
            ("i,i->", [(7,), (7,)]),
            ("bij->bji", [(2, 3, 4)]),
            ("ij->", [(3, 4)]),
            ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
            ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
            ("ik,jk->kij", [(3, 4), (2, 4)]),
            ("ii->i", [(5, 5)]),
            ("ii", [(4, 4)]),
            ("...ii->...i", [(2, 3, 4, 4)]),
            ("ijij->ji", [(3, 2, 3, 2)]),
            ("iji,jk->ik", [(3, 4, 3), (4, 5)]),
        ]
    },
    "Sum": OnnxCase([node("Sum", ["a", "b", "c"])], {"a": (3, 4), "b": (4,), "c": (3, 1)}),
    "Mean": OnnxCase([node("Mean", ["a", "b"])], {"a": (2, 3), "b": (2, 3)}),
    "LRN": OnnxCase([node("LRN", ["x"], size=3)], {"x": (2, 5, 3, 4)}),
    "LRN-attrs": OnnxCase([node("LRN", ["x"], size=5, alpha=0.01, beta=0.5, bias=2.0)], {"x": (1, 6, 5, 2)}),
    "Mod-fmod": OnnxCase([node("Mod", ["x", "d"], fmod=1)], {"x": (3, 4)}, {"d": weight(4)}),
    "Cast-float": unary_case("Cast", to=TensorProto.FLOAT),
    "Dropout": OnnxCase(
        [node("Dropout", ["x", "ratio"])], {"x": (3, 4)}, {"ratio": np.array(0.5, np.float32)}
    ),
    "Clip": OnnxCase(
        [node("Clip", ["x", "lo", "hi"])],
        {"x": (4, 5)},
        {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)},
    ),
    "Clip-max-only": OnnxCase(
        [node("Clip", ["x", "", "hi"])], {"x": (4, 5)}, {"hi": np.array(0.2, np.float32)}
    ),
    "Clip-none": OnnxCase([node("Clip", ["x"])], {"x": (4, 5)}),
    "Clip-run-time-bounds": OnnxCase([node("Clip", ["x", "lo", "hi"])], {"x": (4, 5), "lo": (), "hi": ()}),
    "Clip-run-time-min-constant-max": OnnxCase(
        [node("Clip", ["x", "lo", "hi"])], {"x": (4, 5), "lo": ()}, {"hi": np.array(0.3, np.float32)}
    ),
    "Dropout-mask": OnnxCase(
        [node("Dropout", ["x"], ["y", "mask"]), node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT)],
        {"x": (3, 4)},
        opset=13,
        outputs=("y", "m"),
    ),
    "Split-empty-part-concat": OnnxCase(
        [
            node("Split", ["x", "s"], ["a", "b"], axis=1),
            node("Relu", ["a"], ["r"]),
            node("Concat", ["r", "b"], ["y"], axis=1),
        ],
        {"x": (2, 6)},
        {"s": ints(6, 0)},
    ),
    **{
        f"Conv-1d-{name}": OnnxCase([node("Conv", ["x", "w", "b"], **attrs)], {"x": (2, 4, 11)}, weights)
        for name, weights, attrs in [
            ("pads-strides", {"w": weight(6, 4, 3), "b": weight(6)}, {"pads": [2, 1], "strides": [2]}),
            ("dilated", {"w": weight(6, 4, 3), "b": weight(6)}, {"pads": [1, 1], "dilations": [3]}),
            (
                "same-groups",
                {"w": weight(8, 2, 3), "b": weight(8)},
                {"auto_pad": "SAME_UPPER", "group": 2},
            ),
        ]
    },
    **{
        op: OnnxCase([node(op, ["a", "b"])], {"a": (2, 1, 5), "b": (3, 1)}, positive=op == "Div")
        for op in ["Add", "Sub", "Mul", "Div"]
    },
    "Add-weight": OnnxCase([node("Add", ["w", "x"])], {"x": (2, 3, 4)}, {"w": weight(4)}),
    "Pow": OnnxCase([node("Pow", ["a", "b"])], {"a": (3, 4), "b": (4,)}, positive=True),
    "Pow-int-exponent": OnnxCase([node("Pow", ["x", "e"])], {"x": (3, 4)}, {"e": ints(3)}),
    "Max": OnnxCase([node("Max", ["a", "b", "c"])], {"a": (2, 3, 1), "b": (1, 4), "c": (3, 4)}),
    "Min": OnnxCase([node("Min", ["a", "b"])], {"a": (5, 1), "b": (1, 2)}),
    "Min-one": OnnxCase([node("Min", ["a"])], {"a": (5, 2)}),
    "Conv": conv_case((1, 3, 7, 9), (5, 3, 3, 2)),
    "Conv-pads-strides-dilations-groups": conv_case(
        (2, 4, 9, 8), (6, 2, 3, 2), pads=[1, 0, 2, 1], strides=[2, 1], dilations=[2, 1], group=2
    ),
    "Conv-depthwise-nobias": conv_case((1, 3, 6, 5), (3, 1, 3, 3), bias=False, group=3, pads=[1, 1, 1, 1]),
    "Conv-same-upper": conv_case((1, 2, 7, 6), (3, 2, 3, 4), auto_pad="SAME_UPPER", strides=[2, 2]),
    "Conv-same-lower": conv_case((1, 2, 7, 6), (3, 2, 4, 3), auto_pad="SAME_LOWER", strides=[2, 1]),
    "Conv-valid": conv_case((1, 2, 7, 6), (3, 2, 3, 3), auto_pad="VALID", kernel_shape=[3, 3]),
    "BatchNormalization": OnnxCase(
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-3)],
        {"x": (2, 3, 4, 5)},
        {"s": weight(3), "b": weight(3), "m": weight(3), "v": weight(3, positive=True)},
    ),
    "BatchNormalization-opset15": OnnxCase(
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], training_mode=0)],
        {"x": (2, 3, 5)},
        {"s": weight(3), "b": weight(3), "m": weight(3), "v": weight(3, positive=True)},
        opset=15,
    ),
    "MaxPool": pool_case("MaxPool", kernel_shape=[2, 2]),
    "MaxPool-pads-ceil": pool_case(
        "MaxPool", kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 1, 1], ceil_mode=1
    ),
    "MaxPool-dilations": pool_case("MaxPool", kernel_shape=[2, 3], dilations=[2, 1], strides=[1, 2]),
    "MaxPool-same": pool_case("MaxPool", kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    "AveragePool": pool_case("AveragePool", kernel_shape=[3, 3], strides=[2, 2]),
    "AveragePool-pads": pool_case("AveragePool", kernel_shape=[3, 2], pads=[1, 1, 0, 1]),
    "AveragePool-pads-included": pool_case(
        "AveragePool", kernel_shape=[3, 2], pads=[1, 1, 1, 0], count_include_pad=1, strides=[2, 1]
    ),
    "AveragePool-ceil": pool_case("AveragePool", kernel_shape=[2, 2], strides=[2, 3], ceil_mode=1),
    "GlobalAveragePool": pool_case("GlobalAveragePool"),
    "GlobalMaxPool": pool_case("GlobalMaxPool"),
    "Flatten": OnnxCase([node("Flatten", ["x"])], {"x": (2, 3, 4)}),
    "Flatten-0": OnnxCase([node("Flatten", ["x"], axis=0)], {"x": (2, 3, 4)}),
    "Flatten-negative": OnnxCase([node("Flatten", ["x"], axis=-1)], {"x": (2, 3, 4)}),
    "Reshape": OnnxCase([node("Reshape", ["x", "s"])], {"x": (2, 3, 4)}, {"s": ints(0, -1, 2)}),
    "Transpose": OnnxCase([node("Transpose", ["x"])], {"x": (2, 3, 4)}),
    "Transpose-perm": OnnxCase([node("Transpose", ["x"], perm=[1, 2, 0])], {"x": (2, 3, 4)}),
    "Concat": OnnxCase(
        [node("Concat", ["a", "w", "b"], axis=-1)], {"a": (2, 3), "b": (2, 1)}, {"w": weight(2, 4)}
    ),
    "Split-sizes": OnnxCase(
        [node("Split", ["x", "s"], ["y", "z", "t"], axis=1)],
        {"x": (2, 6, 3)},
        {"s": ints(2, 3, 1)},
        outputs=("y", "z", "t"),
    ),
    "Split-equal": OnnxCase([node("Split", ["x"], ["y", "z"], axis=-1)], {"x": (3, 4)}, outputs=("y", "z")),
    "Split-num-outputs": OnnxCase(
        [node("Split", ["x"], ["y", "z", "t"], num_outputs=3)],
        {"x": (7, 2)},
        opset=18,
        outputs=("y", "z", "t"),
    ),
    "Slice": OnnxCase(
        [node("Slice", ["x", "st", "en", "ax", "sp"])],
        {"x": (5, 6, 7)},
        {"st": ints(-4, 1), "en": ints(INT64_MAX, -1), "ax": ints(-1, 0), "sp": ints(2, 1)},
    ),
    "Slice-clamped": OnnxCase(
        [node("Slice", ["x", "st", "en"])], {"x": (5, 6)}, {"st": ints(-100, 2), "en": ints(100, 3)}
    ),
    "Squeeze": OnnxCase([node("Squeeze", ["x", "a"])], {"x": (3, 1, 4, 1)}, {"a": ints(-1)}),
    "Squeeze-all": OnnxCase([node("Squeeze", ["x"])], {"x": (1, 3, 1, 4)}),
    "Unsqueeze": OnnxCase([node("Unsqueeze", ["x", "a"])], {"x": (3, 4)}, {"a": ints(0, -1)}),
    "Expand": OnnxCase([node("Expand", ["x", "s"])], {"x": (3, 1)}, {"s": ints(2, 1, 4)}),
    "Pad": OnnxCase(
        [node("Pad", ["x", "p", "v"])],
        {"x": (2, 3, 4)},
        {"p": ints(0, 1, 2, 1, 0, 3), "v": np.array(1.5, np.float32)},
    ),
    "Pad-axes": OnnxCase(
        [node("Pad", ["x", "p", "", "a"])],
        {"x": (2, 3, 4)},
        {"p": ints(1, 2, 0, 1), "a": ints(-1, 0)},
        opset=18,
    ),
    "Gemm": OnnxCase([node("Gemm", ["a", "w", "c"])], {"a": (3, 4)}, {"w": weight(4, 5), "c": weight(5)}),
    "Gemm-trans-alpha-beta": OnnxCase(
        [node("Gemm", ["a", "w", "c"], transA=1, transB=1, alpha=0.5, beta=2.0)],
        {"a": (4, 3)},
        {"w": weight(5, 4), "c": weight(3, 1)},
    ),
    "Gemm-no-c": OnnxCase([node("Gemm", ["a", "b"], transB=1)], {"a": (2, 3), "b": (4, 3)}),
    "MatMul": OnnxCase([node("MatMul", ["a", "b"])], {"a": (2, 1, 3, 4), "b": (5, 4, 6)}),
    "MatMul-vector-left": OnnxCase([node("MatMul", ["a", "b"])], {"a": (4,), "b": (2, 4, 3)}),
    "MatMul-vector-right": OnnxCase([node("MatMul", ["a", "b"])], {"a": (2, 3, 4), "b": (4,)}),
    "MatMul-vectors": OnnxCase(
        [node("MatMul", ["a", "b"]), node("Relu", ["y"], ["z"])], {"a": (4,), "b": (4,)}, outputs=("z",)
    ),
    "Softmax": OnnxCase([node("Softmax", ["x"], axis=1)], {"x": (2, 3, 4)}),
    "Softmax-default": OnnxCase([node("Softmax", ["x"])], {"x": (2, 3, 5)}),
    "LogSoftmax": OnnxCase([node("LogSoftmax", ["x"])], {"x": (3, 5)}),
    "LayerNormalization": OnnxCase(
        [node("LayerNormalization", ["x", "g", "b"], axis=-2, epsilon=1e-3)],
        {"x": (2, 3, 4)},
        {"g": weight(3, 4), "b": weight(3, 4)},
        opset=17,
    ),
    "LayerNormalization-no-bias": OnnxCase(
        [node("LayerNormalization", ["x", "g"])], {"x": (2, 3, 5)}, {"g": weight(5)}, opset=17
    ),
    "LayerNormalization-broadcast-scale": OnnxCase(
        [node("LayerNormalization", ["x", "g", "b"], axis=1)],
        {"x": (2, 3, 4)},
        {"g": weight(1, 4), "b": weight(4)},
        opset=17,
    ),
    "InstanceNormalization": OnnxCase(
        [node("InstanceNormalization", ["x", "s", "b"], epsilon=1e-3)],
        {"x": (2, 3, 4, 5)},
        {"s": weight(3), "b": weight(3)},
    ),
    "GroupNormalization-21": OnnxCase(
        [node("GroupNormalization", ["x", "s", "b"], num_groups=2)],
        {"x": (2, 4, 3, 5)},
        {"s": weight(4), "b": weight(4)},
        opset=21,
        declared={"y": (2, 4, 3, 5)},
    ),
    # Operators ONNX defines as functions of others: imported as their bodies.
    "RMSNormalization-23": OnnxCase(
        [node("RMSNormalization", ["x", "g"], axis=-2, epsilon=1e-3)],
        {"x": (2, 3, 5)},
        {"g": weight(3, 5)},
        opset=23,
    ),
    "MeanVarianceNormalization-default-axes": OnnxCase(
        [node("MeanVarianceNormalization", ["x"])], {"x": (2, 3, 4, 5)}, declared={"y": (2, 3, 4, 5)}
    ),
    "Shrink": unary_case("Shrink", bias=0.2, lambd=0.4),
    "Attention-4d-gqa-causal-mask": OnnxCase(
        [node("Attention", ["q", "k", "v", "mask"], is_causal=1)],
        {"q": (2, 4, 3, 8), "k": (2, 2, 5, 8), "v": (2, 2, 5, 6)},
        {"mask": weight(3, 5)},
        opset=23,
    ),
    "Attention-3d-heads-scale-softcap": OnnxCase(
        [node("Attention", ["q", "k", "v"], q_num_heads=2, kv_num_heads=2, scale=0.3, softcap=2.0)],
        {"q": (1, 3, 16), "k": (1, 4, 16), "v": (1, 4, 12)},
        opset=23,
    ),
    "Attention-qk-matmul-output": OnnxCase(
        [node("Attention", ["q", "k", "v"], ["y", "", "", "qk"], qk_matmul_output_mode=3)],
        {"q": (1, 2, 3, 8), "k": (1, 2, 5, 8), "v": (1, 2, 5, 4)},
        opset=23,
        outputs=("y", "qk"),
    ),
    "Pow-float-base-int-exponent": OnnxCase(
        [node("Pow", ["x", "e"])], {"x": (2, 3)}, index_inputs={"e": ((2, 3), 5)}, positive=True
    ),
    "Pow-int-base-float-exponent": OnnxCase(
        [node("Pow", ["b", "x"])], {"x": (2, 3)}, index_inputs={"b": ((2, 3), 6)}, positive=True
    ),
    "Pow-int64-base-int32-exponent": OnnxCase(
        [node("Pow", ["b", "e"])],
        {},
        {"e": np.array([[0, 1, 2], [3, 7, 20]], np.int32)},  # ONNX Runtime saturates an overflow
        index_inputs={"b": ((2, 3), 9)},
    ),
    "Slice-negative-steps": OnnxCase(
        [node("Slice", ["x", "a", "b", "c", "d"])],
        {"x": (4, 3, 7)},
        {"a": ints(-1, 1, 6), "b": ints(-5, 3, 0), "c": ints(0, 1, 2), "d": ints(-1, 1, -2)},
    ),
    "Slice-empty": OnnxCase(
        [node("Slice", ["x", "a", "b"]), node("Relu", ["x"], ["r"])],
        {"x": (4, 3)},
        {"a": ints(3, 0), "b": ints(2, 3)},
        outputs=("y", "r"),
    ),
    "GatherND-batch-dims": OnnxCase(
        [node("GatherND", ["x", "i"], batch_dims=1)], {"x": (2, 3, 4)}, index_inputs={"i": ((2, 5, 1), 3)}
    ),
    "Resize-tf-crop-and-resize": OnnxCase(
        [
            node(
                "Resize",
                ["x", "roi", "", "sizes"],
                mode="linear",
                coordinate_transformation_mode="tf_crop_and_resize",
                extrapolation_value=-2.0,
            )
        ],
        {"x": (1, 2, 4, 5)},
        {"roi": np.array([0, 0, -0.2, 0.3, 1, 1, 0.9, 1.3], np.float32), "sizes": ints(1, 2, 5, 4)},
    ),
    "LayerNormalization-statistics": OnnxCase(
        [node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "inv_std"], axis=1)],
        {"x": (3, 4, 5)},
        {"g": weight(4, 5), "b": weight(4, 5)},
        opset=17,
        outputs=("y", "mean", "inv_std"),
    ),
    "ReduceMean": reduce_case("ReduceMean", axes=[0, -1], keepdims=0),
    "ReduceMean-all": reduce_case("ReduceMean"),
    "ReduceMax": reduce_case("ReduceMax", axes=[1]),
    **{
        f"Trilu-run-time-k-{upper}": OnnxCase(
            [node("Trilu", ["x", "k"], upper=upper)],
            {"x": (2, 4, 5)},
            index_inputs={"k": ((), 3)},
            declared={"y": (2, 4, 5)},
            opset=14,
        )
        for upper in (0, 1)
    },
    "ReduceMin-scalar": reduce_case("ReduceMin", keepdims=0),
    "ReduceProd": reduce_case("ReduceProd", axes=[0, 2]),
    "ReduceProd-opset18": reduce_case("ReduceProd", opset=18, axes_input=[-1], keepdims=0),
    "ReduceSum": reduce_case("ReduceSum", axes_input=[-2], keepdims=0),
    "ReduceSum-noop": reduce_case("ReduceSum", noop_with_empty_axes=1),
    "ReduceL1": reduce_case("ReduceL1", axes=[0, 2]),
    "ReduceL2-opset18": reduce_case("ReduceL2", opset=18, axes_input=[-1], keepdims=0),
    "ReduceSumSquare-all": reduce_case("ReduceSumSquare", keepdims=0),
    "ReduceLogSumExp": reduce_case("ReduceLogSumExp", axes=[1]),
    "ReduceLogSumExp-all": reduce_case("ReduceLogSumExp", opset=18, keepdims=0),
    "ArgMax": OnnxCase([node("ArgMax", ["x"], axis=1)], {"x": (3, 4, 5)}),
    "ArgMin-last": OnnxCase(
        [node("ArgMin", ["x"], axis=-1, keepdims=0, select_last_index=1)], {"x": (3, 4, 5)}
    ),
    "ArgMax-vector": OnnxCase([node("ArgMax", ["x"], keepdims=0)], {"x": (7,)}),
    "ReduceMean-opset18": reduce_case("ReduceMean", opset=18, axes_input=[2, 0]),
    "ReduceMax-opset18-all": reduce_case("ReduceMax", opset=18, keepdims=0),
    "Gather-embedding": OnnxCase(
        [node("Gather", ["table", "ids"])], {}, {"table": weight(10, 4)}, index_inputs={"ids": ((2, 3), 10)}
    ),
    "Gather-constant-indices": OnnxCase(
        [node("Gather", ["x", "i"], axis=1)], {"x": (2, 5, 3)}, {"i": np.array([[0, -1], [3, 3]], np.int64)}
    ),
    "Gather-scalar-index": OnnxCase(
        [node("Gather", ["x", "i"], axis=1)], {"x": (2, 5, 3)}, {"i": np.array(-2, np.int64)}
    ),
    "Constant": OnnxCase(
        [
            helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(weight(3, 4))),
            helper.make_node("Constant", [], ["f"], value_float=2.5),
            helper.make_node("Constant", [], ["fs"], value_floats=[1.0, 2.0, 3.0, 4.0]),
            helper.make_node("Constant", [], ["s"], value_ints=[4, 3]),
            node("Add", ["x", "c"], ["t"]),
            node("Mul", ["t", "f"], ["u"]),
            node("Sub", ["u", "fs"], ["v"]),
            node("Reshape", ["v", "s"]),
        ],
        {"x": (3, 4)},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_operator_matches_onnxruntime(name: str) -> None:
    case = CASES[name]
    check_against_ort(make_model(case), feeds_of(case))


# Shape computations: with static input shapes they are constants, folded while importing.

SHAPE_CASES: dict[str, OnnxCase] = {
    "shape-gather-unsqueeze-concat": OnnxCase(
        [
            node("Shape", ["x"], ["s"]),
            node("Gather", ["s", "zero"], ["n"]),
            node("Unsqueeze", ["n", "zero1"], ["n1"]),
            node("Concat", ["n1", "minus1"], ["target"], axis=0),
            node("Reshape", ["x", "target"]),
        ],
        {"x": (2, 3, 5)},
        {"zero": np.array(0, np.int64), "zero1": ints(0), "minus1": ints(-1)},
        declared={"y": (2, 15)},
    ),
    "shape-slice-div-mul": OnnxCase(
        [
            node("Shape", ["x"], ["s"], start=1),
            node("Slice", ["s", "zero", "one"], ["c"]),
            node("Div", ["c", "two"], ["half"]),
            node("Mul", ["half", "two"], ["even"]),
            node("Sub", ["even", "half"], ["h"]),
            node("Shape", ["x"], ["s2"], end=1),
            node("Concat", ["s2", "two", "h", "last"], ["target"], axis=0),
            node("Add", ["target", "zeros"], ["target2"]),
            node("Reshape", ["x", "target2"]),
        ],
        {"x": (3, 4, 5)},
        {"zero": ints(0), "one": ints(1), "two": ints(2), "last": ints(5), "zeros": ints(0, 0, 0, 0)},
        opset=15,
    ),
    "constant-of-shape-range-cast": OnnxCase(
        [
            node("Shape", ["x"], ["s"]),
            node(
                "ConstantOfShape", ["s"], ["ones"], value=numpy_helper.from_array(np.array([1.5], np.float32))
            ),
            node("Range", ["zero", "n", "one"], ["r"]),
            node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
            node("Add", ["x", "ones"], ["t"]),
            node("Mul", ["t", "rf"]),
        ],
        {"x": (2, 4)},
        {"zero": np.array(0, np.int64), "n": np.array(4, np.int64), "one": np.array(1, np.int64)},
    ),
    "gather-negative-index": OnnxCase(
        [
            node("Shape", ["x"], ["s"]),
            node("Gather", ["s", "last"], ["d"]),
            node("Reshape", ["x", "d"]),
        ],
        {"x": (2, 3)},
        {"last": ints(-1, 0)},
        declared={"y": (3, 2)},
    ),
    "squeeze-expand-shape": OnnxCase(
        [
            node("Shape", ["x"], ["s"]),
            node("Slice", ["s", "m1", "end"], ["last"]),
            node("Squeeze", ["last", "zero"], ["d"]),
            node("Unsqueeze", ["d", "zero"], ["d1"]),
            node("Expand", ["d1", "two"], ["dd"]),
            node("Concat", ["one", "dd"], ["target"], axis=0),
            node("Expand", ["b", "target"]),
        ],
        {"x": (2, 3), "b": (3, 1)},
        {"m1": ints(-1), "end": ints(INT64_MAX), "zero": ints(0), "two": ints(2), "one": ints(1)},
    ),
}


@pytest.mark.parametrize("name", list(SHAPE_CASES))
def test_shape_computations_fold_into_constants(name: str) -> None:
    case = SHAPE_CASES[name]
    module = check_against_ort(make_model(case), feeds_of(case))
    # Only float computation reaches the graph: no integer constant survives.
    assert all(c.type.dtype.startswith("float") for c in module.constants())


# Torch exports (the legacy TorchScript exporter).


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 3 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(x.view(x.size(0), -1))


class TorchBlock(torch.nn.Module):
    """Pre-norm attention and a GELU feed-forward (exported as Erf)."""

    def __init__(self, dim: int = 12, heads: int = 3) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.ff = torch.nn.Sequential(torch.nn.Linear(dim, 20), torch.nn.GELU(), torch.nn.Linear(20, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attention = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.out((attention @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.norm2(x))


def export(module: torch.nn.Module, x: torch.Tensor, opset: int, **kwargs: object) -> onnx.ModelProto:
    torch.manual_seed(0)
    for p in module.parameters():
        torch.nn.init.normal_(p, std=0.5)
    for name, buffer in module.named_buffers():
        if "running_var" in name:
            buffer.uniform_(0.5, 2.0)
        elif "running_mean" in name:
            buffer.normal_()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter (deprecated) and its tracer, on purpose
        torch.onnx.export(
            module.eval(), (x,), f, dynamo=False, opset_version=opset, input_names=["x"], **kwargs
        )
    return onnx.load_model_from_string(f.getvalue())


@pytest.mark.parametrize("folding", [True, False])
def test_torch_convnet(folding: bool) -> None:
    x = torch.randn(2, 3, 7, 8)
    model = export(ConvNet(), x, 13, do_constant_folding=folding)
    ops = {n.op_type for n in model.graph.node}
    assert ("BatchNormalization" in ops) != folding  # torch folds it into the conv itself
    check_against_ort(model, {"x": x.numpy()})


def test_graph_passes_fold_what_the_frontend_leaves_to_them() -> None:
    """Weight arithmetic (bias reshapes, Gemm's transposed weight) is left to constant folding, and
    batch norm after a conv is in the form its folding pass recognizes."""
    x = torch.randn(2, 3, 7, 8)
    model = export(ConvNet(), x, 13, do_constant_folding=False)
    module = check_against_ort(model, {"x": x.numpy()})
    assert {"batch_norm", "transpose"} <= {c.op for c in module.calls() if isinstance(c, Call)}
    folded = fold_constants(fold_batch_norm(fold_constants(module)))
    ops = [c.op for c in folded.calls() if isinstance(c, Call)]
    assert ops == ["conv2d", "add", "relu", "max_pool2d", "reshape", "matmul", "add"]
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.numpy()}
    )
    np.testing.assert_allclose(run_reference(folded, [x.numpy()])[0], expected[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("opset", [13, 17])
def test_torch_transformer_block(opset: int) -> None:
    x = torch.randn(2, 5, 12)
    model = export(TorchBlock(), x, opset)
    ops = {n.op_type for n in model.graph.node}
    assert "Erf" in ops
    assert ("LayerNormalization" in ops) == (opset == 17)  # opset 13: ReduceMean, Sub, Pow, Sqrt, Div
    check_against_ort(model, {"x": x.numpy()})


def fix_batch(model: onnx.ModelProto, size: int) -> onnx.ModelProto:
    """Set every dynamic dimension named "batch" (as make_dynamic_shape_fixed does)."""
    for info in [*model.graph.input, *model.graph.output]:
        for dim in info.type.tensor_type.shape.dim:
            if dim.dim_param == "batch":
                dim.dim_value = size
    return model


@pytest.mark.parametrize("module,shape", [(ConvNet(), (2, 3, 7, 8)), (TorchBlock(), (2, 5, 12))])
def test_torch_dynamic_export_with_the_batch_fixed(module: torch.nn.Module, shape: tuple[int, ...]) -> None:
    """A dynamic-batch export computes its reshape targets with Shape, Gather, Unsqueeze, Concat,
    Div and Cast; with the batch fixed they fold into constants."""
    x = torch.randn(*shape)
    model = export(module, x, 17, dynamic_axes={"x": {0: "batch"}})
    assert "Shape" in {n.op_type for n in model.graph.node}
    with pytest.raises(GraphError, match="dimension 0 is 'batch'"):
        from_onnx(model)
    check_against_ort(fix_batch(model, 2), {"x": x.numpy()})


# Models refused, each with the reason.


def single(
    op_node: onnx.NodeProto, inputs: dict[str, tuple[int, ...]], opset: int = 13, **weights: np.ndarray
) -> onnx.ModelProto:
    return make_model(OnnxCase([op_node], inputs, weights, opset=opset))


def test_unsupported_operator_is_named_before_anything_is_built() -> None:
    model = make_model(
        OnnxCase(
            [node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["y"], name="nz")], {"x": (2, 3)}
        )
    )
    with pytest.raises(GraphError, match=r"unsupported operator on values computed at run time .*Conv") as e:
        from_onnx(model)
    assert (e.value.node, e.value.op) == ("nz", "NonZero")


def test_operators_onnx_does_not_define_and_control_flow_are_refused_before_the_checker() -> None:
    unknown = make_model(OnnxCase([helper.make_node("Frobnicate", ["x"], ["y"], name="f")], {"x": (2, 3)}))
    with pytest.raises(GraphError, match=r"unsupported operator; supported: .*Conv") as e:
        from_onnx(unknown)
    assert (e.value.node, e.value.op) == ("f", "Frobnicate")
    branch = helper.make_graph(
        [node("Relu", ["x"], ["z"])], "b", [], [helper.make_tensor_value_info("z", 1, [2, 3])]
    )
    cond = helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=branch)
    model = make_model(OnnxCase([cond], {"x": (2, 3)}, {"c": np.array(True)}))
    with pytest.raises(GraphError, match="subgraphs") as e:
        from_onnx(model)
    assert (e.value.node, e.value.op) == ("if", "If")


def test_custom_domain_operator_is_unsupported() -> None:
    model = make_model(OnnxCase([node("Relu", ["x"])], {"x": (2, 3)}))
    model.graph.node[0].CopyFrom(helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft"))
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(GraphError, match=r"com\.microsoft\.Gelu.*unsupported operator"):
        from_onnx(model)


def test_dynamic_dimension_names_input_and_dim() -> None:
    model = make_model(OnnxCase([node("Relu", ["x"])], {"x": ("n", 3)}))
    with pytest.raises(GraphError, match=r"'x'.*dimension 0 is 'n'"):
        from_onnx(model)


def test_int_input_used_as_data() -> None:
    case = OnnxCase(
        [node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT), node("Relu", ["f"])],
        {},
        index_inputs={"ids": ((3,), 5)},
    )
    check_against_ort(make_model(case), feeds_of(case))


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.95])
def test_truncated_bytes(cut: float) -> None:
    data = make_model(CASES["Conv"]).SerializeToString()
    with pytest.raises(FrontendError, match=r"not an ONNX model|invalid ONNX model|no ai\.onnx opset"):
        from_onnx(data[: int(len(data) * cut)])


@pytest.mark.parametrize("data", [b"\xff" * 64, b"hello, world", np.random.default_rng(1).bytes(500)])
def test_garbage_bytes(data: bytes) -> None:
    with pytest.raises(FrontendError):
        from_onnx(data)


def test_limits() -> None:
    model = make_model(CASES["Constant"])
    with pytest.raises(FrontendError, match="8 nodes, more than max_nodes=7"):
        from_onnx(model, max_nodes=7)
    with pytest.raises(FrontendError, match="more than max_bytes=100"):
        from_onnx(model.SerializeToString(), max_bytes=100)
    with pytest.raises(FrontendError, match="more than max_bytes=100"):
        from_onnx(model, max_bytes=100)


def test_limits_refuse_a_file_before_reading_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(make_model(CASES["Conv"]).SerializeToString())
    monkeypatch.setattr("builtins.open", lambda *a, **k: pytest.fail("the file was opened"))
    with pytest.raises(FrontendError, match="max_bytes=10"):
        from_onnx(path, max_bytes=10)


def test_float64_model() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, (3, 2))
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, (3, 2))
    w = numpy_helper.from_array(RNG.standard_normal(2), "w")
    graph = helper.make_graph([node("Add", ["x", "w"], ["t"]), node("Tanh", ["t"])], "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    module = check_against_ort(model, {"x": RNG.standard_normal((3, 2))})
    assert module.outputs[0].type.dtype == "float64"


def test_initializers_listed_as_inputs_are_weights() -> None:
    """Models of IR version 3 list their initializers among the graph inputs too."""
    case = CASES["Add-weight"]
    model = make_model(case)
    model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, (4,)))
    module = check_against_ort(model, feeds_of(case))
    assert [i.type.shape for i in module.inputs] == [(2, 3, 4)]


def test_reads_a_path(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    case = CASES["Conv-pads-strides-dilations-groups"]
    path.write_bytes(make_model(case).SerializeToString())
    for model in (path, str(path)):
        assert from_onnx(model).inputs[0].type.shape == (2, 4, 9, 8)


def test_opset_newer_than_supported_is_refused() -> None:
    with pytest.raises(FrontendError, match=r"opset 29 is not supported.*13 to 28"):
        from_onnx(single(node("Relu", ["x"]), {"x": (2,)}, opset=29))


def test_older_opsets_are_converted_up() -> None:
    """Opset 10's Slice took its starts and ends as attributes, opset 11's Clip its bounds: the
    version converter rewrites them as inputs, and the result is the same as ONNX Runtime's on the
    original model."""
    graph = helper.make_graph(
        [
            node("Slice", ["x"], ["s"], starts=[1], ends=[3], axes=[1]),
            node("Clip", ["s"], ["y"], min=-0.5, max=0.5),
        ],
        "old",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 4))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 2))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=7)
    check_against_ort(model, {"x": RNG.standard_normal((2, 4)).astype(np.float32)})


def test_an_old_experimental_operator_is_named() -> None:
    """ImageScaler (in old model-zoo files) was never part of an opset: nothing converts it."""
    model = single(node("ImageScaler", ["x"]), {"x": (1, 3, 2, 2)}, opset=7)
    with pytest.raises(GraphError, match="node 'y' \\(ImageScaler\\): not an operator of opset 7"):
        from_onnx(model)


def test_a_function_body_that_cannot_import_names_the_operator_and_the_inner_node() -> None:
    """Bernoulli is a function of RandomUniformLike, which a compiled model cannot compute."""
    model = single(node("Bernoulli", ["x"]), {"x": (2, 3)}, opset=15)
    with pytest.raises(GraphError, match="node 'y' \\(Bernoulli\\): RandomUniformLike 'y/"):
        from_onnx(model)


def test_checker_errors_are_frontend_errors() -> None:
    model = single(node("Relu", ["missing"]), {"x": (2,)})
    with pytest.raises(FrontendError, match="invalid ONNX model"):
        from_onnx(model)


REFUSED = {
    "maxpool-indices": (
        OnnxCase(
            [node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2]), node("Cast", ["idx"], ["z"], to=1)],
            {"x": (1, 1, 4, 4)},
            outputs=("y", "z"),
        ),
        "output Indices",
    ),
    "dropout-training": (
        OnnxCase(
            [node("Dropout", ["x", "r", "t"])],
            {"x": (2, 3)},
            {"r": np.array(0.5, np.float32), "t": np.array(True)},
        ),
        "training_mode=1",
    ),
    "batchnorm-training": (
        OnnxCase(
            [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "mean", "var"], training_mode=1)],
            {"x": (2, 3, 4)},
            {k: weight(3, positive=True) for k in "sbmv"},
            opset=15,
        ),
        "training_mode=1",
    ),
    "cast-to-float8": (
        OnnxCase([node("Cast", ["x"], to=TensorProto.FLOAT8E4M3FN)], {"x": (2, 3)}),
        "a cast to float8_e4m3fn is not supported",
    ),
    "pad-reflect": (
        OnnxCase([node("Pad", ["x", "p"], mode="reflect")], {"x": (2, 3)}, {"p": ints(0, 1, 0, 1)}),
        "mode 'reflect'",
    ),
    "conv3d": (
        OnnxCase([node("Conv", ["x", "w"])], {"x": (1, 2, 3, 4, 5)}, {"w": weight(3, 2, 1, 2, 2)}),
        "only 2-D",
    ),
    "float8-weight": (
        OnnxCase([node("Add", ["x", "w"])], {"x": (3,)}, {"w": weight(3)}),
        "constant .w.: dtype float8_e4m3fn is not supported",
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_with_reason(name: str) -> None:
    case, reason = REFUSED[name]
    model = make_model(case)
    if name == "float8-weight":
        model.graph.initializer[0].CopyFrom(numpy_helper.from_array(weight(3).astype("float8_e4m3fn"), "w"))
    with pytest.raises(GraphError, match=reason) as e:
        from_onnx(model)
    assert e.value.node == (case.nodes[0].name or case.nodes[0].output[0])


def test_missing_onnx_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)
    monkeypatch.delitem(sys.modules, "compiler.frontend.onnx", raising=False)
    with pytest.raises(
        ImportError, match="from_onnx needs the onnx package: pip install 'tensor-tuner\\[models\\]'"
    ):
        from_onnx(b"")
