"""Prometheus metrics: request counts and latencies, candidates leased and results by outcome (this
process), and the state of the queue, the tasks and the fleet (read from the database at each scrape,
so every coordinator reports the same numbers)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from tuner.database import Database
from tuner.database.fleet import alive_since, workers
from tuner.database.schema import CandidateRow, TaskRow
from tuner.service.clock import now as clock_now

REQUESTS = Counter("tuner_http_requests", "HTTP requests handled", ["method", "route", "status"])
LATENCY = Histogram(
    "tuner_http_request_seconds",
    "HTTP request latency",
    ["route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
LEASED = Counter("tuner_candidates_leased", "Candidates leased to workers")
RESULTS = Counter("tuner_results", "Results submitted by workers, by outcome", ["outcome"])


class _DatabaseCollector(Collector):
    def __init__(self, db: Database, heartbeat_secs: float) -> None:
        self.db = db
        self.heartbeat_secs = heartbeat_secs

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self.db.transaction() as session:
            tasks = session.execute(select(TaskRow.status, func.count()).group_by(TaskRow.status)).all()
            queue = session.execute(
                select(CandidateRow.status, func.count()).group_by(CandidateRow.status)
            ).all()
            errors = session.scalar(select(func.count()).where(TaskRow.traceback.is_not(None)))
        yield _by_status("tuner_tasks", "Tasks by status", tasks)
        yield GaugeMetricFamily(
            "tuner_search_errors",
            "Tasks failed by an error in their search (a bug: the task's traceback says where)",
            value=errors,
        )
        yield _by_status("tuner_candidates", "Queued candidates by status", queue)
        now = clock_now(self.db)
        alive = workers(self.db, seen_since=alive_since(now, self.heartbeat_secs))
        yield GaugeMetricFamily(
            "tuner_workers_seen", "Workers alive (seen lately, not stopped)", value=len(alive)
        )
        throttled = [w for w in alive if w.throttled_until is not None and w.throttled_until > now]
        yield GaugeMetricFamily(
            "tuner_workers_throttled",
            "Workers alive that get no lease for now: each let worker_strikes leases expire without a result",
            value=len(throttled),
        )


def _by_status(name: str, documentation: str, rows: Sequence[tuple[str, int]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=["status"])
    for status, n in rows:
        family.add_metric([status], n)
    return family


def render(db: Database, heartbeat_secs: float) -> tuple[bytes, str]:
    """The exposition text: this process's counters, then the database's gauges."""
    gauges = CollectorRegistry(auto_describe=False)
    gauges.register(_DatabaseCollector(db, heartbeat_secs))
    return generate_latest(REGISTRY) + generate_latest(gauges), CONTENT_TYPE_LATEST
