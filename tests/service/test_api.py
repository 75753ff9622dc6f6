"""The REST API in process (the search loop ticked by hand, workers played by the test): tasks from
submission to done, the worker protocol, best-record queries, tokens and roles, bad input."""

import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from typing import get_args

import pytest

from compiler.target import Target
from compiler.workloads import workload_from_spec
from compiler.workloads.primfunc_spec import primfunc_spec
from runner import TimingKind
from runner.protocol import WORKER_NAME_LENGTH
from tests.compiler.test_script import MM_RELU, te_mm_relu
from tests.compiler.workloads.test_primfunc_spec import fused_conv2d_add_relu
from tests.service.conftest import HARDWARE, HW, OTHER, Api, hardware_body, in_process_client
from tuner.database.fleet import MISSED_HEARTBEATS
from tuner.database.schema import CandidateRow, WorkerRow
from tuner.service.schemas import Timing

SPEC = {"op": "matmul", "params": {"M": 32, "N": 32, "K": 16}}
FUSED = primfunc_spec(fused_conv2d_add_relu(), 3)
# Huge extents and a load past its buffer: parsed (never run), then refused by the spec's checks.
HOSTILE_SCRIPT = MM_RELU.replace("T.grid(128, 128, 128)", "T.grid(128, 128, 60000)").replace(
    "T.axis.reduce(128, k)", "T.axis.reduce(60000, k)"
)


