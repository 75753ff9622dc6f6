"""Coordinator throughput: a real `tuner serve` process, 8 worker processes with the null runner (they
measure nothing, so the coordinator is all that is measured), 8 tasks with large budgets. Reports
candidates dispatched per second, the p50/p99 latency of lease and result calls as the workers saw
them, and the coordinator's overhead per candidate (lease + result time per candidate), on SQLite and
on PostgreSQL.

The search loop runs in the coordinator process too (random search on a small matmul), so the
dispatch rate includes proposing the candidates: that is the coordinator's real work per candidate.
"""

from __future__ import annotations

import multiprocessing as mp
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from runner.worker import Worker, WorkerConfig
from tests.postgres import temporary_database
from tests.service.processes import Coordinator
from tuner.database import Database
from tuner.database.tokens import create_token
from tuner.service.client import Client
from tuner.settings import Settings

WORKERS = 8
TASKS = 8
SECONDS = 20.0
SPEC = {"op": "matmul", "params": {"M": 64, "N": 64, "K": 64}}


class TimedWorker(Worker):
    """The real worker daemon, with every request to the coordinator timed."""

    def __init__(self, config: WorkerConfig) -> None:
        super().__init__(config)
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.measured = 0

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        start = time.perf_counter()
        reply = super()._request(method, path, body)
        kind = path.rsplit("/", 1)[-1]
        if kind == "lease" and not reply["candidates"]:
            kind = "idle-lease"  # nothing to do yet: load on the coordinator, but no candidate's cost
        self.latencies[kind].append(time.perf_counter() - start)
        if kind == "results":
            self.measured += sum(o == "accepted" for o in reply["outcomes"])
        return reply


def _work(url: str, token: str, index: int, seconds: float, out: Any) -> None:
    worker = TimedWorker(
        WorkerConfig(coordinator_url=url, token=token, name=f"null-{index}", runner="null", idle_poll_s=0.02)
    )
    threading.Timer(seconds, worker.stopping.set).start()
    worker.run()
    out.put((dict(worker.latencies), worker.measured))


def run(settings: Settings, workdir: Path) -> dict[str, float]:
    with Database.open(settings.database_url) as db:
        admin = create_token(db, role="admin", name="bench")[1]
        worker_token = create_token(db, role="worker", name="bench")[1]
    ctx = mp.get_context("spawn")
    coordinator = Coordinator(settings, workdir).start()
    try:
        out = ctx.Queue()
        procs = [
            ctx.Process(target=_work, args=(coordinator.url, worker_token, i, SECONDS, out))
            for i in range(WORKERS)
        ]
        for p in procs:
            p.start()
        with Client(coordinator.url, admin) as api:
            deadline = time.monotonic() + 60
            while len(api.http.get("/v1/workers").json()) < WORKERS and time.monotonic() < deadline:
                time.sleep(0.1)
            for seed in range(TASKS):
                api.submit(SPEC, trials=100_000, strategy="random", seed=seed)
        reports = [out.get(timeout=SECONDS + 120) for _ in procs]
        for p in procs:
            p.join()
    finally:
        coordinator.stop()
    latencies: dict[str, list[float]] = defaultdict(list)
    for lat, _ in reports:
        for kind, values in lat.items():
            latencies[kind] += values
    measured = sum(m for _, m in reports)
    lease, results = np.array(latencies["lease"]), np.array(latencies["results"])
    return {
        "candidates": measured,
        "per_second": measured / SECONDS,
        "lease_p50_ms": 1e3 * float(np.percentile(lease, 50)),
        "lease_p99_ms": 1e3 * float(np.percentile(lease, 99)),
        "results_p50_ms": 1e3 * float(np.percentile(results, 50)),
        "results_p99_ms": 1e3 * float(np.percentile(results, 99)),
        "idle_leases": len(latencies["idle-lease"]),
        "overhead_ms_per_candidate": 1e3 * (lease.sum() + results.sum()) / max(measured, 1),
    }


def main() -> None:
    for backend in ("sqlite", "postgresql"):
        with tempfile.TemporaryDirectory() as tmp, temporary_database() as pg_url:
            url = f"sqlite:///{Path(tmp) / 'bench.db'}" if backend == "sqlite" else pg_url
            settings = Settings(database_url=url, queue_depth=64, tick_seconds=0.05)
            r = run(settings, Path(tmp))
        print(
            f"coordinator on {backend}, {WORKERS} null-runner workers, {TASKS} tasks, {SECONDS:.0f} s: "
            f"{r['per_second']:.0f} candidates/s ({r['candidates']})"
        )
        print(
            f"  lease p50 {r['lease_p50_ms']:.1f} ms, p99 {r['lease_p99_ms']:.1f} ms; "
            f"results p50 {r['results_p50_ms']:.1f} ms, p99 {r['results_p99_ms']:.1f} ms; "
            f"{r['idle_leases']} idle lease calls; "
            f"overhead {r['overhead_ms_per_candidate']:.2f} ms per candidate"
        )
