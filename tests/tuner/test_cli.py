"""The `tuner` command line, embedded: tune with the real local runner, then best and show."""

import json

from compiler.target import Target
from tests.compiler.test_script import MM_RELU
from tuner.baseline import numpy_seconds, openblas_coretype
from tuner.cli import main

WORKLOAD = ["matmul", "M=32", "N=48", "K=16"]


def test_tune_then_best_then_show(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    plot = tmp_path / "curve.png"
    code = main(
        [
            "tune",
            *WORKLOAD,
            "--trials",
            "4",
            "--batch-size",
            "2",
            "--database",
            url,
            "--json",
            "--plot",
            str(plot),
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["trials"] == 4 and summary["best_gflops"] > 0 and summary["numpy_gflops"] > 0
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert main(["best", *WORKLOAD, "--database", url, "--top", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 1 and rows[0]["gflops"] == summary["best_gflops"]
    assert main(["show", *WORKLOAD, "--database", url]) == 0
    shown = capsys.readouterr().out
    assert "@T.prim_func" in shown and "sample_perfect_tile" in shown
    assert main(["evaluate-model", "--database", url, "--json", "--splits", "3"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["candidates"] == 1 and scores["splits"] == 3  # a quarter of 4 records held out
    assert [s["candidates"] for s in scores["per_workload"].values()] == [4]
    assert main(["evaluate-model", "--database", url]) == 0
    table = capsys.readouterr().out
    assert "matmul" in table and "top-1" in table and "all (mean)" in table


def test_a_bad_workload_is_refused_naming_the_field(capsys, tmp_path):
    assert (
        main(["tune", "matmul", "M=32", "N=-4", "K=8", "--database", f"sqlite:///{tmp_path / 'x.db'}"]) == 2
    )
    assert "params.N" in capsys.readouterr().err


def test_tune_a_tvmscript_file(tmp_path, capsys):
    """The course's kernel as a file: tuned as the registry's matmul_relu of its shape, without a numpy
    baseline (a PrimFunc's reference is the IR interpreter); a broken file names its line."""
    script = tmp_path / "kernel.py"
    script.write_text(MM_RELU.replace("128", "16"))
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["tune", "--script", str(script), "--trials", "2", "--database", url, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["trials"] == 2 and summary["numpy_gflops"] is None
    same = ["matmul_relu", "M=16", "N=16", "K=16", "--database", url, "--json"]
    assert main(["best", *same]) == 0
    assert json.loads(capsys.readouterr().out)[0]["gflops"] == summary["best_gflops"]
    script.write_text(MM_RELU.replace("Y[vi, vj] + A", "Y[vi, vj] + Z"))
    assert main(["tune", "--script", str(script), "--database", url]) == 2
    assert "tvmscript: line 23, column 41: Z is not a buffer" in capsys.readouterr().err
    assert main(["tune", "--script", str(tmp_path / "missing.py"), "--database", url]) == 2
    assert "script: cannot read" in capsys.readouterr().err


def test_the_numpy_baseline_runs_in_a_child_process_without_openblas_coretype(monkeypatch):
    """The child refuses to measure when the variable is set, so this fails if it leaks through."""
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert 0 < numpy_seconds({"op": "matmul", "params": {"M": 64, "N": 64, "K": 64}}) < 0.1


def test_an_avx2_target_is_measured_against_openblas_avx2_kernels(monkeypatch):
    """An AVX2 machine emulated on an AVX-512 one runs numpy as such a machine would."""
    x86 = "x86_64-unknown-linux-gnu"
    assert openblas_coretype(Target(x86, "znver3", "+avx2,+fma,-avx512f", 2)) == "Haswell"
    assert openblas_coretype(Target(x86, "znver4", "+avx2,+fma,+avx512f", 2)) is None
    assert openblas_coretype(Target("aarch64-unknown-linux-gnu", "neoverse-n1", "+neon", 2)) is None
    assert openblas_coretype(None) is None
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    avx2 = Target(x86, "znver3", "+avx2,+fma,-avx512f", 2)
    assert 0 < numpy_seconds({"op": "matmul", "params": {"M": 64, "N": 64, "K": 64}}, target=avx2) < 0.1


def test_tune_for_an_emulated_target_keeps_its_records_apart(tmp_path, capsys):
    """Tuned for x86-64-v2 (SSE only) on this machine: its records belong to that kind of hardware."""

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    command = ["tune", *WORKLOAD, "--trials", "2", "--database", url, "--json", "--no-baseline"]
    assert main([*command, "--target", "x86-64-v2"]) == 0
    assert json.loads(capsys.readouterr().out)["trials"] == 2
    assert main(["best", *WORKLOAD, "--database", url, "--json"]) == 1  # none for this machine itself
    capsys.readouterr()
    key = Target.host().emulated("x86-64-v2").key
    assert main(["best", *WORKLOAD, "--database", url, "--json", "--hardware", key]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert main([*command, "--target", "x86-64-v2,+no-such-feature"]) == 2
    assert "bad target" in capsys.readouterr().err
