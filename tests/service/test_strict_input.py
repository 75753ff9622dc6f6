"""Request bodies are strict: each number and flag must have its JSON type, and every string must be
text the database can store. Each refusal is a 422 naming the field, written as JSON any client reads,
and stores nothing."""

import json

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from tests.service.conftest import HARDWARE, Api
from tests.service.test_api import SPEC, lease, register, results, submit
from tuner.service.errors import field_error, install_error_handlers

SURROGATE = '"\\ud800"'  # the JSON escape of a lone UTF-16 surrogate, as a client writes it


def raw_post(api: Api, path: str, text: str, role: str):
    """POST a body written by hand: json= cannot write a lone surrogate escape."""
    headers = {**api.as_(role), "Content-Type": "application/json"}
    return api.client.post(path, content=text.encode(), headers=headers)


def refusal(reply) -> list[list]:
    """The locations a 422 names; its body must be valid UTF-8 JSON with no surrogate left in it."""
    assert reply.status_code == 422, reply.text
    json.dumps(json.loads(reply.content.decode("utf-8")), ensure_ascii=False).encode("utf-8")
    return [error["loc"] for error in reply.json()["detail"]]


def test_lone_surrogates_are_refused_naming_the_field(api: Api):
    """The seven places the review found a 500 (and a closed connection)."""
    worker = register(api)
    submit(api, trials=2)
    api.loop.tick()
    (candidate, _) = lease(api, worker)
    spec = json.dumps(SPEC)
    result = f'{{"candidate_id": {candidate["id"]}, "status": "timeout", "message": {SURROGATE}}}'
    cases = [
        ("/v1/tokens", f'{{"role": "client", "name": {SURROGATE}}}', "admin", ["body", "name"]),
        ("/v1/tasks", f'{{"workload": {spec}, "hardware": "\\udfff"}}', "client", ["body", "hardware"]),
        ("/v1/tasks", f'{{"workload": {spec}, {SURROGATE}: 1}}', "client", ["body"]),
        (
            "/v1/tasks",
            f'{{"workload": {{"op": "matmul", "params": {{{SURROGATE}: 4}}}}}}',
            "client",
            ["body", "workload"],
        ),
        ("/v1/best", f'{{"workload_hash": {SURROGATE}}}', "client", ["body", "workload_hash"]),
        (
            "/v1/workers",
            f'{{"name": {SURROGATE}, "hardware": {json.dumps(HARDWARE)}}}',
            "worker",
            ["body", "name"],
        ),
        (
            f"/v1/workers/{worker}/results",
            f'{{"results": [{result}]}}',
            "worker",
            ["body", "results", 0, "message"],
        ),
    ]
    for path, text, role, loc in cases:
        assert loc in refusal(raw_post(api, path, text, role)), (path, text)
    # Deep in a workload spec, the message says where.
    nested = f'{{"workload": {{"op": "matmul", "params": {{"M": [{{"x": {SURROGATE}}}]}}}}}}'
    (detail,) = raw_post(api, "/v1/tasks", nested, "client").json()["detail"]
    assert detail["msg"] == "params.M[0].x: text must be valid Unicode without NUL"
    # nothing of the above was stored: the candidate's first result is a would-be best, held for a
    # second lease to re-measure
    assert results(api, worker, [candidate]) == ["confirming"]
    assert [t["id"] for t in api.client.get("/v1/tasks", headers=api.as_("client")).json()] == [1]


def test_an_error_echoing_an_unwritable_value_writes_its_escape(api: Api):
    """A validation error echoes the input, with the surrogate as its escape text."""
    register(api)
    reply = raw_post(api, "/v1/tasks", f'{{"workload": {{"op": {SURROGATE}}}}}', "client")
    assert refusal(reply) == [["body", "workload"]]
    assert reply.json()["detail"][0]["input"] == {"op": "\\ud800"}


