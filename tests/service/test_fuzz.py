"""The REST API fuzzed from its own OpenAPI schema (schemathesis, in process, no server).

With an admin token, every operation gets generated requests, valid and invalid, against a database
seeded so that ids 1..3 of tasks, workers, records, candidates and tokens exist: no answer may be a
5xx, and each must be one the schema documents (status, content type, headers, body). This runs on
SQLite, and with valid requests on PostgreSQL, which refuses values SQLite stores (NUL in text, ids
past 32 bits); invalid requests never reach a database, so sending them twice would only cost time.

Without a token, with a forged one and with one of the wrong role, every operation but /healthz must
refuse: 401, or 403 for the wrong role, never a 2xx or 5xx. That depends on no database: SQLite only.
Those requests are well-formed: a body that is not JSON at all is a 400/422 before the token is read.

Examples per operation are fixed and derandomized, so a run is repeatable and bounded in time.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import fresh_database
from tests.service.api_routes import EXAMPLES
from tests.service.conftest import HARDWARE, service_settings
from tuner.database.tokens import create_token
from tuner.service.app import create_app
from tuner.service.settings import Settings
from tuner.service.task_loop import TaskLoop

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# The role each operation takes ("any": every role; "none": no token), and a role it refuses.
ROLES = {
    "POST /v1/tasks": "client",
    "GET /v1/tasks": "client",
    "GET /v1/tasks/{task_id}": "client",
    "POST /v1/tasks/{task_id}/cancel": "client",
    "POST /v1/best": "client",
    "GET /v1/workloads/{workload_hash}/best": "client",
    "GET /v1/records/{record_id}": "client",
    "GET /v1/workers": "client",
    "GET /v1/hardware": "client",
    "POST /v1/hardware/{hardware_id}/approve": "admin",
    "POST /v1/workers": "worker",
    "POST /v1/workers/{worker_id}/heartbeat": "worker",
    "POST /v1/workers/{worker_id}/lease": "worker",
    "POST /v1/workers/{worker_id}/results": "worker",
    "POST /v1/workers/{worker_id}/release": "worker",
    "POST /v1/workers/{worker_id}/stop": "worker",
    "GET /v1/tokens": "admin",
    "POST /v1/tokens": "admin",
    "DELETE /v1/tokens/{token_id}": "admin",
    "POST /v1/models": "client",
    "GET /v1/models": "client",
    "GET /v1/models/{model_id}": "client",
    "POST /v1/models/{model_id}/cancel": "client",
    "GET /v1/models/{model_id}/artifact": "client",
    "GET /metrics": "any",
    "GET /healthz": "none",
}
WRONG_ROLE = {"client": "worker", "worker": "client", "admin": "client"}
ROLES_OF_TOKENS = ("client", "worker", "admin")


def http_only(app: FastAPI):
    """The app as schemathesis calls it: HTTP only. The fixture's TestClient runs the app's lifespan
    (which opens the database) and ends it; schemathesis would keep it running until the process exits."""

    async def serve(scope, receive, send):
        if scope["type"] != "http":
            raise RuntimeError("the test runs the lifespan")  # schemathesis reads this as "no lifespan"
        await app(scope, receive, send)

    return serve


# The schema as the app serves it (serving it opens no database).
APP = create_app(Settings(database_url="sqlite://"))
schema = schemathesis.openapi.from_asgi("/openapi.json", http_only(APP))
# Valid requests only: for PostgreSQL and for the refusals.
well_formed = schemathesis.openapi.from_asgi(
    "/openapi.json",
    http_only(APP),
    config=schemathesis.Config.from_dict({"generation": {"mode": "positive"}}),
)


@dataclass(frozen=True)
class ServedApp:
    """The app on a seeded database, HTTP only, with the secrets of its tokens."""

    app: object
    tokens: dict[str, str]  # role -> token
    token_ids: set[int]  # the tests' own tokens: the fuzzer must not revoke them

    def as_(self, role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}


@pytest.fixture
def served(request: pytest.FixtureRequest) -> ServedApp:
    """The app on a seeded database of the backend the test names. The module's operations share its
    state as clients would (a task one cancels is cancelled for the next): a copy per operation would
    isolate them, but costs a second and a half per operation on PostgreSQL (CREATE, DROP DATABASE)."""
    return request.getfixturevalue(f"served_on_{request.param}")


@pytest.fixture(scope="module")
def served_on_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    # Two module fixtures, not one parametrized: pytest-xdist hands a worker tests of both backends
    # in any order, and a parametrized one would be set up again at each switch.
    yield from serve("sqlite", tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="module")
def served_on_postgresql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    yield from serve("postgresql", tmp_path_factory.mktemp("fuzz"))


def serve(kind: str, directory: Path) -> Iterator[ServedApp]:
    with fresh_database(kind, directory) as url:
        settings = service_settings(url)
        app = create_app(settings)
        with TestClient(app) as client:
            db = app.state.db
            for role in ROLES_OF_TOKENS:  # ids 1..3, for the fuzzer to revoke
                create_token(db, role=role, name=f"spare {role}")
            tokens = {role: create_token(db, role=role, name=f"fuzz {role}") for role in ROLES_OF_TOKENS}
            served = ServedApp(
                http_only(app), {r: t[1] for r, t in tokens.items()}, {t[0] for t in tokens.values()}
            )
            seed(client, TaskLoop(db, settings, owner="fuzz-seed"), served)
            yield served


def seed(client: TestClient, loop: TaskLoop, served: ServedApp) -> None:
    """Three workers of approved hardware, three tasks with candidates queued, four of them leased and
    three measured (held as would-be bests, leased again and re-measured), and a model."""

    def post(path: str, body: dict, role: str, expect: int = 200) -> dict:
        reply = client.post(path, json=body, headers=served.as_(role))
        assert reply.status_code == expect, reply.text
        return reply.json()

    for name in ("w1", "w2", "w3"):
        post("/v1/workers", {"name": name, "hardware": HARDWARE}, "worker", 201)
    post("/v1/hardware/1/approve", {}, "admin")
    for m in (16, 24, 32):
        spec = {"op": "matmul", "params": {"M": m, "N": 16, "K": 8}}
        post("/v1/tasks", {"workload": spec, "trials": 8, "strategy": "random"}, "client", 201)
    post("/v1/models", EXAMPLES["ModelCreate"], "client", 201)
    loop.tick()
    leased = post("/v1/workers/1/lease", {"max": 4}, "worker")["candidates"]
    measured = [{"candidate_id": c["id"], "status": "ok", "run_secs": [1e-4, 2e-4]} for c in leased[:3]]
    assert post("/v1/workers/1/results", {"results": measured}, "worker")["outcomes"] == ["confirming"] * 3
    assert len(post("/v1/workers/2/lease", {"max": 3}, "worker")["candidates"]) == 3
    assert post("/v1/workers/2/results", {"results": measured}, "worker")["outcomes"] == ["accepted"] * 3


HYPOTHESIS = {
    "deadline": None,
    "derandomize": True,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}


@schema.parametrize()
@pytest.mark.parametrize("served", ["sqlite"], indirect=True)
@settings(max_examples=20, **HYPOTHESIS)
def test_no_server_errors_and_every_answer_is_documented(case: schemathesis.Case, served: ServedApp):
    call_as_admin(case, served)


@well_formed.parametrize()
@pytest.mark.parametrize("served", ["postgresql"], indirect=True)
@settings(max_examples=20, **HYPOTHESIS)
def test_valid_requests_reach_postgresql_without_server_errors(case: schemathesis.Case, served: ServedApp):
    """Invalid requests are refused before any query, the same on both backends: on PostgreSQL only
    valid ones are sent, whose values reach the database."""
    call_as_admin(case, served)


def call_as_admin(case: schemathesis.Case, served: ServedApp) -> None:
    if case.path_parameters and case.path_parameters.get("token_id") in served.token_ids:
        case.path_parameters["token_id"] = 1  # revoking the tests' own tokens would end their fuzz
    case.call_and_validate(app=served.app, headers=served.as_("admin"), checks=CHECKS)


@well_formed.exclude(path="/healthz").parametrize()
@pytest.mark.parametrize("served", ["sqlite"], indirect=True)
@settings(max_examples=10, **HYPOTHESIS)
def test_every_operation_refuses_a_missing_forged_or_wrong_token(case: schemathesis.Case, served: ServedApp):
    role = ROLES[case.operation.label]
    case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
    attempts = [({}, 401), ({"Authorization": "Bearer tt_forged"}, 401)]
    if role in WRONG_ROLE:
        attempts.append((served.as_(WRONG_ROLE[role]), 403))
    for headers, expected in attempts:
        reply = case.call_and_validate(app=served.app, headers=headers, checks=CHECKS)
        # The body limit is checked first: an oversized body is refused unread, whoever sends it.
        assert reply.status_code in (expected, 413), (headers, reply.status_code, reply.text)


def test_the_role_table_names_every_operation():
    operations = {
        f"{method.upper()} {path}" for path, ops in APP.openapi()["paths"].items() for method in ops
    }
    assert operations == set(ROLES)
