"""The injective graph operators (reshape, transpose, concat, slice, pad, take, gather_elements,
gather_nd, broadcast_to)
against PyTorch and numpy indexing, and their compiled te computes against their references."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler.graph import OPS, Pattern
from compiler.graph.ir import Attrs, TensorType
from compiler.graph.ops.transform import reshape_groups
from tests.compiler.graph.op_check import case, check_op, check_refused, owned_ops, with_torch

rng = np.random.default_rng(0)


def normal(*shape: int, dtype: str = "float32") -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def reshape(src: tuple[int, ...], dst: tuple[int, ...], id_: str) -> object:
    return case("reshape", [normal(*src)], with_torch(lambda x: x.reshape(dst)), id_, shape=dst)


def torch_pad(before: tuple[int, ...], after: tuple[int, ...], value: float):
    """F.pad takes (left, right) pairs from the last axis to the first."""
    pairs = [p for b, a in reversed(list(zip(before, after))) for p in (b, a)]
    return with_torch(lambda x: F.pad(x, pairs, value=value))


def fancy_take(axis: int):
    """numpy's integer-array indexing, which wraps negative indices: x[:, idx] for axis 1."""
    return lambda x, idx: x[(slice(None),) * axis + (idx,)]


INJECTIVE = [
    reshape((3, 5, 7), (105,), "flatten"),
    reshape((3, 5, 7), (15, 7), "merge"),
    reshape((3, 5, 7), (7, 15), "regroup"),
    reshape((2, 3, 1, 4), (6, 1, 4), "ones-between"),
    reshape((6, 1, 1), (2, 3), "split"),
    reshape((2, 1, 6), (1, 3, 4), "one-group"),
    reshape((1, 1), (1,), "ones"),
    case("transpose", [normal(3, 5, 7)], with_torch(lambda x: x.permute(2, 0, 1)), "odd", axes=(2, 0, 1)),
    case("transpose", [normal(3, 5, 7)], with_torch(lambda x: x.permute(1, 2, 0)), "inverse", axes=(1, 2, 0)),
    case(
        "transpose",
        [normal(1, 4, dtype="float64")],
        with_torch(lambda x: x.permute(1, 0)),
        "float64",
        axes=(1, 0),
    ),
    case(
        "concat",
        [normal(3, 2, 7), normal(3, 1, 7), normal(3, 4, 7)],
        with_torch(lambda *xs: torch.cat(xs, 1)),
        "three",
        axis=1,
    ),
    case("concat", [normal(2, 5), normal(1, 5)], with_torch(lambda *xs: torch.cat(xs, 0)), "axis0", axis=0),
    case("concat", [normal(1, 1)], with_torch(lambda x: torch.cat([x], 1)), "one", axis=1),
    case(
        "slice",
        [normal(3, 5, 7)],
        with_torch(lambda x: x[0:3:2, 1:5:3, 2:7]),
        "strided",
        begin=(0, 1, 2),
        end=(3, 5, 7),
        strides=(2, 3, 1),
    ),
    case(
        "slice",
        [normal(4, 9)],
        with_torch(lambda x: x[1:2, 3:8:2]),
        "inner",
        begin=(1, 3),
        end=(2, 8),
        strides=(1, 2),
    ),
    case(
        "slice",
        [normal(1, 1)],
        with_torch(lambda x: x[:, :]),
        "ones",
        begin=(0, 0),
        end=(1, 1),
        strides=(1, 1),
    ),
    case(
        "pad",
        [normal(3, 5, 7)],
        torch_pad((0, 1, 2), (1, 0, 3), -1.5),
        "odd",
        pads=(0, 1, 2, 1, 0, 3),
        value=-1.5,
    ),
    case("pad", [normal(1, 1)], torch_pad((1, 1), (1, 1), 0.0), "ones", pads=(1, 1, 1, 1), value=0.0),
    case("pad", [normal(2, 3)], torch_pad((0, 0), (0, 0), 0.0), "none", pads=(0, 0, 0, 0), value=0.0),
    case(
        "take",
        [normal(3, 5, 7), rng.integers(-5, 5, (2, 3)).astype("int64")],
        fancy_take(1),
        "negative",
        axis=1,
    ),
    case(
        "take",
        [normal(3, 5, dtype="float64"), np.array([2, 0, -1, 2], dtype="int32")],
        fancy_take(0),
        "int32",
        axis=0,
    ),
    case("take", [normal(3, 5, 7), np.array([6], dtype="int64")], fancy_take(2), "last", axis=2),
    case(
        "gather_elements",
        [normal(3, 5, 7), rng.integers(0, 5, (2, 4, 7)).astype("int64")],
        with_torch(lambda x, i: torch.gather(x, 1, i)),
        "smaller",
        axis=1,
    ),
    case(
        "gather_elements",
        [normal(3, 5, dtype="float64"), np.array([[-1, 0], [2, -3], [1, 1]], dtype="int32")],
        lambda x, i: np.take_along_axis(x[:, :5], np.mod(i, 5), 1),
        "negative",
        axis=1,
    ),
    case(
        "gather_nd",
        [normal(3, 5, 7), rng.integers(0, 3, (4, 1)), rng.integers(0, 5, (1, 6))],
        with_torch(lambda x, i, j: x[i, j]),
        "broadcast",
        axis=0,
    ),
    case(
        "gather_nd",
        [normal(2, 5, 7, 3), np.array([[1, -2]], dtype="int32"), np.array([[6], [0], [-1]], dtype="int32")],
        lambda x, i, j: x[:, i, j],
        "axis1-negative",
        axis=1,
    ),
    case(
        "broadcast_to",
        [normal(3, 1)],
        with_torch(lambda x: torch.broadcast_to(x, (2, 3, 5))),
        "odd",
        shape=(2, 3, 5),
    ),
    case(
        "broadcast_to",
        [normal(1, 1)],
        with_torch(lambda x: torch.broadcast_to(x, (1, 4))),
        "ones",
        shape=(1, 4),
    ),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "expected"), INJECTIVE)
