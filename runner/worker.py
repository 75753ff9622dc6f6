"""The worker daemon: runs on a benchmark machine, leases candidates from the coordinator, builds and
times them with the isolated local runner, and reports the results.

It is a plain client of the coordinator's REST API (`/v1/workers/...`):
- register with the machine's hardware fingerprint (CPU, features, the cores it may use), then
  heartbeat from a background thread, naming the leases it holds: those stay alive, and one whose
  answer never arrived (its coordinator killed mid-request) expires and goes to another worker;
- lease a batch, measure it candidate by candidate, submit the results (a result that would be the
  new best is re-measured by a second lease, which the coordinator arranges: this worker's or
  another's, so a lucky or forged run cannot win alone);
- say so if an admin has yet to approve this kind of hardware: until then no task targets it, and the
  worker waits, leasing nothing;
- know one coordinator or several (each a process serving the same database): when the one in use
  cannot be reached or fails (5xx), move to the next at once, and back off exponentially once every
  one has failed in a row, retrying forever: results are accepted once, so re-sending a submission
  whose answer was lost is safe. A coordinator of another database does not know this worker:
  register with it anew;
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
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import httpx

from compiler.target import Target
from runner.hardware import host_hardware
from runner.local import LocalRunner, LocalRunnerConfig
from runner.null import NullRunner
from runner.results import Candidate, Runner, RunResult, Status, TimingConfig

log = logging.getLogger("tuner.worker")
# The longest result message the coordinator accepts (tuner.service.schemas.LongText).
MESSAGE_LIMIT = 20_000


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


class Fatal(Exception):
    """The coordinator refused us for good (bad token, wrong role): retrying cannot help."""


class Refused(Fatal):
    """The coordinator refused this request (a 4xx but 401, 403, 408, 429): sending it again cannot
    help, though a smaller or a cleaner one may. Fatal unless the caller knows better."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class UnknownWorker(Refused):
    """A coordinator answered 404 for this worker: it serves another database than the one the worker
    registered with."""