def test_http_errors_write_any_detail():
    """An HTTP error naming a culprit key that UTF-8 cannot encode, or with NaN or an exception in its
    detail, is still written (it was a 500 and a closed connection)."""
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/field")
    def field() -> None:
        raise field_error("params.\ud800", "unknown parameter")

    @app.get("/odd")
    def odd() -> None:
        raise HTTPException(
            409, {"value": float("nan"), "error": ValueError("\udfff"), "deep": [[[[[[[[[[1]]]]]]]]]]}
        )

    with TestClient(app) as client:
        assert refusal(client.get("/field")) == [["body", "params", "\\ud800"]]
        odd = client.get("/odd")
        assert odd.status_code == 409
        assert odd.json()["detail"] == {"value": None, "error": "\\udfff", "deep": [[[[[[["..."]]]]]]]}


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/v1/tasks", {"workload": SPEC, "trials": "10"}, ["body", "trials"]),
        ("/v1/tasks", {"workload": SPEC, "trials": 1000.0}, ["body", "trials"]),
        ("/v1/tasks", {"workload": SPEC, "trials": True}, ["body", "trials"]),
        ("/v1/tasks", {"workload": SPEC, "seed": 1.5}, ["body", "seed"]),
        ("/v1/tasks", {"workload": SPEC, "seed": False}, ["body", "seed"]),
        ("/v1/best", {"workload": SPEC, "k": "2"}, ["body", "k"]),
        ("/v1/best", {"workload": SPEC, "k": True}, ["body", "k"]),
        ("/v1/workers", {"name": "w", "hardware": {**HARDWARE, "cores": "8"}}, ["body", "hardware", "cores"]),
        ("/v1/workers", {"name": "w", "hardware": {**HARDWARE, "cores": 8.0}}, ["body", "hardware", "cores"]),
        ("/v1/workers", {"name": 7, "hardware": HARDWARE}, ["body", "name"]),
        ("/v1/workers/1/lease", {"max": "2"}, ["body", "max"]),
        ("/v1/workers/1/lease", {"max": True}, ["body", "max"]),
        ("/v1/workers/1/release", {"candidate_ids": ["1"]}, ["body", "candidate_ids", 0]),
        ("/v1/workers/1/release", {"candidate_ids": [1.0]}, ["body", "candidate_ids", 0]),
        ("/v1/tokens", {"role": "client", "name": 1}, ["body", "name"]),
    ],
)
def test_numbers_strings_and_flags_must_have_their_json_type(api: Api, path: str, body: dict, loc: list):
    register(api)
    role = "admin"
    assert loc in refusal(api.client.post(path, json=body, headers=api.as_(role)))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("candidate_id", "5"),
        ("candidate_id", 5.0),
        ("run_secs", ["1e-3"]),
        ("run_secs", [True]),
        ("build_secs", "0.5"),
        ("build_secs", True),
        ("remeasured", False),  # not a field of the protocol: refused whatever its value
        ("status", 1),
    ],
)
def test_a_result_with_a_field_of_the_wrong_type_is_refused(api: Api, field: str, value: object):
    worker = register(api)
    submit(api, trials=1)
    api.loop.tick()
    (candidate,) = lease(api, worker)
    result = {"candidate_id": candidate["id"], "status": "ok", "run_secs": [1e-3], field: value}
    reply = api.client.post(
        f"/v1/workers/{worker}/results", json={"results": [result]}, headers=api.as_("worker")
    )
    assert ["body", "results", 0, field] in [loc[:4] for loc in refusal(reply)]
    assert results(api, worker, [candidate]) == ["confirming"]  # the refused one was not stored


def test_json_numbers_of_either_kind_are_seconds(api: Api):
    """A float field takes a JSON integer (JSON has one number type): 1 second is 1 second."""
    worker = register(api)
    submit(api, trials=1)
    api.loop.tick()
    (candidate,) = lease(api, worker)
    result = {"candidate_id": candidate["id"], "status": "ok", "run_secs": [1], "build_secs": 2}
    reply = api.client.post(
        f"/v1/workers/{worker}/results", json={"results": [result]}, headers=api.as_("worker")
    )
    assert reply.json() == {"outcomes": ["confirming"]}  # taken, as a would-be best
