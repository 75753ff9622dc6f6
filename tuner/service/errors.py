"""Errors in the shape FastAPI gives its own validation errors, so a client reads one format: a 422
whose detail lists each culprit's location (`loc`) and what is wrong with it (`msg`)."""

from __future__ import annotations

from fastapi import HTTPException, status


def field_error(field: str, message: str) -> HTTPException:
    """422 naming the body field at the dotted path `field`."""
    loc = ["body", *field.split(".")]
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        [{"type": "value_error", "loc": loc, "msg": f"{field}: {message}"}],
    )
