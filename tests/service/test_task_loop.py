"""The search loop, ticked by hand beside the in-process API: what it queues when a task ends in the
middle of a tick, how one task's failure stays that task's, and that it proposes programs for the
machine a task runs on, which need not be the coordinator's own."""

import math

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from tests.service.conftest import Api
from tests.service.test_api import lease, register, results, submit
from tuner.database import TaskStatus
from tuner.database.owners import cancel_task


def test_a_task_cancelled_while_its_search_proposes_gets_no_candidates(api: Api):
    worker = register(api)
    task = submit(api, trials=20)["id"]
    api.loop.tick()
    results(api, worker, lease(api, worker))  # the queue is empty: the next tick proposes again
    search = api.loop.states[task].search
    propose = search.propose

    def cancelled_meanwhile(*args, **kwargs):
        proposals = propose(*args, **kwargs)
        cancel_task(api.db, task_id=task, message="no longer wanted")
        return proposals

    search.propose = cancelled_meanwhile
    api.loop.tick()
    assert api.db.get_task(task).status == TaskStatus.CANCELLED
    assert lease(api, worker) == []
    assert api.loop.states[task].queued == {}  # nothing waits for records that will never come


def test_a_task_the_database_refuses_fails_alone_and_a_lost_database_waits(api: Api, monkeypatch):
    worker = register(api)
    doomed, fine = submit(api, trials=4)["id"], submit(api, trials=4)["id"]
    advance = api.loop._advance

    def refused(task):
        if task.id == doomed:
            raise IntegrityError("INSERT ...", {}, Exception("violates check constraint"))
        advance(task)

    monkeypatch.setattr(api.loop, "_advance", refused)
    api.loop.tick()
    assert api.db.get_task(doomed).status == TaskStatus.FAILED
    assert {c["task_id"] for c in lease(api, worker)} == {fine}

    def away(task):
        raise OperationalError("SELECT ...", {}, Exception("server closed the connection"))

    monkeypatch.setattr(api.loop, "_advance", away)
    with pytest.raises(OperationalError):
        api.loop.tick()
    assert api.db.get_task(fine).status == TaskStatus.RUNNING


AVX2_WORKER = {
    "key": "znver3-avx2-64c",
    "cpu": "Test EPYC",
    "features": "+avx,+avx2,+fma,-avx512f",
    "cores": 64,
}


def test_a_task_for_an_avx2_machine_is_searched_for_its_registers_and_cores(api: Api):
    worker = register(api, hardware=AVX2_WORKER)
    task = submit(api, trials=8, hardware=AVX2_WORKER["key"])
    api.loop.tick()
    search = api.loop.states[task["id"]].search
    assert (search.vector_bits, search.cores) == (256, 64)
    leased = lease(api, worker)
    assert len(leased) == 8  # the queue depth of the test settings
    for candidate in leased:
        tiles = [
            i["decision"]
            for i in candidate["trace"]["instructions"]
            if i["kind"] == "sample_perfect_tile" and i["args"]["n"] == 4
        ]
        vector, rows = tiles[0][-1], tiles[1][-1]  # j (vectorized), then i
        assert vector <= 32 and math.ceil(vector / 8) * rows <= 12
