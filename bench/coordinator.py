"""Coordinator throughput, on SQLite and on PostgreSQL: a real `tuner serve` process and worker
processes (the real daemon, batches of 4) with the null runner, which measures nothing, so the
coordinator is what is measured. All of it shares this machine's 2 cores: the workers' own Python and
PostgreSQL included.

- dispatch: the queue is filled beforehand with 4,000 candidates (real matmul traces, made unique) and
  the coordinator serves the API only; the workers drain it. One worker shows what a lease and a
  result call cost; 8 show the throughput, and latencies that now include queueing for the cores.
  Reported: candidates per second (and its inverse, the coordinator's time per candidate at
  saturation), the p50/p99 latency of lease and result calls as the workers saw them, and the sum of
  those latencies per candidate.
- with the search loop: 8 random-search tasks on a small matmul, the coordinator proposing candidates
  as the workers drain them (20 s): the rate the whole service sustains when measuring costs nothing.
"""

from __future__ import annotations

import multiprocessing as mp
import re
import tempfile
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import httpx
import numpy as np

from bench.common import random_matmul_traces
from bench.soak_worker import TimedClient
from compiler.target import host_hardware
from compiler.workloads import workload_from_spec
from runner.worker import Worker, WorkerConfig
from tests.postgres import temporary_database
from tests.service.processes import Coordinator
from tuner.database import Database, trace_hash
from tuner.database import queue as q
from tuner.database.owners import claim_tasks
from tuner.database.tokens import create_token
from tuner.service.client import Client
from tuner.service.settings import Settings

WORKERS = 8
QUEUED = 4000
LOOP_SECONDS = 20.0
SPEC = {"op": "matmul", "params": {"M": 64, "N": 64, "K": 64}}


class DrainingClient(TimedClient):
    """The soak's timed worker client, also noting the wall clock of its first lease and last result.
    With `until_idle` its worker stops at its first empty lease (the queue is drained)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.until_idle = False
        self.first = self.last = 0.0

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        reply = super()._request(method, path, body)
        if path.endswith("/lease"):
            if reply["candidates"]:
                self.first = self.first or time.time()
            elif self.until_idle:
                self.stopping.set()
        if path.endswith("/results"):
            self.last = time.time()
        return reply

    @property
    def measured(self) -> int:
        return self.outcomes["accepted"]


def _work(url: str, token: str, index: int, seconds: float | None, out: Any) -> None:
    config = WorkerConfig(coordinator_url=url, token=token, name=f"null-{index}", runner="null")
    worker = Worker(config, client=DrainingClient)
    client = cast(DrainingClient, worker.coordinator)
    client.until_idle = seconds is None
    if seconds is not None:
        threading.Timer(seconds, worker.stopping.set).start()
    worker.run()
    out.put((dict(client.seconds), client.measured, client.first, client.last))


def _run_workers(
    url: str, token: str, seconds: float | None, workers: int = WORKERS
) -> tuple[dict[str, list[float]], int, float]:
    """8 workers, for `seconds` or (None) until the queue is drained. Returns the latencies of their
    calls, the candidates they measured, and the seconds from the first lease to the last result."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_work, args=(url, token, i, seconds, out)) for i in range(workers)]
    for p in procs:
        p.start()
    reports = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    latencies: dict[str, list[float]] = defaultdict(list)
    for lat, *_ in reports:
        for kind, values in lat.items():
            latencies[kind] += values
    first = min(r[2] for r in reports if r[2])
    last = max(r[3] for r in reports)
    return latencies, sum(r[1] for r in reports), last - first


def _fill_queue(settings: Settings) -> None:
    """A task with QUEUED candidates waiting: real traces, each made unique by an extra key."""
    hw, wl = host_hardware(), workload_from_spec(SPEC)
    traces = random_matmul_traces(SPEC, 40)
    unique = [{**traces[i % len(traces)], "bench": i} for i in range(QUEUED)]
    with Database.open(settings.database_url) as db:
        wid = db.add_workload(hash=wl.func.structural_hash(), name=wl.name, spec=wl.spec, flops=wl.flops)
        hid = db.add_hardware(hw)
        task = db.add_task(workload_id=wid, hardware_id=hid, strategy="random", trials=QUEUED, seed=0)
        # Queued as its search loop would: only the owner of a running task may (the API runs no loop).
        claim_tasks(db, owner="bench", now=datetime.now(UTC), claim_secs=3600)
        for start in range(0, QUEUED, 500):
            batch = unique[start : start + 500]
            programs = [q.Proposed(t, trace_hash(t)) for t in batch]  # each a program of its own
            q.enqueue(
                db,
                task_id=task,
                owner="bench",
                workload_id=wid,
                hardware_id=hid,
                timing_kind="warm",
                programs=programs,
            )


