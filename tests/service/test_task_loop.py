"""The task loop, ticked by hand beside the in-process API: what it queues when a task ends in the
middle of a tick, how one task's failure stays that task's, and that it proposes programs for the
machine a task runs on, which need not be the coordinator's own."""

import math

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from compiler.schedule import loop_transform
from compiler.target import Hardware, Target
from tests.service.conftest import Api, hardware_body
from tests.service.test_api import lease, measure, register, submit
from tuner.database import TaskStatus
from tuner.database.owners import cancel_task


def test_a_task_cancelled_while_its_search_proposes_gets_no_candidates(api: Api):
    worker = register(api)
    task = submit(api, trials=20)["id"]
    api.loop.tick()
    measure(api, worker, lease(api, worker))  # the queue is empty: the next tick proposes again
    driver = api.loop.drivers[task]
    propose = driver.propose

    def cancelled_meanwhile(*args, **kwargs):
        proposals = propose(*args, **kwargs)
        cancel_task(api.db, task_id=task, message="no longer wanted")
        return proposals

    driver.propose = cancelled_meanwhile
    api.loop.tick()
    assert api.db.get_task(task).status == TaskStatus.CANCELLED
    assert lease(api, worker) == []
    assert driver.in_flight == {}  # nothing waits for records that will never come


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
    waiting = submit(api, trials=4)["id"]  # a task to advance: `fine` has its 4 trials queued
    with pytest.raises(OperationalError):
        api.loop.tick()
    assert api.db.get_task(fine).status == api.db.get_task(waiting).status == TaskStatus.RUNNING


def test_a_tick_past_its_time_still_advances_one_task_and_no_more(api: Api):
    """A tick stops proposing after a quarter of a claim's time, so the loop renews its claims in
    time; but a slow database (a loaded host) must not leave every tick with nothing done."""
    worker = register(api)
    first, second = submit(api, trials=4)["id"], submit(api, trials=4)["id"]
    settings = api.loop.settings
    api.loop.settings = settings.model_copy(update={"claim_seconds": 1e-6})  # past it at once
    api.loop.tick()
    assert {c["task_id"] for c in lease(api, worker)} == {first}
    api.loop.settings = settings
    api.loop.tick()
    assert {c["task_id"] for c in lease(api, worker)} == {second}


AVX2 = Hardware(Target("x86_64-unknown-linux-gnu", "znver3", "+avx,+avx2,+fma,-avx512f", 64), "Test EPYC")


def test_a_task_for_an_avx2_machine_is_searched_for_its_registers_and_cores(api: Api):
    worker = register(api, hardware=hardware_body(AVX2))
    task = submit(api, trials=8, hardware=AVX2.key)
    api.loop.tick()
    target = api.loop.drivers[task["id"]].target
    assert (target.vector_bits, target.cores) == (256, 64)
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


def test_a_bug_in_a_primitive_fails_the_task_with_its_traceback_and_is_counted(api: Api, monkeypatch):
    """Not "the search space has no unmeasured program left": a bug is not an exhausted space."""

    def broken_split(*args, **kwargs):
        raise RuntimeError("a bug in split")

    monkeypatch.setattr(loop_transform, "split", broken_split)
    register(api)
    task = submit(api, trials=4)["id"]
    api.loop.tick()
    failed = api.client.get(f"/v1/tasks/{task}", headers=api.as_("client")).json()
    assert failed["status"] == "failed" and failed["message"] == "RuntimeError: a bug in split"
    assert "broken_split" in failed["traceback"] and "in split" in failed["traceback"]
    metrics = api.client.get("/metrics", headers=api.as_("client")).text
    assert "tuner_search_errors 1.0" in metrics


def test_tasks_on_one_hardware_share_a_cost_model_and_a_dropped_search_resumes_its_learning(api: Api):
    worker = register(api)
    api.loop.settings = api.loop.settings.model_copy(update={"max_searches": 1})
    first = submit(api, trials=16, strategy="evolutionary")["id"]
    api.loop.tick()
    model = api.loop.drivers[first].model
    measure(api, worker, lease(api, worker))  # 8 records, which no search has learned from yet
    other = {"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}
    submit(api, trials=16, strategy="evolutionary", workload=other)
    # The second task's search is built (with the same model) and dropped for the first's, rebuilt,
    # which learns the 8 records its dropped predecessor had not.
    api.loop.tick()
    assert list(api.loop.drivers) == [first] and api.loop.drivers[first].model is model
    assert list(api.loop.models.values()) == [model] and model.num_samples == 8
