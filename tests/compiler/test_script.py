"""The TVMScript reader: the MLC course's programs as written, TVM's spellings, the decorator forms, and a
ScriptError with the line and column for every program it refuses (never a traceback, never a run)."""

from __future__ import annotations

import contextlib
import importlib.util
import pathlib
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import Schedule, build
from compiler.ir import IRModule, PrimFunc
from compiler.script import ScriptError, from_source
from tests.compiler import helpers

MM_RELU = """
import tvm
from tvm.script import tir as T


@tvm.script.ir_module
class MyModule:
    @T.prim_func
    def mm_relu(A: T.Buffer((128, 128), "float32"),
                B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(Y[vi, vj])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
"""


def te_mm_relu(n: int = 128) -> PrimFunc:
    """te's mm_relu (tests/compiler/helpers.py) of n x n x n."""
    return helpers.mm_relu(n, n, n).func


def _scheduled() -> str:
    sch = Schedule(te_mm_relu(16), seed=0)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, [None, 5])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    sch.parallel(i)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(sch.get_block("Y"), k)
    return sch.func.script()


SCHEDULED = _scheduled()


def run(
    func: PrimFunc, *shapes_in: tuple[int, ...], seed: int = 0
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(s).astype("float32") for s in shapes_in]
    outputs = [np.empty(b.shape, b.dtype) for b in func.params[len(shapes_in) :]]
    build(func)(*inputs, *outputs)
    return inputs, outputs


def test_the_course_mm_relu_reads_as_written_and_is_te_s_program():
    module = from_source(MM_RELU)
    assert isinstance(module, IRModule) and list(module) == ["mm_relu"]
    func = module["mm_relu"]
    assert func.attrs == ()  # global_symbol and tir.noalias say nothing here
    assert func.structural_hash() == te_mm_relu().structural_hash()
    (a, b), (c,) = run(func, (128, 128), (128, 128))
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_a_repeated_loop_name_is_renamed_and_block_variables_may_repeat():
    func = from_source(MM_RELU)["mm_relu"]
    text = func.script()
    assert "for i1 in range(128):" in text and "for j1 in range(128):" in text
    assert text.count("vi = T.axis.spatial(128") == 2


@pytest.mark.parametrize(
    ("signature", "header"),
    [
        ('A: T.Buffer[(8, 6), "float32"], B: T.Buffer[(8, 6), "float32"]', ""),
        ("A: T.Buffer((8, 6)), B: T.Buffer(shape=(8, 6), dtype='float32')", ""),
        (
            "a: T.handle, b: T.handle",
            'A = T.match_buffer(a, (8, 6), "float32")\nB = T.match_buffer(b, [8, 6])',
        ),
    ],
)
def test_buffer_declarations_in_every_spelling(signature, header):
    text = """
@T.prim_func
def scale(SIGNATURE):
HEADER
    for i, j in T.grid(8, 6):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2
"""
    text = text.replace("SIGNATURE", signature).replace("HEADER", textwrap.indent(header, "    "))
    func = from_source(text)
    assert [(b.name, b.shape, b.dtype) for b in func.params] == [
        ("A", (8, 6), "float32"),
        ("B", (8, 6), "float32"),
    ]
    (a,), (b,) = run(func, (8, 6))
    np.testing.assert_array_equal(b, a * 2)


def test_root_block_loop_kinds_annotations_predicates_and_tvm_spellings():
    text = """
@T.prim_func
def f(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    with T.block("root"):
        T.reads()
        T.writes()
        T.block_attr({"pragma": 1})
        tmp = T.alloc_buffer((10,), "float32", scope="global")
        for i_0 in T.parallel(3, annotations={"note": "x"}):
            for i_1 in T.vectorized(4):
                with T.block("tmp"):
                    v = T.axis.S(10, i_0 * 4 + i_1)
                    T.where(i_0 * 4 + i_1 < 10)
                    T.block_attr({"tag": (1, 2)})
                    tmp[v] = T.if_then_else(A[v] > 0.0, T.exp(A[v]), T.sigmoid(A[v]))
        for i in T.serial(0, 10):
            with T.block("B"):
                v = T.axis.spatial((0, 10), i)
                B[v] = T.Cast("float32", T.Cast("int32", tmp[v])) + T.cast(v, "float32") + T.min_value(
                    "float32"
                ) * 0.0
"""
    func = from_source(text)
    assert func.attrs == (("pragma", 1),)
    assert [b.name for b in func.allocs] == ["tmp"]
    loops = func.body.stmts[0]
    assert loops.kind == "parallel" and loops.annotations == (("note", "x"),)
    assert loops.body.kind == "vectorized" and loops.body.body.annotations == (("tag", (1, 2)),)
    (a,), (b,) = run(func, (10,))
    tmp = np.where(a > 0, np.exp(a), 1 / (1 + np.exp(-a)))
    want = np.trunc(tmp) + np.arange(10) + np.finfo(np.float32).min * 0
    np.testing.assert_allclose(b, want, rtol=1e-6)
    assert from_source(func.script()) == func