def register(api: Api, name: str = "w1", hardware: dict = HARDWARE, *, approve: bool = True) -> int:
    """A worker (of the worker token) of `hardware`, which an admin then approves, as an operator
    does for each new kind of machine."""
    reply = api.client.post(
        "/v1/workers", json={"name": name, "hardware": hardware}, headers=api.as_("worker")
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["lease_seconds"] == api.loop.settings.lease_seconds  # the worker is told
    if approve:
        approve_hardware(api, hardware)
    return reply.json()["id"]


def approve_hardware(api: Api, hardware: dict, **body) -> dict:
    key = Target(hardware["triple"], hardware["mcpu"], hardware["features"], hardware["cores"]).key
    known = api.client.get("/v1/hardware", headers=api.as_("client")).json()
    (row,) = [h for h in known if h["key"] == key]
    reply = api.client.post(f"/v1/hardware/{row['id']}/approve", json=body, headers=api.as_("admin"))
    assert reply.status_code == 200, reply.text
    return reply.json()


def submit(api: Api, trials: int = 6, **extra) -> dict:
    body = {"workload": SPEC, "trials": trials, "strategy": "random", **extra}
    reply = api.client.post("/v1/tasks", json=body, headers=api.as_("client"))
    assert reply.status_code == 201, reply.text
    return reply.json()


def lease(api: Api, worker: int, n: int = 8) -> list[dict]:
    reply = api.client.post(f"/v1/workers/{worker}/lease", json={"max": n}, headers=api.as_("worker"))
    assert reply.status_code == 200, reply.text
    return reply.json()["candidates"]


def results(api: Api, worker: int, leased: list[dict], secs: float = 1e-3, role: str = "worker") -> list[str]:
    body = {
        "results": [
            {"candidate_id": c["id"], "status": "ok", "run_secs": [secs * (1 + c["id"] / 100)] * 3}
            for c in leased
        ]
    }
    reply = api.client.post(f"/v1/workers/{worker}/results", json=body, headers=api.as_(role))
    assert reply.status_code == 200, reply.text
    return reply.json()["outcomes"]


def measure(api: Api, worker: int, leased: list[dict], secs: float = 1e-3) -> None:
    """Measure leased candidates as workers do: a would-be best comes back 'confirming' and goes back
    to the queue, where it is the oldest candidate, and this worker leases and re-measures it."""
    outcomes = results(api, worker, leased, secs)
    assert set(outcomes) <= {"accepted", "confirming"}, outcomes
    held = [c["id"] for c, o in zip(leased, outcomes) if o == "confirming"]
    if held:
        again = lease(api, worker, len(held))
        assert [c["id"] for c in again] == sorted(held)
        assert results(api, worker, again, secs) == ["accepted"] * len(held)


@pytest.mark.patient_leases  # on a loaded CI host the two leases it holds expired before its last lease
def test_a_task_runs_from_submission_to_done(api: Api):
    worker = register(api)
    task = submit(api, trials=6)
    assert task["status"] == "pending" and task["hardware_key"] == HW.key and task["best"] is None
    assert task["workload_spec"]["params"] == SPEC["params"]  # the dashboard shows the shape
    api.loop.tick()
    first = lease(api, worker)
    assert len(first) == 6 and first[0]["spec"]["op"] == "matmul" and first[0]["best_secs"] is None
    # No best yet: each would be the best, so each is re-measured by a second lease before it counts.
    assert results(api, worker, first[:4]) == ["confirming"] * 4
    again = lease(api, worker, 4)
    assert [c["id"] for c in again] == [c["id"] for c in first[:4]]
    assert results(api, worker, again) == ["accepted"] * 4
    # A worker that submits the same results twice (its first answer was lost) stores nothing new.
    assert results(api, worker, again) == ["duplicate"] * 4
    detail = api.client.get(f"/v1/tasks/{task['id']}", headers=api.as_("client")).json()
    assert detail["status"] == "running" and detail["trials_done"] == 4
    assert detail["queue"] == {"pending": 0, "leased": 2, "done": 4} and len(detail["curve"]) == 4
    assert detail["curve"] == sorted(detail["curve"]) and detail["best"]["gflops"] == detail["curve"][-1]
    api.loop.tick()  # the budget is covered: nothing more is queued
    assert lease(api, worker) == []
    assert results(api, worker, first[4:], secs=1.0) == ["accepted"] * 2  # slower than the best
    api.loop.tick()
    done = api.client.get(f"/v1/tasks/{task['id']}", headers=api.as_("client")).json()
    assert done["status"] == "done" and done["trials_done"] == 6 and done["queue"]["done"] == 6
    assert len(api.db.task_records(task["id"])) == 6
    listed = api.client.get("/v1/tasks", headers=api.as_("client")).json()
    assert [t["id"] for t in listed] == [task["id"]]


def test_best_records_by_spec_and_by_hash(api: Api):
    worker = register(api)
    task = submit(api, trials=3)
    api.loop.tick()
    leased = lease(api, worker)
    measure(api, worker, leased)
    by_spec = api.client.post("/v1/best", json={"workload": SPEC, "k": 5}, headers=api.as_("client"))
    assert by_spec.status_code == 200, by_spec.text
    records = by_spec.json()
    assert [r["median_secs"] for r in records] == sorted(r["median_secs"] for r in records) and len(
        records
    ) == 3
    assert records[0]["trace"] == leased[0]["trace"] and records[0]["hardware_key"] == HW.key
    flops = 2 * 32 * 32 * 16
    assert records[0]["gflops"] == pytest.approx(flops / records[0]["median_secs"] / 1e9)
    by_hash = api.client.get(
        f"/v1/workloads/{task['workload_hash']}/best", params={"hardware": HW.key}, headers=api.as_("client")
    )
    assert by_hash.json()[0]["id"] == records[0]["id"]
    assert {r["timing_kind"] for r in records} == {"warm"}
    as_layer = api.client.post(
        "/v1/best", json={"workload": SPEC, "timing": "layer"}, headers=api.as_("client")
    )
    assert as_layer.status_code == 200 and as_layer.json() == []  # no layer of a model was timed
    lukewarm = api.client.post(
        "/v1/best", json={"workload": SPEC, "timing": "lukewarm"}, headers=api.as_("client")
    )
    assert lukewarm.status_code == 422 and "timing" in lukewarm.text
    assert set(get_args(Timing)) == {k.value for k in TimingKind}
    one = api.client.get(f"/v1/records/{records[0]['id']}", headers=api.as_("client")).json()
    assert one["trace"] == records[0]["trace"] and one["task_id"] == task["id"]
    assert api.client.get("/v1/records/999", headers=api.as_("client")).status_code == 404
    unknown_hw = api.client.post(
        "/v1/best", json={"workload": SPEC, "hardware": "elsewhere"}, headers=api.as_("client")
    )
    assert unknown_hw.json() == []


def test_a_worker_that_stops_gives_its_leases_back(api: Api):
    w1, w2 = register(api, "w1"), register(api, "w2")
    submit(api, trials=4)
    api.loop.tick()
    held = lease(api, w1, 4)
    released = api.client.post(
        f"/v1/workers/{w1}/release", json={"candidate_ids": [held[0]["id"]]}, headers=api.as_("worker")
    )
    assert released.json() == {"count": 1}
    assert [c["id"] for c in lease(api, w2, 1)] == [held[0]["id"]]
    assert api.client.post(f"/v1/workers/{w1}/heartbeat", headers=api.as_("worker")).json() == {"count": 3}
    named = {"holding": [held[1]["id"], held[0]["id"]]}  # the second is no longer its own
    beat = api.client.post(f"/v1/workers/{w1}/heartbeat", json=named, headers=api.as_("worker"))
    assert beat.json() == {"count": 1}
    assert api.client.post(f"/v1/workers/{w1}/stop", headers=api.as_("worker")).json() == {"count": 3}
    assert len(lease(api, w2, 8)) == 3
    # A heartbeat that arrives after the goodbye is refused: it must not revive the worker.
    assert api.client.post(f"/v1/workers/{w1}/heartbeat", headers=api.as_("worker")).status_code == 409
    # w2 beats as a live worker does (on a loaded machine the test may outlast 3 heartbeat periods)
    api.client.post(f"/v1/workers/{w2}/heartbeat", headers=api.as_("worker"))
    fleet = api.client.get("/v1/workers", headers=api.as_("client")).json()
    assert [(w["name"], w["alive"]) for w in fleet] == [("w1", False), ("w2", True)]


def test_a_worker_that_leases_is_alive_whether_or_not_it_beats(api: Api):
    """A lease request counts as a heartbeat: a worker whose beats lag (a loaded machine, a client
    that never beats) keeps the leases it was just given. Before, the loop's next tick took it for
    dead and ended them, its results were refused, and a lost batch of 8 throttled it for 10 min."""
    worker = register(api)
    submit(api, trials=4)
    api.loop.tick()
    time.sleep(MISSED_HEARTBEATS * api.loop.settings.heartbeat_seconds + 0.1)  # no beat since it registered
    leased = lease(api, worker)
    api.loop.tick()  # ends the leases of the workers silent for MISSED_HEARTBEATS heartbeats
    assert set(results(api, worker, leased)) == {"confirming"}


def test_cancel(api: Api):
    worker = register(api)
    task = submit(api, trials=8)
    api.loop.tick()
    cancelled = api.client.post(f"/v1/tasks/{task['id']}/cancel", headers=api.as_("client"))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert lease(api, worker) == []
    again = api.client.post(f"/v1/tasks/{task['id']}/cancel", headers=api.as_("client"))
    assert again.status_code == 409
    assert api.client.post("/v1/tasks/999/cancel", headers=api.as_("client")).status_code == 404


def test_tasks_target_registered_hardware(api: Api):
    reply = api.client.post("/v1/tasks", json={"workload": SPEC}, headers=api.as_("client"))
    assert reply.status_code == 422 and "start a worker, and approve its hardware" in reply.text
    register(api, "w1")
    register(api, "w2", hardware_body(OTHER))
    ambiguous = api.client.post("/v1/tasks", json={"workload": SPEC}, headers=api.as_("client"))
    assert ambiguous.status_code == 422 and ambiguous.json()["detail"][0]["loc"] == ["body", "hardware"]
    assert submit(api, hardware=OTHER.key)["hardware_key"] == OTHER.key
    assert submit(api, cpu_model="Other CPU")["hardware_key"] == OTHER.key
    # A worker of the other hardware never gets this hardware's candidates.
    api.loop.tick()
    assert lease(api, 1) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"workload": {"op": "matmul", "params": {"M": -3, "N": 4, "K": 4}}},
            ["body", "workload", "params", "M"],
        ),
        ({"workload": {"op": "no_such_op"}}, ["body", "workload", "op"]),
        ({"workload": {"expr": "Y[i] = A[i] +", "inputs": {"A": [4]}}}, ["body", "workload", "expr"]),
        ({"workload": {**FUSED, "num_inputs": 4}}, ["body", "workload", "num_inputs"]),
        ({"workload": {"primfunc": "def f(): ...", "num_inputs": 1}}, ["body", "workload", "primfunc"]),
        (
            {"workload": {**FUSED, "primfunc": {**FUSED["primfunc"], "attrs": [["pragma", 1]]}}},
            ["body", "workload", "primfunc", "attrs"],
        ),
        (
            {"workload": {**FUSED, "primfunc": {**FUSED["primfunc"], "name": "a.b"}}},
            ["body", "workload", "primfunc", "name"],
        ),
        ({"workload": {"tvmscript": "@T.prim_func\ndef f(:"}}, ["body", "workload", "tvmscript"]),
        ({"workload": {"tvmscript": HOSTILE_SCRIPT}}, ["body", "workload", "tvmscript"]),
        ({"workload": SPEC, "trials": 0}, ["body", "trials"]),
        ({"workload": SPEC, "trials": 10**9}, ["body", "trials"]),
        ({"workload": SPEC, "strategy": "annealing"}, ["body", "strategy"]),
        ({"workload": SPEC, "colour": "red"}, ["body", "colour"]),
        ({"trials": 4}, ["body", "workload"]),
    ],
)
def test_a_malformed_task_is_refused_naming_the_field(api: Api, body: dict, field: list[str]):
    register(api)
    reply = api.client.post("/v1/tasks", json=body, headers=api.as_("client"))
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["loc"][: len(field)] == field


