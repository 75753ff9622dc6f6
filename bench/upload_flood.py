"""A flood of model uploads against a real `tuner serve` (issue 42, item 2): N clients each upload a
60 MiB ONNX model at once (a dense layer whose weights are 60 MiB), while a worker heartbeats every
0.2 s. Reports the uploads' answers (201 imported, 503 past the import slots), the heartbeats'
latency, and the resident memory of the API process and of its whole process tree (the import
children included), sampled every 0.1 s. The probe of issue 42 found 6 such uploads took the API from
178 MB to 1.99 GB and heartbeats to 9.4-36 s.

    python -m bench.upload_flood [--uploads 6 40] [--mib 60]
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from bench.proc import rss_mb
from compiler.target import host_hardware
from runner.protocol import HardwareIn
from tests.service.processes import Coordinator
from tuner.database import Database
from tuner.database.tokens import create_token
from tuner.service.settings import Settings


def big_model(mib: int) -> bytes:
    """x[1, 1024] @ W[1024, n] + relu, W of `mib` MiB."""
    n = mib * (1 << 20) // (4 * 1024)
    w = np.random.default_rng(0).standard_normal((1024, n), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def tree_rss_mb(pid: int) -> float:
    """The process and all its descendants."""
    total, pending = 0.0, [pid]
    while pending:
        p = pending.pop()
        try:
            total += rss_mb(p)
            for thread in Path(f"/proc/{p}/task").iterdir():
                pending += [int(c) for c in (thread / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def flood(uploads: int, body: dict, workdir: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{workdir / 'flood.db'}")
    with Database.open(settings.database_url) as db:
        client_token = create_token(db, role="client", name="flood")[1]
        worker_token = create_token(db, role="worker", name="flood")[1]
        db.add_hardware(host_hardware(), approved=True)
    coordinator = Coordinator(settings, workdir).start()
    assert coordinator.process is not None
    api = coordinator.process.pid
    try:
        wauth = {"Authorization": f"Bearer {worker_token}"}
        reg = {"name": "w", "hardware": HardwareIn.of(host_hardware()).model_dump()}
        worker = httpx.post(f"{coordinator.url}/v1/workers", json=reg, headers=wauth, timeout=30).json()["id"]
        before = rss_mb(api), tree_rss_mb(api)
        done = threading.Event()
        beats: list[float] = []
        peaks = [0.0, 0.0]

        def heartbeat() -> None:
            with httpx.Client(timeout=60) as http:
                while not done.is_set():
                    start = time.monotonic()
                    http.post(
                        f"{coordinator.url}/v1/workers/{worker}/heartbeat",
                        json={"holding": []},
                        headers=wauth,
                    )
                    beats.append(time.monotonic() - start)
                    done.wait(0.2)

        def sample() -> None:
            while not done.is_set():
                peaks[0] = max(peaks[0], rss_mb(api))
                peaks[1] = max(peaks[1], tree_rss_mb(api))
                done.wait(0.1)

        content = json.dumps(body).encode()  # once: 40 encodings would load the host more than the server

        def upload(_: int) -> int:
            headers = {"Authorization": f"Bearer {client_token}", "Content-Type": "application/json"}
            reply = httpx.post(f"{coordinator.url}/v1/models", content=content, headers=headers, timeout=600)
            return reply.status_code

        watchers = [threading.Thread(target=f) for f in (heartbeat, sample)]
        for t in watchers:
            t.start()
        start = time.monotonic()
        with ThreadPoolExecutor(uploads) as pool:
            statuses = list(pool.map(upload, range(uploads)))
        wall = time.monotonic() - start
        done.set()
        for t in watchers:
            t.join()
        counts = {s: statuses.count(s) for s in sorted(set(statuses))}
        size = len(body["onnx"]) / 2**20
        p50, worst = statistics.median(beats) * 1e3, max(beats) * 1e3
        print(f"{uploads} uploads of {size:.0f} MiB (base64): answers {counts} in {wall:.1f} s")
        print(f"  heartbeats {len(beats)}: p50 {p50:.0f} ms, max {worst:.0f} ms")
        api_mb, tree_mb = f"{before[0]:.0f} -> peak {peaks[0]:.0f}", f"{before[1]:.0f} -> peak {peaks[1]:.0f}"
        print(f"  RSS: API process {api_mb} MB; with its children {tree_mb} MB")
    finally:
        coordinator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uploads", type=int, nargs="+", default=[6, 40])
    parser.add_argument("--mib", type=int, default=60)
    args = parser.parse_args()
    body = {"onnx": base64.b64encode(big_model(args.mib)).decode(), "trials": 8}
    for n in args.uploads:
        with tempfile.TemporaryDirectory() as tmp:
            flood(n, body, Path(tmp))


if __name__ == "__main__":
    main()
