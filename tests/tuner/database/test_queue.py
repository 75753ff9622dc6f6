"""The service's tables on SQLite and PostgreSQL: the candidate queue (leases, expiry, results accepted
once), workers, task owners and API tokens."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from runner import MODEL_TIMING, TimingConfig
from runner.protocol import LeasedBest, ResultIn
from tests.tuner.database.test_database import add_pair, hw_key, record
from tuner.database import Database, TaskStatus, owners, trace_hash
from tuner.database import queue as q
from tuner.database.fleet import heartbeat, register_worker, stop_worker, workers
from tuner.database.owners import cancel_task, claim_tasks, disown, finish_task
from tuner.database.queue import lock_candidates
from tuner.database.schema import CandidateRow, TokenRow
from tuner.database.tokens import LastAdmin, authenticate, create_token, hash_token, revoke_token, tokens

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
LEASE = 30.0
LOOP = "loop"  # the coordinator that runs the tasks' searches


def later(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def trace(n: int) -> dict:
    return {"version": 1, "instructions": [{"kind": "split", "decision": [n, 4]}]}


def proposed(n: int) -> q.Proposed:
    """A program known by its trace (these traces make no program)."""
    return q.Proposed(trace(n), trace_hash(trace(n)))


def own(db: Database, task: int) -> None:
    """Make LOOP the task's owner, with a claim that lapsed before T0: the tests find it free to take."""
    assert task in claim_tasks(db, owner=LOOP, now=T0 - timedelta(hours=1), claim_secs=1)


@pytest.fixture
def setup(tuning_db: Database):
    """A task on hw0 with 5 queued traces, a worker on hw0 and one on hw1."""
    wid, hid = add_pair(tuning_db)
    _, other_hid = add_pair(tuning_db, "w0", "hw1")
    task = tuning_db.add_task(workload_id=wid, hardware_id=hid, strategy="random", trials=8, seed=0)
    own(tuning_db, task)
    traces = [trace(n) for n in range(5)]
    queued = q.enqueue(
        tuning_db,
        task_id=task,
        owner=LOOP,
        workload_id=wid,
        hardware_id=hid,
        timing_kind="warm",
        programs=[q.Proposed(t, trace_hash(t)) for t in traces],
    )
    assert queued == {trace_hash(t) for t in traces}
    w1 = register_worker(tuning_db, name="w1", hardware_id=hid, now=T0)
    w2 = register_worker(tuning_db, name="w2", hardware_id=hid, now=T0)
    other = register_worker(tuning_db, name="elsewhere", hardware_id=other_hid, now=T0)
    return tuning_db, task, wid, hid, (w1, w2, other)


def lease(db, worker, hid, n, now=T0, **policy):
    return q.lease(
        db, worker_id=worker, hardware_id=hid, limit=n, now=now, policy=q.LeasePolicy(LEASE, **policy)
    )


def ok(candidate_id: int, secs: float = 1e-3, timing: TimingConfig | None = None) -> ResultIn:
    """An ok result, timed warm with 3 repeats unless `timing` says how it was timed."""
    used = asdict(timing) if timing is not None else {"repeat": 3}
    return ResultIn(candidate_id=candidate_id, status="ok", run_secs=[secs] * 3, timing=used)


def submit(db: Database, worker: int, *results: ResultIn) -> list[q.Outcome]:
    """Results of `worker` (named w<id> in records), judged against a generous 1000 GFLOPS per core."""
    name = {1: "w1", 2: "w2"}.get(worker, "elsewhere")
    return q.submit(db, worker_id=worker, worker=name, submissions=results, gflops_per_core=1000.0)


BEST = 1e-4
WORKLOAD_HASH = "w0".ljust(64, "0")


def seed_best(db: Database, wid: int, hid: int) -> None:
    """A best record of BEST seconds, so results slower than it are stored at once."""
    seed = {"version": 1, "instructions": [{"kind": "seed"}]}
    db.add_record(record(wid, hid, seed, status="ok", run_secs=[BEST], worker="seed", remeasured=True))


