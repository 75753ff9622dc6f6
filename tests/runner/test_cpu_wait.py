"""waited_ns(): the process's threads' wait for a CPU, read from the kernel's scheduler statistics."""

import os
import subprocess
import sys
import threading
import time

from runner.cpu_wait import waited_ns


def _spin_on(cpu: int, seconds: float, spun: threading.Event, release: threading.Event) -> None:
    os.sched_setaffinity(0, {cpu})  # this thread only
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    spun.set()
    release.wait()  # alive until read: an exited thread's statistics are gone


def test_counts_the_wait_of_a_thread_that_shares_its_cpu_with_a_busy_process():
    """Not the calling thread's own: a kernel's wait is its worker threads'."""
    cpu = min(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(hog.pid, {cpu})
        start = waited_ns()
        spun, release = threading.Event(), threading.Event()
        spinner = threading.Thread(target=_spin_on, args=(cpu, 0.3, spun, release), daemon=True)
        spinner.start()
        spun.wait()
        waited = waited_ns() - start
        release.set()
        spinner.join()
    finally:
        hog.kill()
        hog.wait()
    assert waited > 50_000_000, f"waited {waited / 1e6:.1f} ms of 300 shared with a busy process"
