"""`make bench-peers` without TVM (CI never installs it): the suite is valid workloads with the flops
both sides are judged by, every operator in it has a TVM version and a numpy baseline, the baselines
compute what our references compute, the report keeps failures out of its means, and a stopped run
resumes without tuning again what it finished."""

import ast
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench import peers
from bench.peer_numpy import BASELINES, numpy_kernel
from bench.peer_suite import SUITE
from bench.peers import Entry, Side, child_env, cost_model_ranking, load_sides, parse_args, save_sides, table
from compiler.target import Target, host_hardware
from compiler.workloads import workload_from_spec
from runner import NullRunner
from tuner.tune import tune

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def expected_flops(op: str, p: dict) -> int:
    """Two flops per multiply-add, counted from the layer's definition."""
    if op == "matmul":
        return 2 * p["M"] * p["N"] * p["K"]
    if op == "batch_matmul":
        return 2 * p["B"] * p["M"] * p["N"] * p["K"]
    oh = _out(p["H"], p["R"], p["stride"], p["padding"])
    ow = _out(p["W"], p["S"], p["stride"], p["padding"])
    dense = op in ("conv2d_nchw", "conv2d_nchw_kblock")
    per_output = p["R"] * p["S"] * (p["C"] if dense else 1)
    channels = p["K"] if dense else p["C"]
    return 2 * p["N"] * channels * oh * ow * per_output


def test_the_suite_is_real_layers_of_every_kind():
    names = [s.name for s in SUITE]
    assert len(SUITE) >= 16
    assert len(set(names)) == len(names)
    ops = {s.spec["op"] for s in SUITE}
    assert ops == {"conv2d_nchw", "conv2d_nchw_kblock", "depthwise_conv2d_nchw", "matmul", "batch_matmul"}
    assert any(s.spec["op"] == "matmul" and s.spec["params"]["M"] == 1 for s in SUITE)  # batch-1 dense
    assert any(s.spec["params"].get("stride", 1) == 2 for s in SUITE)


@pytest.mark.parametrize("shape", SUITE, ids=lambda s: s.name)
def test_every_shape_is_a_workload_with_the_layers_flops(shape):
    workload = workload_from_spec(shape.spec)
    assert workload.flops == expected_flops(shape.spec["op"], workload.spec["params"])


def test_every_operator_has_a_tvm_version_and_a_numpy_baseline():
    """tvm_peer.py imports TVM, so its table of operators is read from its source."""
    tree = ast.parse((BENCH / "tvm_peer.py").read_text())
    (ops,) = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "TVM_WORKLOADS"
    ]
    tvm_ops = {key.value for key in ops.keys}
    for shape in SUITE:
        assert shape.spec["op"] in tvm_ops
        assert shape.spec["op"] in BASELINES


def spec(op: str, **params: int) -> dict:
    return {"op": op, "params": params}


SMALL = [
    spec("conv2d_nchw", N=2, C=5, H=11, W=11, K=7, R=3, S=3, stride=2, padding=1),
    spec("conv2d_nchw", N=1, C=6, H=9, W=9, K=4, R=1, S=1),
    spec("conv2d_nchw", N=1, C=3, H=20, W=20, K=4, R=7, S=7, stride=2, padding=3),
    spec("conv2d_nchw_kblock", N=2, C=5, H=9, W=8, K=6, R=3, S=3, stride=2, padding=1, kb=3),
    spec("conv2d_nchw_kblock", N=1, C=6, H=7, W=7, K=8, R=1, S=1, kb=4),
    spec("depthwise_conv2d_nchw", N=1, C=6, H=13, W=13, R=3, S=3, stride=2, padding=1),
    spec("depthwise_conv2d_nchw", N=2, C=4, H=7, W=7, R=3, S=3, padding=1),
    spec("matmul", M=7, N=5, K=3),
    spec("batch_matmul", B=3, M=4, N=5, K=6),
]


@pytest.mark.parametrize("small", SMALL, ids=lambda s: s["op"])
def test_numpy_baselines_compute_the_reference(small):
    workload = workload_from_spec(small)
    inputs = workload.random_inputs(np.random.default_rng(0))
    (out,) = workload.empty_outputs()
    numpy_kernel(small["op"], workload.spec["params"])(*inputs, out)
    np.testing.assert_allclose(out, workload.reference(*inputs)[0], rtol=1e-4, atol=1e-4)


def _entry(ours_secs: float, tvm_secs: float, tvm_error: str | None = None) -> Entry:
    shape = SUITE[0]
    entry = Entry(shape, workload_from_spec(shape.spec), 64, Side(10.0, [1.0, 2.0]), Side(40.0, [2.0]))
    entry.ours.secs, entry.tvm.secs, entry.numpy_secs = ours_secs, tvm_secs, ours_secs
    entry.tvm.error = tvm_error
    return entry


