"""TVM's spellings of the scheduling API, as the MLC course writes them: `Schedule(mod)`, `sch.mod`,
`get_block(name, func_name=)`, `sch.get`, `get_producers`/`get_consumers`, `with_attr`, `show()`,
callable tensors, a Schedule that samples afresh unless it is given a seed (its trace still replays
exactly), and `build(mod, target="llvm")` with `nd.array`, `cpu()` and `time_evaluator`."""

import numpy as np
import pytest

import compiler
from compiler import Schedule, ScheduleError, te
from compiler.ir import IRModule
from compiler.script import from_source
from tests.compiler.test_script import te_mm_relu


def test_a_schedule_of_a_module_works_on_its_one_function():
    func = te_mm_relu(16)
    sch = Schedule(IRModule((func,)))
    assert sch.func == func and sch.mod == IRModule((func,))
    block = sch.get_block("Y", func_name="mm_relu")
    loops = sch.get_loops(block)
    assert sch.get(block).name == "Y" and sch.get(loops[1]).extent == 16  # type: ignore[union-attr]
    sch.split(loops[1], [None, 4])
    assert sch.mod["mm_relu"] == sch.func != func
    with pytest.raises(ScheduleError, match="works on mm_relu, not main"):
        sch.get_block("Y", func_name="main")
    other = IRModule((func, from_source(func.script().replace("def mm_relu", "def other"))))
    with pytest.raises(ScheduleError, match="one function; the module holds mm_relu, other"):
        Schedule(other)


def test_with_attr_and_show(capsys):
    func = te_mm_relu(8).with_attr("global_symbol", "mm").with_attr("note", 1).with_attr("global_symbol", "x")
    assert func.attrs == (("note", 1), ("global_symbol", "x"))
    func.show()
    IRModule((func,)).show()
    out = capsys.readouterr().out
    assert "T.func_attr({'note': 1, 'global_symbol': 'x'})" in out and "@I.ir_module" in out


def test_tensors_are_callable_as_in_tvm():
    A = te.placeholder((3, 4), name="A")
    B = te.compute((3, 4), lambda *i: A(*i) + 1.0, name="B")
    same = te.compute((3, 4), lambda i, j: A[i, j] + 1.0, name="B")
    assert te.create_prim_func([A, B]).structural_hash() == te.create_prim_func([A, same]).structural_hash()


def test_a_schedule_without_a_seed_samples_afresh_and_its_trace_replays():
    func = te_mm_relu(64)

    def tiles(sch: Schedule) -> list[int]:
        return [int(sch.get(t)) for t in sch.sample_perfect_tile(sch.get_loops(sch.get_block("Y"))[1], n=3)]

    unseeded = [Schedule(func) for _ in range(12)]
    assert len({tuple(tiles(s)) for s in unseeded}) > 1
    assert tiles(Schedule(func, seed=7)) == tiles(Schedule(func, seed=7))
    for sch in unseeded:
        assert sch.trace.apply(func).trace == sch.trace


def test_producers_and_consumers():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: B[i] + C[i], name="D")
    sch = Schedule(te.create_prim_func([A, D]), seed=0)
    names = lambda rvs: [rv.name for rv in rvs]  # noqa: E731
    assert names(sch.get_consumers(sch.get_block("B"))) == ["C", "D"]
    assert names(sch.get_producers(sch.get_block("D"))) == ["B", "C"]
    assert sch.get_producers(sch.get_block("B")) == [] and sch.get_consumers(sch.get_block("D")) == []


def test_a_module_builds_into_a_library_of_its_functions_that_times_them():
    func = te_mm_relu(16)
    lib = compiler.build(IRModule((func,)), target="llvm -mcpu=native")
    assert list(lib) == ["mm_relu"] and isinstance(lib["mm_relu"], compiler.Kernel)
    a = compiler.nd.array(np.arange(256, dtype="float32").reshape(16, 16) / 256)
    c = compiler.nd.empty((16, 16), dtype="float32")
    lib["mm_relu"](a, a, c)
    got = c.numpy()
    assert type(got) is np.ndarray and np.allclose(got, np.maximum(a @ a, 0), rtol=1e-5)
    result = lib.time_evaluator("mm_relu", compiler.cpu(), number=3, repeat=4, min_repeat_ms=1)(a, a, c)
    assert len(result.results) == 4 and result.min <= result.median <= result.max
    assert 0 < result.mean < 1e-3
    with pytest.raises(KeyError, match="no function 'main'"):
        lib["main"]
    with pytest.raises(ValueError, match="this machine's CPU, 'llvm'"):
        compiler.build(func, target="cuda")
