"""Errors in the shape FastAPI gives its own validation errors, so a client reads one format: a 422
whose detail lists each culprit's location (`loc`) and what is wrong with it (`msg`); every other error
is `{"detail": "..."}`. `documented(...)` declares the latter in the OpenAPI schema, so a client (and
the fuzz test) knows every status a route can answer."""

from __future__ import annotations

import re
from typing import Any

from fastapi import HTTPException, status
from pydantic import BaseModel


class ErrorPublic(BaseModel):
    detail: str


_MEANING = {
    status.HTTP_400_BAD_REQUEST: "The request body is not text (JSON must be UTF-8), or its declared "
    "Content-Length is not a number.",
    status.HTTP_401_UNAUTHORIZED: "No bearer token, or an unknown or revoked one.",
    status.HTTP_403_FORBIDDEN: "The token's role may not do this (or the worker is another token's).",
    status.HTTP_404_NOT_FOUND: "No such object.",
    status.HTTP_409_CONFLICT: "The object is not in a state that allows this.",
    status.HTTP_413_CONTENT_TOO_LARGE: "The request body is over the coordinator's max_request_bytes.",
    status.HTTP_429_TOO_MANY_REQUESTS: "The token's quota is used up until some of its tasks end.",
    status.HTTP_503_SERVICE_UNAVAILABLE: "The coordinator cannot reach its database.",
}
_HEADERS = {
    status.HTTP_401_UNAUTHORIZED: {"WWW-Authenticate": {"schema": {"type": "string"}}},
}

# Every route that takes a token, and every route that takes a body.
AUTH = (status.HTTP_401_UNAUTHORIZED, status.HTTP_403_FORBIDDEN)
BODY = (status.HTTP_400_BAD_REQUEST, status.HTTP_413_CONTENT_TOO_LARGE)


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route or router that may answer these error statuses."""
    return {
        code: {"model": ErrorPublic, "description": _MEANING[code]}
        | ({"headers": _HEADERS[code]} if code in _HEADERS else {})
        for code in codes
    }


def field_error(field: str, message: str) -> HTTPException:
    """422 naming the body field at the dotted path `field`; list indices (`primfunc.body[1][0]`) are
    numbers in `loc`, as in FastAPI's own errors."""
    loc: list[str | int] = ["body"]
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        loc.append(int(index) if index else key)
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        [{"type": "value_error", "loc": loc, "msg": f"{field}: {message}"}],
    )
