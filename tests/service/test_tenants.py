"""Trust boundaries and fair use, through the REST API (issue 14's reproductions): tasks belong to the
token that submitted them; a result counts only from the worker holding the lease, never faster than
the hardware can run, and a new best only once a second lease re-measured it; a new kind of hardware
waits for an admin; per-token quotas; workloads that cannot finish a candidate in time, or whose
reference is not finite, are refused at submission."""

import logging

import pytest
from prometheus_client import REGISTRY

from tests.service.conftest import HW, OTHER, Api, hardware_body
from tests.service.test_api import SPEC, approve_hardware, lease, measure, register, results, submit
from tuner.cli import main


def token(api: Api, role: str, name: str) -> dict[str, str]:
    """Headers of a new token of `role`, made by the admin."""
    reply = api.client.post("/v1/tokens", json={"role": role, "name": name}, headers=api.as_("admin"))
    assert reply.status_code == 201, reply.text
    return {"Authorization": f"Bearer {reply.json()['token']}"}


def post_results(api: Api, worker: int, headers: dict, *results: dict) -> list[str]:
    reply = api.client.post(f"/v1/workers/{worker}/results", json={"results": list(results)}, headers=headers)
    assert reply.status_code == 200, reply.text
    return reply.json()["outcomes"]


# 1. Ownership.


def test_a_client_token_lists_reads_and_cancels_its_own_tasks_only(api: Api):
    worker = register(api)
    mine = submit(api, trials=2)
    other = token(api, "client", "second client")
    # The reproduction: a second client token could list, GET (200) and cancel (200) it.
    assert api.client.get("/v1/tasks", headers=other).json() == []
    hidden = api.client.get(f"/v1/tasks/{mine['id']}", headers=other)
    missing = api.client.get("/v1/tasks/999", headers=other)
    assert (hidden.status_code, hidden.json()) == (404, {"detail": f"no task {mine['id']}"})
    assert missing.status_code == 404  # told apart from a task that does not exist by nothing but the id
    assert api.client.post(f"/v1/tasks/{mine['id']}/cancel", headers=other).status_code == 404
    # The best records, the fleet's, are everyone's; which task measured them is the owner's to know.
    api.loop.tick()
    measure(api, worker, lease(api, worker))
    for headers, task_id in ((other, None), (api.as_("client"), mine["id"]), (api.as_("admin"), mine["id"])):
        best = api.client.post("/v1/best", json={"workload": SPEC, "k": 10}, headers=headers).json()
        assert len(best) == 2 and {r["task_id"] for r in best} == {task_id}
        record = api.client.get(f"/v1/records/{best[0]['id']}", headers=headers).json()
        assert record["task_id"] == task_id
    theirs = api.client.post("/v1/tasks", json={"workload": SPEC, "trials": 2}, headers=other).json()
    assert [t["id"] for t in api.client.get("/v1/tasks", headers=other).json()] == [theirs["id"]]
    assert [t["id"] for t in api.client.get("/v1/tasks", headers=api.as_("client")).json()] == [mine["id"]]
    everything = api.client.get("/v1/tasks", headers=api.as_("admin")).json()
    assert [t["id"] for t in everything] == [mine["id"], theirs["id"]]
    assert api.client.get(f"/v1/tasks/{theirs['id']}", headers=api.as_("admin")).status_code == 200
    assert api.client.get(f"/v1/tasks/{mine['id']}", headers=api.as_("client")).json()["status"] == "running"


# 2. Trust in results.


