"""Per-token quotas on SQLite and PostgreSQL: what a token's active tasks hold, each limit, and
submissions of one token racing each other, which cannot both pass a check on the same count."""

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest

from tests.tuner.database.test_database import add_pair
from tuner.database import Database
from tuner.database.owners import cancel_task
from tuner.database.quotas import OverQuota, Quota, Usage, submit_task, usage
from tuner.database.tokens import create_token


def submit(db: Database, token: int, quota: Quota | None, trials: int = 4, secs: float = 1.0) -> int:
    wid, hid = add_pair(db)
    return submit_task(
        db,
        token_id=token,
        quota=quota,
        workload_id=wid,
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