def queue_for_new_task(
    db: Database, wid: int, hid: int, timing_kind: str, programs: list[q.Proposed]
) -> set[str]:
    """Queue programs for a second task of the pair, timed as `timing_kind`, owned by LOOP."""
    task = db.add_task(
        workload_id=wid, hardware_id=hid, strategy="random", trials=8, seed=1, timing_kind=timing_kind
    )
    own(db, task)
    return q.enqueue(
        db,
        task_id=task,
        owner=LOOP,
        workload_id=wid,
        hardware_id=hid,
        timing_kind=timing_kind,
        programs=programs,
    )


def test_enqueue_skips_traces_queued_for_the_pair_by_any_task(setup):
    db, task, wid, hid, _ = setup
    queued = queue_for_new_task(db, wid, hid, "warm", [proposed(4), proposed(5)])
    assert queued == {trace_hash(trace(5))}
    assert q.queued_program_hashes(db, workload_id=wid, hardware_id=hid, timing_kind="warm") == {
        trace_hash(trace(n)) for n in range(6)
    }
    assert q.counts(db, task_id=task) == q.QueueCounts(pending=5, leased=0, done=0)


def test_a_layer_task_queues_and_ranks_apart_from_kernel_tasks(setup):
    """A model's layer queues the programs a kernel task queued (they are timed another way); its
    candidates are leased with the timing of a forward pass, held against the best of its own kind,
    and stored as records of that kind."""
    db, _, wid, hid, (w1, _, _) = setup
    seed_best(db, wid, hid)  # a fast warm best: it does not hold back the layer's first result
    queued = queue_for_new_task(db, wid, hid, "layer", [proposed(0), proposed(1)])
    assert queued == {trace_hash(trace(0)), trace_hash(trace(1))}
    assert q.queued_program_hashes(db, workload_id=wid, hardware_id=hid, timing_kind="layer") == queued
    leased = lease(db, w1, hid, 7)
    assert [c.timing for c in leased] == [None] * 5 + [asdict(MODEL_TIMING)] * 2
    assert [c.best_secs for c in leased] == [BEST] * 5 + [None] * 2
    warm_result = ok(leased[6].id, 2e-3)
    assert submit(db, w1, warm_result) == [q.Outcome.REFUSED]  # timed warm: not a layer's time
    assert submit(db, w1, ok(leased[5].id, 2e-3, MODEL_TIMING)) == [q.Outcome.CONFIRMING]
    assert submit(db, w1, ok(leased[0].id, 2e-3)) == [q.Outcome.ACCEPTED]  # slower than the warm best
    (again,) = lease(db, w1, hid, 1)
    assert submit(db, w1, ok(again.id, 2e-3, MODEL_TIMING)) == [q.Outcome.ACCEPTED]
    best = db.best(WORKLOAD_HASH, hw_key("hw0"), timing_kind="layer")
    assert best is not None and (best.trace, best.timing_kind) == (trace(0), "layer")
    warm = db.best(WORKLOAD_HASH, hw_key("hw0"), timing_kind="warm")
    assert warm is not None and warm.median_secs == BEST


def test_only_the_owner_of_an_active_task_queues_for_it(setup):
    db, task, wid, hid, _ = setup

    def enqueue(owner: str, n: int) -> set[str]:
        return q.enqueue(
            db,
            task_id=task,
            owner=owner,
            workload_id=wid,
            hardware_id=hid,
            timing_kind="warm",
            programs=[proposed(n)],
        )

    assert enqueue("stranger", 10) == set()
    assert claim_tasks(db, owner="b", now=T0, claim_secs=10) == [task]  # LOOP's claim had lapsed
    assert enqueue(LOOP, 11) == set()  # it proposed for so long that "b" took the task over
    assert enqueue("b", 12) == {trace_hash(trace(12))}
    assert cancel_task(db, task_id=task, message="enough")
    assert enqueue("b", 13) == set()
    assert q.counts(db, task_id=task) == q.QueueCounts(pending=0, leased=0, done=0)
    assert q.queued_program_hashes(db, workload_id=wid, hardware_id=hid, timing_kind="warm") == {
        trace_hash(trace(n)) for n in (0, 1, 2, 3, 4, 12)
    }


