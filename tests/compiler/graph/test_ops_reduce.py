"""sum, prod, mean, max, min, softmax, log_softmax, layer_norm and cumsum: the numpy references agree
with PyTorch (several axes, keepdims or not, a middle axis, the trailing 1 or 2 axes), the te computes
agree with the references, and the type rules refuse bad axes and shapes."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler.graph import OPS, Attrs, TensorType
from tests.compiler.graph.op_check import (
    assert_compiles_to_reference,
    assert_schedules,
    check_op,
    check_refused,
    infer,
    prim_func,
    random_inputs,
)

TORCH_REDUCE = {
    "sum": torch.sum,
    "mean": torch.mean,
    "max": torch.amax,
    "min": torch.amin,
    "prod": lambda x, dim, keepdim: _torch_prod(x, dim, keepdim),
}


def _torch_prod(x: torch.Tensor, dims: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    """torch.prod takes one dim at a time: the last first, so the others keep their places."""
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, dim=d, keepdim=keepdim)
    return x


REDUCTIONS = [
    ("sum", (3, 4, 5), (0, 2), False),
    ("sum", (3, 4, 5), (0, 2), True),
    ("mean", (3, 4, 5), (1,), True),
    ("mean", (2, 3, 4, 5), (2, 3), False),
    ("max", (3, 4, 5), (0, 1, 2), False),
    ("max", (3, 4, 5), (1, 2), True),
    ("min", (7, 3), (1,), False),
    ("prod", (3, 4, 5), (0, 2), False),
    ("prod", (2, 3, 4, 7), (3,), True),
    ("prod", (5, 3), (0, 1), False),
]


@pytest.mark.parametrize(("op", "shape", "axes", "keepdims"), REDUCTIONS)
def test_reductions_match_pytorch_and_compile(op, shape, axes, keepdims):
    (x,) = arrays = random_inputs([shape])
    want = assert_compiles_to_reference(op, arrays, {"axes": axes, "keepdims": keepdims})
    torch_out = TORCH_REDUCE[op](torch.from_numpy(x), dim=axes, keepdim=keepdims).numpy()
    np.testing.assert_allclose(want, torch_out.reshape(want.shape), rtol=1e-5, atol=1e-5)


def test_reducing_every_axis_without_keepdims_gives_shape_1():
    """The graph level has no rank-0 tensors: what PyTorch returns as a scalar is shape (1,)."""
    assert infer("sum", [(3, 4)], {"axes": (0, 1), "keepdims": False}).shape == (1,)
    assert infer("sum", [(3, 4)], {"axes": (0, 1), "keepdims": True}).shape == (1, 1)


def test_mean_is_a_sum_block_then_a_scale():
    func = prim_func("mean", random_inputs([(3, 4)]), {"axes": (1,), "keepdims": False})
    assert 'with T.block("out_sum")' in func.script() and "T.float32(0.25)" in func.script()


def test_reduction_flops_count_each_input_element():
    attrs = {"axes": (0, 2), "keepdims": False}
    x = TensorType((3, 4, 5), "float32")
    assert OPS["sum"].flops([x], infer("sum", [x.shape], attrs), Attrs.of(attrs)) == 60
    assert OPS["mean"].flops([x], infer("mean", [x.shape], attrs), Attrs.of(attrs)) == 64


SOFTMAXES = [
    ("softmax", (3, 5, 4), 1),
    ("softmax", (7,), 0),
    ("log_softmax", (3, 5, 4), 1),
    ("log_softmax", (2, 6), 1),
]


@pytest.mark.parametrize(("op", "shape", "axis"), SOFTMAXES)
def test_softmax_and_log_softmax_match_pytorch_and_compile(op, shape, axis):
    (x,) = arrays = random_inputs([shape])
    x[..., 0] += 100  # exp(100) overflows float32: the max must be subtracted first
    want = assert_compiles_to_reference(op, arrays, {"axis": axis})
    torch_out = getattr(F, op)(torch.from_numpy(x), dim=axis).numpy()
    np.testing.assert_allclose(want, torch_out, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("normalized", [(7,), (3, 7)])
def test_layer_norm_matches_pytorch_and_compiles(normalized):
    x, gamma, beta = arrays = random_inputs([(2, 3, 7), normalized, normalized])
    attrs = {"axes": tuple(range(3 - len(normalized), 3)), "epsilon": 1e-5}
    want = assert_compiles_to_reference("layer_norm", arrays, attrs)
    torch_out = F.layer_norm(
        *map(torch.from_numpy, (x,)), normalized, torch.from_numpy(gamma), torch.from_numpy(beta), 1e-5
    )
    np.testing.assert_allclose(want, torch_out.numpy(), rtol=1e-5, atol=1e-5)


def test_layer_norm_in_float64():
    arrays = random_inputs([(4, 5), (5,), (5,)], dtype="float64")
    assert (
        assert_compiles_to_reference("layer_norm", arrays, {"axes": (1,), "epsilon": 0.1}).dtype == np.float64
    )


LAYER_NORM = {"axes": (1, 2), "epsilon": 1e-5}
AXES = "must be sorted unique axes"
REFUSED = {  # op, argument shapes, attributes, the reason
    "sum axis out of range": ("sum", [(3, 4)], {"axes": (2,), "keepdims": False}, AXES),
    "sum axes unsorted": ("sum", [(3, 4)], {"axes": (1, 0), "keepdims": False}, AXES),
    "sum axes repeated": ("sum", [(3, 4)], {"axes": (1, 1), "keepdims": False}, AXES),
    "sum no axes": ("sum", [(3, 4)], {"axes": (), "keepdims": False}, AXES),
    "mean keepdims not a bool": (
        "mean",
        [(3, 4)],
        {"axes": (1,), "keepdims": 0},
        "attribute keepdims=0 must be a bool",
    ),
    "max two arguments": ("max", [(3, 4), (3, 4)], {"axes": (1,), "keepdims": False}, "takes 1 argument"),
    "mean of integers": (
        "mean",
        [(3, 4)],
        {"axes": (1,), "keepdims": False},
        "argument 0 has dtype int64; expected float",
        ["int64"],
    ),
    "sum of bools": (
        "sum",
        [(3, 4)],
        {"axes": (1,), "keepdims": False},
        "argument 0 has dtype bool; expected float32 or float64 or int8 .* or uint64",
        ["bool"],
    ),
    "softmax axis out of range": ("softmax", [(3, 4)], {"axis": 2}, "axis 2 is out of range for rank 2"),
    "log_softmax negative axis": (
        "log_softmax",
        [(3, 4)],
        {"axis": -1},
        "axis -1 is out of range for rank 2",
    ),
    "layer_norm axes not trailing": (
        "layer_norm",
        [(2, 3, 4), (2, 3), (2, 3)],
        {**LAYER_NORM, "axes": (0, 1)},
        "trailing axes",
    ),
    "layer_norm gamma shape": ("layer_norm", [(2, 3, 4), (4,), (3, 4)], LAYER_NORM, "must have shape"),
    "layer_norm beta shape": ("layer_norm", [(2, 3, 4), (3, 4), (4, 3)], LAYER_NORM, "must have shape"),
    "layer_norm epsilon not a number": (
        "layer_norm",
        [(2, 3, 4), (3, 4), (3, 4)],
        {**LAYER_NORM, "epsilon": "1e-5"},
        "attribute epsilon='1e-5' must be a number",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_arguments_are_refused(case):
    op, shapes, attrs, reason, *dtypes = REFUSED[case]
    types = dtypes[0] if dtypes else ["float32"] * len(shapes)
    check_refused(op, list(zip(shapes, types)), attrs, reason)


@pytest.mark.parametrize(
    ("op", "shapes", "attrs"),
    [
        ("softmax", [(4, 6, 5)], {"axis": 1}),
        ("layer_norm", [(4, 3, 8), (3, 8), (3, 8)], LAYER_NORM),
        ("mean", [(2, 6, 5, 3)], {"axes": (2, 3), "keepdims": True}),
    ],
)
def test_normalizations_schedule_under_the_default_space(op, shapes, attrs):
    func = prim_func(op, random_inputs(shapes), attrs)
    assert_schedules(func, lambda *a: OPS[op].reference(a, Attrs.of(attrs)), shapes, range(2))


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(("dtype", "axis"), [("float32", 1), ("int64", 1), ("int32", 0), ("float64", 2)])
def test_cumsum_matches_pytorch_and_compiles(dtype: str, axis: int, exclusive: bool, reverse: bool):
    """PyTorch has no exclusive or reverse form: flip, and subtract the element (exact on these
    small whole numbers)."""
    x = np.random.default_rng(axis).integers(-5, 6, (3, 7, 5)).astype(dtype)

    def expected(a: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(a)
        t = t.flip(axis) if reverse else t
        out = torch.cumsum(t, axis).to(t.dtype)
        out = out - t if exclusive else out
        return (out.flip(axis) if reverse else out).numpy()

    check_op("cumsum", [x], {"axis": axis, "exclusive": exclusive, "reverse": reverse}, expected)


def test_cumsum_of_position_ids_from_a_mask():
    """RoBERTa's position ids: the running count of the tokens that are not padding."""
    mask = np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]], np.int64)
    want = assert_compiles_to_reference("cumsum", [mask], {"axis": 1, "exclusive": False, "reverse": False})
    np.testing.assert_array_equal(want, [[1, 2, 3, 3, 3], [1, 1, 2, 3, 4]])


