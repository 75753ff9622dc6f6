"""What routes depend on: the database, the settings, and the caller's token with its role.

The dependencies are `async def` although they do no I/O worth awaiting: FastAPI runs a plain `def`
dependency in its thread pool, one hand-off per dependency, and those hand-offs were most of the
cost of a request (a token found in the cache needs no database at all). A token not in the cache
is looked up in the thread pool: on the event loop, a database that waits (SQLite's busy timeout is
30 s) would stop every request.

Every route but /healthz (and the dashboard's static shell) names one of the role aliases below; a
missing or unknown token gets 401, a token of the wrong role 403. Admin tokens may do everything.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from runner.protocol import MAX_ID
from tuner.database import Database, Role
from tuner.database.tokens import TokenInfo, authenticate
from tuner.service.schemas import DEFAULT_PAGE, MAX_PAGE, NEXT_PAGE_HEADER
from tuner.service.settings import Settings

_bearer = HTTPBearer(auto_error=False, description="A token from `tuner token create`.")


async def get_db(request: Request) -> Database:
    return request.app.state.db


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


DatabaseDep = Annotated[Database, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


class TokenCache:
    """Tokens recently looked up, so a busy worker's every call does not read the tokens table. A
    token revoked through this process stops working at once; through another coordinator process
    (or the CLI), within `ttl` seconds. Unknown tokens are remembered for `unknown_ttl` seconds, so a
    client retrying with a bad token does not reach the database on every request either."""

    def __init__(self, ttl: float = 5.0, unknown_ttl: float = 1.0, size: int = 4096) -> None:
        self.ttl, self.unknown_ttl, self.size = ttl, unknown_ttl, size
        self._seen: dict[str, tuple[TokenInfo | None, float]] = {}

    async def authenticate(self, db: Database, token: str) -> TokenInfo | None:
        hit = self._seen.get(token)
        if hit is not None and hit[1] > time.monotonic():
            return hit[0]
        holder = await run_in_threadpool(authenticate, db, token)
        if len(self._seen) >= self.size:
            self._seen.clear()
        ttl = self.ttl if holder is not None else self.unknown_ttl
        self._seen[token] = (holder, time.monotonic() + ttl)
        return holder

    def forget(self, token_id: int) -> None:
        self._seen = {k: v for k, v in self._seen.items() if v[0] is None or v[0].id != token_id}


async def _token(
    request: Request,
    db: DatabaseDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> TokenInfo:
    if credentials is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "missing bearer token", headers={"WWW-Authenticate": "Bearer"}
        )
    holder = await request.app.state.tokens.authenticate(db, credentials.credentials)
    if holder is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "unknown or revoked token", headers={"WWW-Authenticate": "Bearer"}
        )
    return holder


def require(*roles: Role) -> Callable[[TokenInfo], Awaitable[TokenInfo]]:
    """A dependency admitting tokens of `roles`, and admin tokens."""
    allowed = {Role.ADMIN, *roles}

    async def check(holder: Annotated[TokenInfo, Depends(_token)]) -> TokenInfo:
        if holder.role not in allowed:
            names = ", ".join(sorted(r.value for r in allowed))
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"this needs a token of role {names}")
        return holder

    return check


AnyToken = Annotated[TokenInfo, Depends(require(Role.CLIENT, Role.WORKER))]
ClientToken = Annotated[TokenInfo, Depends(require(Role.CLIENT))]
WorkerToken = Annotated[TokenInfo, Depends(require(Role.WORKER))]
AdminToken = Annotated[TokenInfo, Depends(require())]


@dataclass(frozen=True)
class Page:
    """A page of a list, in id order: the rows after the id `after` (None: from the first), `limit`
    of them at most. A full page's answer names the `after` of the next one (NEXT_PAGE_HEADER)."""

    after: int | None
    limit: int

    def answer(self, response: Response, ids: list[int]) -> None:
        if len(ids) == self.limit:
            response.headers[NEXT_PAGE_HEADER] = str(ids[-1])


async def page(
    after: Annotated[
        int | None, Query(ge=0, lt=MAX_ID, description="Rows with an id above this one.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Rows at most.")] = DEFAULT_PAGE,
) -> Page:
    return Page(after, limit)


PageDep = Annotated[Page, Depends(page)]