def _tokens(settings: Settings) -> tuple[str, str]:
    with Database.open(settings.database_url) as db:
        return create_token(db, role="admin", name="bench")[1], create_token(db, role="worker", name="bench")[
            1
        ]


def dispatch(settings: Settings, workdir: Path, api_processes: int = 1, workers: int = WORKERS) -> str:
    admin, worker_token = _tokens(settings)
    _fill_queue(settings)
    coordinator = Coordinator(settings, workdir, "--no-search-loop", "--workers", str(api_processes)).start()
    try:
        latencies, measured, seconds = _run_workers(coordinator.url, worker_token, None, workers)
        inside = _server_seconds(coordinator.url, admin) if workers == 1 else None
    finally:
        coordinator.stop()
    summary = _summary(latencies, measured, seconds)
    if inside is not None:  # with one worker, time inside is work, not waiting for the cores
        summary += f"; inside the coordinator {1e3 * inside / measured:.2f} ms per candidate"
    return summary


def _server_seconds(url: str, token: str) -> float:
    """The time the coordinator spent in lease and result calls, from its own request histogram."""
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}).text
    total = 0.0
    for route in ("/v1/workers/{worker_id}/lease", "/v1/workers/{worker_id}/results"):
        pattern = rf'tuner_http_request_seconds_sum{{route="{re.escape(route)}"}} (\S+)'
        total += float(re.search(pattern, text).group(1))
    return total


def with_search_loop(settings: Settings, workdir: Path) -> str:
    admin, worker_token = _tokens(settings)
    coordinator = Coordinator(settings, workdir).start()
    try:
        with Client(coordinator.url, admin) as api:
            # The tasks need the workers' hardware: register it first, as a worker's start would, and
            # approve it, as an admin does.
            Worker(
                WorkerConfig(coordinator_url=coordinator.url, token=worker_token, runner="null")
            )._register()
            api.http.post("/v1/hardware/1/approve").raise_for_status()
            for seed in range(WORKERS):
                api.submit(SPEC, trials=settings.max_trials, strategy="random", seed=seed)
        latencies, measured, seconds = _run_workers(coordinator.url, worker_token, LOOP_SECONDS)
    finally:
        coordinator.stop()
    return _summary(latencies, measured, seconds)


def _summary(latencies: dict[str, list[float]], measured: int, seconds: float) -> str:
    lease, results = (1e3 * np.array(latencies[kind]) for kind in ("lease", "results"))
    overhead = (lease.sum() + results.sum()) / max(measured, 1)
    p50, p99 = (lambda x: np.percentile(x, 50)), (lambda x: np.percentile(x, 99))
    return (
        f"{measured / seconds:.0f} candidates/s = {1e3 * seconds / measured:.1f} ms each "
        f"({measured} in {seconds:.1f} s); "
        f"lease p50 {p50(lease):.1f} ms, p99 {p99(lease):.1f} ms; "
        f"results p50 {p50(results):.1f} ms, p99 {p99(results):.1f} ms; "
        f"{overhead:.2f} ms of call latency per candidate"
    )


def main() -> None:
    phases = {
        "dispatch to 1 worker (no contention: the calls' own latency)": lambda s, w: dispatch(
            s, w, workers=1
        ),
        "dispatch, 1 API process": dispatch,
        "dispatch, 2 API processes": lambda settings, workdir: dispatch(settings, workdir, 2),
        "with the search loop": with_search_loop,
    }
    for backend in ("sqlite", "postgresql"):
        for name, phase in phases.items():
            with tempfile.TemporaryDirectory() as tmp, temporary_database() as pg_url:
                url = f"sqlite:///{Path(tmp) / 'bench.db'}" if backend == "sqlite" else pg_url
                settings = Settings(database_url=url, queue_depth=64, tick_seconds=0.05)
                result = phase(settings, Path(tmp))
                print(f"coordinator on {backend}, null-runner workers, {name}: {result}")