def test_nothing_is_queued_behind_a_cancel_in_progress(setup, database_url, monkeypatch):
    """A search that proposed while a cancel was withdrawing the task's candidates queues nothing:
    on PostgreSQL the cancel holds the task row from before it lists the candidates."""
    db, task, wid, hid, _ = setup
    listed = threading.Event()

    def slow_lock(session, *where):
        held = lock_candidates(session, *where)
        listed.set()
        time.sleep(0.5)  # the enqueue below runs here: after the list, before the task is cancelled
        return held

    def enqueue() -> set[str]:
        listed.wait(10)
        with Database.open(database_url) as own_db:
            return q.enqueue(
                own_db,
                task_id=task,
                owner=LOOP,
                workload_id=wid,
                hardware_id=hid,
                timing_kind="warm",
                programs=[proposed(9)],
            )

    monkeypatch.setattr(owners, "lock_candidates", slow_lock)
    with ThreadPoolExecutor(1) as pool:
        queued = pool.submit(enqueue)
        assert cancel_task(db, task_id=task, message="enough")
        assert queued.result() == set()
    assert q.counts(db, task_id=task) == q.QueueCounts(pending=0, leased=0, done=0)


def test_leases_go_to_matching_hardware_oldest_first_once(setup):
    db, task, _, hid, (w1, w2, other) = setup
    first = lease(db, w1, hid, 2)
    assert [c.trace for c in first] == [trace(0), trace(1)]
    assert first[0].task_id == task and first[0].spec["op"] == "matmul" and first[0].best_secs is None
    assert first[0].lease_expires_at == later(LEASE)
    assert [c.trace for c in lease(db, w2, hid, 10)] == [trace(n) for n in (2, 3, 4)]
    assert lease(db, w1, hid, 10) == []  # everything is leased
    _, other_hid = add_pair(db, "w0", "hw1")
    assert lease(db, other, other_hid, 10) == []  # nothing for other hardware
    assert q.counts(db, task_id=task) == q.QueueCounts(pending=0, leased=5, done=0)


def test_an_expired_lease_is_dispatched_again_and_heartbeats_keep_leases(setup):
    db, _, _, hid, (w1, w2, _) = setup
    mine = {c.id for c in lease(db, w1, hid, 2)}
    theirs = {c.id for c in lease(db, w2, hid, 3)}
    assert heartbeat(db, worker_id=w2, policy=q.LeasePolicy(LEASE), now=later(20)) == 3
    # At 40 s, w1's leases (to 30 s) have expired; w2's were renewed to 50 s.
    again = lease(db, w1, hid, 10, now=later(40))
    assert {c.id for c in again} == mine
    assert lease(db, w1, hid, 10, now=later(45)) == []
    assert {c.id for c in lease(db, w1, hid, 10, now=later(51))} == theirs


def test_results_count_once_and_only_from_the_lease_holder(setup):
    db, task, wid, hid, (w1, w2, _) = setup
    seed_best(db, wid, hid)
    a, b, c = lease(db, w1, hid, 3)
    assert submit(db, w1, ok(a.id), ok(b.id, 2e-3)) == ["accepted", "accepted"]
    # A retried submission stores nothing; nor does a result for a candidate done by another.
    again = submit(db, w1, ok(a.id), ok(c.id), ok(10_000))
    assert again == [q.Outcome.DUPLICATE, q.Outcome.ACCEPTED, q.Outcome.UNKNOWN]
    assert submit(db, w2, ok(c.id, 1e-6)) == [q.Outcome.REFUSED]
    records = db.records(workload_id=wid, hardware_id=hid)[1:]
    assert len(records) == 3 and {r.worker for r in records} == {"w1"}
    assert records[0].task_id == task and records[0].timing == {"repeat": 3}
    assert not any(r.remeasured for r in records)
    assert db.get_task(task).trials_done == 3
    assert q.counts(db, task_id=task) == q.QueueCounts(pending=2, leased=0, done=3)
    assert lease(db, w2, hid, 1)[0].best_secs == BEST


