"""A model tuned through the service, end to end as a user would: a `tuner serve` coordinator and one
`tuner worker` daemon (the local runner) on this machine, the model's ONNX bytes submitted with one
trial budget, its progress polled, then its artifact (the native library) downloaded and loaded.
Reported: the tuning wall time and the estimate along the way, the CPU time the coordinator's
processes took from the worker's cores, the artifact's outputs against PyTorch's, and, with the
service stopped, the artifact's forward pass alternated with the same records built in this process
(`graph.build`), ONNX Runtime and PyTorch eager.

Everything shares this machine's cores: the coordinator proposes the next batch while the worker
measures one (a deployment would run it elsewhere), so its CPU time is printed beside the wall.

    python -m bench.model_service [--model resnet18] [--trials 2000] [--postgres] [--keep DIR]
"""

from __future__ import annotations

import os

os.environ.pop("OPENBLAS_CORETYPE", None)  # an honest numpy/PyTorch baseline (bench/__main__.py)

import argparse
import io
import statistics
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import numpy as np

from bench.common import alternated_ms
from bench.model_latency import ZooModel, onnx_bytes, zoo_models
from bench.model_peers import peers
from bench.proc import cpu_seconds, search_loop_pid
from compiler import frontend, graph
from compiler.graph import load_library
from compiler.target import host_hardware
from tests.postgres import temporary_database
from tests.service.processes import Coordinator, Process, start_worker, wait_until
from tuner.best import build_model
from tuner.database import Database, TaskStatus
from tuner.database.tokens import create_token
from tuner.service.client import Client
from tuner.service.schemas import ModelDetail
from tuner.service.settings import Settings

POLL_S = 5.0
REPORT_EVERY = 250  # trials between progress lines
ROUNDS, CALLS = 5, 6
ENDED = (TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED)


@contextmanager
def database_url(postgres: bool, directory: Path) -> Iterator[str]:
    """A fresh database: a temporary PostgreSQL one, or an SQLite file in `directory`."""
    if postgres:
        with temporary_database() as url:
            yield url
    else:
        yield f"sqlite:///{directory / 'service.db'}"


def wait_for_model(api: Client, model_id: int, start: float) -> ModelDetail:
    """Poll until the model's tuning ends, printing its trials and estimate every REPORT_EVERY trials."""
    reported = -REPORT_EVERY
    while True:
        detail = api.model(model_id)
        ended = detail.status in ENDED
        if detail.trials_done - reported >= REPORT_EVERY or ended:
            reported = detail.trials_done
            estimate = f"{detail.estimated_secs * 1e3:.2f} ms" if detail.estimated_secs else "none yet"
            print(
                f"[{time.monotonic() - start:5.0f} s] {detail.trials_done}/{detail.trials} trials, "
                f"status {detail.status}, estimate {estimate}",
                flush=True,
            )
        if ended:
            return detail
        time.sleep(POLL_S)


def layer_table(detail: ModelDetail, top: int = 10) -> None:
    """The layers that take most of the estimate: trials, best GFLOPS and share."""
    for layer in sorted(detail.layers, key=lambda layer: -(layer.share or 0.0))[:top]:
        print(
            f"    {layer.workload_name[:44]:44s} x{layer.weight:<2d} {layer.trials_done:4d} trials "
            f"{(layer.best_secs or 0.0) * 1e6:8.1f} us {layer.gflops or 0.0:6.1f} GFLOPS "
            f"{layer.share or 0.0:6.1%}"
        )


def unpack(artifact: bytes, directory: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(artifact)) as tar:
        tar.extractall(directory, filter="data")
    return directory / "model.so"


def tune_through_service(entry: ZooModel, source: bytes, url: str, trials: int, logs: Path) -> Path:
    """Start the service, tune the model under `trials`, download and unpack its artifact into
    `logs`; returns the library's path."""
    with Database.open(url) as db:
        admin = create_token(db, role="admin", name="bench")[1]
        worker_token = create_token(db, role="worker", name="bench")[1]
        db.add_hardware(host_hardware(), approved=True)
    coordinator = Coordinator(Settings(database_url=url), logs).start()
    worker: Process | None = None
    try:
        worker = start_worker(coordinator, worker_token, "bench-worker", logs)
        assert coordinator.process is not None
        api_pid = coordinator.process.pid
        pids = (api_pid, cast(int, wait_until(lambda: search_loop_pid(api_pid), 60, "the search loop")))
        with Client(coordinator.url, admin) as api:
            idle = sum(map(cpu_seconds, pids))
            start = time.monotonic()
            model = api.submit_model(source, trials=trials, name=entry.name)
            print(f"submitted in {time.monotonic() - start:.1f} s: {model.tasks} tasks", flush=True)
            detail = wait_for_model(api, model.id, start)
            wall = time.monotonic() - start
            busy = sum(map(cpu_seconds, pids)) - idle
            print(
                f"{entry.name}: {detail.status} after {detail.trials_done} trials in {wall:.0f} s of tuning; "
                f"the coordinator's processes used {busy:.0f} CPU s meanwhile; estimate "
                f"{(detail.estimated_secs or float('nan')) * 1e3:.2f} ms"
            )
            layer_table(detail)
            fetched = time.monotonic()
            artifact = api.model_artifact(model.id)
            print(f"artifact: {len(artifact) / 1e6:.1f} MB in {time.monotonic() - fetched:.0f} s")
        return unpack(artifact, logs)
    finally:
        if worker is not None:
            worker.stop()
        coordinator.stop()


def compare(entry: ZooModel, source: bytes, url: str, library: Path) -> None:
    """The artifact against PyTorch's outputs, then timed against the in-process build and the peers."""
    import torch

    args = entry.inputs()
    inputs = [a.numpy() for a in args]
    native = load_library(library)
    with torch.no_grad():
        expected = entry.make()(*args).numpy()
    error = float(np.max(np.abs(native(*inputs)[0] - expected)))
    print(f"artifact against PyTorch: max abs error {error:.2e} (outputs up to {np.abs(expected).max():.2f})")
    with Database.open(url) as db:
        built = build_model(graph.optimize(frontend.from_onnx(source)), database=db)
    ours = {"artifact": lambda: native(*inputs), "graph.build": lambda: built(*inputs)}
    runs = {**ours, **peers(entry, host_hardware().target.cores)}
    ms = {k: statistics.median(t) for k, t in alternated_ms(runs, ROUNDS, CALLS).items()}
    times = ", ".join(f"{k} {v:.3f} ms ({v / ms['artifact']:.2f}x)" for k, v in ms.items())
    print(f"forward pass, medians alternated: {times}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18", choices=[m.name for m in zoo_models()])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--postgres", action="store_true", help="the database on the local PostgreSQL")
    parser.add_argument("--keep", type=Path, help="keep the logs, database and artifact here")
    args = parser.parse_args(argv)
    entry = next(m for m in zoo_models() if m.name == args.model)
    source = onnx_bytes(entry.make(), entry.inputs())
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        with database_url(args.postgres, directory) as url:
            library = tune_through_service(entry, source, url, args.trials, directory)
            compare(entry, source, url, library)


if __name__ == "__main__":
    main()