def test_a_fused_primfunc_task_is_tuned_under_its_structural_hash(api: Api):
    """Submitted as data, identified by its structural hash; the candidates leased carry the canonical
    spec, from which a worker rebuilds the same function."""
    worker = register(api)
    task = submit(api, trials=3, workload=FUSED)
    assert task["workload_hash"] == fused_conv2d_add_relu().structural_hash()
    assert task["workload_name"] == "fused_conv2d_add_relu" and task["workload_spec"] == FUSED
    api.loop.tick()
    leased = lease(api, worker)
    assert len(leased) == 3
    assert workload_from_spec(leased[0]["spec"]).func.structural_hash() == task["workload_hash"]
    measure(api, worker, leased)
    api.loop.tick()
    done = api.client.get(f"/v1/tasks/{task['id']}", headers=api.as_("client")).json()
    assert done["status"] == "done" and done["best"]["gflops"] > 0


def test_a_tvmscript_task_is_the_same_workload_as_te_s_program(api: Api):
    worker = register(api)
    task = submit(api, trials=2, workload={"tvmscript": MM_RELU})
    assert task["workload_hash"] == te_mm_relu().structural_hash()
    assert set(task["workload_spec"]) == {"primfunc", "num_inputs"}  # workers get the PrimFunc
    api.loop.tick()
    assert len(lease(api, worker)) == 2


