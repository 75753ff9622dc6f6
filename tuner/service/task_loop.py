"""The coordinator's task loop: it runs the search of every task this process owns.

Each tick it takes a step of every model (`model_loop`: which of a model's layer tasks gets the next
batch of its budget; a layer that measured its batch waits for the next), claims the active tasks
without a live owner (renewing its own claims), takes the leases of workers that stopped beating,
gives up candidates whose workers keep dying, and ends the tasks whose budget is spent. Then it tops
up the queue of the tasks that run low: clients take turns (the one with the fewest candidates
queued first), and each client's neediest task goes first (fewest queued, then least advanced); each
such task's search driver (tuner.search.driver, the same the embedded tuner uses) learns from the
records that arrived since it last looked and proposes up to `queue_depth` candidates. The queue of
all this loop's tasks holds about `max_queued` pending candidates at most, and a tick stops
proposing after a quarter of a claim's time (having advanced one task at least): many tasks each
get a few candidates soon, rather than the first ones many, and the loop renews its claims in time.
An error in a search fails its task with the traceback.

The searches of all tasks on one kind of hardware share one cost model, warm-started once from the
database and trained by every task's records (as the tasks of a model do in the embedded tuner's task
scheduler): a task starts without training a model of its own, which took seconds per task. Drivers
(each with its population and feature cache) are kept for the `max_searches` tasks advanced last: a
flood of tasks does not grow the loop's memory; a task whose driver was dropped gets one rebuilt from
the database when it next needs candidates, and it learns from where the dropped one stopped (a task
new to this loop learns all its records). A shared model holding more than SHARED_MODEL_SAMPLES
measurements starts afresh, warm-started again, and the searches that used it are rebuilt.

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
import time
import traceback
import uuid
from collections import Counter, OrderedDict, defaultdict
from datetime import datetime, timedelta
from itertools import zip_longest

from compiler.schedule_rules import RuleConfig, default_schedule
from compiler.target import Target
from compiler.workloads import workload_from_spec
from tuner.database import Database, TaskInfo, TaskStatus
from tuner.database import queue as q
from tuner.database.fleet import alive_since, expire_silent
from tuner.database.outage import is_outage
from tuner.database.owners import claim_tasks, disown, finish_task
from tuner.database.tuned_models import drop_cancelled_sources
from tuner.search.cost_model import CostModel
from tuner.search.driver import SearchDriver, TaskIds, warm_started_model
from tuner.search.space import rule_space
from tuner.service.clock import now as clock_now
from tuner.service.model_loop import step_models
from tuner.service.settings import Settings

log = logging.getLogger(__name__)
# How long a stopping coordinator waits for its loop to release its tasks before it kills the loop.
# Shorter than the grace periods in deploy/ (90 s), so the loop is never killed by systemd or docker
# along with the API: killed, its claims would hold the tasks until they lapse.
STOP_SECONDS = 40.0
# Measurements a shared cost model holds before it is replaced by a fresh warm-started one, so that its
# memory and its retraining stay bounded: a measurement is 3 x 165 float32 features, about 2 kB, so
# 20 MB (twice that while it trains).
SHARED_MODEL_SAMPLES = 10_000


class OutageLog:
    """A database outage in the log: one line when it starts, one when it ends, however many tries
    fail in between."""

    def __init__(self, meanwhile: str) -> None:
        self.meanwhile = meanwhile  # what the loop does until the database is back
        self.away = False

    def started(self, error: Exception) -> None:
        if not self.away:
            log.warning("database unavailable (%s); %s", type(error).__name__, self.meanwhile)
            self.away = True

    def ended(self) -> None:
        if self.away:
            log.warning("database available again")
            self.away = False


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
        # The searches kept in memory, the one advanced last at the end.
        self.drivers: OrderedDict[int, SearchDriver] = OrderedDict()
        self.models: dict[int, CostModel] = {}  # by hardware id: the cost model its tasks' searches share
        self.learned: dict[int, int] = {}  # by task: the last record its search learned from
        self._stop = threading.Event()
        # Since when this loop has seen the database without a break: heartbeats that could not
        # arrive before then say nothing about the workers.
        self._seen_since: datetime | None = None

    def run(self, stop: threading.Event, parent: int | None = None) -> None:
        """Tick until `stop` is set (or the process `parent` is gone), then release this loop's claims
        so another coordinator, or this one restarted, resumes the tasks at once."""
        self._stop = stop
        outage = OutageLog("retrying every tick")
        try:
            while not stop.is_set() and (parent is None or os.getppid() == parent):
                try:
                    self.tick()
                    outage.ended()
                except Exception as e:  # the database may be away for a moment; the loop must outlive it
                    self._seen_since = None
                    if not is_outage(e):
                        log.exception("task loop tick failed; retrying")
                    else:
                        outage.started(e)
                stop.wait(self.settings.tick_seconds)
        finally:
            disown(self.db, owner=self.owner)
            self.drivers.clear()

    def tick(self) -> None:
        now = clock_now(self.db)
        s = self.settings
        self._seen_since = self._seen_since or now
        if self._seen_since <= alive_since(now, s.heartbeat_seconds):
            expire_silent(self.db, now=now, heartbeat_secs=s.heartbeat_seconds)
        q.reclaim_expired(self.db, now=now, policy=s.lease_policy())
        step_models(self.db, in_flight=s.model_batches_in_flight)
        drop_cancelled_sources(self.db, before=now - timedelta(days=s.cancelled_model_days))
        owned = claim_tasks(self.db, owner=self.owner, now=now, claim_secs=s.claim_seconds)
        for task_id in set(self.drivers) - set(owned):
            del self.drivers[task_id]  # cancelled, finished, or taken over by another coordinator
        for task_id in set(self.learned) - set(owned):
            del self.learned[task_id]
        deadline = time.monotonic() + s.claim_seconds / 4
        for n, task_id in enumerate(self._due(q.progress(self.db, task_ids=owned))):
            # The first due task advances whatever the clock says: a slow database must not leave
            # every tick with nothing done.
            if self._stop.is_set() or (n > 0 and time.monotonic() > deadline):
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

    def _due(self, tasks: list[q.TaskProgress]) -> list[int]:
        """The tasks to advance this tick, in order: those whose budget is spent (they end), then
        those whose queue runs low, clients taking turns (the client with the fewest candidates
        queued first) and each client's neediest task first (fewest queued, then least advanced),
        until `max_queued` candidates would be pending."""
        depth = self.settings.queue_depth
        queued: Counter[int | None] = Counter()
        low: dict[int | None, list[q.TaskProgress]] = defaultdict(list)
        for t in tasks:
            outstanding = t.counts.pending + t.counts.leased
            queued[t.token_id] += outstanding
            if outstanding <= depth // 2 and t.counts.done + outstanding < t.trials:
                low[t.token_id].append(t)
        for group in low.values():
            group.sort(key=lambda t: (t.counts.pending + t.counts.leased, t.counts.done, t.task_id))
        clients = sorted(low, key=lambda client: (queued[client], client or 0))
        turns = zip_longest(*(low[client] for client in clients))
        order = [t.task_id for turn in turns for t in turn if t is not None]
        room = self.settings.max_queued - sum(t.counts.pending for t in tasks)
        ended = [t.task_id for t in tasks if t.counts.done >= t.trials]
        return ended + order[: max(0, -(-room // depth))]

    def _advance(self, task: TaskInfo) -> None:
        # One consistent read of the queue: the task row's count may lag results that arrive meanwhile.
        counts = q.counts(self.db, task_id=task.id)
        if counts.done >= task.trials:
            if task.model_id is None:  # a model's layer waits for its next batch (model_loop)
                self._end(task.id, TaskStatus.DONE, "")
            return
        outstanding = counts.pending + counts.leased
        room = task.trials - counts.done - outstanding
        depth = self.settings.queue_depth
        if room <= 0 or outstanding > depth // 2:
            return
        driver = self._driver(task)
        driver.learn()
        self.learned[task.id] = driver.last_record_id
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
            timing_kind=task.timing_kind,
            programs=[q.Proposed(p.trace, p.key) for p in proposals],
        )
        # Only what was queued comes back as this task's records; another task may have queued the
        # rest first, and a task cancelled or taken over meanwhile queues nothing.
        driver.forget(p for p in proposals if p.key not in queued)

    def _driver(self, task: TaskInfo) -> SearchDriver:
        """The task's search, kept among the `max_searches` used last (rebuilt if it was dropped)."""
        driver = self.drivers.pop(task.id, None)
        if driver is None or (driver.model is not None and driver.model.num_samples > SHARED_MODEL_SAMPLES):
            driver = self._resume(task)
            driver.last_record_id = self.learned.get(task.id, 0)
        self.drivers[task.id] = driver
        while len(self.drivers) > self.settings.max_searches:
            self.drivers.popitem(last=False)
        return driver

    def _resume(self, task: TaskInfo) -> SearchDriver:
        """The task's search, rebuilt from the database: it learns every record there is, and will
        not propose what is queued already. The programs run on the workers' machines, not on this
        one: the space and the cost model's features are for the target they registered."""
        workload = self.db.get_workload(task.workload_id)
        queued = q.queued_program_hashes(
            self.db, workload_id=task.workload_id, hardware_id=task.hardware_id, timing_kind=task.timing_kind
        )
        target = next(h for h in self.db.hardware_list() if h.id == task.hardware_id).target
        wl = workload_from_spec(workload.spec)
        model = None if task.strategy == "random" else self._shared_model(task, target)
        return SearchDriver(
            wl,
            self.db,
            TaskIds(task.workload_id, task.hardware_id, task.id, task.timing_kind),
            target,
            hardware_key=task.hardware_key,
            strategy=task.strategy,
            # Resumed after a restart, the search draws a new stream (what it drew before is queued):
            # replaying the old one would sample nothing but programs it must skip.
            seed=task.seed + len(queued),
            space=rule_space(RuleConfig.for_target(target)),
            exclude=queued,
            start_from=default_schedule(wl.func, target).trace,
            model=model,
        )

    def _shared_model(self, task: TaskInfo, target: Target) -> CostModel:
        """The cost model of the task's hardware, warm-started when first needed, and again (the
        drivers that used the old one dropped) once it holds SHARED_MODEL_SAMPLES measurements."""
        model = self.models.get(task.hardware_id)
        if model is not None and model.num_samples <= SHARED_MODEL_SAMPLES:
            return model
        if model is not None:
            for task_id in [t for t, d in self.drivers.items() if d.model is model]:
                del self.drivers[task_id]
        model = warm_started_model(self.db, task.hardware_id, [task.workload_id], target, task.seed)
        self.models[task.hardware_id] = model
        # The warm start has this task's records (those of its workload) already.
        latest = self.db.task_records(task.id)
        self.learned[task.id] = latest[-1].id if latest else 0
        return model

    def _end(self, task_id: int, status: TaskStatus, message: str, trace: str | None = None) -> None:
        finish_task(
            self.db, task_id=task_id, owner=self.owner, status=status, message=message, traceback=trace
        )
        self.drivers.pop(task_id, None)