def test_a_worker_cannot_complete_another_workers_lease(api: Api):
    """The issue's reproduction: a worker with its own token and the same hardware key submitted
    results for candidates leased to another; they were accepted, and the real holder's came back
    'duplicate'."""
    holder = register(api, "bench-1")
    intruder_token = token(api, "worker", "bench-2")
    reply = api.client.post(
        "/v1/workers", json={"name": "bench-2", "hardware": hardware_body(HW)}, headers=intruder_token
    )
    intruder = reply.json()["id"]
    assert reply.json()["hardware_approved"]
    submit(api, trials=2)
    api.loop.tick()
    leased = lease(api, holder)
    forged = [{"candidate_id": c["id"], "status": "ok", "run_secs": [1e-3]} for c in leased]
    assert post_results(api, intruder, intruder_token, *forged) == ["refused", "refused"]
    assert api.client.post("/v1/best", json={"workload": SPEC}, headers=api.as_("client")).json() == []
    assert results(api, holder, leased) == ["confirming", "confirming"]  # the holder's still count


def test_a_forged_impossible_time_is_refused_and_flagged(api: Api, caplog: pytest.LogCaptureFixture):
    """The issue's reproduction: run_secs [1e-12] (sent with remeasured false, a field the protocol no
    longer has) became the best record, 524,288,000 GFLOPS for a 64^3 matmul."""
    worker = register(api)
    spec = {"op": "matmul", "params": {"M": 64, "N": 64, "K": 64}}
    submit(api, trials=3, workload=spec)
    api.loop.tick()
    a, b, c = lease(api, worker)
    before = REGISTRY.get_sample_value("tuner_results_total", {"outcome": "impossible"}) or 0.0
    forged = [{"candidate_id": x["id"], "status": "ok", "run_secs": [1e-12]} for x in (a, b)]
    with caplog.at_level(logging.WARNING, logger="tuner.service.routes.workers"):
        assert post_results(api, worker, api.as_("worker"), *forged) == ["refused", "refused"]
        assert post_results(api, worker, api.as_("worker"), forged[0]) == ["refused"]
    flagged = [r for r in caplog.records if "faster than its hardware can run" in r.getMessage()]
    assert len(flagged) == 1 and f"candidate {a['id']}" in flagged[0].getMessage()
    after = REGISTRY.get_sample_value("tuner_results_total", {"outcome": "impossible"})
    assert after == before + 3
    assert (
        'tuner_results_total{outcome="impossible"}'
        in api.client.get("/metrics", headers=api.as_("client")).text
    )
    assert api.client.post("/v1/best", json={"workload": spec}, headers=api.as_("client")).json() == []
    # A registered peak is the ceiling: 64^3 matmul's 524,288 flops at 1 GFLOPS take 0.52 ms at least.
    assert approve_hardware(api, hardware_body(HW), peak_gflops=1.0)["peak_gflops"] == 1.0
    one = {"candidate_id": c["id"], "status": "ok", "run_secs": [4e-4, 6e-4]}
    assert post_results(api, worker, api.as_("worker"), one) == ["refused"]
    # The holder's honest result still counts.
    measure(api, worker, [a])
    (best,) = api.client.post("/v1/best", json={"workload": spec}, headers=api.as_("client")).json()
    assert best["gflops"] < 1.0 and best["remeasured"]


def test_a_new_best_counts_only_once_a_second_lease_remeasured_it(api: Api):
    """A result that would be the best waits for a second lease (a worker cannot claim it re-measured
    it: the protocol has no such field); the record ranks by the slower of the two measurements, so
    one forged time cannot make the best."""
    w1, w2 = register(api, "w1"), register(api, "w2")
    submit(api, trials=2)
    api.loop.tick()
    a, b = lease(api, w1)
    lying = {"candidate_id": a["id"], "status": "ok", "run_secs": [1e-6] * 5}
    honest = {"candidate_id": b["id"], "status": "ok", "run_secs": [2e-3] * 5}
    claim = api.client.post(
        f"/v1/workers/{w1}/results",
        json={"results": [{**lying, "remeasured": True}]},
        headers=api.as_("worker"),
    )
    assert claim.status_code == 422 and "remeasured" in claim.text
    assert post_results(api, w1, api.as_("worker"), lying, honest) == ["confirming", "confirming"]
    assert api.client.post("/v1/best", json={"workload": SPEC}, headers=api.as_("client")).json() == []
    again = lease(api, w2)
    assert [c["id"] for c in again] == [a["id"], b["id"]]
    remeasured = [{"candidate_id": c["id"], "status": "ok", "run_secs": [3e-3] * 5} for c in again]
    assert post_results(api, w2, api.as_("worker"), *remeasured) == ["accepted", "accepted"]
    best = api.client.post("/v1/best", json={"workload": SPEC, "k": 2}, headers=api.as_("client")).json()
    assert [r["median_secs"] for r in best] == [3e-3, 3e-3]  # not 1e-6: w2's measurement decides
    assert best[0]["remeasured"] and len(best[0]["run_secs"]) == 10