def ties_and_nans(dtype: str) -> np.ndarray:
    """Whole numbers, so rows tie; for floats a NaN in one row (it wins, at its first position)."""
    x = np.random.default_rng(3).integers(-3, 4, (4, 7, 5)).astype(dtype)
    if dtype.startswith("float"):
        x[1, 2, 3] = x[1, 5, 3] = np.nan
    return x


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize(
    ("dtype", "axis", "keepdims"), [("float32", 1, False), ("int64", 2, True), ("float64", 0, True)]
)
def test_argmax_and_argmin_take_the_first_extreme_as_pytorch(op, dtype, axis, keepdims):
    torch_fn = torch.argmax if op == "argmax" else torch.argmin
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": False}
    check_op(
        op, [ties_and_nans(dtype)], attrs, lambda a: torch_fn(torch.from_numpy(a), axis, keepdims).numpy()
    )


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_and_argmin_can_take_the_last_extreme(op):
    """ONNX's select_last_index: PyTorch has no such option, so the reference flips the axis."""
    x = ties_and_nans("float32")
    torch_fn = torch.argmax if op == "argmax" else torch.argmin

    def last(a: np.ndarray) -> np.ndarray:
        return a.shape[1] - 1 - torch_fn(torch.from_numpy(a).flip(1), 1).numpy()

    check_op(op, [x], {"axis": 1, "keepdims": False, "select_last_index": True}, last)
    assert infer(op, [(3, 4)], {"axis": 1, "keepdims": False, "select_last_index": True}).dtype == "int64"
