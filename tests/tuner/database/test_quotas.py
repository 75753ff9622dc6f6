"""Per-token quotas on SQLite and PostgreSQL: what a token's active tasks hold, each limit, and
submissions of one token racing each other, which cannot both pass a check on the same count."""

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest

from tests.tuner.database.test_database import WORKLOAD, add_pair
from tuner.database import Database, NewWorkload
from tuner.database.owners import cancel_task
from tuner.database.quotas import OverQuota, Quota, Usage, precheck, submit_task, usage
from tuner.database.tokens import create_token


def submit(
    db: Database, token: int, quota: Quota | None, trials: int = 4, secs: float = 1.0, workload: str = "w0"
) -> int:
    _, hid = add_pair(db)
    return submit_task(
        db,
        token_id=token,
        quota=quota,
        workload=NewWorkload(workload.ljust(64, "0"), workload, WORKLOAD, 1.0),
        hardware_id=hid,
        strategy="random",
        trials=trials,
        seed=0,
        candidate_secs=secs,
    )


def test_each_limit_counts_the_tokens_active_tasks_only(tuning_db: Database):
    db = tuning_db
    mine, theirs = (create_token(db, role="client", name=n)[0] for n in ("me", "them"))
    quota = Quota(tasks=2, trials=10, worker_secs=60.0)
    first = submit(db, mine, quota, trials=4, secs=2.0)
    submit(db, mine, quota, trials=4, secs=2.0)
    with db.transaction() as session:
        assert usage(session, mine) == Usage(tasks=2, trials=8, worker_secs=16.0)
    with pytest.raises(OverQuota, match="2 active tasks, its quota is 2"):
        submit(db, mine, quota, trials=1)
    submit(db, theirs, quota, trials=10)  # another token's quota is its own
    assert cancel_task(db, task_id=first, message="")  # ended tasks no longer count
    with pytest.raises(OverQuota, match="over its quota of 10"):
        submit(db, mine, quota, trials=7)
    with pytest.raises(OverQuota, match="worker-hours"):
        submit(db, mine, quota, trials=6, secs=10.0)  # 8 s held + 60 s asked > 60 s
    submit(db, mine, quota, trials=6, secs=8.0)
    submit(db, mine, None, trials=1000)  # no quota: an admin's token
    assert [t.token_id for t in db.tasks(token_id=mine)] == [mine] * 4


def test_racing_submissions_of_one_token_cannot_both_pass(database_url: str):
    with Database.open(database_url) as db:
        token = create_token(db, role="client", name="racer")[0]
        add_pair(db)
    start = Barrier(4)

    def race(_: int) -> bool:
        with Database.open(database_url) as own:
            start.wait()
            try:
                submit(own, token, Quota(tasks=1, trials=100, worker_secs=1e6))
            except OverQuota:
                return False
            return True

    with ThreadPoolExecutor(4) as pool:
        won = list(pool.map(race, range(4)))
    assert won.count(True) == 1


def test_a_refused_submission_writes_nothing_and_the_precheck_refuses_before_any_work(tuning_db: Database):
    """Over its quota, a submission leaves no workload row behind (the probe found 429-refused tasks
    still writing theirs); `precheck` refuses what is over already, before a model is imported."""
    db = tuning_db
    token = create_token(db, role="client", name="me")[0]
    quota = Quota(tasks=1, trials=10, worker_secs=60.0)
    submit(db, token, quota)
    with pytest.raises(OverQuota, match="1 active tasks"):
        submit(db, token, quota, workload="new")
    assert [w.name for w in db.workloads()] == ["w0"]
    with pytest.raises(OverQuota, match="1 active tasks"):
        precheck(db, token_id=token, asked=Usage(1, 1, 0.0), quota=quota)
    precheck(db, token_id=token, asked=Usage(1, 1, 0.0), quota=None)