def test_the_table_leaves_failures_out_of_its_geometric_means():
    entries = [_entry(1.0, 2.0), _entry(1.0, 0.5), _entry(1.0, 1.0, tvm_error="wrong result")]
    *rows, means = table(entries, peak=100.0)
    assert len(rows) == 2 + 3
    cells = [c.strip() for c in means.strip("|").split("|")]
    assert cells[3] == "**1.00** (of 2)"  # ours / TVM: 2.0 and 0.5; the wrong TVM kernel is left out
    assert cells[4] == "**1.00**"  # ours / numpy, all three
    assert cells[9] == "**0.25**"  # wall: 10 s against 40 s
    assert "| n/a |" in rows[-1]


def test_numpy_runs_avx2_kernels_only_for_a_target_without_avx512(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    avx512 = Target("x86_64-unknown-linux-gnu", "znver4", "+avx2,+fma,+avx512f", 2)
    avx2 = Target("x86_64-unknown-linux-gnu", "znver3", "+avx2,+fma,-avx512f", 2)
    assert "OPENBLAS_CORETYPE" not in child_env(avx512) and "PEER_OPENBLAS_CORETYPE" not in child_env(avx512)
    assert child_env(avx2)["PEER_OPENBLAS_CORETYPE"] == "Haswell"
    assert child_env(avx2)["TVM_NUM_THREADS"] == "2"


def test_the_cost_model_ranking_is_scored_on_the_tuning_runs_records(tmp_path):
    hardware = host_hardware()
    spec = {"op": "matmul", "params": {"M": 32, "N": 48, "K": 16}}
    database = f"sqlite:///{tmp_path / 'ours.db'}"
    tune(spec, trials=24, database=database, runner=NullRunner(), hardware=hardware)
    scores = cost_model_ranking(tmp_path / "ours.db", hardware)
    assert scores is not None and set(scores) == {"top1", "top5", "random_top1", "random_top5"}
    assert 0 < scores["top1"] <= scores["top5"] <= 1
    assert 0 < scores["random_top1"] < scores["random_top5"] <= 1


def test_a_tuned_shapes_outcome_is_saved_and_loaded_whole_on_its_own_hardware(tmp_path):
    ours = Side(12.5, [1.0, 3.0], "trace", tmp_path / "ours.so", ranking={"top1": 0.9})
    tvm = Side(40.0, [], error="tvm_peer.py exited 1")
    hardware = host_hardware()
    save_sides(tmp_path, hardware, ours, tvm)
    assert load_sides(tmp_path, hardware) == (ours, tvm)
    assert load_sides(tmp_path / "never-tuned", hardware) is None
    avx2 = Target("x86_64-unknown-linux-gnu", "znver3", "+avx2,+fma,-avx512f", 2)
    assert load_sides(tmp_path, replace(hardware, target=avx2)) is None


def test_resume_continues_a_kept_run_and_only_a_kept_one(tmp_path, capsys):
    (tmp_path / "mlp.fc1@64").mkdir()
    with pytest.raises(SystemExit):
        parse_args(["--keep", str(tmp_path)])
    assert "--resume continues it" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--resume"])
    assert parse_args(["--keep", str(tmp_path), "--resume"]).resume


def test_resuming_skips_saved_shapes_and_starts_half_done_ones_afresh(tmp_path, monkeypatch):
    done, half = SUITE[0], SUITE[1]
    (tmp_path / "done").mkdir()
    hardware = host_hardware()
    save_sides(tmp_path / "done", hardware, Side(1.0, [5.0]), Side(2.0, [6.0]))
    (tmp_path / "half" / "ours").mkdir(parents=True)
    (tmp_path / "half" / "ours" / "ours.db").write_text("an earlier run's records")
    tuned = []

    def fake_tune(wl, trials, work, hardware):
        tuned.append(work)
        assert not any(work.iterdir())  # from empty databases
        return Side(3.0, [7.0])

    monkeypatch.setattr(peers, "tune_ours", fake_tune)
    monkeypatch.setattr(peers, "tune_tvm", fake_tune)
    assert peers.tuned_entry(done, 64, tmp_path / "done", hardware, resume=True).ours.curve == [5.0]
    assert tuned == []
    entry = peers.tuned_entry(half, 64, tmp_path / "half", hardware, resume=True)
    assert tuned == [tmp_path / "half" / "ours", tmp_path / "half" / "tvm"]
    assert load_sides(tmp_path / "half", hardware) == (entry.ours, entry.tvm)
