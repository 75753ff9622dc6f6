"""Models as service tasks, in process (the loop ticked by hand, workers played by the test): a small
MLP from submission to done under one budget, its progress and latency curve, its artifact compiled
from the best records and checked against numpy, ownership, cancel, and the refusals of bad models."""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import get_args

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from compiler import frontend, te
from compiler.graph import load_library
from compiler.graph.serialize import module_to_json
from runner import MODEL_TIMING
from tests.service.conftest import Api, in_process_client
from tests.service.onnx_models import encoded, file_reader, mlp, open_batch_mlp, reference
from tests.service.test_api import lease, measure, register, submit
from tuner.cli import main
from tuner.cli import service as commands
from tuner.cli import service_models as model_commands
from tuner.database import NewRecord, trace_hash
from tuner.database import tuned_models as m
from tuner.search.driver import SearchDriver
from tuner.service.client import Client
from tuner.service.model_loop import BATCH_TRIALS
from tuner.service.routes import models as models_route
from tuner.service.schemas import ModelDetail, Scheduler
from tuner.task_scheduler import SCHEDULERS

RNG = np.random.default_rng(1)


def submit_model(api: Api, trials: int = 40, role: str = "client", **extra) -> dict:
    body = {"onnx": encoded(mlp()), "trials": trials, "name": "mlp", **extra}
    body = {key: value for key, value in body.items() if value is not None}
    reply = api.client.post("/v1/models", json=body, headers=api.as_(role))
    assert reply.status_code == 201, reply.text
    return reply.json()


def model(api: Api, model_id: int, role: str = "client") -> dict:
    reply = api.client.get(f"/v1/models/{model_id}", headers=api.as_(role))
    assert reply.status_code == 200, reply.text
    return reply.json()


def run_to_end(api: Api, worker: int, model_id: int, secs: float = 1e-3) -> dict:
    """Tick and measure until the model ends; each layer's times fall as it is measured more."""
    for _ in range(200):
        api.loop.tick()
        leased = lease(api, worker, 8)
        if leased:
            measure(api, worker, leased, secs)
        detail = model(api, model_id)
        if detail["status"] not in ("pending", "running"):
            return detail
    raise AssertionError(f"model {model_id} did not end: {detail}")


def test_a_model_is_tuned_under_one_budget_and_reports_its_latency(api: Api):
    worker = register(api)
    submitted = submit_model(api, trials=40)
    assert (submitted["status"], submitted["tasks"], submitted["trials"]) == ("pending", 2, 40)
    assert submitted["estimated_secs"] is None
    api.loop.tick()
    first = model(api, submitted["id"])
    # Every layer gets a first batch at once; the rest of the budget waits for the scheduler.
    assert [layer["trials"] for layer in first["layers"]] == [BATCH_TRIALS, BATCH_TRIALS]
    done = run_to_end(api, worker, submitted["id"])
    assert done["status"] == "done", done["message"]
    layers = done["layers"]
    assert sum(layer["trials_done"] for layer in layers) == done["trials_done"] == 40
    assert [layer["weight"] for layer in layers] == [1, 1]
    assert all(layer["status"] == "done" for layer in layers)
    total = sum(layer["weight"] * layer["best_secs"] for layer in layers)
    assert done["estimated_secs"] == pytest.approx(total)
    assert sum(layer["share"] for layer in layers) == pytest.approx(1.0)
    assert all(
        layer["gflops"] == pytest.approx(layer["flops"] / layer["best_secs"] / 1e9) for layer in layers
    )
    # One point per finished batch: the two first batches, then 40 - 32 = 8 trials in one more.
    curve = done["curve"]
    assert [p["trials"] for p in curve][-1] == 40 and len(curve) == 3
    assert curve[0]["estimated_secs"] is None or curve[0]["estimated_secs"] >= curve[-1]["estimated_secs"]
    assert curve[-1]["estimated_secs"] == pytest.approx(total)
    listed = api.client.get("/v1/models", headers=api.as_("client")).json()
    assert [m["id"] for m in listed] == [submitted["id"]]


