"""The coordinator's task loop: it runs the search of every task this process owns.

Each tick it claims the active tasks without a live owner (renewing its own claims), gives up
candidates whose workers keep dying, and for each owned task: its search driver (tuner.search.driver,
the same the embedded tuner uses) learns from the records that arrived since the last tick; the task
ends when its budget is spent or its space exhausted, and otherwise `queue_depth` candidates are kept
queued ahead of the workers. An error in a search fails its task with the traceback.

Nothing lives only in memory: the candidates are rows, results are records, and the search object is
rebuilt from the database by whichever process owns the task next (after a restart, or a takeover when
this process stops renewing its claims). So a coordinator can die at any moment and lose nothing.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import socket
import threading
import traceback
import uuid
from typing import Protocol

from compiler.workloads import workload_from_spec
from tuner.database import Database, TaskInfo, TaskStatus
from tuner.database import queue as q
from tuner.database.outage import is_outage
from tuner.database.owners import claim_tasks, disown, finish_task
from tuner.search.default_schedule import default_schedule
from tuner.search.driver import SearchDriver, TaskIds
from tuner.search.space import SpaceConfig, rule_space
from tuner.service.clock import utcnow
from tuner.service.settings import Settings

log = logging.getLogger(__name__)
# How long a stopping coordinator waits for its loop to release its tasks before it kills the loop.
# Shorter than the grace periods in deploy/ (90 s), so the loop is never killed by systemd or docker
# along with the API: killed, its claims would hold the tasks until they lapse.
STOP_SECONDS = 40.0


class Event(Protocol):
    """A threading or a multiprocessing event: what the loop waits on between ticks."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


def owner_id() -> str:
    """Unique per process start: a restarted coordinator is a new owner and waits out its old claims
    only if it cannot tell them apart (it can: `disown` on a clean shutdown releases them at once)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class TaskLoop:
    """Owns tasks and drives their searches, tick by tick; `run` ticks until told to stop."""

    def __init__(self, db: Database, settings: Settings, owner: str | None = None) -> None:
        self.db = db
        self.settings = settings
        self.owner = owner or owner_id()
        self.drivers: dict[int, SearchDriver] = {}
        self._stop: Event = threading.Event()

    def run(self, stop: Event, parent: int | None = None) -> None:
        """Tick until `stop` is set (or the process `parent` is gone), then release this loop's claims
        so another coordinator, or this one restarted, resumes the tasks at once."""
        self._stop = stop
        away = False  # the database is: an outage is logged when it starts and when it ends
        try:
            while not stop.is_set() and (parent is None or os.getppid() == parent):
                try:
                    self.tick()
                    if away:
                        log.warning("database available again")
                    away = False
                except Exception as e:  # the database may be away for a moment; the loop must outlive it
                    if not is_outage(e):
                        log.exception("task loop tick failed; retrying")
                    elif not away:
                        log.warning("database unavailable (%s); retrying every tick", type(e).__name__)
                        away = True
                stop.wait(self.settings.tick_seconds)
        finally:
            disown(self.db, owner=self.owner)
            self.drivers.clear()

    def tick(self) -> None:
        now = utcnow()
        s = self.settings
        q.give_up_expired(self.db, now=now, max_attempts=s.max_attempts)
        owned = claim_tasks(self.db, owner=self.owner, now=now, claim_secs=s.claim_seconds)
        for task_id in set(self.drivers) - set(owned):
            del self.drivers[task_id]  # cancelled, finished, or taken over by another coordinator
        for task_id in owned:
            if self._stop.is_set():
                return
            try:
                self._advance(self.db.get_task(task_id))
            except Exception as e:
                if is_outage(e):
                    raise  # not the task's fault: the next tick tries again
                # A bug in a primitive or the search, a row the database refuses: that task fails
                # with its traceback (counted in /metrics), and the tasks after it still advance.
                log.exception("task %d failed", task_id)
                self._end(task_id, TaskStatus.FAILED, f"{type(e).__name__}: {e}", traceback.format_exc())

    def _advance(self, task: TaskInfo) -> None:
        driver = self.drivers.get(task.id) or self._resume(task)
        driver.learn()
        # One consistent read of the queue: the task row's count may lag results that arrive meanwhile.
        counts = q.counts(self.db, task_id=task.id)
        if counts.done >= task.trials:
            self._end(task.id, TaskStatus.DONE, "")
            return
        outstanding = counts.pending + counts.leased
        room = task.trials - counts.done - outstanding
        depth = self.settings.queue_depth
        if room <= 0 or outstanding > depth // 2:
            return
        proposals = driver.propose(min(depth - outstanding, room))
        if not proposals:
            if outstanding == 0:
                self._end(task.id, TaskStatus.DONE, "the search space has no unmeasured program left")
            return
        queued = q.enqueue(
            self.db,
            task_id=task.id,
            owner=self.owner,
            workload_id=task.workload_id,
            hardware_id=task.hardware_id,
            programs=[q.Proposed(p.trace, p.key) for p in proposals],
        )
        # Only what was queued comes back as this task's records; another task may have queued the
        # rest first, and a task cancelled or taken over meanwhile queues nothing.
        driver.forget(p for p in proposals if p.key not in queued)

    def _resume(self, task: TaskInfo) -> SearchDriver:
        """The task's search, rebuilt from the database: it learns every record there is, and will
        not propose what is queued already. The programs run on the workers' machines, not on this
        one: the space and the cost model's features are for the target they registered."""
        workload = self.db.get_workload(task.workload_id)
        queued = q.queued_program_hashes(self.db, workload_id=task.workload_id, hardware_id=task.hardware_id)
        target = next(h for h in self.db.hardware_list() if h.id == task.hardware_id).target
        wl = workload_from_spec(workload.spec)
        driver = SearchDriver(
            wl,
            self.db,
            TaskIds(task.workload_id, task.hardware_id, task.id),
            target,
            hardware_key=task.hardware_key,
            strategy=task.strategy,
            # Resumed after a restart, the search draws a new stream (what it drew before is queued):
            # replaying the old one would sample nothing but programs it must skip.
            seed=task.seed + len(queued),
            space=rule_space(SpaceConfig.for_target(target)),
            exclude=queued,
            start_from=default_schedule(wl.func, target).trace,
        )
        self.drivers[task.id] = driver
        return driver

    def _end(self, task_id: int, status: TaskStatus, message: str, trace: str | None = None) -> None:
        finish_task(
            self.db, task_id=task_id, owner=self.owner, status=status, message=message, traceback=trace
        )
        self.drivers.pop(task_id, None)


class TaskLoopProcess:
    """The search loop in a child process of the coordinator: proposing candidates is CPU-bound Python
    (sampling, lowering, the cost model) and would otherwise hold the API's GIL for seconds at a time.
    The child watches its parent and ends, releasing its tasks, if the parent dies without stopping it."""

    def __init__(self, settings: Settings) -> None:
        ctx = mp.get_context("spawn")
        self._stop = ctx.Event()
        self._process = ctx.Process(
            target=_loop_process, args=(settings, self._stop, os.getpid()), name="search-loop", daemon=True
        )

    def start(self) -> None:
        self._process.start()

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        self._stop.set()
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def _loop_process(settings: Settings, stop: Event, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop (Ctrl-C reaches both)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    with Database.open(settings.database_url) as db:
        TaskLoop(db, settings).run(stop, parent)
