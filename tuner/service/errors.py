"""Errors in the shape FastAPI gives its own validation errors, so a client reads one format: a 422
whose detail lists each culprit's location (`loc`) and what is wrong with it (`msg`); every other error
is `{"detail": "..."}`. `documented(...)` declares the latter in the OpenAPI schema, so a client (and
the fuzz test) knows every status a route can answer.

The handlers here echo what the client sent (a culprit's value, a key in its location), so they
write whatever they are given as valid JSON in UTF-8: a lone surrogate (the JSON escape "\\ud800"
decodes to one) as its escape text, NaN as null, a deeply nested value cut off. An error handler that
fails answers 500 and drops the connection, whatever the request did wrong.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from tuner.database.outage import is_outage
from tuner.service.admission import Busy

log = logging.getLogger("tuner.service")
# What a 503 asks a client to wait before it tries again.
RETRY_AFTER_SECONDS = 5
# How deep an echoed value is written; below, it is cut off.
ECHO_DEPTH = 8


class ErrorPublic(BaseModel):
    detail: str


_MEANING = {
    status.HTTP_400_BAD_REQUEST: "The request body is not text (JSON must be UTF-8), or its declared "
    "Content-Length is not a number.",
    status.HTTP_401_UNAUTHORIZED: "No bearer token, or an unknown or revoked one.",
    status.HTTP_403_FORBIDDEN: "The token's role may not do this (or the worker is another token's).",
    status.HTTP_404_NOT_FOUND: "No such object.",
    status.HTTP_409_CONFLICT: "The object is not in a state that allows this.",
    status.HTTP_410_GONE: "The object's data was dropped (a cancelled model's file, after a grace period).",
    status.HTTP_413_CONTENT_TOO_LARGE: "The request body is over the coordinator's max_request_bytes.",
    status.HTTP_429_TOO_MANY_REQUESTS: "The token's quota is used up until some of its tasks end.",
    status.HTTP_503_SERVICE_UNAVAILABLE: "The coordinator cannot reach its database, or the database did "
    "not answer within database_timeout_seconds, or (a model upload, an artifact build) it does as much "
    "of that work at once as it may: retry after Retry-After seconds.",
}
_HEADERS = {
    status.HTTP_401_UNAUTHORIZED: {"WWW-Authenticate": {"schema": {"type": "string"}}},
    status.HTTP_503_SERVICE_UNAVAILABLE: {"Retry-After": {"schema": {"type": "integer"}}},
}

# What any route may answer (the app's `responses=`); every route that takes a token, and every route
# that takes a body.
EVERY_ROUTE = (status.HTTP_503_SERVICE_UNAVAILABLE,)
AUTH = (status.HTTP_401_UNAUTHORIZED, status.HTTP_403_FORBIDDEN)
BODY = (status.HTTP_400_BAD_REQUEST, status.HTTP_413_CONTENT_TOO_LARGE)


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route or router that may answer these error statuses."""
    return {
        code: {"model": ErrorPublic, "description": _MEANING[code]}
        | ({"headers": _HEADERS[code]} if code in _HEADERS else {})
        for code in codes
    }


def field_error(field: str, message: str, location: str = "body") -> HTTPException:
    """422 naming the field at the dotted path `field` of the body (or of the query: `location`);
    list indices (`primfunc.body[1][0]`) are numbers in `loc`, as in FastAPI's own errors."""
    loc: list[str | int] = [location]
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        loc.append(int(index) if index else key)
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        [{"type": "value_error", "loc": loc, "msg": f"{field}: {message}"}],
    )


def printable(text: str) -> str:
    """`text` with what UTF-8 cannot encode (a lone surrogate) written as its escape, `\\ud800`."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def install_error_handlers(app: FastAPI) -> None:
    """Validation errors and HTTP errors written so that no input can make them fail; a database that
    is away or too slow a 503 with Retry-After on every route (`EVERY_ROUTE` documents it), logged
    in one line, where it was a 500 with a traceback per request."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(DBAPIError, _database_away)
    app.add_exception_handler(PoolTimeout, _database_away)
    app.add_exception_handler(Busy, _busy)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return _json(status.HTTP_422_UNPROCESSABLE_CONTENT, {"detail": _echo(list(exc.errors()))})


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code in (status.HTTP_204_NO_CONTENT, status.HTTP_304_NOT_MODIFIED):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return _json(exc.status_code, {"detail": _echo(exc.detail)}, exc.headers)


async def _database_away(request: Request, exc: Exception) -> Response:
    """503 for a database outage; anything else is a bug, re-raised to be the 500 it is (with its
    traceback in the log)."""
    if not is_outage(exc):
        raise exc
    cause = getattr(exc, "orig", None) or exc
    first_line = printable(str(cause)).strip().split("\n")[0][:200]
    log.warning(
        "%s %s: 503, database unavailable (%s: %s)",
        request.method,
        request.url.path,
        type(cause).__name__,
        first_line,
    )
    return _json(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        {"detail": "the database is unavailable; retry later"},
        {"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def _busy(request: Request, exc: Exception) -> Response:
    """503 for heavy work past its slots (`admission.Slots`), with when to try again."""
    assert isinstance(exc, Busy)
    return _json(
        status.HTTP_503_SERVICE_UNAVAILABLE, {"detail": str(exc)}, {"Retry-After": str(exc.retry_after)}
    )


def _json(code: int, content: object, headers: Mapping[str, str] | None = None) -> Response:
    body = json.dumps(content, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return Response(body, status_code=code, headers=headers, media_type="application/json")


def _echo(value: object, depth: int = 0) -> object:
    """`value` as JSON that can always be written: printable strings (keys too), non-finite numbers
    as null, anything else (an exception in a validation error's context) as its text, and nothing
    deeper than ECHO_DEPTH."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return printable(value)
    if depth >= ECHO_DEPTH:
        return "..."
    if isinstance(value, dict):
        return {printable(str(k)): _echo(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_echo(v, depth + 1) for v in value]
    return printable(str(value))