def test_the_artifact_is_built_from_the_best_records_and_computes_the_model(api: Api, tmp_path: Path):
    worker = register(api)
    submitted = submit_model(api, trials=4)
    path = f"/v1/models/{submitted['id']}/artifact"
    api.loop.tick()
    early = api.client.get(path, headers=api.as_("client"))
    assert early.status_code == 409 and "no valid record" in early.json()["detail"]
    run_to_end(api, worker, submitted["id"])
    reply = api.client.get(path, headers=api.as_("client"))
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(reply.content)) as tar:
        assert sorted(tar.getnames()) == ["model.h", "model.so"]
        tar.extractall(tmp_path, filter="data")
    assert "TENSOR_TUNER_INPUT0_SHAPE {4, 16}" in (tmp_path / "model.h").read_text()
    native = load_library(tmp_path / "model.so")
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    (y,) = native(x)
    np.testing.assert_allclose(y, reference(x), rtol=1e-4, atol=1e-4)
    # The same best records: the same bytes, without a second build.
    again = api.client.get(path, headers=api.as_("client"))
    assert again.content == reply.content and api.client.app.state.artifacts.builds == 1
    unknown = api.client.get(path, params={"hardware": "nowhere"}, headers=api.as_("client"))
    assert unknown.status_code == 404 and "nowhere" in unknown.json()["detail"]


def test_a_model_with_a_range_is_tuned_at_spread_sizes_and_is_one_library_for_it(api: Api, tmp_path: Path):
    """Issue 40 through the service: dims give the batch a range; the layers are the kernels at the
    sizes tune_model spreads over it; the artifact is one library for every batch in the range, or
    one of static shapes at a size asked for, and a size outside the range is a 422 naming it."""
    worker = register(api)
    submitted = submit_model(api, trials=24, onnx=encoded(open_batch_mlp()), dims={"batch": [1, 16]})
    assert submitted["dims"] == {"batch": [1, 16]} and submitted["tasks"] > 2
    assert run_to_end(api, worker, submitted["id"])["status"] == "done"
    path = f"/v1/models/{submitted['id']}/artifact"
    reply = api.client.get(path, headers=api.as_("client"))
    assert reply.status_code == 200, reply.text
    with tarfile.open(fileobj=io.BytesIO(reply.content)) as tar:
        tar.extractall(tmp_path / "range", filter="data")
    assert "/* size 0: batch, from 1 to 16 */" in (tmp_path / "range" / "model.h").read_text()
    native = load_library(tmp_path / "range" / "model.so")
    for batch in (1, 5, 16):
        x = RNG.standard_normal((batch, 16)).astype(np.float32)
        np.testing.assert_allclose(native(x)[0], reference(x), rtol=1e-4, atol=1e-4)
    at = api.client.get(path, params={"size": "batch=5"}, headers=api.as_("client"))
    assert at.status_code == 200, at.text
    with tarfile.open(fileobj=io.BytesIO(at.content)) as tar:
        tar.extractall(tmp_path / "five", filter="data")
    assert "TENSOR_TUNER_INPUT0_SHAPE {5, 16}" in (tmp_path / "five" / "model.h").read_text()
    refusals = {
        "batch=17 is outside the declared range batch in [1, 16]": "batch=17",
        "the model's ranged dimensions are batch in [1, 16]": "sequence=3",
    }
    for message, size in refusals.items():
        refused = api.client.get(path, params={"size": size}, headers=api.as_("client"))
        assert refused.status_code == 422 and message in str(refused.json()["detail"]), refused.text
        assert refused.json()["detail"][0]["loc"] == ["query", "size"]
    static = submit_model(api, trials=4)
    refused = api.client.get(
        f"/v1/models/{static['id']}/artifact", params={"size": "batch=2"}, headers=api.as_("client")
    )
    assert refused.status_code == 422 and "has static shapes" in str(refused.json()["detail"])
    for dims, message in (
        ({"batch": [8, 2]}, "a range's min is at most its max"),
        ({"batch": [0, 4]}, "greater than"),
    ):
        body = {"onnx": encoded(open_batch_mlp()), "trials": 8, "dims": dims}
        bad = api.client.post("/v1/models", json=body, headers=api.as_("client"))
        assert bad.status_code == 422 and message in str(bad.json()["detail"]), bad.text


