"""The coordinator's REST API: a FastAPI app over the tuning database.

`create_app(settings)` opens (and migrates) the database when the app starts. The search loop is not
part of the app: `tuner serve` runs it in a process of its own beside the API's (see
`task_loop.TaskLoopProcess`), however many API processes there are. Several coordinators may
share one PostgreSQL database.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tuner.database import Database
from tuner.service.admission import Busy, Slots
from tuner.service.artifact import ArtifactCache
from tuner.service.deps import TokenCache
from tuner.service.errors import EVERY_ROUTE, RETRY_AFTER_SECONDS, documented, install_error_handlers
from tuner.service.metrics import LATENCY, REQUESTS
from tuner.service.routes import dashboard, hardware, models, records, system, tasks, tokens, workers
from tuner.service.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API of one coordinator process, on the database of `settings`."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.db = Database.open(settings.database_url, timeout_seconds=settings.database_timeout_seconds)
        try:
            yield
        finally:
            app.state.db.close()

    app = FastAPI(
        title="tensor-tuner coordinator",
        version="1",
        description="Submit tuning tasks, follow them, and ask the best-schedule database what is fastest.",
        lifespan=lifespan,
        responses=documented(*EVERY_ROUTE),
    )
    app.state.settings = settings
    app.state.tokens = TokenCache()
    app.state.workers = {}  # worker id -> its registration, which never changes
    app.state.flagged = set()  # workers whose impossible times were logged (once each)
    app.state.health_probes = anyio.CapacityLimiter(1)
    app.state.artifacts = ArtifactCache(settings.artifact_cache_bytes)
    app.state.import_slots = Slots(settings.max_concurrent_imports, "importing models", RETRY_AFTER_SECONDS)
    app.state.build_slots = Slots(settings.max_concurrent_builds, "building artifacts", RETRY_AFTER_SECONDS)
    # The model routes' blocking work (an import or a build waits on its child for seconds to
    # minutes) runs on threads of its own: never on those that serve the workers' requests.
    app.state.model_threads = anyio.CapacityLimiter(
        settings.max_concurrent_imports + settings.max_concurrent_builds + MODEL_READ_THREADS
    )
    for module in (tasks, models, records, workers, hardware, tokens, system, dashboard):
        app.include_router(module.router)
    install_error_handlers(app)
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_request_bytes, larger={MODEL_UPLOAD: model_body_bytes(settings)}
    )
    app.add_middleware(UploadSlots, slots=app.state.import_slots)
    app.add_middleware(CountRequests)
    return app


class CountRequests:
    """Request counts and latencies by route template (e.g. /v1/tasks/{task_id}: bounded labels). A
    plain ASGI middleware: FastAPI's `@app.middleware("http")` runs each request in an extra task with
    its own streams, a cost the dispatch benchmark could see."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def recorded(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recorded)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")
            REQUESTS.labels(scope["method"], path, str(status)).inc()
            LATENCY.labels(path).observe(time.perf_counter() - start)


def create_api() -> FastAPI:
    """The API alone, configured from the environment: the factory `tuner serve --workers N` gives
    uvicorn, whose worker processes each build their own app (the search loop runs beside them)."""
    return create_app(Settings())


# The route that takes a model file: its body may be as large as the model, in base64, and a little.
MODEL_UPLOAD = ("POST", "/v1/models")
# Threads for the model routes' quick work (a built artifact served from memory) beside their slots.
MODEL_READ_THREADS = 2


class UploadSlots:
    """A model upload takes an import slot before its body is read, for the whole request: with none
    free it is answered 503 with Retry-After at once, having cost neither the memory of its body nor
    a thread."""

    def __init__(self, app: ASGIApp, slots: Slots) -> None:
        self.app = app
        self.slots = slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope["path"].rstrip("/")) != MODEL_UPLOAD:
            await self.app(scope, receive, send)
            return
        try:
            self.slots.take()
        except Busy as e:
            # Closed after the answer: the body the client is still sending is not read and dropped.
            await _refuse(send, 503, str(e), {"Retry-After": str(e.retry_after), "Connection": "close"})
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.slots.give_back()


def model_body_bytes(settings: Settings) -> int:
    return -(-settings.max_model_bytes // 3) * 4 + 64 * 1024


class BodyLimit:
    """413 for a request body over `max_bytes` (or the limit `larger` gives its method and path),
    whether it declares its length or streams it; 400 for a declared length that is not a number."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, larger: dict[tuple[str, str], int] | None = None
    ) -> None:
        self.app = app
        self.default_bytes = max_bytes
        self.larger = larger or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.larger.get((scope["method"], scope["path"].rstrip("/")), self.default_bytes)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and not declared.isdigit():
            await _refuse(send, 400, "Content-Length is not a number")
            return
        if declared is not None and int(declared) > limit:
            await _refuse(send, 413, f"request body over the limit of {limit} bytes")
            return
        seen, too_large = 0, False

        async def limited() -> Message:
            """The body as the app reads it, cut off (as a disconnect) once it passes the limit."""
            nonlocal seen, too_large
            if too_large:
                return {"type": "http.disconnect"}
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                too_large = True
                return {"type": "http.disconnect"}
            return message

        async def guarded(message: Message) -> None:
            if not too_large:  # the app's answer to a cut-off body is replaced by the 413
                await send(message)

        try:
            await self.app(scope, limited, guarded)
        except Exception:
            if not too_large:
                raise
        if too_large:
            await _refuse(send, 413, f"request body over the limit of {limit} bytes")


async def _refuse(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
