"""A small typed client of the coordinator's REST API, for the `tuner submit/submit-model/status/best/show`
commands and for scripts: each method is one request, its body built from the API's request model and
its answer validated into the response model its route declares (`tuner.service.schemas`)."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar, get_args, get_origin

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from tuner.service.schemas import (
    MAX_PAGE,
    NEXT_PAGE_HEADER,
    BestQuery,
    ModelCreate,
    ModelDetail,
    ModelPublic,
    RecordPublic,
    Scheduler,
    Strategy,
    TaskCreate,
    TaskDetail,
    TaskPublic,
    Timing,
)

T = TypeVar("T")


class ApiError(Exception):
    """The coordinator refused a request; `status` is the HTTP status, `detail` its explanation.

    A request its own model refuses (trials=0, say) is refused before it is sent, as the coordinator
    would refuse it: status 422, a detail naming each culprit field of the body."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail

    @property
    def summary(self) -> str:
        """The detail in one line: each culprit of a validation error with its field, or the text."""
        if not isinstance(self.detail, list):
            return str(self.detail)
        return "; ".join(_culprit(d) if isinstance(d, dict) else str(d) for d in self.detail)


class BadResponse(Exception):
    """The coordinator took a request but its answer is not the model its route declares (another
    version of the API, or not the coordinator at that URL): one error naming the request and the
    culprit fields, rather than a KeyError wherever the answer is used."""

    def __init__(self, request: str, expected: str, error: ValidationError) -> None:
        culprits = [_culprit(e, skip=0) for e in error.errors()]
        more = f"; and {len(culprits) - 3} more" if len(culprits) > 3 else ""
        super().__init__(f"{request}: the answer is not a {expected}: {'; '.join(culprits[:3])}{more}")
        self.request = request
        self.expected = expected


def _culprit(error: Mapping[str, Any], skip: int = 1) -> str:
    """One validation error as "field: message"; `skip` drops the location's "body", "query"..."""
    field = ".".join(str(part) for part in error.get("loc", [])[skip:])
    message = str(error.get("msg", error))
    return message if not field or message.startswith(field) else f"{field}: {message}"