def test_a_kernel_over_a_range_is_a_model_of_its_sizes(api: Api, remote: list[str], capsys):
    """Issue 40's spec form through the service: one parameter given as [min, max] (or a script
    declaring a size var) is tuned at its sizes under one budget, each size a layer; the range is
    the model's dims; it has no library to download."""
    worker = register(api)
    spec = {"op": "matmul", "params": {"M": [1, 64], "N": 16, "K": 8}}
    submitted = submit_model(api, trials=24, onnx=None, workload=spec, sizes=[1, 8, 64], name="mm")
    assert (submitted["tasks"], submitted["dims"]) == (3, {"M": [1, 64]})
    done = run_to_end(api, worker, submitted["id"])
    assert done["status"] == "done" and [layer["weight"] for layer in done["layers"]] == [1, 1, 1]
    assert [layer["flops"] for layer in done["layers"]] == [2 * m * 16 * 8 for m in (1, 8, 64)]
    artifact = api.client.get(f"/v1/models/{submitted['id']}/artifact", headers=api.as_("client"))
    assert artifact.status_code == 422 and "no library" in artifact.text
    n = te.var("n", range=(1, 40))
    a = te.placeholder((n, 8), "float32", name="A")
    script = te.create_prim_func([a, te.compute((n, 8), lambda i, j: a[i, j] * 2.0, name="B")]).script()
    scripted = submit_model(api, trials=8, onnx=None, workload={"tvmscript": script})
    assert scripted["tasks"] == 4 and scripted["dims"] == {"n": [1, 40]}
    refusals = [
        (
            {"workload": {"op": "matmul", "params": {"M": 8, "N": 16, "K": 8}}},
            "workload",
            "no parameter is a range",
        ),
        ({"workload": spec, "sizes": [0]}, "sizes", "greater than or equal to 1"),
        ({"workload": spec, "sizes": [65]}, "sizes", "sizes [65] are outside the range [1, 64]"),
        (
            {"workload": {"op": "matmul", "params": {"M": [1, 64], "N": [1, 8], "K": 8}}},
            "workload",
            "one parameter may be a range",
        ),
        ({"workload": spec, "onnx": encoded(mlp())}, "body", "exactly one of onnx"),
        ({"onnx": encoded(mlp()), "sizes": [4]}, "body", "sizes go with workload"),
    ]
    for body, where, message in refusals:
        reply = api.client.post("/v1/models", json={"trials": 8, **body}, headers=api.as_("client"))
        assert reply.status_code == 422 and message in str(reply.json()["detail"]), reply.text
        assert where in str(reply.json()["detail"][0]["loc"]), reply.text
    command = ["submit", "matmul", "M=1..64", "N=16", "K=8", "--sizes", "2,64", "--trials", "8", "--json"]
    assert main([*command, *remote]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert (cli["tasks"], cli["dims"], cli["name"]) == (2, {"M": [1, 64]}, "matmul M=1..64")


def test_a_model_is_its_tokens_and_cancel_stops_its_layers(api: Api):
    register(api)
    submitted = submit_model(api, trials=40)
    api.loop.tick()
    path = f"/v1/models/{submitted['id']}"
    assert api.client.get(path, headers=api.as_("worker")).status_code == 403
    assert model(api, submitted["id"], role="admin")["id"] == submitted["id"]
    other = api.client.post("/v1/tokens", json={"role": "client", "name": "b"}, headers=api.as_("admin"))
    someone = {"Authorization": f"Bearer {other.json()['token']}"}
    assert api.client.get(path, headers=someone).status_code == 404
    assert api.client.post(f"{path}/cancel", headers=someone).status_code == 404
    assert api.client.get("/v1/models", headers=someone).json() == []
    cancelled = api.client.post(f"{path}/cancel", headers=api.as_("client"))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert {layer["status"] for layer in model(api, submitted["id"])["layers"]} == {"cancelled"}
    assert api.client.post(f"{path}/cancel", headers=api.as_("client")).status_code == 409


def bad_models() -> list[tuple[dict, str]]:
    truncated = encoded(mlp()[:40])
    return [
        ({"onnx": "not base64!", "trials": 8}, "not base64"),
        ({"onnx": truncated, "trials": 8}, "not an ONNX model"),
        ({"onnx": encoded(mlp("Acos")), "trials": 8}, "node 'act' (Acos): unsupported operator"),
        ({"onnx": encoded(mlp()), "trials": 1}, "the model has 2 layers"),
        ({"onnx": encoded(mlp()), "trials": "8"}, "valid integer"),
        ({"onnx": encoded(mlp()), "trials": 8, "scheduler": "fastest"}, "gradient"),
    ]


@pytest.mark.parametrize(("body", "message"), bad_models(), ids=lambda v: str(v)[:30])
def test_a_bad_model_is_a_422_naming_the_problem(api: Api, body: dict, message: str):
    register(api)
    reply = api.client.post("/v1/models", json=body, headers=api.as_("client"))
    assert reply.status_code == 422, reply.text
    assert message in str(reply.json()["detail"])


def test_an_open_dimension_is_sized_by_dims_and_the_model_kept_so(api: Api):
    register(api)
    body = {"onnx": encoded(open_batch_mlp()), "trials": 8}
    refusals = {
        "dimension 0 is 'batch': give it a range or a size": {},
        "dims: the model's open dimensions are ['batch']; unknown: ['seq']": {"dims": {"batch": 4, "seq": 2}},
        "Input should be a valid integer": {"dims": {"batch": [1, 8, 9]}},
        "Input should be greater than or equal to 1": {"dims": {"batch": 0}},
    }
    for message, extra in refusals.items():
        reply = api.client.post("/v1/models", json={**body, **extra}, headers=api.as_("client"))
        assert reply.status_code == 422 and message in str(reply.json()["detail"]), reply.text
        assert reply.json()["detail"][0]["loc"][1] == ("dims" if extra else "onnx")
    graph_body = {"graph": module_to_json(frontend.from_onnx(mlp())), "trials": 8, "dims": {"batch": 4}}
    reply = api.client.post("/v1/models", json=graph_body, headers=api.as_("client"))
    assert reply.status_code == 422 and "a graph's shapes are static" in reply.text
    submitted = submit_model(api, trials=8, onnx=encoded(open_batch_mlp()), dims={"batch": 4})
    assert submitted["tasks"] == 2
    source_format, source = m.source(api.db, submitted["id"])
    stored = frontend.from_onnx(source)
    assert source_format == "onnx" and stored.inputs[0].type.shape == (4, 16)


def test_a_model_cannot_read_a_file_of_the_coordinator(api: Api, tmp_path: Path, monkeypatch):
    """Issue 42's attack: the README's quickstart keeps tokens in the directory `tuner serve` runs in,
    and a tensor with its data "external" at `admin.token` read them back. Refused, with one message
    whether the file exists or not (no oracle), and never a byte of it."""
    register(api)
    secret = b"SECRETTOKEN12345"
    (tmp_path / "admin.token").write_bytes(secret)
    monkeypatch.chdir(tmp_path)
    details = []
    for location in ("admin.token", "missing.token", str(tmp_path / "admin.token")):
        body = {"onnx": encoded(file_reader(location)), "trials": 8}
        reply = api.client.post("/v1/models", json=body, headers=api.as_("client"))
        assert reply.status_code == 422, reply.text
        details.append(str(reply.json()["detail"]))
    assert len(set(details)) == 1 and "tensor 'v' keeps its data in an external file" in details[0]
    assert "token" not in details[0] and str(int.from_bytes(secret[:8], "little")) not in details[0]


def test_model_limits(api: Api):
    register(api)
    settings = api.client.app.state.settings
    big = onnx.load_model_from_string(mlp())
    settings_nodes, settings.max_model_nodes = settings.max_model_nodes, 2
    try:
        reply = api.client.post(
            "/v1/models", json={"onnx": encoded(mlp()), "trials": 8}, headers=api.as_("client")
        )
    finally:
        settings.max_model_nodes = settings_nodes
    assert reply.status_code == 422 and "3 nodes, more than max_nodes=2" in str(reply.json()["detail"])
    settings.max_model_bytes = 1024
    reply = api.client.post(
        "/v1/models", json={"onnx": encoded(big.SerializeToString()), "trials": 8}, headers=api.as_("client")
    )
    assert reply.status_code == 422 and "over max_model_bytes=1024" in str(reply.json()["detail"])


def test_a_model_body_may_be_larger_than_other_requests(api: Api):
    """The model's route takes a body of its model's size, in base64, while other routes keep theirs."""
    register(api)
    proto = onnx.load_model_from_string(mlp())
    proto.graph.initializer.append(numpy_helper.from_array(np.zeros(20_000, np.float32), "unused"))
    source = encoded(proto.SerializeToString())
    assert len(source) > api.client.app.state.settings.max_request_bytes
    reply = api.client.post("/v1/models", json={"onnx": source, "trials": 8}, headers=api.as_("client"))
    assert reply.status_code == 201, reply.text
    padded = {"workload": {"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}, "x": "a" * len(source)}
    assert api.client.post("/v1/tasks", json=padded, headers=api.as_("client")).status_code == 413


@pytest.fixture
def remote(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The flags that point a command at the in-process coordinator, with a client token."""
    monkeypatch.setattr(commands, "Client", lambda url, token: in_process_client(api, token))
    return ["--coordinator", "http://testserver", "--token", api.tokens["client"]]


def test_submit_model_waits_with_progress_lines_and_the_artifact_downloads(
    api: Api, remote: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
):
    worker = register(api)
    (tmp_path / "mlp.onnx").write_bytes(mlp())
    poll = Client.model

    def measured(self: Client, model_id: int) -> ModelDetail:
        api.loop.tick()
        leased = lease(api, worker, 8)
        if leased:
            measure(api, worker, leased)
        return poll(self, model_id)

    monkeypatch.setattr(Client, "model", measured)
    monkeypatch.setattr(model_commands.time, "sleep", lambda _: None)
    assert main(["submit-model", str(tmp_path / "mlp.onnx"), *remote, "--trials", "20", "--wait"]) == 0
    captured = capsys.readouterr()
    assert "model 1 (mlp): 2 layers, 20 trials" in captured.err
    assert "[   20/20] estimated latency" in captured.err
    assert "share" in captured.out and "model 1: done" in captured.out
    out = tmp_path / "model.tar.gz"
    assert main(["model-artifact", "1", "-o", str(out), *remote]) == 0
    with tarfile.open(out) as tar:
        assert sorted(tar.getnames()) == ["model.h", "model.so"]
        served = {name: tar.extractfile(name).read() for name in ("model.so", "model.h")}
    library = tmp_path / "lib" / "mlp.so"
    library.parent.mkdir()
    assert main(["model-artifact", "1", "-o", str(library), *remote]) == 0
    assert library.read_bytes() == served["model.so"]
    header = library.with_suffix(".h").read_text()
    assert header.startswith("/* The model in mlp.so, ") and "#ifndef TENSOR_TUNER_MLP_H" in header
    assert header.replace("mlp.so", "model.so").replace("_MLP_H", "_MODEL_H") == served["model.h"].decode()
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_allclose(load_library(library)(x)[0], reference(x), rtol=1e-4, atol=1e-4)
    assert main(["submit-model", str(tmp_path / "missing.onnx"), *remote]) == 2


def memory_bomb() -> bytes:
    """A model whose import would fill a 40 GB constant: ConstantOfShape of a static shape is computed
    while importing."""
    shape = numpy_helper.from_array(np.array([100_000, 100_000], np.int64), "shape")
    nodes = [
        onnx.helper.make_node("ConstantOfShape", ["shape"], ["big"], name="bomb"),
        onnx.helper.make_node("Add", ["x", "big"], ["y"], name="add"),
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "bomb",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [100_000, 100_000])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [100_000, 100_000])],
        [shape],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]).SerializeToString()


def test_a_model_whose_import_needs_too_much_memory_is_refused_and_the_coordinator_lives(api: Api):
    register(api)
    api.client.app.state.settings.model_memory_bytes = 1 << 30
    reply = api.client.post(
        "/v1/models", json={"onnx": encoded(memory_bomb()), "trials": 8}, headers=api.as_("client")
    )
    assert reply.status_code == 422, reply.text
    assert "could not be imported (MemoryError: Unable to allocate 37.3 GiB" in str(reply.json()["detail"])
    assert api.client.get("/healthz").status_code == 200


def test_a_model_counts_as_one_task_holding_its_whole_budget(api: Api):
    register(api)
    settings = api.client.app.state.settings
    settings.quota_trials, settings.quota_active_tasks = 30, 2
    first = submit_model(api, trials=20)
    api.loop.tick()  # its two layers are tasks now, but the model counts once
    over = api.client.post(
        "/v1/models", json={"onnx": encoded(mlp()), "trials": 20}, headers=api.as_("client")
    )
    assert over.status_code == 429 and "over its quota of 30" in over.json()["detail"]
    task = {"workload": {"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}, "trials": 10}
    assert api.client.post("/v1/tasks", json=task, headers=api.as_("client")).status_code == 201
    assert api.client.post("/v1/tasks", json=task, headers=api.as_("client")).status_code == 429
    api.client.post(f"/v1/models/{first['id']}/cancel", headers=api.as_("client"))
    assert api.client.post("/v1/tasks", json=task, headers=api.as_("client")).status_code == 201


def test_a_client_over_its_quota_is_refused_before_its_model_is_imported(api: Api, monkeypatch):
    """The probe's refused client cost 8.5 s of CPU per refusal: its model was imported first. Now
    the quota is checked first, and a refused upload writes nothing."""
    register(api)
    settings = api.client.app.state.settings
    settings.quota_trials = 30
    submit_model(api, trials=20)
    workloads = len(api.db.workloads())
    monkeypatch.setattr(models_route, "import_model", lambda *a: pytest.fail("imported"))
    over = api.client.post(
        "/v1/models", json={"onnx": encoded(mlp()), "trials": 20}, headers=api.as_("client")
    )
    assert over.status_code == 429 and "over its quota of 30" in over.json()["detail"]
    assert len(api.db.workloads()) == workloads


def test_uploads_and_builds_past_their_slots_are_503_with_retry_after(api: Api):
    """An upload that finds every import slot taken is refused before its body is read (the probe's
    6 concurrent 60 MiB uploads took the API to 2 GB); a build past the build slots likewise. What
    is built is served whatever the slots."""
    state = api.client.app.state
    worker = register(api)
    submitted = submit_model(api, trials=4)
    for _ in range(state.import_slots.limit):
        state.import_slots.take()
    try:
        busy = api.client.post(
            "/v1/models", json={"onnx": encoded(mlp()), "trials": 8}, headers=api.as_("client")
        )
    finally:
        for _ in range(state.import_slots.limit):
            state.import_slots.give_back()
    assert busy.status_code == 503 and busy.headers["Retry-After"] == "5"
    assert "importing models (2 at once)" in busy.json()["detail"]
    run_to_end(api, worker, submitted["id"])
    path = f"/v1/models/{submitted['id']}/artifact"
    state.build_slots.take()
    try:
        refused = api.client.get(path, headers=api.as_("client"))
    finally:
        state.build_slots.give_back()
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
    built = api.client.get(path, headers=api.as_("client"))
    assert built.status_code == 200
    state.build_slots.take()
    try:
        assert api.client.get(path, headers=api.as_("client")).content == built.content  # from memory
    finally:
        state.build_slots.give_back()


def test_a_models_layers_are_leased_with_the_timing_of_a_forward_pass(api: Api):
    """A worker times a model's layer as `tune_model` does on one machine (caches evicted, the input
    read back: as a forward pass runs it); a plain task's candidates keep the worker's own timing.
    The record keeps the timing its results were measured with."""
    worker = register(api)
    plain = submit(api, trials=4)
    submitted = submit_model(api, trials=16)
    layers = {layer["task_id"] for layer in model(api, submitted["id"])["layers"]}
    leased: list[dict] = []
    for _ in range(5):  # a tick stops advancing tasks after a deadline, which a loaded CI host can hit
        api.loop.tick()
        leased += lease(api, worker, 64)
        if {c["task_id"] for c in leased} >= layers | {plain["id"]}:
            break
    assert {c["task_id"] for c in leased} == layers | {plain["id"]}
    for candidate in leased:
        expected = asdict(MODEL_TIMING) if candidate["task_id"] in layers else None
        assert candidate["timing"] == expected


def measure_layers(api: Api, worker: int, leased: list[dict], slow_task: int) -> None:
    """Results as a worker sends them, the slow layer's 10x slower; a would-be best is re-measured."""

    def post(candidates: list[dict]) -> list[str]:
        body = {
            "results": [
                {
                    "candidate_id": c["id"],
                    "status": "ok",
                    "run_secs": [(1e-2 if c["task_id"] == slow_task else 1e-3)] * 3,
                }
                for c in candidates
            ]
        }
        reply = api.client.post(f"/v1/workers/{worker}/results", json=body, headers=api.as_("worker"))
        assert reply.status_code == 200, reply.text
        return reply.json()["outcomes"]

    held = [c for c, outcome in zip(leased, post(leased)) if outcome == "confirming"]
    if held:
        assert post(lease(api, worker, len(held))) == ["accepted"] * len(held)


@pytest.mark.parametrize(
    ("scheduler", "trials"),
    [("gradient", [4 * BATCH_TRIALS, BATCH_TRIALS]), ("round-robin", [3 * BATCH_TRIALS, 2 * BATCH_TRIALS])],
)
def test_the_scheduler_spends_the_budget_where_the_latency_is(api: Api, scheduler: str, trials: list[int]):
    """After every layer's first batch, gradient gives each batch to the layer whose next one promises
    the largest drop in latency (the slow one, 10x slower, every time); round-robin takes turns."""
    worker = register(api)
    submitted = submit_model(api, trials=5 * BATCH_TRIALS, scheduler=scheduler)
    slow = model(api, submitted["id"])["layers"][0]["task_id"]
    for _ in range(200):
        api.loop.tick()
        leased = lease(api, worker, 8)
        if leased:
            measure_layers(api, worker, leased, slow)
        detail = model(api, submitted["id"])
        if detail["status"] == "done":
            break
    assert detail["status"] == "done", detail
    assert [layer["trials"] for layer in detail["layers"]] == trials
    assert [layer["trials_done"] for layer in detail["layers"]] == trials
    assert len(detail["curve"]) == 5


@pytest.mark.parametrize(
    ("in_flight", "trials"), [(1, [BATCH_TRIALS] * 2), (2, [2 * BATCH_TRIALS, BATCH_TRIALS])]
)
def test_batches_stay_in_flight_while_another_is_measured(api: Api, in_flight: int, trials: list[int]):
    """Once a layer's first batch is back, it gets another while the other layer's first is still
    measured, up to `model_batches_in_flight` batches out; a layer whose first batch is out gets none."""
    api.loop.settings.model_batches_in_flight = in_flight
    worker = register(api)
    submitted = submit_model(api, trials=6 * BATCH_TRIALS)
    for _ in range(10):  # the first layer's first batch measured; the second's leased, never measured
        api.loop.tick()
        first, second = model(api, submitted["id"])["layers"]
        if first["trials_done"] == BATCH_TRIALS:
            break
        measure(api, worker, [c for c in lease(api, worker, 64) if c["task_id"] == first["task_id"]])
    for _ in range(3):
        assert [layer["trials"] for layer in model(api, submitted["id"])["layers"]] == trials
        api.loop.tick()
    assert second["trials_done"] == 0


def test_identical_layers_of_two_models_share_their_records(api: Api):
    worker = register(api)
    first = submit_model(api, trials=4)
    run_to_end(api, worker, first["id"])
    second = submit_model(api, trials=4)
    detail = model(api, second["id"])
    assert detail["estimated_secs"] == pytest.approx(model(api, first["id"])["estimated_secs"])
    assert [layer["workload_hash"] for layer in detail["layers"]] == [
        layer["workload_hash"] for layer in model(api, first["id"])["layers"]
    ]


def test_a_kernels_warm_record_does_not_stand_for_a_layers_time(api: Api):
    """The same kernel timed warm (tuned alone) is far faster than any layer record; the model's
    estimate and its layers' bests count layer records only."""
    worker = register(api)
    submitted = submit_model(api, trials=4)
    first_layer = api.db.get_task(model(api, submitted["id"])["layers"][0]["task_id"])
    kernel_trace = {"version": 1, "instructions": []}
    api.db.add_record(
        NewRecord(
            workload_id=first_layer.workload_id,
            hardware_id=first_layer.hardware_id,
            trace=kernel_trace,
            program_hash=trace_hash(kernel_trace),
            status="ok",
            run_secs=[1e-7],
        )
    )
    assert [layer["best_secs"] for layer in model(api, submitted["id"])["layers"]] == [None, None]
    done = run_to_end(api, worker, submitted["id"])
    assert all(layer["best_secs"] > 1e-7 for layer in done["layers"])
    total = sum(layer["weight"] * layer["best_secs"] for layer in done["layers"])
    assert done["estimated_secs"] == pytest.approx(total)
    assert done["curve"][-1]["estimated_secs"] == pytest.approx(total)


def test_a_model_in_the_graphs_json_form_is_tuned_and_built_like_an_onnx_one(api: Api, tmp_path: Path):
    worker = register(api)
    form = module_to_json(frontend.from_onnx(mlp()))
    reply = api.client.post("/v1/models", json={"graph": form, "trials": 4}, headers=api.as_("client"))
    assert reply.status_code == 201, reply.text
    assert reply.json()["tasks"] == 2
    run_to_end(api, worker, reply.json()["id"])
    artifact = api.client.get(f"/v1/models/{reply.json()['id']}/artifact", headers=api.as_("client"))
    assert artifact.status_code == 200, artifact.text
    with tarfile.open(fileobj=io.BytesIO(artifact.content)) as tar:
        tar.extractall(tmp_path, filter="data")
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_allclose(load_library(tmp_path / "model.so")(x)[0], reference(x), rtol=1e-4, atol=1e-4)
    form["nodes"][0]["op"] = "celu"
    bad = api.client.post("/v1/models", json={"graph": form, "trials": 4}, headers=api.as_("client"))
    assert bad.status_code == 422
    (error,) = bad.json()["detail"]
    assert error["loc"] == ["body", "graph"] and "(celu): unsupported operator" in error["msg"]
    both = api.client.post(
        "/v1/models", json={"graph": form, "onnx": encoded(mlp()), "trials": 4}, headers=api.as_("client")
    )
    assert both.status_code == 422 and "exactly one of onnx" in str(both.json()["detail"])


def test_submit_model_sends_a_json_file_as_the_graph_form(
    api: Api, remote: list[str], tmp_path: Path, capsys
):
    register(api)
    (tmp_path / "graph.json").write_text(json.dumps(module_to_json(frontend.from_onnx(mlp()))))
    assert main(["submit-model", str(tmp_path / "graph.json"), *remote, "--trials", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == 2
    (tmp_path / "broken.json").write_text("{")
    assert main(["submit-model", str(tmp_path / "broken.json"), *remote]) == 2


def test_submit_model_sizes_open_dimensions_with_dim(api: Api, remote: list[str], tmp_path: Path, capsys):
    register(api)
    (tmp_path / "open.onnx").write_bytes(open_batch_mlp())
    submit = ["submit-model", str(tmp_path / "open.onnx"), *remote, "--trials", "4"]
    assert main([*submit, "--dim", "batch=1..4", "--trials", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dims"] == {"batch": [1, 4]}
    assert main(submit) == 2
    assert "dimension 0 is 'batch'" in capsys.readouterr().err
    assert main([*submit, "--dim", "batch=3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == 2


def test_a_layer_whose_search_fails_fails_the_model_and_stops_the_others(api: Api, monkeypatch):
    register(api)
    submitted = submit_model(api, trials=40)
    propose = SearchDriver.propose
    first_layer = {}

    def broken(self: SearchDriver, n: int):
        first_layer.setdefault("task", self.ids.task_id)
        if self.ids.task_id == first_layer["task"]:
            raise RuntimeError("a bug in the search")
        return propose(self, n)

    monkeypatch.setattr(SearchDriver, "propose", broken)
    api.loop.tick()  # the layers get their batches; the first layer's search fails
    api.loop.tick()  # the model sees it
    failed = model(api, submitted["id"])
    assert failed["status"] == "failed", failed
    assert (
        failed["message"]
        == f"the search of its task {first_layer['task']} failed: RuntimeError: a bug in the search"
    )
    assert [layer["status"] for layer in failed["layers"]] == ["failed", "cancelled"]


def test_the_api_offers_the_schedulers_the_task_scheduler_has():
    assert get_args(Scheduler) == SCHEDULERS


def test_a_cancelled_models_file_is_dropped_after_its_grace_period(api: Api):
    """The probe's cancelled 40 MiB models kept their bytes forever, outside any quota."""
    register(api)
    cancelled, running = submit_model(api, trials=4), submit_model(api, trials=4)
    path = f"/v1/models/{cancelled['id']}"
    assert api.client.post(f"{path}/cancel", headers=api.as_("client")).status_code == 200
    now = datetime.now(UTC)
    assert m.drop_cancelled_sources(api.db, before=now - timedelta(days=7)) == 0  # in its grace period
    assert m.drop_cancelled_sources(api.db, before=now + timedelta(seconds=1)) == 1
    assert not m.has_source(api.db, cancelled["id"]) and m.has_source(api.db, running["id"])
    gone = api.client.get(f"{path}/artifact", headers=api.as_("client"))
    assert gone.status_code == 410 and "file dropped" in gone.json()["detail"]