# The search loop yields its cores to the API and to anything else on the machine: a worker beside
# it timed a 2-thread kernel at 8x its time while a process at equal priority was busy, and as fast
# as alone beside one at niceness 10 (bench/results/2026-11-26.md). On a machine of its own it changes
# nothing.
SEARCH_NICENESS = 10
# How often the coordinator checks that its search loop lives: also the least time between two
# starts of a loop that keeps dying.
SUPERVISE_SECONDS = 2.0


class TaskLoopProcess:
    """The search loop in a child process of the coordinator: proposing candidates is CPU-bound Python
    (sampling, lowering, the cost model) and would otherwise hold the API's GIL for seconds at a time.
    The child watches its parent and ends, releasing its tasks, if the parent dies without stopping it;
    the parent starts another child if this one dies (the kernel's OOM killer, a crash in native
    code): an API with no search behind it would take tasks that never advance.

    The child is told to stop by SIGTERM, not by an event both processes share: a multiprocessing
    Event's waiter killed with SIGKILL as it slept left `set()` waiting for it forever, and `tuner
    serve` never exited on SIGTERM after its loop had been killed."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._context = mp.get_context("spawn")
        self._stop = threading.Event()
        self._process = self._spawn()
        self._supervisor = threading.Thread(
            target=self._supervise, name="search-loop-supervisor", daemon=True
        )

    def start(self) -> None:
        self._process.start()
        self._supervisor.start()

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        self._stop.set()
        self._supervisor.join()  # it starts no child after this
        self._process.terminate()  # the child stops ticking and releases its tasks
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

    def _spawn(self) -> mp.process.BaseProcess:
        return self._context.Process(
            target=_loop_process,
            args=(self._settings, os.getpid()),
            name="search-loop",
            daemon=True,
        )

    def _supervise(self) -> None:
        while not self._stop.wait(SUPERVISE_SECONDS):
            if not self._process.is_alive():
                log.error("the search loop died (exit code %s); starting another", self._process.exitcode)
                self._process = self._spawn()
                self._process.start()


def _loop_process(settings: Settings, parent: int) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop (Ctrl-C reaches both)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    os.nice(SEARCH_NICENESS)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    run_loop(settings, stop, parent)


def run_loop(settings: Settings, stop: threading.Event, parent: int | None = None) -> None:
    """Open the database, waiting for it if it is away, and tick until `stop` is set (or the process
    `parent` is gone). The loop starts seconds after the API (a process that imports the compiler):
    a database lost meanwhile must not end it, or the API would serve on with no search behind it.

    A transaction waits on the database at most a claim's time: past it the loop's claims have lapsed
    anyway, and a connection that went silent (a failover, a dropped NAT entry: TCP notices nothing
    for hours) would otherwise hold the loop, and every task it owns, until TCP gives up."""
    outage = OutageLog("the search loop waits for it")
    while not stop.is_set() and (parent is None or os.getppid() == parent):
        try:
            db = Database.open(settings.database_url, timeout_seconds=settings.claim_seconds)
        except Exception as e:
            if not is_outage(e):
                raise
            outage.started(e)
            stop.wait(settings.tick_seconds)
            continue
        outage.ended()
        with db:
            TaskLoop(db, settings).run(stop, parent)
        return
