"""PrimFunc specs, how fused graph kernels travel: every registered operator's function travels as one
and stays the same workload (hash, flops, reference); a fused kernel's built code matches its
interpreted reference; the structure, the limits and the bounds of every load are checked, each
refusal a WorkloadError naming the path of the culprit; random corruptions are refused cleanly."""

from __future__ import annotations

import copy
import pickle
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import Target, te, winograd
from compiler import build as compile_kernel
from compiler.interpret import interpret
from compiler.ir import PrimFunc
from compiler.schedule_rules import default_schedule
from compiler.serialize import to_json
from compiler.workloads import MAX_BLOCKS, MAX_PRIMFUNC_BYTES, WorkloadError, workload_from_spec
from compiler.workloads.primfunc_spec import count_flops, primfunc_spec
from tests.compiler.test_workload_spec import FORMULAS
from tests.compiler.test_workloads import CASES, IDS


def fused_conv2d_add_relu(
    n: int = 1, c: int = 3, h: int = 9, w: int = 7, k: int = 4, name: str = "fused_conv2d_add_relu"
) -> PrimFunc:
    """What fusion makes of conv2d (3x3, padding 1) + bias add + relu: four blocks, inputs data,
    weight, bias; output last."""
    data = te.placeholder((n, c, h, w), "float32", "data")
    weight = te.placeholder((k, c, 3, 3), "float32", "weight")
    bias = te.placeholder((k, 1, 1), "float32", "bias")
    inside = lambda y, x: te.all(y >= 1, y < h + 1, x >= 1, x < w + 1)  # noqa: E731
    pad = te.compute(
        (n, c, h + 2, w + 2),
        lambda b, ch, y, x: te.select(inside(y, x), data[b, ch, y - 1, x - 1], 0.0),
        name="pad_temp",
    )
    rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    conv = te.compute(
        (n, k, h, w),
        lambda b, f, y, x: te.sum(pad[b, rc, y + ry, x + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv2d_nchw",
    )
    add = te.compute(conv.shape, lambda b, f, y, x: conv[b, f, y, x] + bias[f, 0, 0], name="T_add")
    relu = te.compute(conv.shape, lambda b, f, y, x: te.max(add[b, f, y, x], 0.0), name="T_relu")
    return te.create_prim_func([data, weight, bias, relu], name=name)


def conv_reference(data: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, w = data.shape[2:]
    windows = np.stack([padded[:, :, r : r + h, s : s + w] for r in range(3) for s in range(3)], -1)
    conv = np.einsum("nchwt,kct->nkhw", windows, weight.reshape(*weight.shape[:2], 9))
    return np.maximum(conv + bias, 0)


CONV = primfunc_spec(fused_conv2d_add_relu(), 3)


@pytest.fixture(scope="module")
def build():
    return pytest.importorskip("compiler.build").build


# --- every registered operator travels as a PrimFunc --------------------------------------------------


@pytest.mark.parametrize(("op", "params"), [c for c in CASES if c[0] != "cumsum"], ids=IDS[:-1])
def test_registered_ops_travel_as_the_same_workload(op, params):
    w = workload_from_spec({"op": op, "params": params})
    p = workload_from_spec(primfunc_spec(w.func, w.num_inputs))
    assert p.func == w.func and p.func.structural_hash() == w.func.structural_hash()
    assert (p.name, p.num_inputs, p.flops) == (w.name, w.num_inputs, w.flops)
    inputs = p.random_inputs(np.random.default_rng(0))
    for got, want in zip(p.reference(*inputs), w.reference(*inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert workload_from_spec(p.spec) == p  # the spec is canonical
    assert pickle.loads(pickle.dumps(p)) == p  # workloads cross process boundaries


def test_a_scan_is_not_an_unscheduled_fused_kernel():
    w = workload_from_spec({"op": "cumsum", "params": {"M": 5, "N": 3}})
    with pytest.raises(WorkloadError, match="the spatial variables span"):
        workload_from_spec(primfunc_spec(w.func, 1))


@pytest.mark.parametrize(("expr", "inputs"), [(e, i) for e, i, f in FORMULAS if f is not None])
def test_flops_counted_from_the_ir_match_the_expression_language(expr, inputs):
    w = workload_from_spec({"expr": expr, "inputs": inputs})
    assert count_flops(w.func) == w.flops
    assert workload_from_spec(primfunc_spec(w.func, w.num_inputs)).flops == w.flops


# --- a fused kernel ---------------------------------------------------------------------------------


def test_fused_kernel_builds_and_matches_its_interpreted_reference(build):
    w = workload_from_spec(CONV)
    assert w.name == "fused_conv2d_add_relu" and w.num_inputs == 3
    assert w.flops == 2 * 4 * 9 * 7 * 3 * 9 + 2 * 4 * 9 * 7  # multiply-adds, then the add and the max
    inputs = w.random_inputs(np.random.default_rng(1))
    (want,) = w.reference(*inputs)
    np.testing.assert_allclose(want, conv_reference(*inputs), rtol=1e-5, atol=1e-5)
    outputs = w.empty_outputs()
    build(w.func)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], want, rtol=1e-4, atol=1e-4)


def test_the_same_layer_of_two_models_is_one_workload():
    """Built twice, under different function names: one structural hash, which is the identity the
    tuner and the coordinator record under."""
    a = workload_from_spec(primfunc_spec(fused_conv2d_add_relu(name="model_a_layer3"), 3))
    b = workload_from_spec(primfunc_spec(fused_conv2d_add_relu(name="fused_7"), 3))
    assert a.func.structural_hash() == b.func.structural_hash() == CONV_HASH
    other = workload_from_spec(primfunc_spec(fused_conv2d_add_relu(k=5), 3))
    assert other.func.structural_hash() != CONV_HASH


CONV_HASH = fused_conv2d_add_relu().structural_hash()


# --- refusals, each naming its field ------------------------------------------------------------------


def spec_of(*tensors: te.Tensor, inputs: int) -> dict:
    return primfunc_spec(te.create_prim_func(list(tensors)), inputs)


def refusal(spec: dict) -> WorkloadError:
    with pytest.raises(WorkloadError) as e:
        workload_from_spec(spec)
    return e.value


def at(spec: dict, field: str, value: Any) -> dict:
    """A copy of `spec` with the element at dotted path `field` ("primfunc.body[1][0][3]") replaced."""
    out = copy.deepcopy(spec)
    steps = [s for part in re.findall(r"\.?([^.\[\]]+)|\[(\d+)\]", field) for s in part if s]
    node = out
    for step in steps[:-1]:
        node = node[int(step)] if isinstance(node, list) else node[step]
    last = steps[-1]
    node[int(last) if isinstance(node, list) else last] = value
    return out


PAD = "primfunc.body[1][0]" + "[5]" * 4  # the padding block (four loops deep)
CONV_BLOCK = "primfunc.body[1][1]" + "[5]" * 7  # the conv block (four spatial, three reduce loops)
ADD = "primfunc.body[1][2]" + "[5]" * 4
V = lambda name: ["var", name, "int64"]  # noqa: E731
I64 = lambda value: ["const", value, "int64"]  # noqa: E731
F32 = lambda value: ["const", value, "float32"]  # noqa: E731
SPATIAL = [V(v) for v in ("v_b", "v_f", "v_y", "v_x")]

# (field to corrupt, its new value, field of the error, message)
CORRUPTIONS = [
    ("primfunc.attrs", [["global_symbol", "f"]], "primfunc.attrs", "no annotations"),
    ("primfunc.name", "fused conv", "primfunc.name", "is not a name"),
    ("primfunc.body[1][0][3]", "parallel", "primfunc.body[1][0][3]", "serial, got parallel"),
    ("primfunc.body[1][0][4]", [["pragma_unroll", 4]], "primfunc.body[1][0][4]", "no annotations"),
    ("primfunc.body[1][0][2]", 0, "primfunc.body[1][0][2]", "must be >= 1"),
    ("primfunc.body[1][0][5][1]", "b", "primfunc.body[1][0][5][1]", "defined twice"),
    (f"{PAD}[1]", "pad temp", f"{PAD}[1]", "is not a name"),
    (f"{PAD}[1]", "T_add", f"{ADD}[1]", "another block is named T_add"),
    (f"{PAD}[2][0][2]", "O", f"{PAD}[2][0][2]", "must be S or R"),
    (f"{PAD}[2][1][1]", 2, f"{PAD}[2][1][1]", "must be the extent of loop ch, 3"),
    (f"{PAD}[2][1][0]", "v_y", f"{PAD}[2][2][0]", "names another variable"),
    (f"{PAD}[3][0]", V("ch"), f"{PAD}[3][0]", "must be the loop variable b"),
    (f"{PAD}[4][3][0]", V("v_ch"), f"{PAD}[4][3]", "stores at its spatial variables, in order"),
    (f"{PAD}[6]", ["lt", V("v_x"), I64(12)], f"{PAD}[6]", "no predicate"),
    (f"{PAD}[7]", [["meta_schedule.tiling", "SSR"]], f"{PAD}[7]", "only annotation names a schedule rule"),
    (f"{PAD}[7]", [["schedule_rule", "unknown"]], f"{PAD}[7]", "only annotation names a schedule rule"),
    (
        f"{PAD}[4][2][1]",
        ["const", True, "bool"],
        f"{PAD}[4][2][2][2][2]",
        "v_y - 1, may be -1: outside [0, 8]",
    ),
    (f"{PAD}[4][2][2][2][3]", V("x"), f"{PAD}[4][2][2][2][3]", "x (int64) is not an iteration variable"),
    (
        f"{PAD}[4][2][2][2][0]",
        ["cast", "int32", V("v_b")],
        f"{PAD}[4][2][2][2][0]",
        "an index must be int64, got int32",
    ),
    (f"{PAD}[4][2][2][2][0]", I64(2**70), f"{PAD}[4][2][2][2][0]", "does not fit int64"),
    (f"{PAD}[4][2][2][2][1]", ["mul", V("v_ch"), I64(2**62)], f"{PAD}[4][2][2][2][1]", "may overflow int64"),
    (f"{CONV_BLOCK}[2][5][2]", "S", f"{CONV_BLOCK}[2][5][2]", "spatial variables come before reduce"),
    (f"{CONV_BLOCK}[5]", None, f"{CONV_BLOCK}[5]", "a reduction needs an init"),
    (f"{CONV_BLOCK}[5][3][1]", I64(0), f"{CONV_BLOCK}[5]", "the init stores where the block does"),
    (
        f"{CONV_BLOCK}[4][2][0]",
        "sub",
        f"{CONV_BLOCK}[4][2]",
        "a reduction stores op(conv2d_nchw[...], value)",
    ),
    (
        f"{CONV_BLOCK}[5][2]",
        ["cast", "float32", V("v_rc")],
        f"{CONV_BLOCK}[5][2][2]",
        "not a spatial variable",
    ),
    (f"{ADD}[5]", ["store", "T_add", F32(0.0), SPATIAL], f"{ADD}[5]", "only a reduction has an init"),
    (f"{ADD}[4][1]", "conv2d_nchw", f"{ADD}[4][1]", "block conv2d_nchw writes conv2d_nchw already"),
    (f"{ADD}[4][2][1][1]", "T_relu", f"{ADD}[4][2]", "reads T_relu before any block writes it"),
    ("primfunc.body[1][3]", ["seq", []], "primfunc.body[1][3]", "holds one block, found SeqStmt"),
    ("primfunc.params[0].shape", [1, 3, 9, 70000], "primfunc.params[0].shape", "must be <= 65536"),
    ("primfunc.params[0].shape", [1, 3, 9, 7, 1], f"{PAD}[4][2][2]", "data has rank 5"),
    ("primfunc.format", "onnx", "primfunc", "must have format"),
    ("primfunc.params[3].dtype", "float64", "primfunc.body[1][3][5][5][5][5][4]", "float32 value stored"),
    ("primfunc", 3, "primfunc", "must be an object"),
    ("primfunc", {"f": float("nan")}, "primfunc", "must be JSON data"),
    (
        "primfunc.name",
        "x" * MAX_PRIMFUNC_BYTES,
        "primfunc",
        f"exceeds the limit of {MAX_PRIMFUNC_BYTES} bytes",
    ),
    (f"{PAD}[4][2][3]", ["const", 10**400, "float32"], "primfunc", "OverflowError"),
    ("num_inputs", 4, "num_inputs", "must leave at least one output"),
    ("num_inputs", -1, "num_inputs", ">= 0"),
    ("num_inputs", "3", "num_inputs", "must be an integer"),
    ("dtype", "float32", "dtype", "unknown key; expected some of primfunc, num_inputs"),
    ("op", "matmul", "primfunc", "not both"),
]


@pytest.mark.parametrize(("field", "value", "error_field", "message"), CORRUPTIONS)
def test_corruptions_name_their_field(field, value, error_field, message):
    with pytest.raises(WorkloadError) as e:
        workload_from_spec(at(CONV, field, value))
    assert (e.value.field, message in e.value.message) == (error_field, True), str(e.value)


def chain() -> dict:
    """A -> T (an intermediate) -> outputs C and D, each block one loop deep."""
    a = te.placeholder((4,), "float32", "A")
    t = te.compute((4,), lambda i: a[i] * 2.0, name="T")
    c = te.compute((4,), lambda i: t[i] + 1.0, name="C")
    d = te.compute((4,), lambda i: t[i] * t[i], name="D")
    return spec_of(a, c, d, inputs=1)


CHAIN = chain()
C, D = "primfunc.body[1][1][5]", "primfunc.body[1][2][5]"
NESTS = CHAIN["primfunc"]["body"][1]
U = {"name": "U", "shape": [4], "dtype": "float32"}
DATAFLOW = [
    (f"{C}[4][1]", "A", f"{C}[4][1]", "A is an input: blocks write outputs and intermediates"),
    (f"{D}[4][1]", "C", f"{D}[4][1]", "block C writes C already"),
    (f"{C}[4][2][1][1]", "D", f"{C}[4][2]", "reads D before any block writes it"),
    ("primfunc.body[1]", [NESTS[1], NESTS[0], NESTS[2]], "primfunc.body[1][0][5][4][2]", "reads T before"),
    ("primfunc.body[1]", NESTS[:2], "primfunc.params[2]", "no block writes D"),
    ("primfunc.allocs", [*CHAIN["primfunc"]["allocs"], U], "primfunc.allocs[1]", "no block writes U"),
]


@pytest.mark.parametrize(("field", "value", "error_field", "message"), DATAFLOW)
def test_every_buffer_is_written_once_before_it_is_read(field, value, error_field, message):
    with pytest.raises(WorkloadError) as e:
        workload_from_spec(at(CHAIN, field, value))
    assert (e.value.field, message in e.value.message) == (error_field, True), str(e.value)


def test_missing_num_inputs():
    with pytest.raises(WorkloadError, match="num_inputs: missing"):
        workload_from_spec({"primfunc": CONV["primfunc"]})


def test_int_and_bool_outputs_and_bool_intermediates_are_workloads_like_any_other():
    """A model's masks and token ids are values now (issue 43): a fused kernel may write ints or
    bools and keep a bool intermediate; it is checked, built and verified as any other."""
    a = te.placeholder((5, 7), "float32", "A")
    idx = te.placeholder((7,), "int64", "idx")
    positive = te.compute((5, 7), lambda i, j: a[i, j] > 0.0, name="P")
    masked = te.compute((5, 7), lambda i, j: te.select(positive[i, j], a[i, j], 0.0), name="M")
    ints = te.compute((5, 7), lambda i, j: idx[j] * 2 + te.cast("int64", positive[i, j]), name="N")
    flags = te.compute((5, 7), lambda i, j: te.not_(positive[i, j]), name="F")
    workload = workload_from_spec(spec_of(a, idx, masked, ints, flags, inputs=2))
    inputs = workload.random_inputs(np.random.default_rng(0))
    got = workload.empty_outputs()
    compile_kernel(default_schedule(workload.func, Target.host()).func, Target.host(), listings=False)(
        *inputs, *got
    )
    x, i = inputs
    want = [np.where(x > 0, x, 0), i * 2 + (x > 0), x <= 0]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    for g, w in zip(workload.reference(*inputs), want):
        np.testing.assert_array_equal(g, w)


def plus_one(t: te.Tensor, name: str) -> te.Tensor:
    return te.compute(t.shape, lambda *i: t[i] + 1.0, name=name)


def test_limits_of_rank_blocks_and_bytes():
    deep = te.placeholder((1,) * 7, "float32", "deep")
    error = refusal(spec_of(deep, plus_one(deep, "C"), inputs=1))
    assert (error.field, error.message) == ("primfunc.params[0].shape", "rank 7 exceeds the limit of 6")
    a = te.placeholder((4,), "float32", "A")
    t = a
    for k in range(MAX_BLOCKS + 1):
        t = plus_one(t, f"T{k}")
    error = refusal(spec_of(a, t, inputs=1))
    assert (error.field, error.message) == (
        "primfunc.body",
        f"{MAX_BLOCKS + 1} blocks exceed the limit of {MAX_BLOCKS}",
    )
    big = te.placeholder((65536, 65536), "float32", "big")
    error = refusal(
        spec_of(big, te.compute((65536, 65536), lambda i, j: big[i, j] * 2.0, name="C"), inputs=1)
    )
    assert error.field == "primfunc" and "over the limit" in error.message


def test_the_spec_is_canonical_whatever_the_json_says():
    """Constants written as ints, keys in another order: one canonical spec, one workload."""
    loose = copy.deepcopy(CONV)
    loose["primfunc"] = dict(reversed(list(loose["primfunc"].items())))
    loose = at(loose, f"{ADD}[4][2][2][2][1]", I64(0))  # bias[f, 0, 0] as written
    loose = at(loose, f"{PAD}[4][2][3]", ["const", 0, "float32"])  # 0 rather than 0.0
    w = workload_from_spec(loose)
    assert w.spec == workload_from_spec(CONV).spec == {"primfunc": to_json(w.func), "num_inputs": 3}


# --- bounds of loads ----------------------------------------------------------------------------------

A = te.placeholder((5,), "float32", "A")
B = te.placeholder((4,), "float32", "B")
IDX = te.placeholder((6,), "int64", "idx")
IDX32 = te.placeholder((6,), "int32", "idx")


def window_average(a: te.Tensor) -> te.Tensor:
    """Each element over the size of its 3-wide window clipped to the buffer, as pooling does."""
    count = lambda i: te.cast("float32", te.min(i + 2, 5) - te.max(i - 1, 0))  # noqa: E731
    return te.compute((5,), lambda i: a[i] / count(i), name="C")


def guarded_division(a: te.Tensor) -> te.Tensor:
    """A divisor that the branch that loads proves positive."""
    return te.compute((4, 3), lambda i, j: te.select(j > 1, a[i // (j - 1)], 0.0), name="C")


ARANGE = np.arange(5)
ACCEPTED = [
    # concatenation: each side of the select reads only where it runs
    (lambda: te.compute((9,), lambda i: te.select(i < 5, A[i], B[i - 5]), name="C"), [A, B],
     lambda a, b: np.concatenate([a, b])),
    # take, indices wrapped or clamped into range
    (lambda: te.compute((6,), lambda i: A[IDX[i] % 5], name="C"), [A, IDX], lambda a, idx: a[idx % 5]),
    (lambda: te.compute((6,), lambda i: A[te.min(te.max(IDX[i], 0), 4)], name="C"), [A, IDX],
     lambda a, idx: a[np.clip(idx, 0, 4)]),
    (lambda: te.compute((6,), lambda i: A[te.cast("int64", IDX32[i]) % 5], name="C"), [A, IDX32],
     lambda a, idx: a[idx % 5]),
    (lambda: te.compute((3,), lambda i: A[4 - i] + A[i * 2], name="C"), [A], lambda a: a[::-1][:3] + a[::2]),
    (lambda: window_average(A), [A], lambda a: a / (np.minimum(ARANGE + 2, 5) - np.maximum(ARANGE - 1, 0))),
    (lambda: guarded_division(A), [A],
     lambda a: np.where(ARANGE[:3] > 1, a[ARANGE[:4, None] // np.maximum(ARANGE[:3] - 1, 1)], 0)),
]  # fmt: skip


@pytest.mark.parametrize(("compute", "inputs", "formula"), ACCEPTED)
def test_guarded_and_clamped_loads_are_proven_inside(build, compute, inputs, formula):
    w = workload_from_spec(spec_of(*inputs, compute(), inputs=len(inputs)))
    args = w.random_inputs(np.random.default_rng(0))
    (want,) = w.reference(*args)
    np.testing.assert_allclose(want, formula(*args), rtol=1e-6)
    outputs = w.empty_outputs()
    build(w.func)(*args, *outputs)
    np.testing.assert_allclose(outputs[0], want, rtol=1e-6)


def unguarded_division(a: te.Tensor) -> te.Tensor:
    """Both sides of a select that loads nothing run: its condition proves nothing of them."""
    return te.compute((4, 3), lambda i, j: te.select(j > 1, te.cast("float32", i // (j - 1)), 0.0), name="C")


REFUSED = [
    (lambda: te.compute((6,), lambda i: A[i], name="C"), [A], "index 0 of A, v_i, may be 5: outside [0, 4]"),
    (lambda: te.compute((6,), lambda i: A[IDX[i]], name="C"), [A, IDX], "may be -9223372036854775808"),
    (lambda: te.compute((6,), lambda i: A[te.select(IDX[i] < 0, IDX[i] + 5, IDX[i])], name="C"), [A, IDX],
     "may be -9223372036854775803"),
    (lambda: te.compute((6,), lambda i: A[IDX32[i] % 5], name="C"), [A, IDX32], "must be int64, got int32"),
    (lambda: te.compute((6,), lambda i: A[IDX[i] + 1], name="C"), [A, IDX], "may overflow int64"),
    (lambda: te.compute((4, 3), lambda i, j: A[i // (j - 1)], name="C"), [A], "divisor v_j - 1 may be -1"),
    (lambda: unguarded_division(A), [A], "divisor v_j - 1 may be -1"),
]  # fmt: skip


@pytest.mark.parametrize(("compute", "inputs", "message"), REFUSED)
def test_loads_that_may_leave_their_buffer_are_refused(compute, inputs, message):
    error = refusal(spec_of(*inputs, compute(), inputs=len(inputs)))
    assert re.fullmatch(r"primfunc\.body(\[5\])+\[4\]\[2\].*", error.field), str(error)
    assert message in error.message, str(error)


# --- random corruptions -------------------------------------------------------------------------------


def paths(node: Any, prefix: str = "primfunc") -> list[str]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, f"{prefix}.{k}")
    elif isinstance(node, list):
        for k, v in enumerate(node):
            out += paths(v, f"{prefix}[{k}]")
    return out


PATHS = paths(CONV["primfunc"])
JUNK = st.sampled_from(
    [0, 1, -1, 2, 3, 2**63, 1.5, "", "S", "R", "v_x", "v_rc", "x", "add", "mul", "T_add", "data", "int32",
     "bool", "float64", None, True, [], {}, V("v_x"), V("v_ry"), I64(-1), I64(12), F32(1.5),
     ["load", "data", [I64(0)] * 4], ["load", "T_relu", [I64(0)] * 4], ["floordiv", V("v_x"), I64(0)],
     ["select", ["const", True, "bool"], I64(1), I64(2)], ["store", "T_add", F32(0.0), SPATIAL]]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PATHS), JUNK), min_size=1, max_size=3))
def test_random_corruptions_are_refused_or_still_computable(changes):
    spec = CONV
    for field, value in changes:
        try:
            spec = at(spec, field, value)
        except (IndexError, KeyError, TypeError, ValueError):
            continue  # an earlier change removed the path
    try:
        w = workload_from_spec(spec)
    except WorkloadError as e:
        assert e.field.split(".")[0].split("[")[0] in ("primfunc", "num_inputs"), str(e)
        return
    inputs = w.random_inputs(np.random.default_rng(0))  # what is accepted can be interpreted
    assert [o.shape for o in interpret(w.func, *inputs)] == [b.shape for b in w.outputs]
    assert workload_from_spec(w.spec) == w


def test_a_block_naming_a_known_schedule_rule_travels():
    """A Winograd conv's product names its schedule rule: such a kernel is a valid spec, the same
    workload on the other side."""
    x = te.placeholder((1, 4, 6, 6), name="x")
    w = te.placeholder((4, 4, 4, 16), name="w")
    conv = winograd.conv2d_winograd_nchw(x, w, (1, 1, 1, 1), 16, "conv")
    func = te.create_prim_func([x, w, conv], name="winograd")
    assert workload_from_spec(primfunc_spec(func, 2)).func.structural_hash() == func.structural_hash()
