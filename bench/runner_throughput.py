"""LocalRunner throughput on a batch of 64 matmul 512^3 candidates, and the memory of the runner's
whole process tree while it works through 1,000 candidates (it must stay flat: workers recycle)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.common import random_matmul_traces
from compiler import Target
from runner import Candidate, LocalRunner, LocalRunnerConfig, Status


def tree_rss_mib(pid: int | None = None) -> float:
    """Resident memory of a process and all its descendants, from /proc."""
    pid = pid or os.getpid()
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                rss += tree_rss_mib(int(child))
            except FileNotFoundError:
                continue  # exited while we looked
    return rss


def throughput(batch: int = 64) -> None:
    spec = {"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}}
    candidates = [Candidate(spec, t) for t in random_matmul_traces(spec, batch, seed=2)]
    with LocalRunner(LocalRunnerConfig(), Target.host()) as runner:
        runner.run(candidates[:2])  # start the processes outside the measurement
        start = time.perf_counter()
        results = runner.run(candidates)
        wall = time.perf_counter() - start
    ok = sum(r.status is Status.OK for r in results)
    build = sum(r.build_secs for r in results)
    print(
        f"LocalRunner: {batch} matmul 512^3 candidates in {wall:.1f} s = {batch / wall * 60:.0f} per minute "
        f"({ok} ok; build {build:.1f} s of CPU over 2 workers)"
    )


def memory(total: int = 1000, batch: int = 50) -> None:
    spec = {"op": "matmul", "params": {"M": 64, "N": 64, "K": 64}}
    traces = random_matmul_traces(spec, batch, seed=3)
    samples = []
    with LocalRunner(LocalRunnerConfig(), Target.host()) as runner:
        for done in range(0, total, batch):
            results = runner.run([Candidate(spec, t) for t in traces])
            assert all(r.status is Status.OK for r in results), {r.status for r in results}
            samples.append((done + batch, tree_rss_mib()))
    shown = ", ".join(f"{n}: {mib:.0f}" for n, mib in samples[:: len(samples) // 5])
    first, last = samples[0][1], samples[-1][1]
    print(
        f"LocalRunner memory (all processes, MiB) after candidates {shown}, {total}: {last:.0f} "
        f"-> {last / first:.2f}x the first batch"
    )


def main() -> None:
    throughput()
    memory()
