"""How long this process's threads have waited for a CPU: runnable, but another task had the core.

A timed call of a parallel kernel is only as fast as its slowest thread, so a thread that waits for
a core delays the whole call by about that long. On a worker that shares its cores (a coordinator
beside it, a noisy neighbour) single calls read up to 10x their time; the runner reads these
waits around each timed repeat and times a disturbed repeat again (`runner.evaluate`).

The kernel counts the wait per thread, the second field of /proc/<pid>/task/<tid>/schedstat
(nanoseconds; present when the kernel has CONFIG_SCHED_INFO, as distribution kernels do).
"""

from __future__ import annotations

import os

TASKS = "/proc/self/task"


def waited_ns() -> int | None:
    """Nanoseconds all of this process's threads have waited for a CPU so far (threads that have
    exited are not counted); None where the kernel does not report it."""
    total = 0
    try:
        threads = os.listdir(TASKS)
    except OSError:
        return None
    for tid in threads:
        try:
            with open(f"{TASKS}/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread exited since the listing
        except (OSError, IndexError, ValueError):
            return None
    return total