def test_a_worker_cannot_complete_another_workers_lease(setup):
    """The issue's reproduction: a worker of the same hardware (its own token) submitting results for
    candidates leased to another was accepted, and the real holder's result came back a duplicate."""
    db, _, wid, hid, (w1, w2, other) = setup
    seed_best(db, wid, hid)
    a, b = lease(db, w1, hid, 2)
    pending = lease(db, w2, hid, 3)[-1]
    q.release(db, worker_id=w2, candidate_ids=[pending.id])
    assert submit(db, w2, ok(a.id), ok(b.id)) == [q.Outcome.REFUSED] * 2  # same hardware, not its lease
    assert submit(db, other, ok(a.id)) == [q.Outcome.REFUSED]  # another machine's worker
    assert submit(db, w2, ok(pending.id)) == [q.Outcome.REFUSED]  # given back
    assert len(db.records(workload_id=wid, hardware_id=hid)) == 1  # nothing stored
    assert submit(db, w1, ok(a.id)) == [q.Outcome.ACCEPTED]  # the holder's result still counts
    # w1's lease of b expires and w2 leases b: from then on b is w2's to measure, not w1's.
    assert [c.id for c in lease(db, w2, hid, 1, now=later(31))] == [b.id]
    assert submit(db, w1, ok(b.id)) == [q.Outcome.REFUSED]
    assert submit(db, w2, ok(b.id)) == [q.Outcome.ACCEPTED]
    assert [r.worker for r in db.records(workload_id=wid, hardware_id=hid)] == ["seed", "w1", "w2"]


def test_a_would_be_best_is_held_until_a_second_lease_remeasures_it(setup):
    db, task, wid, hid, (w1, w2, _) = setup
    a, b = lease(db, w1, hid, 2)
    # No best yet: each ok result would be the best, so each waits for its re-measurement.
    assert submit(db, w1, ok(a.id, 1e-3), ok(b.id, 2e-3)) == [q.Outcome.CONFIRMING] * 2
    assert db.records(workload_id=wid, hardware_id=hid) == [] and db.get_task(task).trials_done == 0
    assert q.counts(db, task_id=task) == q.QueueCounts(pending=5, leased=0, done=0)
    assert submit(db, w1, ok(a.id)) == [q.Outcome.REFUSED]  # no longer leased to w1
    # Any worker may re-measure; the held candidates are the oldest, so they go first.
    assert [c.id for c in lease(db, w2, hid, 2)] == [a.id, b.id]
    assert submit(db, w2, ok(a.id, 1.2e-3), ok(b.id, 1.5e-3)) == [q.Outcome.ACCEPTED] * 2
    first, second = db.records(workload_id=wid, hardware_id=hid)
    assert first.run_secs == [1e-3] * 3 + [1.2e-3] * 3 and first.median_secs == 1.2e-3
    assert (first.remeasured, first.worker, first.message) == (True, "w1", "re-measured by w2")
    assert second.median_secs == 2e-3  # the slower of the two medians: its own first run here
    assert db.best(WORKLOAD_HASH, hw_key("hw0"), timing_kind="warm").id == first.id
    assert db.get_task(task).trials_done == 2
    # Slower than the best: stored at once. Faster: held again.
    c, d = lease(db, w1, hid, 2)
    assert submit(db, w1, ok(c.id, 5e-3), ok(d.id, 1e-4)) == [q.Outcome.ACCEPTED, q.Outcome.CONFIRMING]