class Client:
    """One coordinator, with one token; a context manager that closes its connections.

    A read the coordinator answers with 503 (its database away or slow: a restart, an outage) is
    retried after the Retry-After it names, for up to `unavailable_seconds` in all, so `--wait` and
    scripts that poll ride out a blip; a write is never retried, since it may have taken effect."""

    def __init__(
        self, url: str, token: str | None, timeout: float = 30.0, unavailable_seconds: float = 60.0
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)
        self.unavailable_seconds = unavailable_seconds

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def submit(
        self,
        workload: dict[str, Any],
        *,
        trials: int,
        strategy: Strategy = "evolutionary",
        seed: int = 0,
        hardware: str | None = None,
    ) -> TaskPublic:
        with _refused_before_sending():
            body = TaskCreate(
                workload=workload, trials=trials, strategy=strategy, seed=seed, hardware=hardware
            )
        return self._call("POST", "/v1/tasks", TaskPublic, body)

    def tasks(self) -> list[TaskPublic]:
        return self._every("/v1/tasks", TaskPublic)

    def task(self, task_id: int) -> TaskDetail:
        return self._call("GET", f"/v1/tasks/{task_id}", TaskDetail)

    def cancel(self, task_id: int) -> TaskPublic:
        return self._call("POST", f"/v1/tasks/{task_id}/cancel", TaskPublic)

    def best(
        self,
        workload: dict[str, Any],
        *,
        hardware: str | None = None,
        k: int = 1,
        timing: Timing = "warm",
    ) -> list[RecordPublic]:
        with _refused_before_sending():
            # Named only when not the default: a coordinator older than timing kinds refuses the field.
            kind = {} if timing == "warm" else {"timing": timing}
            body = BestQuery(workload=workload, hardware=hardware, k=k, **kind)
        return self._call("POST", "/v1/best", list[RecordPublic], body)

    def submit_model(
        self,
        onnx: bytes | None = None,
        *,
        graph: dict[str, Any] | None = None,
        trials: int,
        name: str | None = None,
        hardware: str | None = None,
        scheduler: Scheduler = "gradient",
        seed: int = 0,
        dims: dict[str, int | list[int] | str] | None = None,
        workload: dict[str, Any] | None = None,
        sizes: list[int] | None = None,
    ) -> ModelPublic:
        """Submit an ONNX model's bytes (sent base64-encoded), or a graph's JSON form
        (`compiler.graph.serialize`), or one kernel over a range (`workload`, at `sizes`), to be
        tuned under one trial budget; `dims` sizes the ONNX model's open input dimensions, or gives
        them [min, max] ranges."""
        with _refused_before_sending():
            body = ModelCreate(
                onnx=base64.b64encode(onnx).decode() if onnx is not None else None,
                graph=graph,
                workload=workload,
                sizes=sizes,
                trials=trials,
                name=name,
                hardware=hardware,
                scheduler=scheduler,
                seed=seed,
                dims=dims,
            )
        return self._call("POST", "/v1/models", ModelPublic, body)

    def models(self) -> list[ModelPublic]:
        return self._every("/v1/models", ModelPublic)

    def model(self, model_id: int) -> ModelDetail:
        return self._call("GET", f"/v1/models/{model_id}", ModelDetail)

    def cancel_model(self, model_id: int) -> ModelPublic:
        return self._call("POST", f"/v1/models/{model_id}/cancel", ModelPublic)

    def model_artifact(
        self,
        model_id: int,
        *,
        hardware: str | None = None,
        sizes: dict[str, int] | None = None,
        timeout: float = 1800.0,
    ) -> bytes:
        """The model compiled from the best records on `hardware` (default: the one it was tuned for):
        a .tar.gz of model.so and model.h. The first download of new records waits for the build. A
        model tuned for ranges is one library for them, or with `sizes` ({"sequence": 128}) a library
        of static shapes at those sizes."""
        params: list[tuple[str, str]] = [("hardware", hardware)] if hardware else []
        params += [("size", f"{name}={value}") for name, value in (sizes or {}).items()]
        response = self._send(
            "GET", f"/v1/models/{model_id}/artifact", params=params or None, timeout=timeout
        )
        if response.is_error:
            raise ApiError(response.status_code, _detail(response))
        return response.content

    def _call(self, method: str, path: str, answer: type[T], body: BaseModel | None = None) -> T:
        """Send the body as given (unset fields take the coordinator's defaults) and validate the answer."""
        request = body.model_dump(mode="json", exclude_unset=True) if body else None
        response = self._send(method, path, json=request)
        if response.is_error:
            raise ApiError(response.status_code, _detail(response))
        try:
            return TypeAdapter(answer).validate_json(response.content)
        except ValidationError as e:
            raise BadResponse(f"{method} {path}", _name(answer), e) from e

    def _every(self, path: str, item: type[T]) -> list[T]:
        """Every row of a list route, page after page."""
        rows: list[T] = []
        after: str | None = None
        while True:
            params = {"limit": str(MAX_PAGE)} | ({"after": after} if after is not None else {})
            response = self._send("GET", path, params=params)
            if response.is_error:
                raise ApiError(response.status_code, _detail(response))
            try:
                rows += TypeAdapter(list[item]).validate_json(response.content)  # type: ignore[valid-type]
            except ValidationError as e:
                raise BadResponse(f"GET {path}", f"list[{item.__name__}]", e) from e
            after = response.headers.get(NEXT_PAGE_HEADER)
            if after is None:
                return rows

    def _send(self, method: str, path: str, **options: Any) -> httpx.Response:
        """One request; a GET answered 503 again after Retry-After while the budget lasts."""
        deadline = time.monotonic() + self.unavailable_seconds
        while True:
            response = self.http.request(method, path, **options)
            if method != "GET" or response.status_code != httpx.codes.SERVICE_UNAVAILABLE:
                return response
            pause = min(_retry_after(response), deadline - time.monotonic())
            if pause <= 0:
                return response
            time.sleep(pause)


def _retry_after(response: httpx.Response) -> float:
    """The pause a 503 asks for, in seconds (one second when it names none or names a date)."""
    try:
        return max(float(response.headers.get("Retry-After", "1")), 0.1)
    except ValueError:
        return 1.0


@contextmanager
def _refused_before_sending() -> Iterator[None]:
    """A request body its model refuses, refused as the coordinator's 422 would (its detail locates
    each culprit in the "body"), so callers handle one kind of refusal."""
    try:
        yield
    except ValidationError as e:
        raise ApiError(422, [{**error, "loc": ["body", *error["loc"]]} for error in e.errors()]) from None


def _detail(response: httpx.Response) -> Any:
    """An error answer's explanation: FastAPI's `detail`, else the text (a proxy's HTML page, say)."""
    try:
        answer = response.json()
    except ValueError:
        return response.text
    return answer.get("detail", response.text) if isinstance(answer, dict) else response.text


def _name(answer: Any) -> str:
    """The expected answer as the route declares it: `TaskDetail`, `list[RecordPublic]`."""
    args = get_args(answer)
    if not args:
        return str(answer.__name__)
    return f"{get_origin(answer).__name__}[{', '.join(_name(a) for a in args)}]"