def test_a_new_hardware_key_from_a_worker_token_waits_for_an_admin(api: Api):
    """The issue's reproduction: a worker token registering a new hardware key broke every client's
    POST /v1/tasks and /v1/best without `hardware` (422: several kinds of hardware match)."""
    register(api, "w1")
    stray = api.client.post(
        "/v1/workers", json={"name": "w2", "hardware": hardware_body(OTHER)}, headers=api.as_("worker")
    )
    assert stray.status_code == 201 and not stray.json()["hardware_approved"]
    assert submit(api, trials=2)["hardware_key"] == HW.key  # the default is unchanged
    best = api.client.post("/v1/best", json={"workload": SPEC}, headers=api.as_("client"))
    assert best.status_code == 200
    refused = api.client.post(
        "/v1/tasks", json={"workload": SPEC, "hardware": OTHER.key}, headers=api.as_("client")
    )
    assert refused.status_code == 422 and "no approved hardware matches" in refused.text
    listed = api.client.get("/v1/hardware", headers=api.as_("client")).json()
    assert [(h["key"], h["approved"]) for h in listed] == [(HW.key, True), (OTHER.key, False)]
    other_id = listed[1]["id"]
    assert api.client.post(f"/v1/hardware/{other_id}/approve", headers=api.as_("worker")).status_code == 403
    assert api.client.post("/v1/hardware/999/approve", headers=api.as_("admin")).status_code == 404
    assert api.client.post(f"/v1/hardware/{other_id}/approve", headers=api.as_("admin")).json()["approved"]
    assert submit(api, trials=2, hardware=OTHER.key)["hardware_key"] == OTHER.key
    ambiguous = api.client.post("/v1/tasks", json={"workload": SPEC}, headers=api.as_("client"))
    assert ambiguous.status_code == 422 and "several kinds of hardware match" in ambiguous.text


def test_an_admin_token_registers_a_new_kind_of_hardware_approved(api: Api):
    reply = api.client.post(
        "/v1/workers", json={"name": "w", "hardware": hardware_body(OTHER)}, headers=api.as_("admin")
    )
    assert reply.json()["hardware_approved"]
    assert submit(api, trials=1)["hardware_key"] == OTHER.key


# 6. Fair use.

CONV_4096 = {
    "op": "conv2d_nchw",
    "params": {"N": 1, "C": 1, "H": 4096, "W": 4096, "K": 1, "R": 4096, "S": 4096, "padding": 2048},
}
TRIPLE_SUM = {
    "expr": "Y[i] = sum(A[i] * B[j] * C[k], j, k)",
    "inputs": {"A": [65536], "B": [4096], "C": [1024]},
}


@pytest.mark.parametrize(
    "workload",
    [TRIPLE_SUM, CONV_4096, {"op": "matmul", "params": {"M": 9459, "N": 9459, "K": 9459}}],
    ids=["triple-sum", "conv2d-R4096", "matmul-9459"],
)
def test_a_workload_that_cannot_finish_one_candidate_in_time_is_refused(api: Api, workload: dict):
    register(api)
    reply = api.client.post("/v1/tasks", json={"workload": workload, "trials": 1}, headers=api.as_("admin"))
    assert reply.status_code == 422, reply.text
    (error,) = reply.json()["detail"]
    assert error["loc"] == ["body", "workload"] and "every candidate would time out" in error["msg"]