def test_a_would_be_best_is_re_measured_beside_the_best_and_ranked_by_their_ratio(setup):
    """The best (1e-4) was measured in a quick phase of its host; a would-be best read 5e-5 and 9e-5
    alone (the plain rule would make it the best), but beside the best its second run took 1.5x the
    best's time: it ranks at 1.5x the best's rank, above it. Another ran beside the best at half its
    time, though its own run read slow (a slow phase): it ranks at half."""
    db, _, wid, hid, (w1, w2, _) = setup
    seed_best(db, wid, hid)
    (best,) = db.records(workload_id=wid, hardware_id=hid)
    a, b = lease(db, w1, hid, 2)
    assert (a.versus, b.versus) == (None, None)  # a first lease measures its candidate alone
    assert submit(db, w1, ok(a.id, 5e-5), ok(b.id, 5e-5)) == [q.Outcome.CONFIRMING] * 2
    again_a, _ = lease(db, w2, hid, 2)
    assert again_a.versus == LeasedBest(record_id=best.id, trace=best.trace)
    beside = ResultIn(
        **{**ok(a.id, 9e-5).model_dump(), "versus_record_id": best.id, "versus_run_secs": [6e-5] * 3}
    )
    assert submit(db, w2, beside) == [q.Outcome.ACCEPTED]
    slower = next(r for r in db.records(workload_id=wid, hardware_id=hid) if r.candidate_id == a.id)
    assert slower.median_secs == pytest.approx(1.5 * BEST) and "1.500x its time" in slower.message
    assert db.best(WORKLOAD_HASH, hw_key("hw0"), timing_kind="warm").id == best.id
    faster = ResultIn(
        **{**ok(b.id, 3e-4).model_dump(), "versus_record_id": best.id, "versus_run_secs": [6e-4] * 3}
    )
    assert submit(db, w2, faster) == [q.Outcome.ACCEPTED]
    new_best = db.best(WORKLOAD_HASH, hw_key("hw0"), timing_kind="warm")
    assert new_best.candidate_id == b.id and new_best.median_secs == pytest.approx(BEST / 2)


def test_times_beside_a_record_of_another_workload_are_not_believed(setup):
    """A second lease's versus_record_id must name a record of the candidate's own workload, hardware
    and timing kind; otherwise the plain rule ranks it (the slower of its two runs)."""
    db, _, wid, hid, (w1, w2, _) = setup
    other_wid = db.add_workload(hash="w9".ljust(64, "0"), name="other", spec={"op": "other"}, flops=1.0)
    db.add_record(record(other_wid, hid, trace(99), status="ok", run_secs=[1e-6], worker="seed"))
    (foreign,) = db.records(workload_id=other_wid, hardware_id=hid)
    (a,) = lease(db, w1, hid, 1)
    assert submit(db, w1, ok(a.id, 2e-3)) == [q.Outcome.CONFIRMING]
    (again,) = lease(db, w2, hid, 1)
    assert again.versus is None  # no best yet: nothing to time beside
    forged = ResultIn(
        **{**ok(a.id, 3e-3).model_dump(), "versus_record_id": foreign.id, "versus_run_secs": [1.0] * 3}
    )
    assert submit(db, w2, forged) == [q.Outcome.ACCEPTED]
    (stored,) = db.records(workload_id=wid, hardware_id=hid)
    assert stored.median_secs == 3e-3 and "side by side" not in stored.message


def test_versus_times_come_only_with_the_record_they_were_timed_beside():
    with pytest.raises(ValueError, match="versus_run_secs"):
        ResultIn(candidate_id=1, status="ok", run_secs=[1e-3], versus_run_secs=[1e-3])
    with pytest.raises(ValueError, match="versus_run_secs"):
        ResultIn(candidate_id=1, status="ok", run_secs=[1e-3], versus_record_id=3)


def test_a_single_forged_result_never_becomes_the_best(setup):
    db, _, wid, hid, (w1, w2, _) = setup
    a, b = lease(db, w1, hid, 2)
    assert submit(db, w1, ok(a.id, 1e-6), ok(b.id, 1e-6)) == [q.Outcome.CONFIRMING] * 2
    c, d = lease(db, w2, hid, 2)
    crash = ResultIn(candidate_id=d.id, status="wrong_result", message="Y: 3 elements differ")
    assert submit(db, w2, ok(c.id, 1e-3), crash) == [q.Outcome.ACCEPTED] * 2
    honest, failed = db.records(workload_id=wid, hardware_id=hid)
    assert (
        honest.median_secs == 1e-3
        and db.best(WORKLOAD_HASH, hw_key("hw0"), timing_kind="warm").id == honest.id
    )
    assert (failed.status, failed.median_secs, failed.remeasured) == ("wrong_result", None, True)
    assert failed.message == "its re-measurement failed: Y: 3 elements differ"


