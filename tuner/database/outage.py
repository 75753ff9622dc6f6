"""A database that is away or stuck, as the code that waits on it sees it: which errors mean the
database (not the request) failed, and `limit_waits`, which bounds how long one use of a pooled
connection may wait on the database.

A frozen server (stopped, swapping, or behind a network path that swallows packets) is noticed by
nothing on its own: TCP's peer still acknowledges what is sent, and the server's statement_timeout
never runs. So for PostgreSQL a watchdog thread shuts the socket of any connection held past the
limit; the waiting driver call then fails as a lost connection (which the pool replaces), and the
server rolls the transaction back when it sees the socket closed. SQLite waits for a lock in its busy
handler, which nothing interrupts, so there the limit is the busy timeout.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from math import ceil
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import ConnectionPoolEntry

log = logging.getLogger(__name__)


def is_outage(error: BaseException) -> bool:
    """The database is unreachable, restarting, stuck or busy (a lost connection, a lock or pool
    timeout, a deadlock victim), as opposed to refusing what was asked of it."""
    return isinstance(error, OperationalError | InterfaceError | PoolTimeout) or (
        isinstance(error, DBAPIError) and error.connection_invalidated
    )


def connect_timeout(seconds: float) -> int:
    """libpq's connect_timeout for a limit of `seconds`: whole seconds, at least 2."""
    return max(2, ceil(seconds))


def limit_waits(engine: Engine, seconds: float) -> None:
    """From now on, a connection of `engine` is held (checked out of its pool) for at most about
    `seconds`. On PostgreSQL, create the engine without pool_pre_ping: a stale connection is pinged
    here instead, under the limit (the pool's own ping would wait on a frozen server forever)."""
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "checkout")
        def busy_timeout(dbapi_connection: Any, *_: Any) -> None:
            dbapi_connection.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

        return
    Watchdog(seconds).watch(engine)


class Watchdog:
    """Shuts the socket of each connection checked out for longer than `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._armed: dict[int, tuple[float, int]] = {}  # id(pool entry) -> (deadline, socket fd)
        self._expired: set[int] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, engine: Engine) -> None:
        dialect = engine.dialect
        fresh: set[int] = set()  # entries just connected: no ping needed

        @event.listens_for(engine, "connect")
        def connected(dbapi_connection: Any, entry: ConnectionPoolEntry) -> None:
            fresh.add(id(entry))

        @event.listens_for(engine, "checkout")
        def checkout(dbapi_connection: Any, entry: ConnectionPoolEntry, *_: Any) -> None:
            self._arm(id(entry), dbapi_connection.fileno())
            if id(entry) in fresh:
                fresh.discard(id(entry))
                return
            try:
                dialect.do_ping(dbapi_connection)
            except dialect.loaded_dbapi.Error:
                self._disarm(id(entry))
                if self._take_expired(id(entry)):
                    raise  # the server is stuck: do not wait on a new connection as well
                raise DisconnectionError("the pooled connection is lost") from None  # the pool reconnects

        for name in ("checkin", "invalidate", "soft_invalidate", "close", "detach"):
            event.listen(engine, name, lambda _dbapi, entry, *_: self._disarm(id(entry)))

    def _arm(self, key: int, fd: int) -> None:
        with self._changed:
            self._expired.discard(key)
            self._armed[key] = (time.monotonic() + self.seconds, fd)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="database-watchdog", daemon=True)
                self._thread.start()
            self._changed.notify()

    def _disarm(self, key: int) -> None:
        """Before the pool closes a connection or hands it out again: its socket is not touched after
        this returns."""
        with self._changed:
            self._armed.pop(key, None)

    def _take_expired(self, key: int) -> bool:
        with self._changed:
            expired = key in self._expired
            self._expired.discard(key)
            return expired

    def _run(self) -> None:
        with self._changed:
            while True:
                now = time.monotonic()
                for key, (deadline, fd) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[key]
                        self._expired.add(key)
                        _shut(fd)
                nearest = min((deadline for deadline, _ in self._armed.values()), default=None)
                self._changed.wait(None if nearest is None else nearest - now)


def _shut(fd: int) -> None:
    """Shut the socket down for both directions: the driver's wait on it ends at once, and the server
    sees the connection end. The descriptor stays the driver's (a duplicate is closed here)."""
    try:
        with socket.socket(fileno=socket.dup(fd)) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except OSError as e:
        log.warning("could not shut a stuck database connection: %s", e)
        return
    log.warning("a database connection was held for too long: its socket was shut")
