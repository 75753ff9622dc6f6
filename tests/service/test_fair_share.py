"""Many tasks from two clients on two workers (issue 14's flood, in small): the clients take turns on
the workers, every task gets candidates early, and the search loop keeps only a few searches in
memory. The loop is ticked by hand beside the in-process API; two workers lease, then report, in
rounds, as two daemons would."""

from collections import Counter

import pytest

from tests.service.conftest import Api
from tests.service.test_api import lease, register, results
from tests.service.test_tenants import token

SEARCHES = 4  # max_searches: far fewer than the tasks


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"queue_depth": 4, "max_queued": 40, "max_searches": SEARCHES})


def spec(i: int) -> dict:
    return {"op": "matmul", "params": {"M": 16 + i, "N": 16, "K": 16}}


def submit_as(api: Api, headers: dict, i: int, trials: int) -> int:
    body = {"workload": spec(i), "trials": trials, "strategy": "random"}
    reply = api.client.post("/v1/tasks", json=body, headers=headers)
    assert reply.status_code == 201, reply.text
    return reply.json()["id"]


def test_two_clients_share_the_workers_and_every_task_starts_early(api: Api):
    workers = [register(api, "w1"), register(api, "w2")]
    trials = 6
    big, small = token(api, "client", "many tasks"), token(api, "client", "few tasks")
    client_of = {submit_as(api, big, i, trials): "big" for i in range(14)}
    client_of |= {submit_as(api, small, 14 + i, trials): "small" for i in range(6)}
    measured: list[int] = []  # the task of each result accepted, in order
    for _ in range(200):
        api.loop.tick()
        assert len(api.loop.drivers) <= SEARCHES
        leased = [lease(api, w, 4) for w in workers]  # both lease before either reports
        for worker, batch in zip(workers, leased):
            if not batch:
                continue
            outcomes = results(api, worker, batch)
            measured += [c["task_id"] for c, o in zip(batch, outcomes) if o == "accepted"]
        if len(measured) == trials * len(client_of):
            break
    assert Counter(measured) == {task: trials for task in client_of}
    # Interleaved, not one client after the other: the client with 6 tasks gets about as much of the
    # workers as the one with 14 while both wait (submitted first, the 14 took them all before)...
    first = Counter(client_of[t] for t in measured[: 2 * 6 * trials])
    assert min(first.values()) >= 0.4 * 2 * 6 * trials, first
    # ... and every task is under way by the time 60% of the trials are measured, while the loop
    # queues 40 candidates at most (10 tasks' worth).
    started = max(measured.index(t) for t in client_of)
    assert started < 0.6 * len(measured), started
    api.loop.tick()
    assert {api.db.get_task(t).status for t in client_of} == {"done"}
    assert not api.loop.drivers