def test_a_time_faster_than_the_hardware_can_run_is_refused(setup):
    """The issue's reproduction: run_secs [1e-12] became the best record, 524,288,000 GFLOPS."""
    db, task, wid, hid, (w1, _, _) = setup
    seed_best(db, wid, hid)
    (a,) = lease(db, w1, hid, 1)
    assert submit(db, w1, ok(a.id, 1e-12)) == [q.Outcome.IMPOSSIBLE]
    assert len(db.records(workload_id=wid, hardware_id=hid)) == 1
    assert q.counts(db, task_id=task).leased == 1  # its lease stands: it expires, as a silent worker's
    # A registered peak is the ceiling: 0.1 GFLOPS runs the workload's 245,760 flops in 2.5 ms at best.
    assert db.approve_hardware(hid, peak_gflops=0.1).peak_gflops == 0.1
    assert submit(db, w1, ok(a.id, 2e-3)) == [q.Outcome.IMPOSSIBLE]
    assert submit(db, w1, ok(a.id, 3e-3)) == [q.Outcome.ACCEPTED]


def test_failures_are_recorded_too(setup):
    db, _, wid, hid, (w1, _, _) = setup
    (a,) = lease(db, w1, hid, 1)
    crash = ResultIn(candidate_id=a.id, status="runtime_error", message="SIGSEGV")
    assert submit(db, w1, crash) == [q.Outcome.ACCEPTED]
    (record,) = db.records(workload_id=wid, hardware_id=hid)
    assert (record.status, record.message, record.median_secs) == ("runtime_error", "SIGSEGV", None)


def test_released_leases_are_pending_again_without_using_an_attempt(setup):
    db, _, _, hid, (w1, w2, _) = setup
    held = lease(db, w1, hid, 3, max_attempts=1)
    assert q.release(db, worker_id=w1, candidate_ids=[held[0].id]) == 1
    assert stop_worker(db, worker_id=w1, now=later(1)) == 2  # the rest go back on goodbye
    assert len(lease(db, w2, hid, 10, max_attempts=1)) == 5
    assert [w.name for w in workers(db, seen_since=T0)] == ["w2", "elsewhere"]


def test_a_candidate_that_different_workers_keep_losing_is_given_up(setup):
    db, task, wid, hid, (w1, w2, _) = setup
    (a,) = lease(db, w1, hid, 1, max_attempts=2)
    (b,) = lease(db, w2, hid, 1, now=later(31), max_attempts=2)
    assert a.id == b.id  # w1's lease expired: back to the queue, leased to w2
    policy = q.LeasePolicy(LEASE, max_attempts=2)
    assert q.reclaim_expired(db, now=later(40), policy=policy) == 0  # w2's lease still holds
    assert q.reclaim_expired(db, now=later(62), policy=policy) == 1  # lost by two different workers
    assert lease(db, w1, hid, 1, now=later(62), max_attempts=2)[0].id != a.id
    (record,) = db.records(workload_id=wid, hardware_id=hid)
    assert record.status == "timeout" and "gave up after 2 different workers" in record.message
    assert db.get_task(task).trials_done == 1


def test_one_worker_that_leases_and_never_answers_burns_no_trial_and_is_throttled(setup):
    """The probe's worker leased again and again without answering: 32 timeout records in 40 s, half
    a budget, nothing measured. Its expired leases go back to the queue (they count once, as one
    worker's), and once it has let `strikes` expire in a row it gets no lease for a while; an honest
    worker gets the candidates and measures them."""
    db, _, wid, hid, (w1, w2, _) = setup
    policy = {"max_attempts": 2, "strikes": 6, "throttle_secs": 600.0}
    t = 0.0
    for _ in range(3):  # 2 candidates each round, never answered
        assert len(lease(db, w1, hid, 2, now=later(t), **policy)) == 2
        t += LEASE + 1
    assert db.records(workload_id=wid, hardware_id=hid) == []  # no trial burnt
    assert lease(db, w1, hid, 2, now=later(t), **policy) == []  # 6 strikes: throttled
    (throttled,) = [w for w in workers(db) if w.id == w1]
    assert throttled.throttled_until == later(t) + timedelta(seconds=600)
    honest = lease(db, w2, hid, 5, now=later(t), **policy)
    assert len(honest) == 5
    assert submit(db, w2, *(ok(c.id) for c in honest)) == [q.Outcome.CONFIRMING] * 5  # would-be bests
    assert len(lease(db, w1, hid, 2, now=later(t + 601), **policy)) == 2  # its throttle is over
    assert db.records(workload_id=wid, hardware_id=hid) == []  # still no timeout