def coordinator_urls(text: str) -> list[str]:
    """'http://a:8000, http://b:8000/' -> ['http://a:8000', 'http://b:8000']."""
    urls = [url.strip().rstrip("/") for url in text.split(",") if url.strip()]
    if not urls:
        raise ValueError(f"no coordinator URL in {text!r}")
    return urls


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

    def __init__(self, config: WorkerConfig, runner: Runner | None = None) -> None:
        self.config = config
        if config.cpus:
            os.sched_setaffinity(0, config.cpus)  # before the runner spawns: its children inherit it
        self.hardware = host_hardware()
        self.runner = runner or _make_runner(config, self.hardware.target)
        self.stopping = threading.Event()
        self.urls = coordinator_urls(config.coordinator_url)
        self.url = self.urls[0]  # the coordinator in use; the heartbeat thread and the loop share it
        self._failover = threading.Lock()
        self.client = httpx.Client(
            headers={"Authorization": f"Bearer {config.token}"}, timeout=config.request_timeout_s
        )
        self.worker_id: int | None = None
        self.registered_with: str | None = None  # the URL whose coordinator gave `worker_id`
        self.heartbeat_s = 10.0
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
            self._register()
            heartbeat = threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True)
            heartbeat.start()
            while not self.stopping.is_set():
                leased = self._call("POST", "/v1/workers/{worker}/lease", {"max": self.config.batch})
                if leased is None:
                    break
                if not leased["candidates"]:
                    self.stopping.wait(self.config.idle_poll_s)
                    continue
                self._hold(leased["candidates"], True)
                try:
                    self._work(leased["candidates"])
                finally:
                    self._hold(leased["candidates"], False)
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
            self.client.close()

    def _register(self) -> None:
        hw, t = self.hardware, self.hardware.target
        target = {"triple": t.triple, "mcpu": t.mcpu, "features": t.features, "cores": t.cores}
        body = {"name": self.config.name, "hardware": {"cpu_model": hw.cpu_model, **target}}
        reply = self._call("POST", "/v1/workers", body)
        if reply is None:
            raise Fatal("stopped before the coordinator could be reached")
        self.worker_id = reply["id"]
        self.heartbeat_s = reply["heartbeat_seconds"]
        log.info(
            "registered with %s as worker %d (%s) for hardware %s",
            self.registered_with,
            self.worker_id,
            self.config.name,
            hw.key,
        )
        if not reply.get("hardware_approved", True):
            log.warning(
                "hardware %s awaits an admin's approval (tuner hardware approve, or POST "
                "/v1/hardware/{id}/approve): no task targets it until then",
                hw.key,
            )

    def _work(self, leased: list[dict[str, Any]]) -> None:
        """Measure a leased batch; stop between candidates if asked, giving the rest back."""
        results: list[dict[str, Any]] = []
        for item, result in self._measure(leased):
            results.append(_result(item["id"], result, _timing(item) or self.config.timing))
        done = {r["candidate_id"] for r in results}
        if results:
            self._submit(results)
        rest = [item["id"] for item in leased if item["id"] not in done]
        if rest:
            self._call("POST", "/v1/workers/{worker}/release", {"candidate_ids": rest})

    def _hold(self, leased: list[dict[str, Any]], holding: bool) -> None:
        ids = {item["id"] for item in leased}
        with self._holding_lock:
            if holding:
                self.holding |= ids
            else:
                self.holding -= ids

    def _measure(self, leased: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], RunResult]]:
        """Each candidate's result, one at a time, stopping between candidates if asked."""
        candidates = [Candidate(item["spec"], item["trace"], _timing(item)) for item in leased]
        for item, result in zip(leased, self.runner.iter_run(candidates)):
            yield item, result
            if self.stopping.is_set():
                return

    def _submit(self, results: list[dict[str, Any]]) -> None:
        """Deliver measured results whatever the coordinator makes of them: a batch over its size
        limit (413) goes in halves, another refused batch one result at a time, and a result refused
        alone is replaced by a runtime_error saying why, so that its candidate is done instead of
        going round the fleet."""
        try:
            self._call("POST", "/v1/workers/{worker}/results", {"results": results}, patient=True)
        except Refused as e:
            if len(results) == 1:
                self._replace(results[0], e)
                return
            half = len(results) // 2
            parts = [results[:half], results[half:]] if e.status == 413 else [[r] for r in results]
            for part in parts:
                self._submit(part)

    def _replace(self, result: dict[str, Any], refusal: Refused) -> None:
        replacement = {
            "candidate_id": result["candidate_id"],
            "status": Status.RUNTIME_ERROR.value,
            "message": clean_message(f"the coordinator refused the result: {refusal}", 500),
        }
        try:
            self._call("POST", "/v1/workers/{worker}/results", {"results": [replacement]}, patient=True)
        except Refused as e:  # nothing left to try: the lease expires and another worker measures it
            log.error("the coordinator refused candidate %d's result: %s", result["candidate_id"], e)

    def _heartbeat(self) -> None:
        while not self.stopping.wait(self.heartbeat_s):
            try:
                with self._holding_lock:
                    holding = sorted(self.holding)
                self._request("POST", "/v1/workers/{worker}/heartbeat", {"holding": holding})
            except (httpx.HTTPError, Fatal) as e:
                log.warning("heartbeat failed: %s", e)

    def _goodbye(self) -> None:
        if self.worker_id is None:
            return
        try:
            self._request("POST", "/v1/workers/{worker}/stop", None)
        except (httpx.HTTPError, Fatal) as e:  # its leases expire on their own
            log.warning("could not say goodbye: %s", e)

    def _call(self, method: str, path: str, body: dict[str, Any] | None, *, patient: bool = False) -> Any:
        """A request (`path` may name `{worker}`), retried while no coordinator can be reached or
        answers: on the next coordinator at once, then, once all have failed in a row, after an
        exponential backoff. Returns None if the worker is asked to stop meanwhile; a `patient` call
        (a submission of measured results, worth keeping) goes on retrying for up to one longest
        backoff after that. A coordinator that does not know this worker gets it registered anew."""
        delay, deadline, failures = 0.25, None, 0
        while True:
            try:
                return self._request(method, path, body)
            except UnknownWorker as e:
                if self.stopping.is_set():
                    return None
                log.warning("%s; registering with it", e)
                self._register()
                continue
            except httpx.HTTPError as e:
                failures += 1
                if failures % len(self.urls):
                    continue  # on the next coordinator, at once
                log.warning("%s %s failed (%s); retrying in %.1f s", method, path, e, delay)
            if self.stopping.is_set():
                deadline = deadline or time.monotonic() + self.config.max_backoff_s
                if not patient or time.monotonic() > deadline:
                    return None
                time.sleep(delay)
            else:
                self.stopping.wait(delay)
            delay = min(delay * 2, self.config.max_backoff_s)

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """One request to the coordinator in use; if it cannot be reached or fails, the next one is
        in use from then on, and the error is raised."""
        url, path = self.url, path.format(worker=self.worker_id)
        try:
            answer = self._answer(method, path, self.client.request(method, url + path, json=body), url)
        except httpx.HTTPError as e:
            with self._failover:  # the loop and the heartbeat thread may fail at once: move on once
                if self.url == url and len(self.urls) > 1:
                    self.url = self.urls[(self.urls.index(url) + 1) % len(self.urls)]
                    log.warning("%s %s on %s failed (%s); moving to %s", method, path, url, e, self.url)
            raise
        if path == "/v1/workers":
            self.registered_with = url
        return answer

    def _answer(self, method: str, path: str, response: httpx.Response, url: str) -> Any:
        code = response.status_code
        if code in (401, 403):
            raise Fatal(f"the coordinator refused {method} {path}: {code} {response.text[:500]}")
        if code == 404 and path.startswith(f"/v1/workers/{self.worker_id}/") and url != self.registered_with:
            raise UnknownWorker(code, f"{url} does not know worker {self.worker_id}")
        if 400 <= code < 500 and code not in (408, 429):
            raise Refused(code, f"{method} {path}: {code} {response.text[:500]}")
        response.raise_for_status()  # 5xx, 408, 429: retried by the caller
        try:
            answer = response.json()
        except ValueError as e:  # say, a proxy's page: retried, as if the coordinator were away
            raise httpx.DecodingError(f"{method} {path}: a {code} answer that is not JSON") from e
        return answer


def _make_runner(config: WorkerConfig, target: Target) -> Runner:
    if config.runner == "null":
        return NullRunner()
    return LocalRunner(LocalRunnerConfig(timing=config.timing), target)


def _timing(item: dict[str, Any]) -> TimingConfig | None:
    """How the coordinator asks for this candidate to be timed (a model's layer: as a forward pass
    runs it), or None for the worker's own way."""
    asked = item.get("timing")
    return TimingConfig.from_dict(asked) if asked else None


def _result(candidate_id: int, result: RunResult, timing: TimingConfig) -> dict[str, Any]:
    return {
        "candidate_id": candidate_id,
        "status": result.status.value,
        "run_secs": result.run_secs,
        "build_secs": result.build_secs,
        "message": clean_message(result.message),
        "timing": asdict(timing),
    }


def clean_message(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """A message the coordinator stores as it is: no NUL (PostgreSQL text cannot hold one), valid
    UTF-8 (a lone surrogate cannot be encoded), at most `limit` characters."""
    text = text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 1] + "…"
