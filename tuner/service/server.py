"""How `tuner serve` runs the API under uvicorn so that slow or many clients cannot take it down.

- A client must send its request's headers within `header_timeout_seconds` of connecting (or of its
  previous response), and its body within `body_timeout_seconds` of the headers; else its connection
  is closed. uvicorn has no such deadline of its own: 1,100 connections trickling their headers
  held every file descriptor of the process, and every request failed, `/healthz` included.
- The process's descriptor limit is raised to its hard limit (systemd's `LimitNOFILE`), and uvicorn
  answers 503 past `max_connections`, kept below that limit: the listening socket can always accept,
  so the API stays reachable while connections are refused or time out.
"""

from __future__ import annotations

import asyncio
import resource
from functools import cache

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tuner.service.settings import Settings

# Descriptors kept free of connections: the database pool, log files, the search loop's pipes.
SPARE_DESCRIPTORS = 256


class DeadlineProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol with a deadline on each request's headers and on its body."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._arm(_timeouts()[0])

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()
        if self.cycle is not None and self.cycle.more_body:
            self._arm(_timeouts()[1])

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm(_timeouts()[0])  # the next request's headers, on a kept-alive connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


@cache
def _timeouts() -> tuple[float, float]:
    """(header, body) seconds, read once per process from the environment `tuner serve` set."""
    settings = Settings()
    return settings.header_timeout_seconds, settings.body_timeout_seconds


def raise_descriptor_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; returns the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def uvicorn_options(settings: Settings) -> dict[str, object]:
    """What `tuner serve` gives uvicorn.run besides the app: the protocol with deadlines, and the
    connection limit under the descriptor limit. The deadlines are read from the environment (every
    API process reads its settings so), which the caller must have set from `settings`."""
    limit = raise_descriptor_limit()
    return {
        "http": f"{DeadlineProtocol.__module__}:{DeadlineProtocol.__name__}",
        "limit_concurrency": max(1, min(settings.max_connections, limit - SPARE_DESCRIPTORS)),
        "timeout_keep_alive": min(5.0, settings.header_timeout_seconds),
    }
