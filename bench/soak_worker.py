"""The worker daemon with its requests timed, for bench.fleet_soak: the real `Worker` with the null
runner, in a process of its own and stopped with SIGTERM as `tuner worker` is. When it stops it writes
what it saw as JSON: every request's latency by kind, its results' outcomes, the requests that failed
and the warnings it logged (a retry, a failed heartbeat: what an operator would see in its log).

    python -m bench.soak_worker --coordinator URL --token TOKEN --name NAME --report FILE
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, cast

import httpx

from runner.coordinator_client import CoordinatorClient, Fatal
from runner.worker import Worker, WorkerConfig

FIRST_WARNINGS = 5  # kept verbatim in the report; the rest are only counted


class Warnings(logging.Handler):
    """Counts the records of WARNING and above, keeping the first few."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.first: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if len(self.first) < FIRST_WARNINGS:
            self.first.append(record.getMessage())


class TimedClient(CoordinatorClient):
    """Times each request to the coordinator by kind: lease (one that brought candidates), idle lease,
    results, heartbeat, release, stop and register. The heartbeat thread records too, hence the lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.outcomes: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        kind = "register" if path == "/v1/workers" else path.rsplit("/", 1)[-1]
        start = time.perf_counter()
        try:
            reply = super()._request(method, path, body)
        except (httpx.HTTPError, Fatal) as e:
            with self._lock:
                self.failed[f"{kind}: {type(e).__name__}"] += 1
            raise
        seconds = time.perf_counter() - start
        if kind == "lease" and not reply["candidates"]:
            kind = "idle lease"
        with self._lock:
            self.seconds[kind].append(seconds)
            if kind == "results":
                self.outcomes.update(reply["outcomes"])
        return reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--coordinator", "--token", "--name", "--report"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    warnings = Warnings()
    logging.getLogger("tuner.worker").addHandler(warnings)
    config = WorkerConfig(coordinator_url=args.coordinator, token=args.token, name=args.name, runner="null")
    worker = Worker(config, client=TimedClient)
    worker.install_signal_handlers()
    code = worker.run()
    timed = cast(TimedClient, worker.coordinator)
    report = {
        "exit": code,
        "seconds": timed.seconds,
        "outcomes": timed.outcomes,
        "failed": timed.failed,
        "warnings": warnings.count,
        "first_warnings": warnings.first,
    }
    Path(args.report).write_text(json.dumps(report))
    raise SystemExit(code)


if __name__ == "__main__":
    main()
