"""A fleet soak (issue 14): a real `tuner serve` and N null-runner worker daemons (bench.soak_worker:
the real daemon, its requests timed) for a fixed window, tasks submitted through the API beforehand so
that the coordinator's search loop proposes every candidate. The workers measure nothing, so the
service is what is measured: results stored per second, the latency of lease and result calls as the
workers saw them (p50, p99) and inside the coordinator (its request histogram's mean), errors of every
kind, and the resident memory of the API process (`tuner serve` itself, with one API process) and of
its search-loop child, idle, then every `--interval` seconds of the window.

Random search by default: its proposals cost the loop little, so the API is what the workers wait on
(the evolutionary search's cost model on 2 shared cores would be the bottleneck instead). The budget
of each task is far more than the window can measure, so the workers never run dry.

    python -m bench.fleet_soak [--database postgresql|sqlite] [--workers 16] [--seconds 150]
                               [--tasks 16] [--trials 10000] [--strategy random] [--interval 15]
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from bench.proc import cpu_seconds, rss_mb, search_loop_pid
from compiler.target import host_hardware
from tests.postgres import temporary_database
from tests.service.processes import Coordinator, Process, environment, wait_until
from tuner.database import Database
from tuner.database.schema import RecordRow, WorkerRow
from tuner.database.tokens import create_token
from tuner.service.client import Client
from tuner.service.settings import Settings

NORMAL_OUTCOMES = {"accepted", "confirming"}  # a would-be best is held for a second measurement
ROUTES = {"lease": "/v1/workers/{worker_id}/lease", "results": "/v1/workers/{worker_id}/results"}


def spec(i: int) -> dict:
    """The i-th task's workload: a matmul of its own shape (no two tasks share a workload)."""
    return {"op": "matmul", "params": {"M": 64 + 8 * i, "N": 64, "K": 64}}


@dataclass
class Service:
    """The coordinator under test and what the bench reads of it."""

    coordinator: Coordinator
    db: Database
    admin: str

    def stored(self) -> int:
        with self.db.transaction() as session:
            return session.scalar(select(func.count()).select_from(RecordRow)) or 0

    def registered(self, names: list[str]) -> int:
        with self.db.transaction() as session:
            return session.scalar(select(func.count()).where(WorkerRow.name.in_(names))) or 0

    def metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """The coordinator's /metrics: each sample's labels and value, by sample name."""
        text = httpx.get(
            f"{self.coordinator.url}/metrics", headers={"Authorization": f"Bearer {self.admin}"}, timeout=30
        ).text
        samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples[s.name].append((s.labels, s.value))
        return samples


def start_workers(service: Service, token: str, n: int, workdir: Path) -> list[Process]:
    env = environment(service.coordinator.settings)
    names = [f"null-{i}" for i in range(n)]
    workers = []
    for name in names:
        args = ["--coordinator", service.coordinator.url, "--token", token, "--name", name]
        args += ["--report", str(workdir / f"{name}.json")]
        workers.append(Process(args, env, workdir / f"{name}.log", module="bench.soak_worker"))
    wait_until(lambda: service.registered(names) == n, 120, f"{n} workers registered")
    return workers


def watch(service: Service, seconds: float, interval: float, pids: tuple[int, int]) -> tuple[int, float]:
    """Print, every `interval` seconds of the window, the results stored so far, the rate over the
    interval and the two processes' memory; at the end, the CPU each used in the window (which of them
    the workers wait on). Returns the results stored in the window and its length."""
    api, loop = pids
    cpu = cpu_seconds(api), cpu_seconds(loop)
    print(f"{'s':>5} {'results':>8} {'per s':>6} {'API RSS MB':>11} {'loop RSS MB':>12}")
    start, first = time.monotonic(), service.stored()
    print(f"{0:5.0f} {0:8d} {'':>6} {rss_mb(api):11.0f} {rss_mb(loop):12.0f}", flush=True)
    last_t, last_n = start, first
    ticks = max(1, round(seconds / interval))
    for k in range(1, ticks + 1):
        time.sleep(max(0.0, start + k * seconds / ticks - time.monotonic()))
        now, n = time.monotonic(), service.stored()
        rate = (n - last_n) / (now - last_t)
        print(
            f"{now - start:5.0f} {n - first:8d} {rate:6.0f} {rss_mb(api):11.0f} {rss_mb(loop):12.0f}",
            flush=True,
        )
        last_t, last_n = now, n
    used = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu)]
    elapsed = last_t - start
    print(
        f"CPU in the window: API process {used[0]:.0f} s ({used[0] / elapsed:.0%} of a core), "
        f"search loop {used[1]:.0f} s ({used[1] / elapsed:.0%})"
    )
    return last_n - first, elapsed


