"""Every route of the app, hit with what schemathesis does not send: JSON escapes of lone UTF-16
surrogates (in values and in keys, at any depth), NUL, numbers of the wrong type or far out of range,
unknown keys, nesting past what the JSON parser allows, bytes that are not UTF-8 in paths, queries and
bodies. No answer may be a 5xx or an exception out of the app (a real server's reset connection), and
every answer must be JSON a strict parser reads (no echoed surrogate).

The routes are read from the app, so a new one is covered without touching this file; a new request
model needs a valid example in api_routes.EXAMPLES (a test says so), from which most cases are
mutated, so they get past the first check into the deeper ones. Cases are derandomized: a run is
repeatable and bounded in time. On SQLite only: what these requests reach is validation, which is the
same on both backends (test_fuzz sends valid requests to PostgreSQL).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_from_bytes

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import fresh_database
from tests.service.api_routes import ENDPOINTS, EXAMPLES, SPEC, Endpoint
from tests.service.conftest import HARDWARE, service_settings
from tuner.database.tokens import create_token
from tuner.service.app import create_app
from tuner.service.task_loop import TaskLoop

EXAMPLES_PER_ROUTE = 60
OUTCOMES: Counter[str] = Counter()  # "METHOD path status" -> cases, printed at the end (pytest -s)


# Hostile values.
surrogate = st.characters(categories=["Cs"])
hostile_text = st.one_of(
    st.text(st.one_of(st.characters(), surrogate), max_size=12),
    st.sampled_from(["\ud800", "\udfff", "a\ud83d", "\x00", "a\x00b", "", " ", "x" * 300, "☃"]),
)
hostile_number = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**31, 2**31 - 1, 2**63, 2**64, 10**30, 1e308, 5e-324, -0.0, 1000.0]),
)
leaf = st.one_of(hostile_text, hostile_number, st.booleans(), st.none())
hostile_json = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)


def paths_in(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every key path into a JSON value (the value itself is ())."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths_in(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths_in(child, (*prefix, index))


def edited(value: Any, path: tuple, action: str, new: Any, key: str) -> Any:
    """A copy of `value` with the item at `path` replaced by `new`, deleted, or (a dict) given an
    extra `key`."""
    if not path:
        if action == "add" and isinstance(value, dict):
            return {**value, key: new}
        return new
    head, rest = path[0], path[1:]
    if not rest and action == "delete":
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if k != head}
        return [v for i, v in enumerate(value) if i != head]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = edited(value[head], rest, action, new, key)
    return copy


@st.composite
def mutated(draw: st.DrawFn, example: dict[str, Any]) -> Any:
    value = example
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(paths_in(value))))
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        value = edited(value, path, action, draw(hostile_json), draw(hostile_text))
    return value


def as_json(value: Any) -> bytes:
    """JSON as a hostile client writes it: surrogates as \\u escapes, NaN and Infinity as Python does."""
    return json.dumps(value, ensure_ascii=True).encode()


def too_deep(depth: int) -> bytes:
    return b'{"workload": ' + b"[" * depth + b"]" * depth + b"}"


raw_bytes = st.binary(max_size=12)


@st.composite
def bodies(draw: st.DrawFn, model: str | None) -> bytes | None:
    example = EXAMPLES.get(model or "", {})
    kinds = ["mutated", "json", "bytes", "deep"] if model else ["none", "json", "bytes"]
    kind = draw(st.sampled_from(kinds))
    if kind == "none":
        return None
    if kind == "mutated":
        return as_json(draw(mutated(example)))
    if kind == "json":
        return as_json(draw(hostile_json))
    if kind == "deep":
        return too_deep(draw(st.sampled_from([100, 900, 990, 1100, 5000])))
    return draw(raw_bytes)


def path_value() -> st.SearchStrategy[str]:
    """A path parameter: an id that exists or not, a huge or negative number, any bytes escaped."""
    return st.one_of(
        st.sampled_from(["1", "2", "3", "0", "-1", str(2**31), str(2**64), "1e3", "1.0", "true"]),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        raw_bytes.map(lambda b: quote_from_bytes(b, safe="")),
        st.sampled_from(["%ED%A0%80", "%00", "%FF%FE", "%C0%AF"]),
    )


@st.composite
def requests(draw: st.DrawFn, endpoint: Endpoint, token_ids: frozenset[str]) -> tuple[str, bytes | None, str]:
    """(URL, body, whose token) for one case."""

    def fill(match: re.Match[str]) -> str:
        value = draw(path_value())
        # Revoking the test's own tokens would turn every later case into a 401.
        return "1" if match.group(1) == "token_id" and value in token_ids else value

    url = re.sub(r"\{(\w+)\}", fill, endpoint.path)
    names = [*endpoint.query, "unknown"]
    query = draw(st.lists(st.tuples(st.sampled_from(names), path_value()), max_size=3))
    if query:
        url += "?" + "&".join(f"{name}={value}" for name, value in query)
    role = draw(st.sampled_from(["admin", "admin", "admin", "client", "worker", None]))
    return url, draw(bodies(endpoint.body)), role


@dataclass
class ServedClient:
    client: TestClient
    tokens: dict[str, str]
    token_ids: frozenset[str]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedClient]:
    """The app on a SQLite file with ids 1..3 of workers, tasks, candidates, records and tokens, and a
    model."""
    with fresh_database("sqlite", tmp_path_factory.mktemp("hostile")) as url:
        settings = service_settings(url)
        app = create_app(settings)
        with TestClient(app) as client:
            db = app.state.db
            for role in ("client", "worker", "admin"):
                create_token(db, role=role, name=f"spare {role}")
            made = {role: create_token(db, role=role, name=role) for role in ("client", "worker", "admin")}
            served = ServedClient(
                client, {r: t[1] for r, t in made.items()}, frozenset(str(t[0]) for t in made.values())
            )
            seed(served, TaskLoop(db, settings, owner="hostile-seed"))
            yield served
    print(f"\nhostile input: {sum(OUTCOMES.values())} cases")
    for outcome, n in sorted(OUTCOMES.items()):
        print(f"  {outcome}: {n}")


def seed(served: ServedClient, loop: TaskLoop) -> None:
    def post(path: str, body: dict[str, Any], role: str) -> Any:
        reply = served.client.post(
            path, json=body, headers={"Authorization": f"Bearer {served.tokens[role]}"}
        )
        assert reply.status_code < 300, reply.text
        return reply.json()

    for name in ("w1", "w2", "w3"):
        post("/v1/workers", {"name": name, "hardware": HARDWARE}, "worker")
    post("/v1/hardware/1/approve", {}, "admin")  # a worker token's new kind of machine waits for it
    for m in (16, 24, 32):
        post("/v1/tasks", {"workload": {**SPEC, "params": {**SPEC["params"], "M": m}}, "trials": 8}, "client")
    post("/v1/models", EXAMPLES["ModelCreate"], "client")
    loop.tick()
    leased = post("/v1/workers/1/lease", {"max": 4}, "worker")["candidates"]
    measured = [{"candidate_id": c["id"], "status": "ok", "run_secs": [1e-4]} for c in leased[:3]]
    post("/v1/workers/1/results", {"results": measured}, "worker")


def test_every_request_model_has_an_example():
    models = {e.body for e in ENDPOINTS if e.body}
    assert models <= set(EXAMPLES), f"add a valid example of {models - set(EXAMPLES)} to EXAMPLES"


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
@settings(
    max_examples=EXAMPLES_PER_ROUTE,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_input_makes_a_server_error(served: ServedClient, endpoint: Endpoint, data: st.DataObject):
    url, body, role = data.draw(requests(endpoint, served.token_ids))
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if role:
        headers["Authorization"] = f"Bearer {served.tokens[role]}"
    # An exception out of the app is raised here: what a real server turns into a reset connection.
    reply = served.client.request(endpoint.method, url, content=body, headers=headers)
    OUTCOMES[f"{endpoint} {reply.status_code}"] += 1
    assert reply.status_code < 500, (url, body, reply.text)
    if reply.content and reply.headers.get("content-type", "").startswith("application/json"):
        strings_in(json.loads(reply.content.decode("utf-8")))


def strings_in(value: Any) -> None:
    """Fails unless every string in a parsed answer is valid Unicode (a strict parser would refuse a
    lone surrogate escape)."""
    if isinstance(value, str):
        value.encode("utf-8")
    elif isinstance(value, dict):
        for key, child in value.items():
            strings_in(key)
            strings_in(child)
    elif isinstance(value, list):
        for child in value:
            strings_in(child)