def test_a_script_of_several_functions_is_a_module_that_prints_and_reads_back():
    one = te_mm_relu(8)
    text = one.script() + "\n" + one.script().replace("def mm_relu", "def other")
    module = from_source(text)
    assert isinstance(module, IRModule) and list(module) == ["mm_relu", "other"]
    assert from_source(module.script()) == module
    assert "other" in module and len(module) == 2
    with pytest.raises(KeyError, match="no function 'nope'"):
        module["nope"]


def test_the_decorator_forms_read_a_python_file_without_running_the_bodies(tmp_path: pathlib.Path):
    path = tmp_path / "kernels.py"
    path.write_text(
        MM_RELU.replace(
            "import tvm\nfrom tvm.script import tir as T", "from compiler.script import ir as I, tir as T"
        ).replace("@tvm.script.ir_module", "@I.ir_module")
        + textwrap.dedent(
            """
            @T.prim_func
            def double(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
                for i in range(4):
                    with T.block("B"):
                        v = T.axis.spatial(4, i)
                        B[v] = A[v] + A[v]
            """
        )
    )
    spec = importlib.util.spec_from_file_location("kernels", path)
    assert spec is not None and spec.loader is not None
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    assert kernels.MyModule["mm_relu"].structural_hash() == te_mm_relu().structural_hash()
    assert isinstance(kernels.double, PrimFunc) and kernels.double.name == "double"


def test_a_decorated_function_s_error_gives_the_file_line_and_column(tmp_path: pathlib.Path):
    path = tmp_path / "broken.py"
    path.write_text(
        "from compiler.script import tir as T\n\n\nclass Holder:\n"
        "    @T.prim_func\n"
        "    def f(A: T.Buffer((4,), 'float32'), B: T.Buffer((4,), 'float32')):\n"
        "        for i in range(4):\n"
        "            with T.block('B'):\n"
        "                v = T.axis.spatial(4, i)\n"
        "                B[v] = A[v] + undefined\n"
    )
    spec = importlib.util.spec_from_file_location("broken", path)
    assert spec is not None and spec.loader is not None
    with pytest.raises(ScriptError) as caught:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    e = caught.value
    assert (e.filename, e.line, e.column) == (str(path), 10, 31)
    assert "undefined is not defined here" in str(e)


BODY = """@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"), I: T.Buffer((8,), "int64")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
"""


STORE_IN_A_LOOP = """@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        B[i] = A[i]
"""


