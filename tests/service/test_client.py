"""The REST API's client: each method answers with the model its route declares, a request its model
refuses is never sent, and an answer that is not the declared model is one error naming the request."""

import json
from collections.abc import Callable

import httpx
import pytest

from tests.service.conftest import Api, in_process_client
from tests.service.test_api import HW, SPEC, lease, measure, register
from tuner.database import TaskStatus
from tuner.service.client import ApiError, BadResponse, Client
from tuner.service.schemas import QueuePublic, RecordPublic, TaskDetail, TaskPublic


def test_each_method_answers_with_the_model_of_its_route(api: Api):
    worker = register(api)
    with in_process_client(api, api.tokens["client"]) as client:
        task = client.submit(SPEC, trials=3, strategy="random", hardware=HW.key)
        assert type(task) is TaskPublic and task.status == TaskStatus.PENDING and task.best is None
        api.loop.tick()
        measure(api, worker, lease(api, worker))
        api.loop.tick()
        detail = client.task(task.id)
        assert isinstance(detail, TaskDetail) and detail.status == TaskStatus.DONE and detail.best
        assert detail.queue == QueuePublic(pending=0, leased=0, done=3) and len(detail.curve) == 3
        (listed,) = client.tasks()
        assert type(listed) is TaskPublic and listed.id == task.id and listed.best == detail.best
        records = client.best(SPEC, k=5)
        assert len(records) == 3 and all(isinstance(r, RecordPublic) for r in records)
        assert records[0].id == detail.best.record_id and records[0].gflops == detail.best.gflops
        cancelled = client.cancel(client.submit(SPEC, trials=2, seed=1).id)
        assert type(cancelled) is TaskPublic and cancelled.status == TaskStatus.CANCELLED
        with pytest.raises(ApiError) as refused:
            client.cancel(task.id)
    assert refused.value.status == 409 and refused.value.summary == f"task {task.id} has already ended"


def answering(coordinator: Callable[[httpx.Request], httpx.Response]) -> Client:
    """A client whose requests `coordinator` answers."""
    client = Client("http://coordinator", "t")
    client.http = httpx.Client(base_url="http://coordinator", transport=httpx.MockTransport(coordinator))
    return client


def test_a_request_is_its_model_and_one_the_model_refuses_is_never_sent():
    sent = []

    def coordinator(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=[])

    with answering(coordinator) as client:
        assert client.best(SPEC, hardware="hw", k=2) == []
        with pytest.raises(ApiError) as k:
            client.best(SPEC, k=0)
        with pytest.raises(ApiError) as trials:
            client.submit(SPEC, trials=0)
    assert sent == [{"workload": SPEC, "hardware": "hw", "k": 2}]
    # Refused as the coordinator refuses it, so the commands' output is the same either way.
    assert k.value.status == 422 and k.value.summary == "k: Input should be greater than or equal to 1"
    assert trials.value.summary == "trials: Input should be greater than or equal to 1"


@pytest.mark.parametrize(
    ("answer", "culprits"),
    [
        (
            {"id": 3, "status": "done"},
            "workload_name: Field required; workload_hash: Field required; workload_spec: Field required; "
            "and 11 more",
        ),
        ("<html>It works!</html>", "Invalid JSON: expected value at line 1 column 1"),
    ],
)
def test_an_answer_that_is_not_the_declared_model_is_one_clear_error(answer: object, culprits: str):
    reply = httpx.Response(200, json=answer) if isinstance(answer, dict) else httpx.Response(200, text=answer)
    with answering(lambda request: reply) as client, pytest.raises(BadResponse) as bad:
        client.task(3)
    assert str(bad.value) == f"GET /v1/tasks/3: the answer is not a TaskDetail: {culprits}"


def test_a_list_answer_names_the_culprit_item():
    answers = {"/v1/best": [{"id": 1}], "/v1/tasks": {"tasks": []}}
    client = answering(lambda request: httpx.Response(200, json=answers[request.url.path]))
    with pytest.raises(BadResponse) as bad:
        client.best(SPEC)
    assert str(bad.value).startswith(
        "POST /v1/best: the answer is not a list[RecordPublic]: 0.workload_hash: Field required; "
    )
    with pytest.raises(BadResponse) as bad:
        client.tasks()
    assert (
        str(bad.value) == "GET /v1/tasks: the answer is not a list[TaskPublic]: Input should be a valid array"
    )


def test_an_error_that_is_not_fastapis_json_is_refused_with_its_text():
    page = "<html>502 Bad Gateway</html>"
    with answering(lambda request: httpx.Response(502, text=page)) as client, pytest.raises(ApiError) as e:
        client.tasks()
    assert e.value.status == 502 and e.value.summary == page
    with (
        answering(lambda request: httpx.Response(500, json=["oops"])) as client,
        pytest.raises(ApiError) as e,
    ):
        client.tasks()
    assert e.value.status == 500 and e.value.summary == '["oops"]'


UNAVAILABLE = httpx.Response(503, headers={"Retry-After": "0.01"}, json={"detail": "retry later"})


def test_a_read_answered_503_is_retried_after_retry_after_and_a_write_never():
    answers = [UNAVAILABLE, UNAVAILABLE, httpx.Response(200, json=[])]
    sent = []

    def coordinator(request: httpx.Request) -> httpx.Response:
        sent.append(request.method)
        return answers.pop(0) if request.method == "GET" else UNAVAILABLE

    with answering(coordinator) as client:
        assert client.tasks() == []
        with pytest.raises(ApiError) as write:
            client.cancel(1)
    assert sent == ["GET", "GET", "GET", "POST"] and write.value.status == 503


def test_a_read_gives_up_when_the_coordinator_stays_unavailable():
    sent = []

    def coordinator(request: httpx.Request) -> httpx.Response:
        sent.append(request.method)
        return UNAVAILABLE

    with answering(coordinator) as client:
        client.unavailable_seconds = 0.2
        with pytest.raises(ApiError) as read:
            client.tasks()
    assert read.value.status == 503 and read.value.summary == "retry later" and 2 <= len(sent) <= 4
