"""One kernel tuned for a range of sizes (issue 40): a symbolic function tuned at a few sizes under
one budget (static workloads and records), then one kernel whose buckets run the tuned traces;
outputs checked against numpy at tuned, untuned and extreme sizes."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from compiler import Schedule, build, te
from compiler.buckets import default_buckets
from compiler.ir import PrimFunc, structural_equal
from compiler.schedule import ScheduleError, TraceError
from compiler.schedule_rules.config import RuleConfig
from compiler.schedule_rules.default import default_schedule, symbolic_schedule
from compiler.target import Target
from tuner import compile_best, compile_range, tune_range
from tuner.cli import main
from tuner.range_tuning import dimension_of, range_sizes
from tuner.search.space import rule_space

RNG = np.random.default_rng(0)


def matmul(high: int = 96) -> PrimFunc:
    n = te.var("n", range=(1, high))
    x, w = te.placeholder((n, 48), name="X"), te.placeholder((48, 40), name="W")
    k = te.reduce_axis((0, 48), name="k")
    y = te.compute((n, 40), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="Y")
    return te.create_prim_func([x, w, y], name="mm")


def check(kernel, sizes) -> None:
    w = RNG.standard_normal((48, 40)).astype("float32")
    for m in sizes:
        x = RNG.standard_normal((m, 48)).astype("float32")
        out = np.full((m + 1, 40), 7.0, "float32")
        kernel(x, w, out[:m])
        np.testing.assert_allclose(out[:m], x @ w, rtol=1e-4, atol=1e-4, err_msg=f"n = {m}")
        assert (out[m] == 7).all()


def test_a_range_tuned_at_two_sizes_runs_every_size_from_one_kernel(tmp_path) -> None:
    database = f"sqlite:///{tmp_path / 'tune.db'}"
    func = matmul()
    result = tune_range(func, trials=8, sizes=[40, 6], database=database, batch_size=4)
    assert result.sizes == [6, 40]
    assert all(record is not None for record in result.best.values())
    assert {b.upto for b in result.buckets.buckets if b.tuned} <= {6, 40, 96}
    assert sum(r.trials for r in result.scheduled.results) == 8
    check(result.kernel, (1, 5, 6, 7, 39, 40, 41, 96))
    check(compile_range(func, sizes=[6, 40], database=database), (2, 40, 96))
    # The sizes are ordinary workloads: their best record builds the static kernel too.
    static = compile_best(func.specialize({"n": 40}), database=database)
    x, w = RNG.standard_normal((40, 48)).astype("float32"), RNG.standard_normal((48, 40)).astype("float32")
    out = np.empty((40, 40), "float32")
    static(x, w, out)
    np.testing.assert_allclose(out, x @ w, rtol=1e-4, atol=1e-4)


def test_untuned_a_range_builds_the_default_buckets(tmp_path) -> None:
    check(compile_range(matmul(), database=f"sqlite:///{tmp_path / 'empty.db'}"), (1, 3, 96))


def test_tuned_sizes_are_buckets_and_a_trace_that_does_not_replay_is_the_default() -> None:
    func, target = matmul(), Target.host()
    trace = default_schedule(func.specialize({"n": 40}), target).trace
    other = te.placeholder((8, 8), name="A")
    stranger = default_schedule(  # another function's trace: its blocks are not there
        te.create_prim_func([other, te.compute((8, 8), lambda i, j: other[i, j] + 1.0, name="B")]), target
    ).trace
    buckets = default_buckets(func, target, {40: trace, 50: stranger}).buckets
    assert buckets[-1].upto == 96
    # 40's trace (the default schedule at 40) makes one bucket with 48, the bound that keeps a trace
    # to the lengths near its own, where the default there is the same program (on AVX-512; AVX2's
    # register tile differs); 50 and above: the stranger did not replay.
    same = structural_equal(
        trace.apply(func).func, symbolic_schedule(func, target, {func.size_vars[0]: 48}).func
    )
    assert {b.upto for b in buckets if b.tuned} == ({48} if same else {40})
    fallback = default_buckets(func, target, {50: stranger}).buckets
    assert fallback[-1].func == default_buckets(func, target).buckets[-1].func
    assert not any(b.tuned for b in fallback)


def test_sizes_outside_the_range_and_several_dimensions_are_refused() -> None:
    with pytest.raises(ValueError, match=r"must be in n's range \[1, 96\]"):
        range_sizes(matmul(), [0, 50])
    assert range_sizes(matmul(512)) == [1, 8, 64, 512]
    m, n = te.var("m", range=(1, 8)), te.var("n", range=(1, 8))
    a = te.placeholder((m, n), name="A")
    two = te.create_prim_func([a, te.compute((m, n), lambda i, j: a[i, j] * 2.0, name="B")])
    with pytest.raises(ValueError, match="one symbolic dimension; it has m, n"):
        dimension_of(two)


def test_the_command_line_tunes_a_registry_range_and_a_symbolic_script(tmp_path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    command = ["tune", "matmul", "M=n:1..40", "N=16", "K=8", "--trials", "4", "--batch-size", "2"]
    assert main([*command, "--sizes", "40,1", "--database", url, "--json", "--no-baseline"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["dimension"] == "n" and [r["size"] for r in summary["sizes"]] == [1, 40]
    assert sum(r["trials"] for r in summary["sizes"]) == 4
    assert all(r["best_record"] is not None for r in summary["sizes"])
    assert (
        main(["best", "matmul", "M=40", "N=16", "K=8", "--database", url, "--json"]) == 0
    )  # ordinary records
    capsys.readouterr()
    refused = {
        ("best", "matmul", "M=1..40", "N=16", "K=8"): "a range is tuned with `tuner tune`",
        ("tune", "matmul", "M=1..40", "N=1..8", "K=8"): "one parameter may be a range",
        ("tune", "matmul", "M=1..40", "N=16", "K=8", "--sizes", "0,5"): r"sizes \[0\] are outside the range",
        (
            "tune",
            "matmul",
            "M=8",
            "N=16",
            "K=8",
            "--sizes",
            "4",
        ): "--sizes needs a parameter given",
        ("tune", "matmul", "M=9..4", "N=16", "K=8"): "needs 1 <= low <= high",
        ("tune", "matmul", "M=1..99999", "N=16", "K=8"): "at M = 99999: must be <= 65536",
        ("tune", "matmul", "M=1..40", "N=16", "K=8", "M=5"): "params.M: given twice",
        ("tune", "matmul", "M=1..40", "N", "K=8"): "params.N: parameters are NAME=VALUE",
        (
            "tune",
            "--spec",
            '{"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}',
            "M=1..8",
        ): "beside no spec",
        ("tune", "matmul", "M=1..40", "N=16", "K=8", "--trials", "2"): "too few trials",
        ("tune", "matmul", "M=1..40", "N=16", "K=8", "--plot", "x.png"): "draws one workload's curve",
    }
    for args, message in refused.items():
        assert main([*args, "--database", url]) == 2, args
        assert re.search(message, capsys.readouterr().err), args
    script = tmp_path / "kernel.py"
    script.write_text(matmul(high=24).script())
    command = ["tune", "--script", str(script), "--trials", "2", "--sizes", "3,24"]
    assert main([*command, "--database", url, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["workload"] == "mm n=1..24" and [r["size"] for r in summary["sizes"]] == [3, 24]
    # The output first: refused as the static path refuses it; --num-inputs is read (it counts the
    # leading parameters, so here it makes W an output that is read before it is written).
    x, w, y = (
        "X: T.Buffer((n, 48), 'float32')",
        "W: T.Buffer((48, 40), 'float32')",
        "Y: T.Buffer((n, 40), 'float32')",
    )
    text = matmul(high=24).script().replace(f"def mm({x}, {w}, {y}):", f"def mm({y}, {x}, {w}):")
    assert text != matmul(high=24).script()
    script.write_text(text)
    assert main([*command, "--database", url]) == 2
    assert "give num_inputs" in capsys.readouterr().err
    assert main([*command, "--num-inputs", "2", "--database", url]) == 2
    assert "at n = 3" in capsys.readouterr().err


@pytest.mark.parametrize("size", [3, 40])
def test_programs_the_search_samples_at_one_size_replay_over_the_range_correctly(size: int) -> None:
    """Traces sampled from the tuner's space at one static size, replayed on the symbolic function:
    each computes every length in the range (checked at its ends, at the size and past it, nothing
    written past n). A block placed over a run-time loop covers the loop's largest range, guarded by
    its domain (before that, a quarter of these programs did not replay and left the default)."""
    func, target = matmul(64), Target.host()
    space = rule_space(RuleConfig.for_target(target))
    replayed = 0
    w = RNG.standard_normal((48, 40)).astype("float32")
    for seed in range(12):
        sch = Schedule(func.specialize({"n": size}), seed=seed)
        space(sch)
        try:
            symbolic = sch.trace.apply(func).func
        except (ScheduleError, TraceError):
            continue
        replayed += 1
        kernel = build(symbolic, target)
        for m in (1, size, size + 1, 64):
            x = RNG.standard_normal((m, 48)).astype("float32")
            out = np.full((m + 1, 40), 7.0, "float32")
            kernel(x, w, out[:m])
            np.testing.assert_allclose(out[:m], x @ w, rtol=1e-4, atol=1e-4, err_msg=f"seed {seed}, n = {m}")
            assert (out[m] == 7).all()
    assert replayed == 12, f"{replayed} of 12 sampled programs replayed over the range"