def test_a_malformed_primfunc_names_the_culprit_down_to_its_list_indices(api: Api):
    register(api)
    nests = list(FUSED["primfunc"]["body"][1])
    nests[0] = [*nests[0][:3], "parallel", *nests[0][4:]]
    bad = {**FUSED, "primfunc": {**FUSED["primfunc"], "body": ["seq", nests]}}
    reply = api.client.post("/v1/tasks", json={"workload": bad}, headers=api.as_("client"))
    assert reply.status_code == 422, reply.text
    (detail,) = reply.json()["detail"]
    assert detail["loc"] == ["body", "workload", "primfunc", "body", 1, 0, 3]
    assert detail["msg"].startswith(
        "workload.primfunc.body[1][0][3]: loops of an unscheduled function are serial"
    )


def test_oversized_and_broken_bodies(api: Api):
    register(api)
    huge = {"workload": {**SPEC, "pad": "x" * 100_000}}
    assert api.client.post("/v1/tasks", json=huge, headers=api.as_("client")).status_code == 413
    broken = api.client.post(
        "/v1/tasks", content=b"{not json", headers={**api.as_("client"), "Content-Type": "application/json"}
    )
    assert broken.status_code == 422
    streamed = api.client.post(
        "/v1/tasks",
        content=iter([b'{"workload": "' + b"x" * 40_000, b"y" * 40_000 + b'"}']),
        headers={**api.as_("client"), "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413
    garbled = api.client.post(
        "/v1/tasks", content=b"{}", headers={**api.as_("client"), "Content-Length": "12abc"}
    )
    assert garbled.status_code == 400 and "Content-Length" in garbled.json()["detail"]


def test_results_are_validated(api: Api):
    worker = register(api)
    submit(api, trials=2)
    api.loop.tick()
    (c, _) = lease(api, worker)
    bad = [
        {"candidate_id": c["id"], "status": "exploded"},
        {"candidate_id": c["id"], "status": "ok", "run_secs": [-1.0]},
        # A zero or subnormal time made GFLOPS infinite: null in a task's best and curve.
        {"candidate_id": c["id"], "status": "ok", "run_secs": [0.0]},
        {"candidate_id": c["id"], "status": "ok", "run_secs": [5e-324]},
        {"candidate_id": c["id"], "status": "ok", "run_secs": []},
        {"candidate_id": 2**31, "status": "timeout"},  # past PostgreSQL's INTEGER: was a 500
    ]
    for result in bad:
        reply = api.client.post(
            f"/v1/workers/{worker}/results", json={"results": [result]}, headers=api.as_("worker")
        )
        assert reply.status_code == 422, (result, reply.text)
    unknown = api.client.post(
        f"/v1/workers/{worker}/results",
        json={"results": [{"candidate_id": 424242, "status": "timeout"}]},
        headers=api.as_("worker"),
    )
    assert unknown.json() == {"outcomes": ["unknown"]}
    too_big = api.client.post(
        f"/v1/workers/{worker}/release", json={"candidate_ids": [2**31]}, headers=api.as_("worker")
    )
    assert too_big.status_code == 422, too_big.text


def test_strings_postgresql_cannot_store_are_refused(api: Api):
    """Found by the fuzzer: a NUL character in a token's name was a 500 on PostgreSQL (its text and
    JSONB refuse it); so was NaN in a result's timing (JSONB refuses it)."""
    worker = register(api)
    submit(api, trials=2)
    api.loop.tick()
    (c, _) = lease(api, worker)
    nul = "a\x00b"
    posts = [
        ("/v1/tokens", {"role": "client", "name": nul}, "admin"),
        ("/v1/workers", {"name": nul, "hardware": HARDWARE}, "worker"),
        ("/v1/workers", {"name": "w", "hardware": {**HARDWARE, "features": nul}}, "worker"),
        ("/v1/best", {"workload_hash": nul}, "client"),
        ("/v1/best", {"workload": SPEC, "hardware": nul}, "client"),
    ]
    for result in (
        {"message": nul},
        {"timing": {nul: 1.0}},
    ):
        body = {"results": [{"candidate_id": c["id"], "status": "timeout", **result}]}
        posts.append((f"/v1/workers/{worker}/results", body, "worker"))
    for path, body, role in posts:
        reply = api.client.post(path, json=body, headers=api.as_(role))
        assert reply.status_code == 422, (path, body, reply.text)
    nan = b'{"results": [{"candidate_id": %d, "status": "timeout", "timing": {"t": NaN}}]}' % c["id"]
    reply = api.client.post(
        f"/v1/workers/{worker}/results",
        content=nan,
        headers={**api.as_("worker"), "Content-Type": "application/json"},
    )
    assert reply.status_code == 422, reply.text
    for path, params in (("/v1/workloads/a%00b/best", {}), ("/v1/workloads/abc/best", {"hardware": nul})):
        reply = api.client.get(path, params=params, headers=api.as_("client"))
        assert reply.status_code == 422, (path, reply.text)
    assert results(api, worker, [c]) == ["confirming"]  # nothing of the above was stored


CLIENT_ROUTES = [
    ("GET", "/v1/tasks"),
    ("POST", "/v1/tasks"),
    ("GET", "/v1/tasks/1"),
    ("POST", "/v1/tasks/1/cancel"),
    ("POST", "/v1/best"),
    ("GET", "/v1/workloads/abc/best"),
    ("GET", "/v1/records/1"),
    ("GET", "/v1/workers"),
    ("GET", "/v1/hardware"),
]
WORKER_ROUTES = [
    ("POST", "/v1/workers"),
    ("POST", "/v1/workers/1/heartbeat"),
    ("POST", "/v1/workers/1/lease"),
    ("POST", "/v1/workers/1/results"),
    ("POST", "/v1/workers/1/release"),
    ("POST", "/v1/workers/1/stop"),
]
ADMIN_ROUTES = [
    ("GET", "/v1/tokens"),
    ("POST", "/v1/tokens"),
    ("DELETE", "/v1/tokens/1"),
    ("POST", "/v1/hardware/1/approve"),
]


def test_every_route_but_healthz_needs_a_token_of_the_right_role(api: Api):
    assert api.client.get("/healthz").json() == {"status": "ok", "database": api.db.engine.dialect.name}
    everything = CLIENT_ROUTES + WORKER_ROUTES + ADMIN_ROUTES + [("GET", "/metrics")]
    for method, path in everything:
        assert api.client.request(method, path).status_code == 401, path
        bad = api.client.request(method, path, headers={"Authorization": "Bearer tt_forged"})
        assert bad.status_code == 401, path
    wrong = [(r, "worker") for r in CLIENT_ROUTES] + [(r, "client") for r in WORKER_ROUTES]
    wrong += [(r, role) for r in ADMIN_ROUTES for role in ("client", "worker")]
    for (method, path), role in wrong:
        assert api.client.request(method, path, headers=api.as_(role)).status_code == 403, (path, role)


@pytest.mark.parametrize(
    ("method", "path", "role"),
    [
        ("GET", "/v1/tasks/{}", "client"),
        ("POST", "/v1/tasks/{}/cancel", "client"),
        ("GET", "/v1/records/{}", "client"),
        ("POST", "/v1/workers/{}/heartbeat", "worker"),
        ("POST", "/v1/workers/{}/stop", "worker"),
        ("DELETE", "/v1/tokens/{}", "admin"),
    ],
)
def test_an_id_out_of_the_databases_range_is_refused_naming_it(api: Api, method: str, path: str, role: str):
    """Found by the fuzzer: an id of 2**63 overflowed in the database driver (a 500); ids are 32-bit
    on PostgreSQL."""
    for bad in (2**31, 2**63, 0):
        reply = api.client.request(method, path.format(bad), headers=api.as_(role))
        assert reply.status_code == 422, reply.text
        assert reply.json()["detail"][0]["loc"][0] == "path"
    assert api.client.request(method, path.format(2**31 - 1), headers=api.as_(role)).status_code == 404


def test_a_worker_token_acts_only_for_its_own_workers(api: Api):
    mine = register(api)
    reply = api.client.post(
        "/v1/tokens", json={"role": "worker", "name": "bench-2"}, headers=api.as_("admin")
    )
    assert reply.status_code == 201
    other = {"Authorization": f"Bearer {reply.json()['token']}"}
    assert api.client.post(f"/v1/workers/{mine}/lease", json={"max": 1}, headers=other).status_code == 403
    assert (
        api.client.post(f"/v1/workers/{mine}/lease", json={"max": 1}, headers=api.as_("admin")).status_code
        == 200
    )
    assert api.client.post("/v1/workers/999/heartbeat", headers=api.as_("worker")).status_code == 404


def test_tokens_are_managed_by_admins(api: Api):
    created = api.client.post(
        "/v1/tokens", json={"role": "client", "name": "ci"}, headers=api.as_("admin")
    ).json()
    headers = {"Authorization": f"Bearer {created['token']}"}
    assert api.client.get("/v1/tasks", headers=headers).status_code == 200
    listed = api.client.get("/v1/tokens", headers=api.as_("admin")).json()
    assert "token" not in listed[0] and [t["name"] for t in listed][-1] == "ci"
    assert api.client.delete(f"/v1/tokens/{created['id']}", headers=api.as_("admin")).status_code == 204
    assert api.client.get("/v1/tasks", headers=headers).status_code == 401
    assert api.client.delete("/v1/tokens/999", headers=api.as_("admin")).status_code == 404
    bad_role = api.client.post("/v1/tokens", json={"role": "root", "name": "x"}, headers=api.as_("admin"))
    assert bad_role.status_code == 422


def test_the_last_admin_token_cannot_be_revoked(api: Api):
    """The probe revoked the service's only admin token: nobody could administer it any more."""
    own = next(
        t["id"] for t in api.client.get("/v1/tokens", headers=api.as_("admin")).json() if t["role"] == "admin"
    )
    last = api.client.delete(f"/v1/tokens/{own}", headers=api.as_("admin"))
    assert last.status_code == 409 and "last admin token" in last.json()["detail"]
    assert api.client.get("/v1/tokens", headers=api.as_("admin")).status_code == 200


def test_metrics_in_prometheus_format(api: Api):
    worker = register(api)
    submit(api, trials=2)
    api.loop.tick()
    measure(api, worker, lease(api, worker))
    # It beats as a live worker does: measuring on a loaded CI host outlasted the 2 s it stays seen.
    assert api.client.post(f"/v1/workers/{worker}/heartbeat", headers=api.as_("worker")).status_code == 200
    reply = api.client.get("/metrics", headers=api.as_("client"))
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    text = reply.text
    assert 'tuner_tasks{status="running"} 1.0' in text
    assert 'tuner_candidates{status="done"} 2.0' in text
    assert "tuner_workers_seen 1.0" in text
    assert 'tuner_results_total{outcome="accepted"}' in text
    assert 'tuner_http_request_seconds_bucket{le="0.005",route="/v1/workers/{worker_id}/lease"}' in text
    # Silent for 2 s, four heartbeats: gone, for the worker list and the metrics alike.
    with api.db.transaction() as session:
        session.get(WorkerRow, worker).last_seen_at = datetime.now(UTC) - timedelta(seconds=2)
    (listed,) = api.client.get("/v1/workers", headers=api.as_("client")).json()
    assert not listed["alive"]
    assert "tuner_workers_seen 0.0" in api.client.get("/metrics", headers=api.as_("client")).text


def test_the_dashboard_page_is_served_without_data(api: Api):
    page = api.client.get("/")
    assert page.status_code == 200 and "tensor-tuner" in page.text and "Bearer" in page.text
    schema = api.client.get("/openapi.json").json()
    assert "/v1/tasks" in schema["paths"] and "/" not in schema["paths"]


def test_candidates_keep_their_hardware(api: Api):
    """The lease query filters on the candidate's own hardware column: denormalized from the task."""
    worker = register(api)
    submit(api, trials=2)
    api.loop.tick()
    with api.db.transaction() as session:
        assert {c.hardware_id for c in session.query(CandidateRow)} == {1}
    assert len(lease(api, worker)) == 2


def test_a_worker_name_fits_the_records_worker_column(api: Api):
    """Records name their worker "<name>#<id>" in a 200-character column: a 200-character name was
    refused by PostgreSQL when the first result came (a 500)."""
    too_long = api.client.post(
        "/v1/workers", json={"name": "w" * 200, "hardware": HARDWARE}, headers=api.as_("worker")
    )
    assert too_long.status_code == 422 and too_long.json()["detail"][0]["loc"] == ["body", "name"]
    longest = register(api, "w" * WORKER_NAME_LENGTH)
    submit(api, trials=1)
    api.loop.tick()
    measure(api, longest, lease(api, longest))
    (record,) = api.client.post("/v1/best", json={"workload": SPEC}, headers=api.as_("client")).json()
    assert record["worker"] == f"{'w' * WORKER_NAME_LENGTH}#{longest}"


def test_results_for_candidates_of_other_hardware_are_refused(api: Api):
    mine = register(api, "w1")
    elsewhere = register(api, "w2", hardware_body(OTHER))
    submit(api, trials=2, hardware=HW.key)
    api.loop.tick()
    leased = lease(api, mine)
    assert results(api, elsewhere, leased) == ["refused", "refused"]
    assert results(api, mine, leased) == ["confirming", "confirming"]


def test_healthz_fails_once_the_sqlite_file_is_deleted_or_replaced(api: Api):
    """The probe deleted the SQLite file under a running coordinator: every request still answered
    200, /healthz too, and everything was gone at the next start."""
    path = api.db.engine.url.database
    if api.db.engine.dialect.name != "sqlite":
        assert api.db.file_problem() is None  # PostgreSQL: no file of ours
        return
    assert api.client.get("/healthz").status_code == 200
    moved = f"{path}.moved"
    os.rename(path, moved)
    deleted = api.client.get("/healthz")
    assert deleted.status_code == 503 and "was deleted" in deleted.json()["detail"]
    assert deleted.headers["Retry-After"] == "5"
    shutil.copy(moved, path)  # the same bytes, another file: a restore under a running coordinator
    assert "replaced by another file" in api.client.get("/healthz").json()["detail"]
    os.replace(moved, path)
    assert api.client.get("/healthz").status_code == 200


def test_lists_come_a_page_at_a_time(api: Api):
    """The probe's 3,000 tasks were 1.3 MB per GET /v1/tasks. A list answers `limit` rows after the
    id `after` (100 by default, 1,000 at most), and a full page names the next page's `after`; the
    typed client follows them."""
    register(api)
    ids = [submit(api, trials=1, seed=k)["id"] for k in range(5)]
    pages, after = [], None
    while True:
        reply = api.client.get(
            "/v1/tasks", params={"limit": 2} | ({"after": after} if after else {}), headers=api.as_("client")
        )
        assert reply.status_code == 200
        pages.append([t["id"] for t in reply.json()])
        after = reply.headers.get("X-Next-After")
        if after is None:
            break
    assert pages == [ids[:2], ids[2:4], ids[4:]]
    assert "X-Next-After" not in api.client.get("/v1/tasks", headers=api.as_("client")).headers
    too_many = api.client.get("/v1/tasks", params={"limit": 1001}, headers=api.as_("client"))
    assert too_many.status_code == 422 and "limit" in str(too_many.json()["detail"])
    with in_process_client(api, api.tokens["client"]) as client:
        assert [t.id for t in client.tasks()] == ids
    workers = api.client.get("/v1/workers", params={"limit": 1}, headers=api.as_("client"))
    assert len(workers.json()) == 1 and workers.headers["X-Next-After"] == str(workers.json()[0]["id"])
