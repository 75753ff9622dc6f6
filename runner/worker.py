"""The worker daemon: runs on a benchmark machine, leases candidates from the coordinator, builds and
times them with the isolated local runner, and reports the results.

It speaks the coordinator's worker protocol through its typed client (`runner.coordinator_client`,
whose messages are `runner.protocol`'s):
- register with the machine's hardware fingerprint (CPU, features, the cores it may use), then
  heartbeat from a background thread, naming the leases it holds: those stay alive, and one whose
  answer never arrived (its coordinator killed mid-request) expires and goes to another worker;
- lease a batch, measure it candidate by candidate, submit the results (a result that would be the
  new best is re-measured by a second lease, which the coordinator arranges: this worker's or
  another's, so a lucky or forged run cannot win alone);
- say so if an admin has yet to approve this kind of hardware: until then no task targets it, and the
  worker waits, leasing nothing;
- know one coordinator or several, failing over between them and retrying (the client's part);
- never drop measured results because the coordinator refuses them: resend them in smaller parts,
  and a result it refuses alone as a runtime_error saying why;
- on SIGTERM or SIGINT, finish the candidate being measured, submit what is done, give the rest of
  the batch back, say goodbye (which releases anything left) and exit 0.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import httpx
from pydantic import ValidationError

from compiler.target import Target, host_hardware
from runner.coordinator_client import CoordinatorClient, Fatal, Refused
from runner.local import LocalRunner, LocalRunnerConfig
from runner.null import NullRunner
from runner.protocol import HardwareIn, LeasedCandidate, ResultIn, WorkerRegister, clean_message
from runner.results import Candidate, Runner, RunResult, Status, TimingConfig, cutoff_above

log = logging.getLogger("tuner.worker")


@dataclass(frozen=True)
class WorkerConfig:
    coordinator_url: str  # one URL, or several separated by commas: the coordinators to fail over between
    token: str
    name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    batch: int = 4
    runner: Literal["local", "null"] = "local"
    timing: TimingConfig = field(default_factory=TimingConfig)
    cpus: frozenset[int] | None = None  # pin the worker and its measurement processes to these CPUs
    max_backoff_s: float = 30.0
    idle_poll_s: float = 0.5  # wait between lease requests while there is nothing to do
    request_timeout_s: float = 30.0


def parse_cpus(text: str) -> frozenset[int]:
    """'0-3,6' -> {0, 1, 2, 3, 6}."""
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    if not cpus:
        raise ValueError(f"no CPUs in {text!r}")
    return frozenset(cpus)


class Worker:
    """One worker process. `run()` blocks until stopped and returns the exit code."""

    def __init__(
        self,
        config: WorkerConfig,
        runner: Runner | None = None,
        client: type[CoordinatorClient] = CoordinatorClient,
    ) -> None:
        """`client` is the class of its coordinator client (a benchmark's times every request)."""
        self.config = config
        if config.cpus:
            os.sched_setaffinity(0, config.cpus)  # before the runner spawns: its children inherit it
        self.hardware = host_hardware()
        self.runner = runner or _make_runner(config, self.hardware.target)
        self.stopping = threading.Event()
        self.coordinator = client(
            config.coordinator_url,
            config.token,
            stopping=self.stopping,
            timeout_s=config.request_timeout_s,
            max_backoff_s=config.max_backoff_s,
        )
        # The candidates whose lease answer arrived and that are not yet submitted or given back:
        # heartbeats renew these only, so a lease whose answer was lost expires.
        self.holding: set[int] = set()
        self._holding_lock = threading.Lock()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())

    def run(self) -> int:
        heartbeat: threading.Thread | None = None
        try:
            registration = WorkerRegister(name=self.config.name, hardware=HardwareIn.of(self.hardware))
            if self.coordinator.register(registration) is None:
                raise Fatal("stopped before the coordinator could be reached")
            heartbeat = threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True)
            heartbeat.start()
            while not self.stopping.is_set():
                leased = self.coordinator.lease(self.config.batch)
                if leased is None:
                    break
                if not leased:
                    self.stopping.wait(self.config.idle_poll_s)
                    continue
                self._hold(leased, True)
                try:
                    self._work(leased)
                finally:
                    self._hold(leased, False)
            return 0
        except Fatal as e:
            log.error("%s", e)
            return 2
        finally:
            self.stopping.set()  # whatever ended the run: no heartbeat may follow the goodbye
            if heartbeat is not None:
                heartbeat.join()
            self._goodbye()
            self.runner.close()
            self.coordinator.close()

    def _work(self, leased: list[LeasedCandidate]) -> None:
        """Measure a leased batch; stop between candidates if asked, giving the rest back."""
        results = [self._result(item, result, versus) for item, result, versus in self._measure(leased)]
        done = {r.candidate_id for r in results}
        if results:
            self._submit(results)
        rest = [item.id for item in leased if item.id not in done]
        if rest:
            self.coordinator.release(rest)

    def _result(self, item: LeasedCandidate, result: RunResult, versus: RunResult | None) -> ResultIn:
        """The result as the protocol carries it (with the best's times beside it, if asked); one it
        cannot carry (a time under a picosecond, a broken clock's) is a runtime_error saying why, so
        the candidate is done rather than leased round the fleet."""
        beside = None if item.versus is None or versus is None else (item.versus.record_id, versus)
        try:
            return ResultIn.of(item.id, result, item.timing_config() or self.config.timing, beside)
        except ValidationError as e:
            message = clean_message(f"the measurement cannot be reported: {e}", 500)
            return ResultIn(candidate_id=item.id, status=Status.RUNTIME_ERROR, message=message)

    def _hold(self, leased: list[LeasedCandidate], holding: bool) -> None:
        ids = {item.id for item in leased}
        with self._holding_lock:
            if holding:
                self.holding |= ids
            else:
                self.holding -= ids

    def _measure(
        self, leased: list[LeasedCandidate]
    ) -> Iterator[tuple[LeasedCandidate, RunResult, RunResult | None]]:
        """Each candidate's result, one at a time, stopping between candidates if asked; a would-be
        best's second lease is timed side by side with the best it names, whose times come beside."""
        plain = [item for item in leased if item.versus is None]
        candidates = [
            Candidate(item.spec, item.trace, item.timing_config(), cutoff_above(item.best_secs))
            for item in plain
        ]
        for item, result in zip(plain, self.runner.iter_run(candidates)):
            yield item, result, None
            if self.stopping.is_set():
                return
        for item in leased:
            if item.versus is None:
                continue
            timing = item.timing_config()
            pair = [Candidate(item.spec, item.trace, timing), Candidate(item.spec, item.versus.trace, timing)]
            again, versus = self.runner.run_side_by_side(pair)
            yield item, again, versus
            if self.stopping.is_set():
                return

    def _submit(self, results: list[ResultIn]) -> None:
        """Deliver measured results whatever the coordinator makes of them: a batch over its size
        limit (413) goes in halves, another refused batch one result at a time, and a result refused
        alone is replaced by a runtime_error saying why, so that its candidate is done instead of
        going round the fleet."""
        try:
            self.coordinator.submit(results)
        except Refused as e:
            if len(results) == 1:
                self._replace(results[0], e)
                return
            half = len(results) // 2
            parts = [results[:half], results[half:]] if e.status == 413 else [[r] for r in results]
            for part in parts:
                self._submit(part)

    def _replace(self, result: ResultIn, refusal: Refused) -> None:
        message = clean_message(f"the coordinator refused the result: {refusal}", 500)
        replacement = ResultIn(candidate_id=result.candidate_id, status=Status.RUNTIME_ERROR, message=message)
        try:
            self.coordinator.submit([replacement])
        except Refused as e:  # nothing left to try: the lease expires and another worker measures it
            log.error("the coordinator refused candidate %d's result: %s", result.candidate_id, e)

    def _heartbeat(self) -> None:
        while not self.stopping.wait(self._heartbeat_seconds()):
            try:
                with self._holding_lock:
                    holding = sorted(self.holding)
                self.coordinator.heartbeat(holding)
            except (httpx.HTTPError, Fatal) as e:
                log.warning("heartbeat failed: %s", e)

    def _heartbeat_seconds(self) -> float:
        registered = self.coordinator.registered
        return registered.heartbeat_seconds if registered is not None else 10.0

    def _goodbye(self) -> None:
        if self.coordinator.worker_id is None:
            return
        try:
            self.coordinator.stop()
        except (httpx.HTTPError, Fatal) as e:  # its leases expire on their own
            log.warning("could not say goodbye: %s", e)


def _make_runner(config: WorkerConfig, target: Target) -> Runner:
    if config.runner == "null":
        return NullRunner()
    return LocalRunner(LocalRunnerConfig(timing=config.timing), target)