@pytest.mark.parametrize(
    "workload",
    [
        {"op": "matmul", "params": {"M": 1024, "N": 1024, "K": 1024}},
        {
            "op": "conv2d_nchw",
            "params": {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "padding": 1},
        },
        {"op": "dense_bias", "params": {"batch": 128, "in_features": 768, "out_features": 3072}},
        {"op": "softmax", "params": {"M": 128, "N": 30522}},
    ],
    ids=["matmul-1024", "resnet-conv", "bert-dense", "softmax"],
)
def test_normal_layer_shapes_are_accepted(api: Api, workload: dict):
    register(api)
    assert submit(api, trials=8, workload=workload)["status"] == "pending"


@pytest.mark.parametrize(
    "expr", ["Y[i] = A[i] / 0", "Y[i] = log(-1*A[i]*A[i])"], ids=["division-by-zero", "log-of-negative"]
)
def test_a_spec_whose_reference_is_not_finite_is_refused(api: Api, expr: str):
    register(api)
    body = {"workload": {"expr": expr, "inputs": {"A": [1024]}}}
    reply = api.client.post("/v1/tasks", json=body, headers=api.as_("client"))
    assert reply.status_code == 422, reply.text
    (error,) = reply.json()["detail"]
    assert error["loc"] == ["body", "workload", "expr"] and "reference is not finite" in error["msg"]


def test_quotas_are_per_client_token(api: Api):
    register(api)
    settings = api.client.app.state.settings
    api.client.app.state.settings = settings.model_copy(
        update={"quota_active_tasks": 2, "quota_trials": 10, "quota_worker_hours": 1.0}
    )
    first, _ = submit(api, trials=4), submit(api, trials=4)
    third = api.client.post("/v1/tasks", json={"workload": SPEC, "trials": 1}, headers=api.as_("client"))
    assert third.status_code == 429 and "2 active tasks, its quota is 2" in third.json()["detail"]
    api.client.post(f"/v1/tasks/{first['id']}/cancel", headers=api.as_("client"))
    too_many = api.client.post("/v1/tasks", json={"workload": SPEC, "trials": 7}, headers=api.as_("client"))
    assert too_many.status_code == 429 and "over its quota of 10" in too_many.json()["detail"]
    assert submit(api, trials=6)["trials"] == 6
    # Another client has its own quota, and an admin none.
    other = token(api, "client", "second client")
    assert (
        api.client.post("/v1/tasks", json={"workload": SPEC, "trials": 10}, headers=other).status_code == 201
    )
    admin = api.client.post("/v1/tasks", json={"workload": SPEC, "trials": 100}, headers=api.as_("admin"))
    assert admin.status_code == 201
    # Worker time: a 1024^3 matmul's candidate is estimated at seconds (9 runs of 2.1 GFLOP at 2 GFLOPS
    # per core), over a quota of 3.6 ms.
    api.client.app.state.settings = settings.model_copy(update={"quota_worker_hours": 1e-6})
    big = {"op": "matmul", "params": {"M": 1024, "N": 1024, "K": 1024}}
    heavy = api.client.post(
        "/v1/tasks", json={"workload": big, "trials": 1}, headers=token(api, "client", "c3")
    )
    assert heavy.status_code == 429 and "worker-hours" in heavy.json()["detail"]


def test_the_hardware_command_lists_and_approves_kinds_of_hardware(api: Api, capsys: pytest.CaptureFixture):
    register(api, "w1", hardware_body(OTHER), approve=False)
    database = ["--database", api.client.app.state.settings.database_url]
    assert main(["hardware", "list", *database]) == 0
    assert "waiting" in capsys.readouterr().out
    assert main(["hardware", "approve", "1", "--peak-gflops", "250", *database]) == 0
    (listed,) = api.client.get("/v1/hardware", headers=api.as_("client")).json()
    assert (listed["key"], listed["approved"], listed["peak_gflops"]) == (OTHER.key, True, 250.0)
    assert main(["hardware", "approve", "7", *database]) == 1
    assert main(["hardware", "approve", *database]) == 2