def test_a_worker_holds_at_most_its_share_and_a_lease_lives_at_most_its_age(setup):
    """A worker that heartbeats but never answers held every queued candidate, forever."""
    db, _, _, hid, (w1, w2, _) = setup
    held = lease(db, w1, hid, 10, max_leases=3)
    assert len(held) == 3 and lease(db, w1, hid, 10, max_leases=3) == []
    assert len(lease(db, w2, hid, 10, max_leases=3)) == 2  # the rest go to another worker
    policy = q.LeasePolicy(LEASE, max_age_secs=100.0)
    for t in (20, 40, 60, 80, 100):  # heartbeats every 20 s, each renewing for LEASE (30 s)
        assert heartbeat(db, worker_id=w1, policy=policy, now=later(t)) == 3
    with db.transaction() as session:
        expiries = set(
            session.scalars(select(CandidateRow.lease_expires_at).where(CandidateRow.worker_id == w1))
        )
    assert expiries == {later(100)}  # renewed up to its age, no further
    assert {c.id for c in held} <= {c.id for c in lease(db, w2, hid, 10, now=later(101), max_leases=10)}


def test_a_result_clears_a_workers_strikes(setup):
    db, _, _, hid, (w1, _, _) = setup
    policy = {"strikes": 3}
    lease(db, w1, hid, 2, **policy)
    (a,) = lease(db, w1, hid, 1, now=later(LEASE + 1), **policy)  # 2 strikes
    assert submit(db, w1, ok(a.id)) == [q.Outcome.CONFIRMING]  # an answer: strikes back to 0
    lease(db, w1, hid, 2, now=later(LEASE + 2), **policy)
    assert len(lease(db, w1, hid, 1, now=later(2 * LEASE + 3), **policy)) == 1  # 2 strikes again, not 4


def test_concurrent_leases_never_share_a_candidate(database_url: str):
    with Database.open(database_url) as db:
        wid, hid = add_pair(db)
        task = db.add_task(workload_id=wid, hardware_id=hid, strategy="random", trials=64, seed=0)
        own(db, task)
        traces = [trace(n) for n in range(60)]
        q.enqueue(
            db,
            task_id=task,
            owner=LOOP,
            workload_id=wid,
            hardware_id=hid,
            timing_kind="warm",
            programs=[q.Proposed(t, trace_hash(t)) for t in traces],
        )
        ids = [register_worker(db, name=f"w{i}", hardware_id=hid, now=T0) for i in range(4)]
    start = threading.Barrier(4)

    def drain(worker: int) -> list[int]:
        with Database.open(database_url) as own:
            start.wait()
            got: list[int] = []
            while batch := lease(own, worker, hid, 3):
                got += [c.id for c in batch]
            return got

    with ThreadPoolExecutor(4) as pool:
        leased = [c for got in pool.map(drain, ids) for c in got]
    assert sorted(leased) == sorted(set(leased)) and len(leased) == 60


def test_one_owner_per_task_and_takeover_when_a_claim_lapses(setup):
    db, task, wid, hid, _ = setup
    second = db.add_task(workload_id=wid, hardware_id=hid, strategy="random", trials=8, seed=1)
    assert claim_tasks(db, owner="a", now=T0, claim_secs=10) == [task, second]
    assert db.get_task(task).status == TaskStatus.RUNNING
    assert claim_tasks(db, owner="b", now=later(5), claim_secs=10) == []
    assert claim_tasks(db, owner="a", now=later(9), claim_secs=10) == [task, second]  # renewed to 19 s
    assert claim_tasks(db, owner="b", now=later(15), claim_secs=10) == []
    assert claim_tasks(db, owner="b", now=later(20), claim_secs=10) == [task, second]  # a stalled
    assert not finish_task(db, task_id=task, owner="a", status=TaskStatus.DONE)
    assert finish_task(db, task_id=task, owner="b", status=TaskStatus.DONE)
    assert db.get_task(task).status == TaskStatus.DONE
    disown(db, owner="b")
    assert claim_tasks(db, owner="c", now=later(21), claim_secs=10) == [second]