def test_op_computes_what_pytorch_does(op, inputs, attrs, expected):
    check_op(op, inputs, attrs, expected)


def test_every_transform_op_is_checked():
    checked = {p.values[0] for p in INJECTIVE}
    assert checked == owned_ops("compiler.graph.ops.transform")


def test_injective_ops_move_data_without_flops():
    t = TensorType((2, 3), "float32")
    for name in owned_ops("compiler.graph.ops.transform"):
        assert OPS[name].pattern == Pattern.INJECTIVE
        assert OPS[name].flops([t], t, Attrs()) == 0


def test_reshape_maps_matching_axes_one_to_one():
    """Only axes whose sizes regroup need a division and a modulo in the compute."""
    assert reshape_groups((2, 3, 1, 4), (6, 4)) == [([0, 1], [0]), ([3], [1])]
    assert reshape_groups((8, 1, 3), (1, 8, 3, 1)) == [([0], [1]), ([2], [2])]
    assert reshape_groups((1, 1), (1,)) == []


F32, F64, I64 = "float32", "float64", "int64"


@pytest.mark.parametrize(
    ("op", "args", "attrs", "reason"),
    [
        (
            "reshape",
            [((3, 5), F32)],
            {"shape": (4, 4)},
            r"cannot reshape \(3, 5\) \(15 elements\) to \(4, 4\)",
        ),
        ("reshape", [((3, 5), F32)], {"shape": (15, 0)}, "must be positive sizes"),
        ("reshape", [((3, 5), F32)], {"shape": 15}, "attribute shape=15 must be a tuple of ints"),
        ("transpose", [((3, 5, 7), F32)], {"axes": (0, 2, 2)}, r"axes \(0, 2, 2\) are not a permutation"),
        ("transpose", [((3, 5, 7), F32)], {"axes": (1, 0)}, "not a permutation of the 3 axes"),
        ("concat", [], {"axis": 0}, "takes at least one argument"),
        ("concat", [((3, 5), F32), ((3, 5, 1), F32)], {"axis": 0}, r"argument 1 has shape \(3, 5, 1\)"),
        ("concat", [((3, 5), F32), ((4, 6), F32)], {"axis": 0}, "expected .* but for axis 0"),
        ("concat", [((3, 5), F32), ((3, 5), F64)], {"axis": 0}, "mix dtypes"),
        ("concat", [((3, 5), F32)], {"axis": 2}, "axis 2 is out of range for rank 2"),
        (
            "slice",
            [((3, 5), F32)],
            {"begin": (0, 0), "end": (3, 6), "strides": (1, 1)},
            r"axis 1: range \[0, 6\) is empty or outside \[0, 5\)",
        ),
        ("slice", [((3, 5), F32)], {"begin": (0, 2), "end": (3, 2), "strides": (1, 1)}, "axis 1: range"),
        ("slice", [((3, 5), F32)], {"begin": (0,), "end": (3,), "strides": (1,)}, "must each have 2 entries"),
        ("slice", [((3, 5), F32)], {"begin": (0, 0), "end": (3, 5), "strides": (1, 0)}, "stride 0"),
        ("pad", [((3, 5), F32)], {"pads": (1, 1), "value": 0.0}, "must have 2 \\* rank = 4 entries"),
        ("pad", [((3, 5), F32)], {"pads": (1, -1, 0, 0), "value": 0.0}, "must be non-negative"),
        (
            "pad",
            [((3, 5), F32)],
            {"pads": (1, 1, 0, 0)},
            r"missing attribute 'value' \(takes \['pads', 'value'\]\)",
        ),
        ("take", [((3, 5), F32), ((2,), F32)], {"axis": 0}, "indices have dtype float32"),
        ("take", [((3, 5), F32), ((2,), I64)], {"axis": 2}, "axis 2 is out of range"),
        ("take", [((3, 5), F32)], {"axis": 0}, "takes 2 arguments"),
        ("gather_elements", [((3, 5), F32), ((3,), I64)], {"axis": 1}, "must have data's rank 2"),
        ("gather_elements", [((3, 5), F32), ((4, 2), I64)], {"axis": 1}, "exceed data"),
        ("gather_nd", [((3, 5), F32), ((2,), I64), ((2,), I64)], {"axis": 1}, "exceed data's rank"),
        ("gather_nd", [((3, 5), F32), ((2,), I64), ((3,), I64)], {"axis": 0}, "do not broadcast"),
        ("gather_nd", [((3, 5), F32), ((2,), F32)], {"axis": 0}, "indices have dtype float32"),
        ("broadcast_to", [((3, 2), F32)], {"shape": (4, 3, 5)}, r"cannot broadcast \(3, 2\) to \(4, 3, 5\)"),
        ("broadcast_to", [((3, 1), F32)], {"shape": (3,)}, "cannot broadcast"),
    ],
)
def test_bad_arguments_are_refused_naming_node_and_op(op, args, attrs, reason):
    check_refused(op, args, attrs, reason)


def test_out_of_range_indices_wrap_and_never_read_outside() -> None:
    """Defined, documented behaviour for indices PyTorch and ONNX Runtime would refuse at run time:
    each reads the element at the index modulo the axis size, in the kernel and in the reference."""
    x = normal(4, 5)
    far = np.array([5, 9, -6, 1000003, -(2**40)], dtype="int64")
    wrapped = np.mod(far, 5)
    check_op("take", [x, far], {"axis": 1}, lambda x, i: x[:, wrapped])
    check_op("gather_elements", [x, np.tile(far, (4, 1))], {"axis": 1}, lambda x, i: x[:, wrapped])
    check_op("gather_nd", [x, np.array([7]), far], {"axis": 0}, lambda x, i, j: x[3, wrapped])
