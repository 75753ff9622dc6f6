"""Best-record queries on PostgreSQL with 100,000 records: "what is the fastest known schedule of this
workload on this machine?". 100 workloads (matmuls of 100 shapes) x 1,000 records on one hardware,
half as many on a second; then 1,000 queries of random workloads, one client, through a real
`tuner serve` process: by structural hash (GET), and by spec (POST, which parses the spec and hashes
it). The same query straight from the database (`Database.top_k`) shows what HTTP adds.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from compiler.target import Hardware, Target
from compiler.workloads import workload_from_spec
from tests.postgres import temporary_database
from tests.service.processes import Coordinator
from tuner.database import Database, NewRecord, trace_hash
from tuner.database.tokens import create_token
from tuner.service.settings import Settings

WORKLOADS = 100
RECORDS_PER_WORKLOAD = 1000
QUERIES = 1000
HARDWARE = ("bench-znver-2c", "bench-other-8c")
STATUSES = ("ok",) * 17 + ("build_error", "timeout", "wrong_result")


def machine(mcpu: str) -> Hardware:
    return Hardware(Target("x86_64-unknown-linux-gnu", mcpu, "", 2), "bench")


def _spec(i: int) -> dict:
    return {"op": "matmul", "params": {"M": 16 + i, "N": 64, "K": 32}}


def _fill(db: Database, rng: random.Random) -> list[str]:
    """The records, inserted a workload at a time; returns the workloads' hashes."""
    hardware = [db.add_hardware(machine(k)) for k in HARDWARE]
    hashes = []
    for i in range(WORKLOADS):
        wl = workload_from_spec(_spec(i))
        key = wl.func.structural_hash()
        hashes.append(key)
        wid = db.add_workload(hash=key, name=wl.name, spec=wl.spec, flops=wl.flops)
        for hid, n in ((hardware[0], RECORDS_PER_WORKLOAD), (hardware[1], RECORDS_PER_WORKLOAD // 2)):
            records = []
            for r in range(n):
                status = rng.choice(STATUSES)
                secs = [rng.lognormvariate(-7, 0.5) for _ in range(5)] if status == "ok" else []
                trace = {"version": 1, "instructions": [{"kind": "bench", "n": r}]}
                records.append(
                    NewRecord(
                        workload_id=wid,
                        hardware_id=hid,
                        trace=trace,
                        program_hash=trace_hash(trace),  # these traces make no program
                        status=status,
                        run_secs=secs,
                    )
                )
            with db.transaction() as session:
                db.insert_records(session.connection(), records)
    return hashes


def _percentiles(seconds: list[float]) -> str:
    ms = 1e3 * np.array(seconds)
    return f"p50 {np.percentile(ms, 50):.2f} ms, p99 {np.percentile(ms, 99):.2f} ms"


def main() -> None:
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp, temporary_database() as url:
        settings = Settings(database_url=url)
        with Database.open(url) as db:
            start = time.perf_counter()
            hashes = _fill(db, rng)
            filled = time.perf_counter() - start
            token = create_token(db, role="client", name="bench")[1]
            picks = [rng.randrange(WORKLOADS) for _ in range(QUERIES)]
            direct = []
            for i in picks:
                t = time.perf_counter()
                db.top_k(hashes[i], HARDWARE[0], 1, timing_kind="warm")
                direct.append(time.perf_counter() - t)
        n = WORKLOADS * RECORDS_PER_WORKLOAD * 3 // 2
        print(f"best-record queries, PostgreSQL, {n} records ({filled:.0f} s to insert):")
        print(f"  Database.top_k in process: {_percentiles(direct)}")
        coordinator = Coordinator(settings, Path(tmp), "--no-search-loop").start()
        try:
            with httpx.Client(base_url=coordinator.url, headers={"Authorization": f"Bearer {token}"}) as http:
                by_hash, by_spec = [], []
                for i in picks:
                    t = time.perf_counter()
                    reply = http.get(f"/v1/workloads/{hashes[i]}/best", params={"hardware": HARDWARE[0]})
                    by_hash.append(time.perf_counter() - t)
                    assert reply.status_code == 200 and len(reply.json()) == 1, reply.text
                    t = time.perf_counter()
                    reply = http.post(
                        "/v1/best", json={"workload": _spec(i), "hardware": HARDWARE[0], "k": 5}
                    )
                    by_spec.append(time.perf_counter() - t)
                    assert reply.status_code == 200 and len(reply.json()) == 5, reply.text
        finally:
            coordinator.stop()
        print(f"  GET /v1/workloads/{{hash}}/best over HTTP: {_percentiles(by_hash)}")
        print(f"  POST /v1/best by spec, k=5, over HTTP: {_percentiles(by_spec)}")
