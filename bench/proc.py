"""The coordinator's processes as /proc shows them: which child runs the search loop, and how much
memory and CPU time a process has, for the service benchmarks that watch them."""

from __future__ import annotations

import os
from pathlib import Path


def search_loop_pid(coordinator_pid: int) -> int | None:
    """The coordinator's search-loop child: the one multiprocessing spawned (not its resource tracker)."""
    children = Path(f"/proc/{coordinator_pid}/task/{coordinator_pid}/children").read_text().split()
    for child in children:
        if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    return None


def rss_mb(pid: int) -> float:
    """Resident memory (VmRSS) in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(kb) / 1024


def cpu_seconds(pid: int) -> float:
    """CPU time the process has used so far, user and system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15
