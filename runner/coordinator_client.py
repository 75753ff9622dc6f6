"""The worker's typed client of the coordinator (`/v1/workers/...`): each method one message of the
protocol (`runner.protocol`), its body a request model and its answer validated into the answer model.

It knows one coordinator or several (each a process serving the same database): when the one in use
cannot be reached or fails (5xx), it moves to the next at once, and backs off exponentially once every
one has failed in a row, retrying until the worker stops: results are accepted once, so re-sending a
submission whose answer was lost is safe. A coordinator of another database does not know this
worker: the client registers with it anew."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from runner.protocol import (
    Count,
    HeartbeatIn,
    Lease,
    LeasedCandidate,
    LeaseRequest,
    PublicOutcome,
    ReleaseIn,
    ResultIn,
    ResultsIn,
    ResultsOut,
    WorkerRegister,
    WorkerRegistered,
)

log = logging.getLogger("tuner.worker")
A = TypeVar("A", bound=BaseModel)


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


class CoordinatorClient:
    """One worker's conversation with its coordinators. `stopping` is the worker's stop flag: a retried
    request gives up (returns None) once it is set, but for a submission of measured results, worth
    keeping, which goes on for up to one longest backoff."""

    def __init__(
        self,
        urls: str,
        token: str,
        *,
        stopping: threading.Event,
        timeout_s: float = 30.0,
        max_backoff_s: float = 30.0,
    ) -> None:
        self.urls = coordinator_urls(urls)
        self.url = self.urls[0]  # the coordinator in use; the heartbeat thread and the loop share it
        self._failover = threading.Lock()
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s)
        self.stopping = stopping
        self.max_backoff_s = max_backoff_s
        self.registration: WorkerRegister | None = None
        self.registered: WorkerRegistered | None = None
        self.registered_with: str | None = None  # the URL whose coordinator gave the worker's id

    @property
    def worker_id(self) -> int | None:
        return self.registered.id if self.registered is not None else None

    def register(self, body: WorkerRegister) -> WorkerRegistered | None:
        """Register (again, with a coordinator that does not know this worker); None if stopped first."""
        self.registration = body
        registered = self._call("POST", "/v1/workers", body, WorkerRegistered)
        if registered is None:
            return None
        self.registered = registered
        hardware = body.hardware.hardware()
        log.info(
            "registered with %s as worker %d (%s) for hardware %s",
            self.registered_with,
            registered.id,
            body.name,
            hardware.key,
        )
        if not registered.hardware_approved:
            log.warning(
                "hardware %s awaits an admin's approval (tuner hardware approve, or POST "
                "/v1/hardware/{id}/approve): no task targets it until then",
                hardware.key,
            )
        return registered

    def lease(self, most: int) -> list[LeasedCandidate] | None:
        lease = self._call("POST", "/v1/workers/{worker}/lease", LeaseRequest(max=most), Lease)
        return lease.candidates if lease is not None else None

    def submit(self, results: list[ResultIn]) -> list[PublicOutcome] | None:
        """Raises Refused if the coordinator refuses the batch (the caller may split it)."""
        body = ResultsIn(results=results)
        answer = self._call("POST", "/v1/workers/{worker}/results", body, ResultsOut, patient=True)
        return answer.outcomes if answer is not None else None

    def release(self, candidate_ids: list[int]) -> None:
        self._call("POST", "/v1/workers/{worker}/release", ReleaseIn(candidate_ids=candidate_ids), Count)

    def heartbeat(self, holding: list[int]) -> int:
        """One try (the next beat is the retry): raises httpx.HTTPError or Fatal."""
        answer = self._request("POST", "/v1/workers/{worker}/heartbeat", _json(HeartbeatIn(holding=holding)))
        return _read(Count, answer, "heartbeat").count

    def stop(self) -> None:
        """Say goodbye (every lease left goes back), one try: raises httpx.HTTPError or Fatal."""
        self._request("POST", "/v1/workers/{worker}/stop", None)

    def close(self) -> None:
        self.http.close()

    def _call(
        self, method: str, path: str, body: BaseModel, answer: type[A], *, patient: bool = False
    ) -> A | None:
        """A request (`path` may name `{worker}`), retried while no coordinator can be reached or
        answers: on the next coordinator at once, then, once all have failed in a row, after an
        exponential backoff. Returns None if the worker is asked to stop meanwhile (see the class)."""
        delay, deadline, failures = 0.25, None, 0
        while True:
            try:
                return _read(answer, self._request(method, path, _json(body)), f"{method} {path}")
            except UnknownWorker as e:
                if self.stopping.is_set() or self.registration is None:
                    return None
                log.warning("%s; registering with it", e)
                if self.register(self.registration) is None:
                    return None
                continue
            except httpx.HTTPError as e:
                failures += 1
                if failures % len(self.urls):
                    continue  # on the next coordinator, at once
                log.warning("%s %s failed (%s); retrying in %.1f s", method, path, e, delay)
            if self.stopping.is_set():
                deadline = deadline or time.monotonic() + self.max_backoff_s
                if not patient or time.monotonic() > deadline:
                    return None
                time.sleep(delay)
            else:
                self.stopping.wait(delay)
            delay = min(delay * 2, self.max_backoff_s)

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """One request to the coordinator in use, its JSON answer; if it cannot be reached or fails,
        the next one is in use from then on, and the error is raised."""
        url, path = self.url, path.format(worker=self.worker_id)
        try:
            answer = self._answer(method, path, self.http.request(method, url + path, json=body), url)
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
            return response.json()
        except ValueError as e:  # say, a proxy's page: retried, as if the coordinator were away
            raise httpx.DecodingError(f"{method} {path}: a {code} answer that is not JSON") from e


def _json(body: BaseModel) -> dict[str, Any]:
    return body.model_dump(mode="json", exclude_unset=True)


def _read(answer: type[A], data: Any, request: str) -> A:
    """The answer as its model; one that is not (a coordinator of another version, or not a
    coordinator) is retried as an answer that could not be read."""
    try:
        return answer.model_validate(data)
    except ValidationError as e:
        raise httpx.DecodingError(f"{request}: the answer is not a {answer.__name__}: {e}") from e
