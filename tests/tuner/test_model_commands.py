"""`tuner import` and `tuner run` on model files: the optimized graph and task table, a compiled run
checked against the reference runtime, a tuned record picked up, and bad files refused."""

import io

import numpy as np
import pytest
import torch

from tuner.cli import main
from tuner.tune import tune


def small_cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 5 * 5, 4),
    ).eval()


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich wraps and truncates tables to the terminal's width; the assertions read whole cells."""
    monkeypatch.setenv("COLUMNS", "200")


def export_onnx(path) -> None:
    buffer = io.BytesIO()
    torch.onnx.export(small_cnn(), (torch.randn(1, 3, 11, 10),), buffer, dynamo=False, opset_version=17)
    path.write_bytes(buffer.getvalue())


def test_import_prints_the_fused_graph_and_its_tasks(tmp_path, capsys) -> None:
    model = tmp_path / "cnn.onnx"
    export_onnx(model)
    assert main(["import", str(model)]) == 0
    out = capsys.readouterr().out
    assert "call_tir(fused_conv2d_add_relu" in out and "@T.prim_func" in out
    assert "3 tasks" in out  # the flatten is a view, no task and "conv2d + add + relu" in out
    assert main(["import", str(model), "--unoptimized"]) == 0
    unoptimized = capsys.readouterr().out
    assert "conv2d(" in unoptimized and "call_tir" not in unoptimized


def test_run_checks_against_onnx_runtime_and_uses_tuned_records(tmp_path, capsys) -> None:
    model = tmp_path / "cnn.onnx"
    export_onnx(model)
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).standard_normal((1, 3, 11, 10)).astype("float32"))
    database = f"sqlite:///{tmp_path / 'tune.db'}"
    assert main(["run", str(model), "--input", str(x), "--repeat", "3", "--database", database]) == 0
    captured = capsys.readouterr()
    assert "0 tuned, 3 default" in captured.err
    assert "ONNX Runtime" in captured.out and "tensor-tuner" in captured.out
    error = float(captured.err.split("outputs: ")[1].split()[0])
    assert error < 1e-4

    from compiler import frontend, graph

    (first, *_) = graph.extract_tasks(graph.optimize(frontend.from_onnx(str(model))))
    tune(first.spec, trials=2, database=database)
    assert main(["run", str(model), "--repeat", "2", "--database", database]) == 0
    assert "1 tuned, 2 default" in capsys.readouterr().err


def test_bad_model_files_are_refused_with_the_reason(tmp_path, capsys) -> None:
    model = tmp_path / "cnn.onnx"
    export_onnx(model)
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(model.read_bytes()[:200])
    assert main(["import", str(truncated)]) == 2
    assert "cannot import" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.onnx")]) == 2
    assert "missing.onnx" in capsys.readouterr().err


def test_a_model_whose_input_values_set_shapes_is_refused_by_its_inputs(tmp_path, capsys) -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    axes = helper.make_tensor_value_info("axes", TensorProto.INT64, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])
    reduce = helper.make_node("ReduceSum", ["x", "axes"], ["y"])
    graph = helper.make_graph([reduce], "g", [x, axes], [y])
    model = tmp_path / "axes.onnx"
    model.write_bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    )
    assert main(["import", str(model)]) == 2
    assert "the values of inputs 'axes' set shapes" in capsys.readouterr().err


def test_a_saved_pytorch_program_runs_against_pytorch(tmp_path, capsys) -> None:
    program = torch.export.export(small_cnn(), (torch.randn(1, 3, 11, 10),))
    path = tmp_path / "cnn.pt2"
    torch.export.save(program, path)
    assert main(["import", str(path)]) == 0
    assert "conv2d + add + relu" in capsys.readouterr().out
    assert main(["run", str(path), "--repeat", "2"]) == 0
    captured = capsys.readouterr()
    assert "PyTorch" in captured.out
    assert float(captured.err.split("outputs: ")[1].split()[0]) < 1e-4


