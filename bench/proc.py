"""The coordinator's processes as /proc shows them: which child runs the search loop, and how much
memory and CPU time a process has, for the service benchmarks that watch them."""

from __future__ import annotations

import os
from pathlib import Path


def search_loop_pid(coordinator_pid: int) -> int | None:
    """The coordinator's search-loop child: the one multiprocessing spawned (not its resource tracker),
    by whichever thread (a loop that died is replaced by the supervising thread)."""
    threads = Path(f"/proc/{coordinator_pid}/task").glob("*/children")
    children = [child for thread in threads for child in _read(thread).split()]
    for child in children:
        if b"spawn_main" in _read(Path(f"/proc/{child.decode()}/cmdline")):
            return int(child)
    return None


def _read(path: Path) -> bytes:
    """A /proc file, empty if its thread or process has just ended."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return b""


def rss_mb(pid: int) -> float:
    """Resident memory (VmRSS) in MiB; 0 for a process that has exited but not been reaped (a zombie
    has no VmRSS)."""
    status = Path(f"/proc/{pid}/status").read_text()
    kb = next((line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")), "0")
    return int(kb) / 1024


def cpu_seconds(pid: int) -> float:
    """CPU time the process has used so far, user and system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15