def _variant(old: str, new: str) -> str:
    assert old in BODY
    return BODY.replace(old, new)


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        (_variant("A[vi, vj]\n", "A[vi, vj] +\n"), 6, 36, "invalid syntax"),
        (_variant("A[vi, vj]\n", "A[vi]\n"), 6, 25, "A has rank 2, indexed with 1 indices"),
        (_variant("A[vi, vj]\n", "A[vi, vk]\n"), 6, 31, "vk is not defined here"),
        (_variant("A[vi, vj]\n", "A[vi, vj] * 2.5 + I[vi]\n"), 6, 25, "operand dtypes differ"),
        (_variant("A[vi, vj]\n", "A[vi, vj + 0.5]\n"), 6, 31, "the float 0.5 where a int64 is expected"),
        (_variant("A[vi, vj]\n", "T.launch(A[vi, vj])\n"), 6, 25, "T.launch is not a function"),
        (_variant("A[vi, vj]\n", "__import__('os').system('true')\n"), 6, 25, "is not a function here"),
        (_variant("A[vi, vj]\n", "A\n"), 6, 25, "A is a buffer: load an element of it"),
        (_variant("A[vi, vj]\n", "A[vi, vj]\n            B[vi, vj] = 0.0\n"), 7, 13, "one store, its last"),
        (_variant("T.grid(8, 8)", "T.grid(8, 2**40)"), 3, 27, "an integer literal is needed"),
        (_variant("T.grid(8, 8)", "T.grid(8, 1099511627776)"), 3, 27, "an extent is from 1 to"),
        (_variant("for i, j in T.grid(8, 8):", "for i, j in T.thread_binding(8, 8):"), 3, 17, "GPU thread"),
        (
            _variant("for i, j in T.grid(8, 8):", "for i in range(1, 8):\n      for j in range(8):"),
            3,
            20,
            "start at 0",
        ),
        (
            _variant('with T.block("B"):', 'with T.block("B"):\n         with T.block("C"):'),
            5,
            10,
            "blocks do not nest",
        ),
        (
            _variant(
                'vi, vj = T.axis.remap("SS", [i, j])',
                "vi = T.axis.opaque(8, i)\n            vj = T.axis.spatial(8, j)",
            ),
            5,
            18,
            "T.axis.opaque is not an axis kind",
        ),
        (_variant('"float32"), I:', '"float8"), I:'), 2, 59, "a dtype is one of"),
        (
            _variant("B[vi, vj] = A[vi, vj]", "I[vi] = A[vi, vj]"),
            6,
            21,
            "stores a float32 into I, a int64 buffer",
        ),
        (STORE_IN_A_LOOP, 4, 9, "a store belongs in a block"),
        (BODY + BODY, 1, 1, "two functions are named f"),
        ("import os\nprint('hello')\n", 2, 1, "a script holds imports"),
        ("", 1, 1, "no @T.prim_func function"),
        (BODY.replace("@T.prim_func\n", ""), 1, 1, "decorated with @T.prim_func"),
        (
            "@I.ir_module\nclass M:\n    @R.function\n"
            "    def main(x: R.Tensor((4,), 'float32')):\n        return x\n",
            4,
            5,
            "Relax functions",
        ),
    ],
)
def test_a_refused_script_says_where_and_why(text: str, line: int, column: int, message: str):
    with pytest.raises(ScriptError) as caught:
        from_source(text)
    e = caught.value
    assert message in e.message, e
    assert (e.line, e.column) == (line, column), e


def test_hostile_text_is_refused_without_a_traceback():
    deep = "A[vi, vj]" + " + A[vi, vj]" * 5000
    nested = "T.exp(" * 150 + "A[vi, vj]" + ")" * 150
    for value in (deep, nested, "-" * 100_000 + "1.0"):
        with pytest.raises(ScriptError):
            from_source(_variant("A[vi, vj]\n", value + "\n"))
    with pytest.raises(ScriptError, match="exceeds the limit"):
        from_source(BODY + "#" * (1 << 20))
    with pytest.raises(ScriptError, match="is text"):
        from_source(b"@T.prim_func")  # type: ignore[arg-type]


PIECES = [
    "(",
    ")",
    ",",
    "[",
    "]",
    ":",
    "\n",
    "    ",
    "-",
    "1",
    "0",
    "2**40",
    "1.5",
    "True",
    "'x'",
    "vi",
    "k",
    "A",
    "Y",
    "T.",
    "T.axis.",
    "remap",
    "spatial",
    "range(",
    "T.grid(",
    "with ",
    "for ",
    " in ",
    " = ",
    "T.block(",
    "T.init()",
    "T.float32(",
    "T.Cast(",
    "T.max(",
    "T.where(",
    " and ",
    " if ",
    " else ",
    "*",
]


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_a_mangled_script_is_read_or_refused_never_a_traceback(data):
    """Random edits of the course's module and of a scheduled program: each reads, or raises a
    ScriptError; no other exception escapes."""
    text = data.draw(st.sampled_from([MM_RELU, SCHEDULED]))
    for _ in range(data.draw(st.integers(1, 4))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 12)))
        text = text[:start] + data.draw(st.sampled_from(PIECES)) + text[end:]
    with contextlib.suppress(ScriptError):
        from_source(text)