def test_tune_model_spends_the_budget_continues_and_exports(tmp_path, capsys) -> None:
    """One budget over the model's 3 tasks, a table and the latencies, a plot; again: it continues
    from the database; then `tuner export` writes a library that computes what ONNX Runtime does."""
    model = tmp_path / "cnn.onnx"
    export_onnx(model)
    database = f"sqlite:///{tmp_path / 'tune.db'}"
    plot = tmp_path / "curve.png"
    command = ["tune-model", str(model), "--trials", "12", "--batch-size", "4", "--repeat", "3"]
    assert main([*command, "--database", database, "--plot", str(plot)]) == 0
    captured = capsys.readouterr()
    estimates = [
        line.split("model estimate ")[1] for line in captured.err.splitlines() if "model estimate" in line
    ]
    assert len(estimates) == 3  # one line per batch of 4
    assert estimates[0] == "unknown until every task has a record (2 without)"
    assert estimates[2].endswith(" ms") and float(estimates[2].split()[0]) > 0
    assert "3 tasks on" in captured.out and "fused_conv2d_add_relu" in captured.out
    for row in ("tensor-tuner, untuned", "tensor-tuner, tuned", "ONNX Runtime", "estimated from"):
        assert row in captured.out
    assert plot.stat().st_size > 0

    from compiler.target import host_hardware
    from tuner.database import Database
    from tuner.search.training_data import hardware_records

    db = Database.open(database)
    first = hardware_records(db, host_hardware().key)
    assert len(first) >= 12
    assert main([*command, "--database", database]) == 0
    again = hardware_records(db, host_hardware().key)
    assert len(again) >= len(first) + 12
    assert len({r.program_hash for r in again if not r.remeasured}) == len(
        [r for r in again if not r.remeasured]
    )
    capsys.readouterr()

    assert main(["export", str(model), "--database", database, "-o", str(tmp_path / "cnn.so")]) == 0
    assert "3 kernels (3 tuned)" in capsys.readouterr().err
    import onnxruntime as ort

    from compiler import graph

    x = np.random.default_rng(0).standard_normal((1, 3, 11, 10)).astype("float32")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {session.get_inputs()[0].name: x})
    (got,) = graph.load_library(tmp_path / "cnn.so")(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_dim_sizes_and_ranges_of_an_open_dimension(tmp_path, capsys) -> None:
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=0)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", 8])
    proto = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model = tmp_path / "rows.onnx"
    model.write_bytes(proto.SerializeToString())
    assert main(["run", str(model), "--repeat", "1"]) == 2
    assert "dimension 0 is 'rows': give it a range or a size" in capsys.readouterr().err
    assert main(["run", str(model), "--repeat", "1", "--dim", "rows=1..100"]) == 0
    captured = capsys.readouterr()
    assert "x: (rows, 8) float32 with rows in [1, 100]" in captured.err
    for rows in (1, 10, 100):
        assert f"rows.onnx at rows={rows}: latency" in captured.out
    errors = [float(part.split()[0]) for part in captured.err.split("outputs: ")[1:]]
    assert len(errors) == 3 and max(errors) < 1e-5
    rows = tmp_path / "rows.npy"
    np.save(rows, np.ones((33, 8), "float32"))
    assert main(["run", str(model), "--repeat", "1", "--dim", "rows=1..100", "--input", str(rows)]) == 0
    assert "at rows=33: latency" in capsys.readouterr().out
    assert main(["export", str(model), "-o", str(tmp_path / "range.so"), "--dim", "rows=1..100"]) == 0
    assert "#define TENSOR_TUNER_SIZE0_MAX 100" in (tmp_path / "range.h").read_text()
    from compiler import graph

    x = np.random.default_rng(0).standard_normal((33, 8)).astype("float32")
    (got,) = graph.load_library(tmp_path / "range.so")(x)
    want = np.exp(np.maximum(x, 0)) / np.exp(np.maximum(x, 0)).sum(axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert main(["export", str(model), "-o", str(tmp_path / "zero.so"), "--dim", "rows=0..100"]) == 2
    assert "cannot export" in capsys.readouterr().err  # 0 rows: no one module for the range
    assert main(["export", str(model), "-o", str(tmp_path / "rows.so"), "--dim", "rows=12"]) == 0
    assert main(["import", str(model), "--dim", "rows=2..30"]) == 0
    assert "the graph and tasks at the largest sizes {'rows': 30}" in capsys.readouterr().err
    database = f"sqlite:///{tmp_path / 'tune.db'}"
    tune = ["tune-model", str(model), "--dim", "rows=1..100", "--trials", "6", "--batch-size", "3"]
    assert main([*tune, "--repeat", "1", "--database", database]) == 0
    captured = capsys.readouterr()
    assert "at sizes [{'rows': 1}, {'rows': 5}, {'rows': 22}, {'rows': 100}]" in captured.err
    for n in (1, 5, 22, 100, 51):  # the tuned sizes, and one between them
        assert f"rows={n} " in captured.out
    run = ["run", str(model), "--repeat", "1", "--dim", "rows=1..100", "--database", database]
    assert main([*run, "--input", str(rows)]) == 0  # 33 rows: no record of its own
    assert "(0 tuned, 2 default)" in capsys.readouterr().err  # 33 rows were not tuned
    np.save(rows, np.ones((33, 9), "float32"))
    assert main([*run, "--input", str(rows)]) == 2
    assert "cannot run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", str(model), "--dim", "rows"])