def stop_workers(workers: list[Process], workdir: Path) -> list[dict[str, Any]]:
    """SIGTERM them all at once (each finishes its batch and says goodbye), then read their reports.
    One signal each: a second one arriving while Python shuts down would kill the process."""
    for w in workers:
        w.send_signal(signal.SIGTERM)
    codes = [w.wait(60) for w in workers]
    reports = []
    for i, code in enumerate(codes):
        path = workdir / f"null-{i}.json"
        report = json.loads(path.read_text()) if path.exists() else {"missing": True}
        reports.append({**report, "code": code})
    return reports


def latency_line(
    reports: list[dict[str, Any]], samples: dict[str, list[tuple[dict[str, str], float]]]
) -> str:
    seconds: dict[str, list[float]] = defaultdict(list)
    for r in reports:
        for kind, values in r.get("seconds", {}).items():
            seconds[kind] += values
    parts = []
    for kind, route in ROUTES.items():
        ms = 1e3 * np.array(seconds[kind] or [np.nan])
        inside = _mean_ms(samples, route)
        parts.append(
            f"{kind} p50 {np.percentile(ms, 50):.1f} ms, p99 {np.percentile(ms, 99):.1f} ms "
            f"({len(seconds[kind])} calls; {inside:.1f} ms mean inside the coordinator)"
        )
    parts.append(f"{len(seconds['idle lease'])} leases found nothing to do")
    return "latency as the workers saw it: " + "; ".join(parts)


def _mean_ms(samples: dict[str, list[tuple[dict[str, str], float]]], route: str) -> float:
    def one(name: str) -> float:
        return sum(v for labels, v in samples[name] if labels.get("route") == route)

    count = one("tuner_http_request_seconds_count")
    return 1e3 * one("tuner_http_request_seconds_sum") / count if count else float("nan")


def errors_line(
    reports: list[dict[str, Any]], samples: dict[str, list[tuple[dict[str, str], float]]], log: str
) -> str:
    outcomes: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for r in reports:
        outcomes.update(r.get("outcomes", {}))
        failed.update(r.get("failed", {}))
    odd = {k: v for k, v in outcomes.items() if k not in NORMAL_OUTCOMES}
    server = sum(v for labels, v in samples["tuner_http_requests_total"] if labels["status"].startswith("5"))
    warnings = sum(r.get("warnings", 0) for r in reports)
    first = next((w for r in reports for w in r.get("first_warnings", [])), None)
    codes = Counter(r["code"] for r in reports)
    return (
        f"errors: {sum(failed.values())} failed requests{_detail(failed)}; "
        f"{warnings} worker warnings{f' (first: {first})' if first else ''}; "
        f"{sum(odd.values())} results not accepted{_detail(odd)}; {server:.0f} 5xx answers (/metrics); "
        f"{log.count('Traceback')} tracebacks in the coordinator's log; "
        f"worker exit codes {dict(codes)}; {sum('missing' in r for r in reports)} reports missing. "
        f"Outcomes: {dict(outcomes)}"
    )


def _detail(counts: Counter[str] | dict[str, int]) -> str:
    return f" {dict(counts)}" if counts else ""


def soak(url: str, workdir: Path, args: argparse.Namespace) -> None:
    settings = Settings(database_url=url, max_trials=args.trials)
    with Database.open(url) as db:
        admin = create_token(db, role="admin", name="soak")[1]
        worker_token = create_token(db, role="worker", name="soak")[1]
        db.add_hardware(host_hardware(), approved=True)
        coordinator = Coordinator(settings, workdir).start()
        service = Service(coordinator, db, admin)
        workers: list[Process] = []
        try:
            assert coordinator.process is not None
            pids = (coordinator.process.pid, search_loop_pid(coordinator.process.pid))
            assert pids[1] is not None, "no search-loop process"
            print(f"idle: API RSS {rss_mb(pids[0]):.0f} MB, search loop RSS {rss_mb(pids[1]):.0f} MB")
            with Client(coordinator.url, admin) as api:
                for i in range(args.tasks):
                    api.submit(spec(i), trials=args.trials, strategy=args.strategy, seed=i)
            workers = start_workers(service, worker_token, args.workers, workdir)
            stored, seconds = watch(service, args.seconds, args.interval, (pids[0], pids[1]))
            reports = stop_workers(workers, workdir)
            samples = service.metrics()
        finally:
            for w in workers:
                w.stop()
            coordinator.stop()
    print(
        f"{args.workers} workers, {args.tasks} {args.strategy}-search tasks, {args.database}: "
        f"{stored} results stored in {seconds:.0f} s = {stored / seconds:.0f}/s"
    )
    print(latency_line(reports, samples))
    print(errors_line(reports, samples, coordinator.process.output() if coordinator.process else ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=150.0, help="the measured window")
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--trials", type=int, default=10_000, help="each task's budget")
    parser.add_argument("--strategy", choices=["random", "evolutionary"], default="random")
    parser.add_argument("--interval", type=float, default=15.0, help="seconds between memory samples")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if args.database == "sqlite":
            soak(f"sqlite:///{workdir / 'soak.db'}", workdir, args)
        else:
            with temporary_database() as url:
                soak(url, workdir, args)


if __name__ == "__main__":
    main()
