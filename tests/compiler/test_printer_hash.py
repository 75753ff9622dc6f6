"""The printer shows TVMScript-like text; the structural hash identifies workloads across processes."""

import os
import pathlib
import subprocess
import sys
import textwrap

from compiler import Schedule, te

ROOT = pathlib.Path(__file__).resolve().parents[2]


def mm_relu(n=16, k_name="k"):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name=k_name)
    Y = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((n, n), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    return te.create_prim_func([A, B, C], name="mm_relu")


def test_script_shows_blocks_axes_and_init():
    text = mm_relu().script()
    for fragment in (
        "@T.prim_func",
        "def mm_relu(A: T.Buffer((16, 16), 'float32')",
        "Y = T.alloc_buffer((16, 16), 'float32')",
        'with T.block("Y"):',
        "v_k = T.axis.reduce(16, k)",
        "with T.init():",
        "Y[v_i, v_j] = Y[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]",
        "C[v_i, v_j] = T.max(Y[v_i, v_j], T.float32(0.0))",
    ):
        assert fragment in text, fragment


def test_script_shows_loop_kinds_guards_and_annotations():
    sch = Schedule(mm_relu(), seed=0)
    i, j, _ = sch.get_loops(sch.get_block("Y"))
    _, j1 = sch.split(j, [None, 5])
    sch.vectorize(j1)
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    text = sch.func.script()
    assert "T.vectorized(5)" in text
    assert "T.where(j_0 * 5 + j_1 < 16)" in text
    assert "'pragma_auto_unroll_max_step': 16" in text


def test_hash_ignores_variable_names_but_not_structure():
    assert mm_relu(k_name="k").structural_hash() == mm_relu(k_name="r").structural_hash()
    assert mm_relu(16).structural_hash() != mm_relu(17).structural_hash()
    sch = Schedule(mm_relu(), seed=0)
    sch.split(sch.get_loops(sch.get_block("Y"))[1], [4, 4])
    assert sch.func.structural_hash() != mm_relu().structural_hash()


def test_hash_is_the_same_in_another_process():
    code = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, "tests/compiler")
        from test_printer_hash import mm_relu
        print(mm_relu().structural_hash())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "123"},
    )
    assert out.stdout.strip() == mm_relu().structural_hash()