def test_a_claim_is_renewed_at_half_time_and_leaves_updated_at_alone(setup):
    db, task, *_ = setup
    assert claim_tasks(db, owner="a", now=T0, claim_secs=10) == [task]
    claimed = db.get_task(task).updated_at
    assert claim_tasks(db, owner="a", now=later(3), claim_secs=10) == [task]  # still owned, not rewritten
    assert claim_tasks(db, owner="a", now=later(6), claim_secs=10) == [task]  # renewed to 16 s
    assert db.get_task(task).updated_at == claimed
    assert claim_tasks(db, owner="b", now=later(12), claim_secs=10) == []
    assert claim_tasks(db, owner="b", now=later(17), claim_secs=10) == [task]


def test_cancel_withdraws_unfinished_candidates(setup):
    db, task, wid, hid, (w1, _, _) = setup
    seed_best(db, wid, hid)
    a, b, c = lease(db, w1, hid, 3)
    assert submit(db, w1, ok(a.id), ok(c.id, 1e-5)) == [q.Outcome.ACCEPTED, q.Outcome.CONFIRMING]
    assert cancel_task(db, task_id=task, message="not needed")
    assert not cancel_task(db, task_id=task, message="twice")
    info = db.get_task(task)
    assert (info.status, info.message) == (TaskStatus.CANCELLED, "not needed")
    assert lease(db, w1, hid, 10) == []  # the held would-be best too: nobody re-measures it now
    # A result that was on its way is still kept (it is a real measurement) but not counted.
    assert submit(db, w1, ok(b.id)) == [q.Outcome.ACCEPTED]
    assert db.get_task(task).trials_done == 1 and len(db.records(workload_id=wid, hardware_id=hid)) == 3
    assert claim_tasks(db, owner="a", now=T0, claim_secs=10) == []
    with pytest.raises(KeyError):
        cancel_task(db, task_id=task + 100, message="")


def test_tokens_are_stored_hashed_and_can_be_revoked(tuning_db: Database):
    admin_id, admin = create_token(tuning_db, role="admin", name="ops")
    _, worker = create_token(tuning_db, role="worker", name="bench-1")
    assert admin.startswith("tt_") and len(admin) > 40 and admin != worker
    holder = authenticate(tuning_db, admin)
    assert holder is not None and (holder.id, holder.role, holder.name) == (admin_id, "admin", "ops")
    assert authenticate(tuning_db, admin + "x") is None and authenticate(tuning_db, "") is None
    with tuning_db.transaction() as session:
        stored = set(session.scalars(select(TokenRow.token_hash)))
    assert stored == {hash_token(admin), hash_token(worker)} and admin not in stored
    with pytest.raises(LastAdmin, match="last admin token"):
        revoke_token(tuning_db, token_id=admin_id, now=T0)  # nobody could administer the service
    assert authenticate(tuning_db, admin) is not None
    create_token(tuning_db, role="admin", name="ops-2")
    revoke_token(tuning_db, token_id=admin_id, now=T0)
    assert authenticate(tuning_db, admin) is None
    assert [t.revoked_at is not None for t in tokens(tuning_db)] == [True, False, False]
    with pytest.raises(ValueError):
        create_token(tuning_db, role="root", name="x")


def test_a_heartbeat_renews_only_the_leases_it_names(setup):
    """A lease whose answer never reached the worker is not in its heartbeats: it expires as if the
    worker were gone, while the ones it names stay with it."""
    db, _, _, hid, (w1, w2, _) = setup
    known, lost = lease(db, w1, hid, 1), lease(db, w1, hid, 2)
    assert heartbeat(db, worker_id=w1, policy=q.LeasePolicy(LEASE), now=later(20), holding=[known[0].id]) == 1
    again = {c.id for c in lease(db, w2, hid, 10, now=later(40))}  # the lost two, and two never leased
    assert len(again) == 4 and {c.id for c in lost} <= again and known[0].id not in again
    assert heartbeat(db, worker_id=w1, policy=q.LeasePolicy(LEASE), now=later(45), holding=None) == 1
