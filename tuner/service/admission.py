"""What a task must pass before it is queued, besides being a valid spec: one candidate of its workload
can finish within a worker's run timeout on the task's hardware, its reference is finite on a probe,
and (for a client token) it stays within the token's quotas. And what heavy work must find before it
starts: a free slot (`Slots`): an API process imports a few models and builds a few artifacts at a
time, and answers the rest 503 with Retry-After at once, so a flood of uploads costs a bounded
memory and never holds the threads that serve the workers.

The time of a candidate is estimated from the workload's flops and the bytes of its buffers, at a
conservative rate per core of the hardware (`candidate_gflops_per_core`) and a conservative memory
bandwidth, the slower of the two, times the runs one measurement makes: a check against the reference,
a warm-up, a calibration run, `worker_repeat` timed runs, and the reference itself, counted as one
more. A workload every candidate of which would run into the timeout would only occupy the fleet: the
issue's triple sum of 65536 x 4096 x 1024 estimated 69 worker-days for one task.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from compiler.workloads import Workload
from runner.local import RUN_TIMEOUT_S
from tuner.database import HardwareInfo, Role
from tuner.database.quotas import Quota
from tuner.database.tokens import TokenInfo
from tuner.service.settings import Settings

# The runs of one measurement besides the timed repeats: check, warm-up, calibration, the reference.
UNTIMED_RUNS = 4


@dataclass(frozen=True)
class Estimate:
    """Seconds of one run of a candidate, and of one candidate's whole measurement."""

    run_secs: float
    candidate_secs: float

    @property
    def fits(self) -> bool:
        return self.candidate_secs <= RUN_TIMEOUT_S


def estimate(workload: Workload, hardware: HardwareInfo, settings: Settings) -> Estimate:
    compute = workload.flops / (settings.candidate_gflops_per_core * 1e9 * hardware.cores)
    memory = footprint_bytes(workload) / (settings.candidate_gbytes_per_second * 1e9)
    run = max(compute, memory)
    return Estimate(run, run * (settings.worker_repeat + UNTIMED_RUNS))


def footprint_bytes(workload: Workload) -> int:
    """Every buffer of the workload: inputs, outputs and intermediates, each touched once a run."""
    func = workload.func
    return sum(b.size * np.dtype(b.dtype).itemsize for b in (*func.params, *func.allocs))


def refusal(workload: Workload, hardware: HardwareInfo, settings: Settings, cost: Estimate) -> str:
    """Why a workload whose candidates cannot finish in time is refused, with the numbers."""
    return (
        f"one candidate would take about {cost.candidate_secs:.3g} s on {hardware.key} "
        f"({settings.worker_repeat + UNTIMED_RUNS} runs of {workload.flops:.3g} flops over "
        f"{footprint_bytes(workload):.3g} bytes, at a conservative {settings.candidate_gflops_per_core:g} "
        f"GFLOPS per core and {settings.candidate_gbytes_per_second:g} GB/s), over the {RUN_TIMEOUT_S:g} s "
        "a worker gives one: every candidate would time out. Tune a smaller shape."
    )


def quota(holder: TokenInfo, settings: Settings) -> Quota | None:
    """The limits of a token's active tasks; None for an admin's, which has none."""
    if holder.role == Role.ADMIN:
        return None
    return Quota(settings.quota_active_tasks, settings.quota_trials, settings.quota_worker_hours * 3600)


class Busy(Exception):
    """Every slot of a kind of heavy work is taken: try again after `retry_after` seconds."""

    def __init__(self, what: str, limit: int, retry_after: int) -> None:
        super().__init__(f"the coordinator is already {what} ({limit} at once): retry after {retry_after} s")
        self.retry_after = retry_after


class Slots:
    """At most `limit` at once of one kind of heavy work (`what` says which, for the refusal); a
    caller that finds none free is refused (Busy), never queued: a queue would hold its request,
    its body and a thread while it waits."""

    def __init__(self, limit: int, what: str, retry_after: int) -> None:
        self.limit, self.what, self.retry_after = limit, what, retry_after
        self.taken = 0
        self._lock = threading.Lock()

    def take(self) -> None:
        """Take a slot, or raise Busy if none is free; `give_back` returns it."""
        with self._lock:
            if self.taken >= self.limit:
                raise Busy(self.what, self.limit, self.retry_after)
            self.taken += 1

    def give_back(self) -> None:
        with self._lock:
            self.taken -= 1

    @contextmanager
    def hold(self) -> Iterator[None]:
        self.take()
        try:
            yield
        finally:
            self.give_back()
